"""Qrels that judge documents missing from the corpus lower nDCG (no run can retrieve them): the
evaluation says so once, in one line, where the qrels meet the corpus."""

from __future__ import annotations

from harness.data.catalog import get_benchmark
from harness.evaluation.measures import unretrievable_line
from harness.run.runner import score_run_file


def test_the_line_counts_and_names_the_missing_documents():
    qrels = {"q1": {"d1": 1, "gone-a": 1}, "q2": {"d2": 0, "gone-b": 2, "gone-c": 1}}
    line = unretrievable_line(qrels, iter(["d1", "d2", "d3"]))
    assert line == (
        "3 of 5 judged documents are not in the corpus (e.g. gone-a, gone-b): scores count them as unretrievable"
    )
    assert unretrievable_line(qrels, ["d1", "d2", "gone-a", "gone-b", "gone-c"]) is None
    assert unretrievable_line({}, []) is None


def test_a_run_scored_on_qrels_naming_absent_documents_warns_once(tmp_path, monkeypatch, capsys):
    bench = get_benchmark("scifact")  # an embedded corpus: readable offline
    qrels = bench.qrels()
    first = next(iter(qrels))
    qrels[first]["no-such-doc"] = 1
    monkeypatch.setattr(bench, "qrels", lambda split=None: {q: dict(d) for q, d in qrels.items()})
    rows = [(q, d) for q, docs in qrels.items() for d in list(docs)[:1] if d != "no-such-doc"]
    run = tmp_path / "s.trec"
    run.write_text("".join(f"{q} Q0 {d} 1 1.0 t\n" for q, d in rows))
    capsys.readouterr()
    score_run_file(run, bench)
    err = capsys.readouterr().err
    warnings = [line for line in err.splitlines() if "not in the corpus" in line]
    judged = len({d for docs in qrels.values() for d in docs})
    assert warnings == [
        f"warning: 1 of {judged} judged documents are not in the corpus (e.g. no-such-doc): "
        "scores count them as unretrievable"
    ], err


def test_complete_qrels_say_nothing(tmp_path, capsys):
    bench = get_benchmark("scifact")
    run = tmp_path / "s.trec"
    run.write_text("".join(f"{q} Q0 {d} 1 1.0 t\n" for q, docs in bench.qrels().items() for d in list(docs)[:1]))
    capsys.readouterr()
    score_run_file(run, bench)
    assert "not in the corpus" not in capsys.readouterr().err


def test_the_stages_of_one_run_warn_once(tmp_path, monkeypatch, capsys):
    bench = get_benchmark("scifact")
    qrels = bench.qrels()
    qrels[next(iter(qrels))]["another-missing-doc"] = 1
    monkeypatch.setattr(bench, "qrels", lambda split=None: {q: dict(d) for q, d in qrels.items()})
    run = tmp_path / "s.trec"
    run.write_text("".join(f"{q} Q0 {d} 1 1.0 t\n" for q, docs in qrels.items() for d in list(docs)[:1]))
    capsys.readouterr()
    for _ in range(3):  # retriever1, retriever2, reranker: one benchmark, one corpus
        score_run_file(run, bench)
    assert capsys.readouterr().err.count("not in the corpus") == 1
