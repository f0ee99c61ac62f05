"""`python -m harness eval` end to end: embedded DL19 / cqadupstack qrels, a temp qrels, bad input."""

from __future__ import annotations

import argparse
import json

import pytest

import harness.cli as cli
from harness.commands import eval as eval_cmd
from harness.data.catalog import get_benchmark
from harness.data.formats import write_trec_qrels, write_trec_run


@pytest.fixture
def run_cli(monkeypatch, capsys):
    """harness.cli.main with only the eval command registered (others may not exist yet)."""
    monkeypatch.setattr(cli, "COMMANDS", ["eval"])

    def call(*argv: str) -> tuple[int, str, str]:
        rc = cli.main(["eval", *map(str, argv)])
        out = capsys.readouterr()
        return rc, out.out, out.err

    return call


def _perfect(qrels, keep=None):
    """Each query's judged documents by grade, descending (ties by doc id), then one junk doc."""
    run = {}
    for qid, docs in qrels.items():
        if keep is not None and qid not in keep:
            continue
        ranked = sorted(docs, key=lambda d: (-docs[d], d))
        run[qid] = {d: float(len(ranked) - i) for i, d in enumerate(ranked)} | {"junk": -1.0}
    return run


def test_eval_dl19_end_to_end(tmp_path, run_cli):
    qrels = get_benchmark("dl19").qrels()
    run_path = write_trec_run(_perfect(qrels), tmp_path / "dl19.trec")
    rc, out, err = run_cli(
        "--run", run_path, "--benchmark", "dl19", "--json", tmp_path / "out" / "s.json", "--per-query"
    )
    assert rc == 0, err
    assert "43 judged queries, run ranks 43" in out and "nDCG@10 *" in out
    summary = json.loads((tmp_path / "out" / "s.json").read_text())
    assert summary["benchmark"] == "dl19" and summary["run"] == str(run_path)
    assert summary["metrics"]["dl19"] == {"nDCG@10": 1.0, "R(rel=2)@1000": 1.0, "RR(rel=2)@10": 1.0}
    assert summary["num_queries"] == 43 and summary["missing_queries"] == 0
    per_query = tmp_path / "out" / "s.per_query.tsv"
    assert summary["per_query_file"] == str(per_query)
    lines = per_query.read_text().splitlines()
    assert lines[0] == "measure\tquery_id\tvalue" and len(lines) == 1 + 3 * 43


def test_eval_dl19_partial_run_warns_and_scores_missing_as_zero(tmp_path, run_cli):
    qrels = get_benchmark("dl19").qrels()
    keep = sorted(qrels)[:20]
    run = _perfect(qrels, keep) | {"999999": {"x": 1.0}}  # one unjudged query
    rc, out, err = run_cli(
        "--run", write_trec_run(run, tmp_path / "r.trec"), "--benchmark", "dl19", "--json", tmp_path / "s.json"
    )
    assert rc == 0
    assert "23 judged queries have no ranking" in err and "1 run queries have no qrels" in err
    assert json.loads((tmp_path / "s.json").read_text())["metrics"]["dl19"]["nDCG@10"] == pytest.approx(20 / 43)


def test_eval_against_a_temp_qrels(tmp_path, run_cli):
    qrels = write_trec_qrels({"q1": {"a": 1, "b": 0}, "q2": {"c": 1}}, tmp_path / "qrels.txt")
    run = write_trec_run({"q1": {"b": 2.0, "a": 1.0}, "q2": {"c": 5.0}, "q3": {"z": 1.0}}, tmp_path / "r.trec")
    rc, out, err = run_cli(
        "--run",
        run,
        "--benchmark",
        "msmarco-dev",
        "--qrels",
        qrels,
        "--json",
        tmp_path / "s.json",
        "--per-query",
        tmp_path / "pq.tsv",
    )
    assert rc == 0, err
    metrics = json.loads((tmp_path / "s.json").read_text())["metrics"]["msmarco-dev"]
    assert metrics["RR@10"] == 0.75 and metrics["R@1000"] == 1.0
    assert "q1\t0.5" in (tmp_path / "pq.tsv").read_text()


def test_eval_extra_measures_and_beir_self_hits(tmp_path, run_cli):
    qrels = write_trec_qrels({"q1": {"d1": 1}}, tmp_path / "qrels.txt")
    run = write_trec_run({"q1": {"q1": 9.0, "d1": 1.0}}, tmp_path / "r.trec")
    rc, out, err = run_cli(
        "--run", run, "--benchmark", "arguana", "--qrels", qrels, "--measure", "P@1", "--measure", "nDCG@10"
    )
    assert rc == 0
    assert "dropped 1 hits" in err
    assert "P@1" in out and "1.0000" in out


