"""Exact inner-product top-k where the vectors are: each rank scores every query against its own shard
(on its GPU in fp16 storage, or in CPU memory) and rank 0 merges the per-rank lists exactly.

    part = shard_topk(queries, vectors, offset, k)      # on every rank, vectors: its rows of the corpus
    best = merge_topk([part0, part1, ...], k, order)     # on rank 0: the top-k of the whole corpus

Ties are broken exactly, by a per-global-row sort key (``order``: the rank of each row's document id;
None: the row itself), on every rank and in the merge: the result does not depend on how the corpus
is split. Scores accumulate in fp32 whatever the storage dtype (a block of rows is cast to fp32 before
its product), so they differ from faiss's only by summation-order rounding.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from harness.core.errors import HarnessError

PAD_SCORE = np.float32(-np.finfo(np.float32).max)  # beside row -1, as faiss pads an inner-product search
PAD_KEY = np.iinfo(np.int64).max  # a padded slot sorts after every real row
SCORE_ELEMENTS = 2**28  # query chunk x vector block scores held at once (1 GiB of float32)


@dataclass(frozen=True)
class TopK:
    scores: np.ndarray  # (Q, k) float32, best first
    index: np.ndarray  # (Q, k) int64, global row of the corpus (-1 padding)


def doc_id_order(doc_ids: Sequence[str]) -> np.ndarray:
    """Per corpus row, the rank of its doc id in sorted order: the sort key that cuts a tie at the k-th place
    for the lowest doc ids, the rule of every run file (:func:`harness.data.formats.by_score_then_id`)."""
    order = np.empty(len(doc_ids), dtype=np.int64)
    order[sorted(range(len(doc_ids)), key=doc_ids.__getitem__)] = np.arange(len(doc_ids), dtype=np.int64)
    return order


def _select(scores: Any, rows: Any, keys: Any, k: int) -> tuple[Any, Any, Any]:
    """The first ``k`` columns per row in (descending score, ascending key) order (torch tensors):
    two stable sorts, the key first."""
    import torch

    by_key = torch.argsort(keys, dim=1, stable=True)
    scores, rows, keys = (torch.gather(t, 1, by_key) for t in (scores, rows, keys))
    by_score = torch.argsort(scores, dim=1, descending=True, stable=True)[:, :k]
    return tuple(torch.gather(t, 1, by_score) for t in (scores, rows, keys))  # type: ignore[return-value]  # a generator's tuple types as tuple[Tensor, ...]


def _block_top(block_scores: Any, block_keys: Any, k: int) -> tuple[Any, Any]:
    """Column positions and scores of the exact top-``k`` of each row of ``block_scores`` (c, B), ties at
    the k-th place kept for the lowest keys: ``topk`` gives the threshold; only rows where more
    columns reach it than fit are sorted in full."""
    import torch

    top_s, top_i = torch.topk(block_scores, k, dim=1)
    tied = (block_scores >= top_s[:, -1:]).sum(dim=1) > k
    if bool(tied.any()):
        rows = torch.nonzero(tied).flatten()
        sub = block_scores[rows]
        keys = block_keys.unsqueeze(0).expand_as(sub)
        cols = torch.arange(sub.shape[1], device=sub.device).unsqueeze(0).expand_as(sub)
        s, c, _ = _select(sub, cols, keys, k)
        top_s[rows], top_i[rows] = s, c
    return top_s, top_i


def shard_topk(queries: Any, vectors: Any, offset: int, k: int, *, chunk: int = 4096) -> TopK:
    """Exact inner-product top-``k`` of every query over ``vectors`` (an (n, d) torch tensor on any device,
    fp16 allowed), rows numbered from ``offset`` (the global row of ``vectors[0]``); ``queries`` (Q, d)
    float32 numpy or torch, ``chunk`` of them scored at a time. Ties are kept for the lowest rows;
    slots past ``n`` are padded (score :data:`PAD_SCORE`, row -1)."""
    return shard_topk_ordered(queries, vectors, offset, k, chunk=chunk)


def shard_topk_ordered(
    queries: Any, vectors: Any, offset: int, k: int, *, chunk: int = 4096, order: np.ndarray | None = None
) -> TopK:
    """:func:`shard_topk` with ties broken by ``order`` (per-global-row sort key, as :func:`merge_topk`'s),
    so that a tie at this shard's k-th place keeps the rows the merge would keep."""
    import torch

    if k < 1 or chunk < 1:
        raise HarnessError(f"k and chunk must be positive, got {k} and {chunk}")
    q_all = torch.as_tensor(queries).to(device=vectors.device, dtype=torch.float32)
    if q_all.ndim != 2 or vectors.ndim != 2 or q_all.shape[1] != vectors.shape[1]:
        raise HarnessError(
            f"queries of shape {tuple(q_all.shape)} do not match vectors of shape {tuple(vectors.shape)}"
        )
    n, nq = int(vectors.shape[0]), int(q_all.shape[0])
    scores = np.full((nq, k), PAD_SCORE, dtype=np.float32)
    index = np.full((nq, k), -1, dtype=np.int64)
    if n == 0 or nq == 0:
        return TopK(scores, index)
    rows_all = torch.arange(offset, offset + n, dtype=torch.int64, device=vectors.device)
    if order is None:
        keys_all = rows_all
    else:
        keys_all = torch.as_tensor(np.asarray(order[offset : offset + n], dtype=np.int64), device=vectors.device)
    block = max(k, SCORE_ELEMENTS // min(chunk, nq))
    for qs in range(0, nq, chunk):
        q = q_all[qs : qs + chunk]
        best_s = torch.full((len(q), 0), 0.0, device=vectors.device)
        best_r = torch.zeros((len(q), 0), dtype=torch.int64, device=vectors.device)
        best_k = torch.zeros((len(q), 0), dtype=torch.int64, device=vectors.device)
        for start in range(0, n, block):
            # fp32 product of a block cast from its storage dtype: fp32 accumulation, one block's copy
            part = q @ vectors[start : start + block].to(torch.float32).T
            keys = keys_all[start : start + block]
            top_s, top_c = _block_top(part, keys, min(k, part.shape[1]))
            best_s, best_r, best_k = _select(
                torch.cat([best_s, top_s], 1),
                torch.cat([best_r, rows_all[start : start + block][top_c]], 1),
                torch.cat([best_k, keys[top_c]], 1),
                k,
            )
        width = best_s.shape[1]
        scores[qs : qs + len(q), :width] = best_s.cpu().numpy()
        index[qs : qs + len(q), :width] = best_r.cpu().numpy()
    return TopK(scores, index)


def merge_topk(parts: Sequence[TopK], k: int, order: np.ndarray | None = None) -> TopK:
    """The exact top-``k`` of several shards' lists over the same queries: descending score, ties by
    ``order[row]`` (the sort key of each global row's document id; None: the row), padding last."""
    if not parts:
        raise HarnessError("no per-shard results to merge")
    if k < 1:
        raise HarnessError(f"k must be positive, got {k}")
    scores = np.concatenate([p.scores for p in parts], axis=1).astype(np.float32, copy=False)
    index = np.concatenate([p.index for p in parts], axis=1).astype(np.int64, copy=False)
    if index.shape[1] < k:  # fewer candidates than k: pad first, the sort keeps them last
        pad = k - index.shape[1]
        scores = np.concatenate([scores, np.full((len(scores), pad), PAD_SCORE, np.float32)], axis=1)
        index = np.concatenate([index, np.full((len(index), pad), -1, np.int64)], axis=1)
    real = index >= 0
    keys = np.where(real, index if order is None else np.asarray(order, np.int64)[np.where(real, index, 0)], PAD_KEY)
    top = np.lexsort((keys, -np.where(real, scores, -np.inf)), axis=1)[:, :k]
    return TopK(np.take_along_axis(scores, top, axis=1), np.take_along_axis(index, top, axis=1))
