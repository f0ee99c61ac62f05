"""TREC runs, negatives and BM25 collections as streams (issue 39): the same bytes and the same pools as
the whole-in-memory paths they replace, and lazy by design (a generator that has not read the rest of
the file when it yields its first query)."""

from __future__ import annotations

import inspect
import random

import pytest

from harness.core.errors import DataFormatError
from harness.data.formats import iter_trec_run, read_trec_run, stream_trec_run, write_trec_run
from harness.finetune.negatives import (
    iter_negative_pool,
    iter_negative_pool_file,
    negative_pool,
    write_negative_pool,
)
from harness.retrieval import bm25
from harness.retrieval.encoder import passage_text


def _fixture_run(queries: int = 40, depth: int = 30) -> dict[str, dict[str, float]]:
    rng = random.Random(3)
    run = {}
    for q in rng.sample(range(1000), queries):  # unsorted qids, tied scores, some empty rankings
        docs = rng.sample(range(500), rng.randint(0, depth))
        run[f"q{q}"] = {f"d{d}": float(rng.randint(0, 5)) + rng.choice((0.0, 0.25)) for d in docs}
    return run


@pytest.mark.parametrize("depth", [None, 7])
def test_streamed_run_has_the_bytes_of_write_trec_run(tmp_path, depth):
    run = _fixture_run()
    whole = write_trec_run(run, tmp_path / "whole.trec", tag="t", depth=depth)
    count = stream_trec_run(((q, run[q]) for q in sorted(run)), tmp_path / "stream.trec", tag="t", depth=depth)
    assert count == len(run)
    assert (tmp_path / "stream.trec").read_bytes() == whole.read_bytes()


def test_stream_trec_run_refuses_queries_out_of_order(tmp_path):
    with pytest.raises(ValueError, match="ascending"):
        stream_trec_run([("q2", {"d": 1.0}), ("q1", {"d": 1.0})], tmp_path / "run.trec")
    assert not (tmp_path / "run.trec").exists()


def test_iter_trec_run_reads_what_read_trec_run_reads_one_query_at_a_time(tmp_path):
    path = write_trec_run(_fixture_run(), tmp_path / "run.trec")
    assert inspect.isgeneratorfunction(iter_trec_run)
    assert list(iter_trec_run(path)) == list(read_trec_run(path).items())


def test_iter_trec_run_is_lazy_and_checks_grouping(tmp_path):
    path = tmp_path / "run.trec"
    path.write_text("q1 Q0 d1 1 2.0 t\nq1 Q0 d2 2 1.0 t\nq2 Q0 d1 1 1.0 t\nbroken line\n")
    stream = iter_trec_run(path)
    assert next(stream) == ("q1", {"d1": 2.0, "d2": 1.0})  # yielded before the broken line is read
    with pytest.raises(DataFormatError):
        list(stream)
    path.write_text("q1 Q0 d1 1 2.0 t\nq2 Q0 d1 1 1.0 t\nq1 Q0 d2 2 1.0 t\n")
    with pytest.raises(DataFormatError, match="do not ascend"):
        list(iter_trec_run(path))
    path.write_text("q2 Q0 d1 1 2.0 t\nq1 Q0 d1 1 1.0 t\n")
    with pytest.raises(DataFormatError, match="do not ascend"):
        list(iter_trec_run(path))


def test_negative_pool_from_a_streamed_run_is_the_in_memory_pool(tmp_path):
    run = _fixture_run()
    rng = random.Random(5)
    # two random judgements per query; when both draw one doc id, the second wins (as a dict literal would)
    qrels = {
        q: dict([(f"d{rng.randrange(500)}", 1), (f"d{rng.randrange(500)}", rng.choice((0, 1)))]) for q in list(run)[::2]
    }
    path = write_trec_run(run, tmp_path / "run.trec")
    whole = negative_pool(read_trec_run(path), qrels, depth=10)
    streamed = negative_pool(iter_trec_run(path), qrels, depth=10)
    assert list(streamed.items()) == list(whole.items()) and whole
    assert inspect.isgeneratorfunction(iter_negative_pool)
    assert write_negative_pool(iter_negative_pool(iter_trec_run(path), qrels, 10), tmp_path / "neg.tsv") == len(whole)
    assert dict(iter_negative_pool_file(tmp_path / "neg.tsv")) == whole


