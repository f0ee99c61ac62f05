"""harness/retrieval/exact_search.py: per-shard exact top-k and the exact merge, ties by doc-id rank."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from harness.core.errors import HarnessError
from harness.retrieval import exact_search
from harness.retrieval.exact_search import TopK, merge_topk, shard_topk, shard_topk_ordered


def _reference(q: np.ndarray, d: np.ndarray, k: int, order: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Brute force: every score, descending, ties by key."""
    s = q @ d.T
    keys = np.arange(len(d)) if order is None else order
    top = np.lexsort((np.broadcast_to(keys, s.shape), -s), axis=1)[:, :k]
    return np.take_along_axis(s, top, axis=1), top


def _tied(n: int = 40, dim: int = 8, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Small-integer vectors with many duplicate rows: exact ties at every place."""
    rng = np.random.default_rng(seed)
    base = rng.integers(-2, 3, size=(6, dim)).astype(np.float32)
    docs = base[rng.integers(0, len(base), size=n)]
    return rng.integers(-2, 3, size=(7, dim)).astype(np.float32), docs


def test_shard_topk_matches_brute_force_with_ties():
    q, d = _tied()
    got = shard_topk(q, torch.from_numpy(d), 0, 10, chunk=3)
    s, i = _reference(q, d, 10)
    assert got.index.dtype == np.int64 and got.scores.dtype == np.float32
    np.testing.assert_array_equal(got.index, i)
    np.testing.assert_array_equal(got.scores, s)


def test_blocks_smaller_than_the_shard_give_the_same_answer(monkeypatch):
    q, d = _tied(n=50)
    monkeypatch.setattr(exact_search, "SCORE_ELEMENTS", 12)  # 4-row blocks for chunks of 3 queries
    got = shard_topk(q, torch.from_numpy(d), 0, 9, chunk=3)
    np.testing.assert_array_equal(got.index, _reference(q, d, 9)[1])


@pytest.mark.parametrize("cut", [1, 17, 39])
def test_split_and_merged_equals_one_shard(cut):
    q, d = _tied()
    order = np.random.default_rng(1).permutation(len(d))  # doc-id ranks unlike the rows
    parts = [
        shard_topk_ordered(q, torch.from_numpy(d[:cut]), 0, 12, order=order),
        shard_topk_ordered(q, torch.from_numpy(d[cut:]), cut, 12, order=order),
    ]
    merged = merge_topk(parts, 12, order)
    s, i = _reference(q, d, 12, order)
    np.testing.assert_array_equal(merged.index, i)
    np.testing.assert_array_equal(merged.scores, s)
    whole = merge_topk([shard_topk_ordered(q, torch.from_numpy(d), 0, 12, order=order)], 12, order)
    np.testing.assert_array_equal(whole.index, merged.index)


def test_fewer_rows_than_k_are_padded():
    q, d = _tied(n=3)
    got = merge_topk([shard_topk(q, torch.from_numpy(d), 5, 4), shard_topk(q, torch.zeros((0, 8)), 8, 4)], 6)
    assert (got.index[:, 3:] == -1).all() and (got.scores[:, 3:] == exact_search.PAD_SCORE).all()
    assert set(got.index[0, :3]) == {5, 6, 7}


def test_fp16_storage_accumulates_in_fp32():
    rng = np.random.default_rng(2)
    q, d = rng.standard_normal((5, 64)).astype(np.float32), rng.standard_normal((30, 64)).astype(np.float32)
    half = torch.from_numpy(d).half()
    got = shard_topk(torch.from_numpy(q), half, 0, 5)
    s, i = _reference(q, half.float().numpy(), 5)
    np.testing.assert_array_equal(got.index, i)
    np.testing.assert_allclose(got.scores, s, rtol=1e-5, atol=1e-5)


def test_bad_shapes_are_one_line_errors():
    with pytest.raises(HarnessError, match="do not match"):
        shard_topk(np.zeros((2, 3), np.float32), torch.zeros((4, 5)), 0, 2)
    with pytest.raises(HarnessError, match="no per-shard"):
        merge_topk([], 3)
    assert isinstance(merge_topk([TopK(np.zeros((1, 1), np.float32), np.zeros((1, 1), np.int64))], 1), TopK)


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 100])
def test_merging_in_query_chunks_equals_one_merge(chunk):
    """Rank 0's chunked merge (harness.retrieval.rank_search.chunked_topk) gives the unchunked merge's lists."""
    from harness.retrieval.rank_search import chunked_topk, merge_bytes

    q, d = _tied()
    shards = [(0, d[:13]), (13, d[13:29]), (29, d[29:])]

    def part_lists(start: int, end: int) -> list[TopK]:
        return [shard_topk(q[start:end], torch.from_numpy(rows), offset, 11) for offset, rows in shards]

    whole = merge_topk(part_lists(0, len(q)), 11)
    got = chunked_topk(len(q), 11, part_lists, chunk)
    assert got is not None
    np.testing.assert_array_equal(got.index, whole.index)
    np.testing.assert_array_equal(got.scores, whole.scores)
    assert chunked_topk(len(q), 11, lambda s, e: None, chunk) is None  # off rank 0: nothing held
    assert merge_bytes(len(q), 11, 3, chunk) == min(len(q), chunk) * 11 * 3 * 12