def test_bad_run_file_names_the_line(tmp_path, run_cli):
    bad = tmp_path / "bad.trec"
    bad.write_text("156493 Q0 d1 1 3.0 t\n156493 Q0 d2 2 2.0 t\n156493 Q0 d3 three\n")
    rc, out, err = run_cli("--run", bad, "--benchmark", "dl19")
    assert rc == 2
    assert err.startswith(f"error: {bad}:3: wrong column count") and "Traceback" not in err


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--benchmark", "dl91"], "unknown benchmark 'dl91'"),
        (["--benchmark", "scifact"], "none of the run's 1 queries has qrels"),
        (["--benchmark", "dl19", "--split", "train"], "unknown split of benchmark 'dl19'"),
        (["--benchmark", "dl19", "--measure", "Foo@3"], "cannot parse measure 'Foo@3'"),
    ],
)
def test_user_errors_are_one_line(tmp_path, run_cli, argv, message):
    run = write_trec_run({"156493": {"x": 1.0}}, tmp_path / "r.trec")
    rc, _, err = run_cli("--run", run, *argv)
    assert rc == 2 and message in err, err


def test_missing_run_file_and_empty_run(tmp_path, run_cli):
    rc, _, err = run_cli("--run", tmp_path / "nope.trec", "--benchmark", "dl19")
    assert rc == 2 and "file not found" in err
    (tmp_path / "empty.trec").write_text("")
    rc, _, err = run_cli("--run", tmp_path / "empty.trec", "--benchmark", "dl19")
    assert rc == 2 and "no entries" in err


def test_run_source_is_required_and_exclusive():
    parser = argparse.ArgumentParser()
    eval_cmd.add_parser(parser.add_subparsers())
    with pytest.raises(SystemExit):
        parser.parse_args(["eval", "--benchmark", "dl19"])
    args = parser.parse_args(["eval", "--run", "r.trec", "--benchmark", "dl19"])
    assert args.func is eval_cmd._eval and args.per_query is None and args.split is None


def test_cqadupstack_from_a_folder_of_forum_runs(tmp_path, run_cli):
    """Six forums ranked perfectly, six missing (score 0): cqadupstack = 6/12."""
    subs = get_benchmark("cqadupstack").sub_benchmarks()
    folder = tmp_path / "runs"
    for i, sub in enumerate(subs[:6]):
        name = sub.name if i % 2 else sub.name.split("-", 1)[1]  # both file name styles
        write_trec_run(_perfect(sub.qrels()), folder / f"{name}.trec")
    rc, out, err = run_cli("--run", folder, "--benchmark", "cqadupstack", "--json", tmp_path / "s.json", "--per-query")
    assert rc == 0, err
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["metrics"]["cqadupstack"]["nDCG@10"] == pytest.approx(0.5)
    assert summary["metrics"][subs[0].name]["nDCG@10"] == pytest.approx(1.0)
    assert summary["metrics"][subs[-1].name]["nDCG@10"] == 0.0
    assert len(summary["subsets"]) == 12 and "mean of the 12 subset means" in out
    assert f"{subs[1].name}/" in (tmp_path / "s.per_query.tsv").read_text()


def test_cqadupstack_single_file_needs_namespaced_ids(tmp_path, run_cli):
    android = get_benchmark("cqadupstack-android").qrels()
    plain = write_trec_run(_perfect(android), tmp_path / "plain.trec")
    rc, _, err = run_cli("--run", plain, "--benchmark", "cqadupstack")
    assert rc == 2 and "<forum>/<qid>" in err
    namespaced = {f"android/{q}": docs for q, docs in _perfect(android).items()}
    rc, out, err = run_cli(
        "--run",
        write_trec_run(namespaced, tmp_path / "ns.trec"),
        "--benchmark",
        "cqadupstack",
        "--json",
        tmp_path / "s.json",
    )
    assert rc == 0, err
    metrics = json.loads((tmp_path / "s.json").read_text())["metrics"]
    assert metrics["cqadupstack-android"]["nDCG@10"] == pytest.approx(1.0)
    assert metrics["cqadupstack"]["nDCG@10"] == pytest.approx(1 / 12)


@pytest.mark.parametrize(
    "content,line,message",
    [
        ("156493 Q0 d1 1 3.0 t\n156493 Q0 d2 2 2.0\n", 2, "wrong column count"),  # 5 columns
        ("156493 Q0 d1 1 3.0 t\n156493 d2 2 2.0\n", 2, "wrong column count"),  # 4 columns
        ("156493 Q0 d1 1 high t\n", 1, "non-numeric score 'high'"),
        ("156493 Q0 d1 1 3.0 t\n156493 Q0 d2 2 nan t\n", 2, "score 'nan' is not a finite number"),
        ("156493 Q0 d1 1 -inf t\n", 1, "score '-inf' is not a finite number"),
    ],
)
def test_malformed_run_files_end_in_one_line_naming_file_and_line(tmp_path, run_cli, content, line, message):
    bad = tmp_path / "bad.trec"
    bad.write_text(content)
    rc, out, err = run_cli("--run", bad, "--benchmark", "dl19")
    assert rc == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"error: {bad}:{line}: ") and message in err, err


def test_unknown_benchmark_suggests_the_nearest_name(tmp_path, run_cli):
    run = write_trec_run({"156493": {"x": 1.0}}, tmp_path / "r.trec")
    rc, _, err = run_cli("--run", run, "--benchmark", "scifcat")
    assert rc == 2 and "did you mean: scifact" in err.lower() and len(err.strip().splitlines()) == 1, err
