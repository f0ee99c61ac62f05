"""Exact search over stored vectors in chunks (harness.retrieval.dense.search_vectors) ranks as one flat
faiss index does: the same scores bit for bit and the same documents, in the order of every run file
(descending score, ties by the lower key: the row, or the doc id's rank given ``order``), whether the matrix
is in memory or memory-mapped, and whatever the chunk size (a multiple of faiss's BLAS block). At the k-th
score a tie of at most TIE_SLACK + 1 documents is cut for the lowest keys (tests/test_rank_search.py); of a
bigger one, as many documents of that exact score are kept as faiss keeps."""

from __future__ import annotations

import numpy as np
import pytest

from harness.retrieval.dense import (
    FAISS_BLOCK,
    Shard,
    build_index,
    chunk_rows,
    retrieve,
    retrieve_vectors,
    search,
    search_vectors,
)


def assert_same_ranking(got: tuple[np.ndarray, np.ndarray], want: tuple[np.ndarray, np.ndarray]) -> None:
    """Scores equal bit for bit; ids equal at every place scored above the k-th score (ties there
    included, by the lower row; ``want``: faiss's own result, re-sorted so); at the k-th score, as many
    documents of that exact score."""
    by_row = np.lexsort((want[1], -want[0]), axis=1)
    want = (np.take_along_axis(want[0], by_row, axis=1), np.take_along_axis(want[1], by_row, axis=1))
    assert np.array_equal(got[0], want[0])
    above = want[0] > want[0][:, -1:]
    assert np.array_equal(np.where(above, got[1], -2), np.where(above, want[1], -2))


def corpus_with_ties(n: int = 5000, dim: int = 16, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Random float vectors with exact duplicates across chunks: every 7th row copies the row 3 before it
    (ties of two), every 50th row copies row 1 (one big tie group)."""
    rng = np.random.default_rng(seed)
    docs = rng.standard_normal((n, dim)).astype(np.float32)
    pairs = np.arange(7, n, 7)
    docs[pairs] = docs[pairs - 3]
    docs[np.arange(50, n, 50)] = docs[1]
    queries = rng.standard_normal((300, dim)).astype(np.float32)
    return docs, queries


@pytest.mark.parametrize("k", [10, 150])
@pytest.mark.parametrize("nq", [3, 300])  # few queries: faiss's per-pair path; many: its BLAS path
def test_chunked_search_equals_one_flat_index(k, nq, tmp_path):
    docs, queries = corpus_with_ties()
    queries = queries[:nq]
    want_s, want_i = search(build_index(docs), queries, k)
    np.save(tmp_path / "v.npy", docs)
    mapped = np.load(tmp_path / "v.npy", mmap_mode="r")
    for matrix in (docs, mapped):
        for rows in (FAISS_BLOCK, 2 * FAISS_BLOCK):
            assert_same_ranking(search_vectors(matrix, queries, k, batch=128, rows=rows), (want_s, want_i))
        whole = search_vectors(matrix, queries, k, rows=len(docs))  # one chunk: one faiss call
        assert_same_ranking(whole, (want_s, want_i))
    if nq == 300:  # the ties are there: a group of equal scores inside some query's top-k, above its k-th
        assert any(len(set(row[:-1]) - {row[-1]}) < len(row[:-1]) - row[:-1].count(row[-1]) for row in want_s.tolist())


def test_tie_groups_straddling_the_kth_place():
    """Integer vectors: whole groups of exactly equal scores, straddling the k-th place."""
    rng = np.random.default_rng(1)
    base = rng.integers(-2, 3, size=(9, 8)).astype(np.float32)
    docs = base[rng.integers(0, 9, size=4000)]
    queries = rng.integers(-2, 3, size=(50, 8)).astype(np.float32)
    for k in (10, 150):
        want = search(build_index(docs), queries, k)
        got = search_vectors(docs, queries, k, rows=FAISS_BLOCK)
        assert_same_ranking(got, want)
        assert (want[0][:, -1] == want[0][:, 0]).any()  # some query's whole top-k is one tie group


def test_fewer_vectors_than_k_are_padded_like_an_index_and_the_run_is_the_same():
    docs, queries = corpus_with_ties(n=40)
    ids = [f"d{i}" for i in range(len(docs))]
    qids = [f"q{i}" for i in range(len(queries))]
    want, want_stats = retrieve(qids, queries, Shard(build_index(docs), ids), k=100)
    got, stats = retrieve_vectors(qids, queries, ids, docs, k=100)
    assert got == want
    assert {k: stats[k] for k in ("docs", "dim", "index_bytes", "queries", "k", "shards")} == {
        k: want_stats[k] for k in ("docs", "dim", "index_bytes", "queries", "k", "shards")
    }


def test_chunk_rows_are_whole_faiss_blocks_within_the_budget():
    assert chunk_rows(768) % FAISS_BLOCK == 0 and chunk_rows(768) * 768 * 4 <= 2 * 2**30
    assert chunk_rows(10**6) == FAISS_BLOCK  # never less than one block


def test_non_finite_vectors_in_a_later_chunk_are_refused():
    from harness.core.errors import HarnessError

    docs, queries = corpus_with_ties()
    docs[4500, 3] = np.nan
    with pytest.raises(HarnessError, match="NaN"):
        search_vectors(docs, queries[:2], 5, rows=FAISS_BLOCK)


def test_the_merged_store_is_the_file_np_save_writes(tmp_path):
    """harness.retrieval.shard_merge.merge_shards_to_file appends chunk by chunk: the bytes of np.save, and the
    doc ids the bytes of json.dumps (three chunks, the last short)."""
    import io
    import json

    from harness.retrieval.shard_encoding import write_chunk
    from harness.retrieval.shard_manifest import FORMAT, MANIFEST
    from harness.retrieval.shard_merge import merge_shards_to_file
    from harness.stages.artifacts import hash_texts

    docs, _ = corpus_with_ties(n=23)
    ids = [f"d{i}" for i in range(len(docs))]
    chunks = {}
    for k, start in enumerate(range(0, len(docs), 10)):
        end = min(len(docs), start + 10)
        write_chunk(tmp_path, f"rank0-chunk{k:05d}", ids[start:end], start, end, docs[start:end])
        chunks[f"rank0-chunk{k:05d}"] = {
            "rank": 0,
            "start": start,
            "end": end,
            "ids_sha256": hash_texts(ids[start:end]),
        }
    (tmp_path / MANIFEST).write_text(
        json.dumps({"format": FORMAT, "passages": len(docs), "ids_sha256": hash_texts(ids), "chunks": chunks})
    )
    assert merge_shards_to_file(tmp_path, tmp_path / "v.npy", tmp_path / "ids.json") == len(ids)
    assert (tmp_path / "ids.json").read_text(encoding="utf-8") == json.dumps(ids)  # written chunk by chunk
    buf = io.BytesIO()
    np.save(buf, docs)
    assert (tmp_path / "v.npy").read_bytes() == buf.getvalue()
