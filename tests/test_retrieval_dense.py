"""faiss exact search equals brute-force numpy top-k; shards merge exactly; stats and save/load."""

from __future__ import annotations

import numpy as np
import pytest

from harness.core.errors import HarnessError
from harness.retrieval.dense import (
    Shard,
    build_index,
    dense_retrieve,
    index_bytes,
    load_index,
    retrieve,
    save_index,
    search,
    to_run,
)


def _data(n_docs: int = 500, n_q: int = 40, dim: int = 24, seed: int = 0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n_docs, dim)).astype(np.float32), rng.standard_normal((n_q, dim)).astype(np.float32)


def _brute(docs: np.ndarray, queries: np.ndarray, k: int):
    scores = queries.astype(np.float64) @ docs.astype(np.float64).T
    ids = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(scores, ids, axis=1), ids


def test_search_equals_brute_force_topk():
    docs, queries = _data()
    index = build_index(docs)
    scores, ids = search(index, queries, k=20, batch=7)  # batches that do not divide the queries
    ref_scores, ref_ids = _brute(docs, queries, 20)
    assert np.array_equal(ids, ref_ids)
    assert np.allclose(scores, ref_scores, atol=1e-4)


def test_retrieve_maps_doc_ids_and_reports_efficiency():
    docs, queries = _data()
    doc_ids = [f"doc{i}" for i in range(len(docs))]
    qids = [f"q{i}" for i in range(len(queries))]
    run, stats = dense_retrieve(qids, queries, doc_ids, docs, k=10)
    _, ref_ids = _brute(docs, queries, 10)
    for qid, row in zip(qids, ref_ids):
        assert list(run[qid]) == [doc_ids[i] for i in row]
    assert stats["index_bytes"] == len(docs) * docs.shape[1] * 4
    assert stats["qps"] > 0 and stats["docs"] == 500 and stats["queries"] == 40


def test_sharded_indexes_merge_to_the_global_topk():
    docs, queries = _data()
    doc_ids = [f"doc{i}" for i in range(len(docs))]
    bounds = [0, 130, 260, 500]
    shards = [Shard(build_index(docs[a:b]), doc_ids[a:b]) for a, b in zip(bounds, bounds[1:])]
    run, stats = retrieve([f"q{i}" for i in range(len(queries))], queries, shards, k=15)
    single, _ = dense_retrieve([f"q{i}" for i in range(len(queries))], queries, doc_ids, docs, k=15)
    assert stats["shards"] == 3 and stats["index_bytes"] == index_bytes(build_index(docs))
    for qid in run:
        assert list(run[qid]) == list(single[qid])
        assert np.allclose(list(run[qid].values()), list(single[qid].values()))


def test_k_larger_than_the_index_and_errors():
    docs, queries = _data(n_docs=5)
    run, _ = dense_retrieve(["a", "b"], queries[:2], list("vwxyz"), docs, k=10)
    assert all(len(r) == 5 for r in run.values())
    index = build_index(docs)
    with pytest.raises(HarnessError, match="dimension"):
        search(index, queries[:, :3], 5)
    with pytest.raises(HarnessError, match="NaN"):
        build_index(np.full((2, 4), np.nan, dtype=np.float32))
    with pytest.raises(HarnessError):
        dense_retrieve(["a"], queries[:1], ["only-one-id"], docs, k=3)
    with pytest.raises(HarnessError):
        to_run(["a", "b"], ["x"], np.zeros((1, 1)), np.zeros((1, 1), dtype=np.int64))


def test_save_and_load_roundtrip(tmp_path):
    docs, queries = _data()
    shard = Shard(build_index(docs), [f"doc{i}" for i in range(len(docs))])
    loaded = load_index(save_index(shard, tmp_path / "idx"))
    assert loaded.doc_ids == shard.doc_ids and loaded.index.ntotal == len(docs)
    assert np.array_equal(search(loaded.index, queries, 5)[1], search(shard.index, queries, 5)[1])
    with pytest.raises(HarnessError, match="no complete dense index"):
        load_index(tmp_path / "missing")