def test_json_collection_streamed_from_pairs_is_the_dict_one(tmp_path):
    corpus = {f"d{i}": {"title": f"T{i}" if i % 3 else "", "text": f"text {i} é"} for i in range(50)}
    for multifield in (True, False):
        a, b = tmp_path / f"dict{multifield}", tmp_path / f"iter{multifield}"
        assert bm25.write_json_collection(corpus, a, multifield) == 50
        assert bm25.write_json_collection(iter(corpus.items()), b, multifield) == 50
        assert (a / "docs.jsonl").read_bytes() == (b / "docs.jsonl").read_bytes()


def test_teacher_pairs_in_chunks_are_the_whole_list_in_order():
    from harness.finetune.teacher_pairs import iter_pair_chunks

    rng = random.Random(9)
    passages = {f"d{i}": {"title": f"T{i}" if i % 2 else "", "text": f"passage {i}"} for i in range(60)}
    queries = {f"q{i}": f"query {i}" for i in range(12)}
    candidates = {q: [f"d{rng.randrange(60)}" for _ in range(rng.randint(1, 15))] for q in queries}
    whole = [
        ([(q, d)], [(queries[q], passage_text(passages[d], " | "))])
        for q, docs in candidates.items()
        for d in dict.fromkeys(docs)
    ]
    one = list(iter_pair_chunks(queries, candidates, passages, " | "))
    assert (
        len(one) == 1
        and one[0][0] == [k for k, _ in whole for k in k]
        and one[0][1] == [p for _, p in whole for p in p]
    )
    chunks = list(iter_pair_chunks(queries, candidates, passages, " | ", chunk=7))
    assert all(len(k) == len(p) == 7 for k, p in chunks[:-1]) and 1 <= len(chunks[-1][0]) <= 7
    assert [k for keys, _ in chunks for k in keys] == one[0][0]
    assert [p for _, pairs in chunks for p in pairs] == one[0][1]
    assert inspect.isgeneratorfunction(iter_pair_chunks)


def test_teacher_scores_stream_per_query_and_write_the_bytes_of_json_dumps(tmp_path):
    """Candidates read as a stream, scores grouped per query across chunk boundaries, written one query at a
    time: the same dict and the same scores.json bytes as scoring the whole dict at once."""
    import json

    from harness.finetune.teacher_pairs import iter_pair_chunks, iter_query_scores, write_scores_json

    rng = random.Random(3)
    passages = {f"d{i}": {"title": "", "text": f"passage {i}"} for i in range(40)}
    queries = {f"q{i}": f"query {i}" for i in range(9)}
    candidates = {q: [f"d{rng.randrange(40)}" for _ in range(rng.randint(1, 11))] for q in queries}

    def score(pairs):
        return [len(q) * 0.25 + len(p) / 3 for q, p in pairs]

    whole: dict[str, dict[str, float]] = {}
    for keys, pairs in iter_pair_chunks(queries, candidates, passages, " "):
        for (q, d), s in zip(keys, score(pairs)):
            whole.setdefault(q, {})[d] = s
    made = []

    def stream():
        for q, docs in candidates.items():
            made.append(q)
            yield q, docs

    chunks = iter_pair_chunks(queries, stream(), passages, " ", chunk=4)
    first = next(chunks)
    assert made == ["q0"] or len(made) < len(queries)  # candidates produced as the chunks need them
    per_query = iter_query_scores([(first[0], score(first[1]))] + [(k, score(p)) for k, p in chunks])
    assert write_scores_json(per_query, tmp_path / "scores.json") == sum(len(v) for v in whole.values())
    assert (tmp_path / "scores.json").read_text(encoding="utf-8") == json.dumps(whole)
    assert write_scores_json([], tmp_path / "empty.json") == 0 and (tmp_path / "empty.json").read_text() == "{}"
