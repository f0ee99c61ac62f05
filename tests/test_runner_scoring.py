"""The runner scores a pipeline's run file through the same evaluation path as `eval`, including
cqadupstack (query ids <forum>/<qid>, the score is the mean of the 12 forums)."""

from __future__ import annotations

import pytest

from harness.data.catalog import get_benchmark
from harness.run.runner import score_run_file


def _write_run(path, rows):
    path.write_text("".join(f"{q} Q0 {d} {r} {s} synthetic\n" for q, d, r, s in rows))
    return path


def test_a_synthetic_cqadupstack_run_is_scored_as_the_mean_of_its_forums(tmp_path):
    bench = get_benchmark("cqadupstack")
    rows, perfect_forums = [], 0
    for i, sub in enumerate(bench.sub_benchmarks()):
        forum = sub.name.split("-", 1)[1]
        for qid, docs in sub.qrels().items():
            relevant = [d for d, g in docs.items() if g > 0]
            if i % 2 == 0:  # every other forum ranks its relevant documents first: nDCG@10 = 1 there
                rows += [(f"{forum}/{qid}", d, r + 1, 100.0 - r) for r, d in enumerate(relevant)]
            else:  # the others retrieve nothing relevant: 0 there
                rows.append((f"{forum}/{qid}", "not-a-document", 1, 1.0))
        perfect_forums += i % 2 == 0
    result = score_run_file(_write_run(tmp_path / "cqa.trec", rows), bench)
    assert result.aggregate["nDCG@10"] == pytest.approx(perfect_forums / 12)
    assert perfect_forums == 6


def test_a_plain_benchmark_run_is_scored_on_its_test_qrels(tmp_path):
    bench = get_benchmark("scifact")
    qrels = bench.qrels()
    rows = [(q, d, 1, 1.0) for q, docs in qrels.items() for d in list(docs)[:1]]
    assert score_run_file(_write_run(tmp_path / "s.trec", rows), bench).aggregate["nDCG@10"] > 0.9


def test_lexmae_paper_dry_run_plans_cqadupstack(capsys):
    from harness.cli import main

    assert main(["run", "--method", "lexmae", "--profile", "paper", "--dry-run", "--wide"]) == 0  # a line whole
    plan = capsys.readouterr().out
    assert "benchmarks:" in plan and "cqadupstack" in plan.split("benchmarks:", 1)[1].splitlines()[0]
