"""The dense search of a launched run, where the vectors are: every rank holds its contiguous rows of the
corpus vectors (on its GPU in fp16 storage, or in CPU memory on a CPU run), scores all queries against
them (:func:`harness.retrieval.exact_search.shard_topk`) and rank 0 merges the per-rank lists exactly
(:func:`harness.retrieval.exact_search.merge_topk`, a tie at the k-th place kept for the lowest doc ids as the
one-process search keeps it), so the run does not depend on the number of processes.

    shard = local_shard(doc_ids, vectors, cache_file, device)   # every rank; rank 0 names the cache file
    run, stats = search_ranks(query_ids, query_emb, shard, k)   # every rank; the run on rank 0, {} elsewhere

One process keeps faiss (:mod:`harness.retrieval.dense`); this module is for world size > 1.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from harness.core import ranks
from harness.core.errors import HarnessError
from harness.retrieval.dense import FAISS_BLOCK, Run, search_vectors, to_run
from harness.retrieval.exact_search import TopK, doc_id_order, merge_topk, shard_topk_ordered

COPY_ROWS = 65_536  # rows copied from the memory map to the device at a time: no whole fp32 slice in memory


@dataclass(frozen=True)
class RankShard:
    """This rank's rows of the corpus vectors: rows [offset, offset + len(vectors)) of ``total``."""

    vectors: Any  # (n, d) torch tensor: fp16 on a GPU, fp32 on the CPU
    offset: int
    total: int
    dim: int
    device: str  # where they lie, e.g. "cuda:1" or "cpu"
    doc_ids: Sequence[str]  # every doc id on rank 0 (it writes the run), [] on the others
    order: np.ndarray | None = None  # per global row, its doc id's sort rank (ties by doc id); None: by row


def rank_rows(total: int, rank: int, world: int, align: int = FAISS_BLOCK) -> tuple[int, int]:
    """Rank ``rank``'s contiguous slice [start, end) of ``total`` rows, its edges on multiples of ``align``
    (sizes differ by at most ``align``): a CPU rank's faiss search then makes the BLAS calls of the
    one-process search over the same rows (:data:`harness.retrieval.dense.FAISS_BLOCK`), so the same scores."""

    def edge(r: int) -> int:
        return total if r >= world else min(total, (total * r // world + align // 2) // align * align)

    return edge(rank), edge(rank + 1)


def local_shard(doc_ids: Sequence[str], vectors: np.ndarray, cache_file: str | None, device: Any) -> RankShard:
    """This rank's rows, read from the corpus vector cache that rank 0 names (every rank calls this
    together: rank 0's answer waits until it has written the cache)."""
    import torch

    from harness.training import distributed as D

    if ranks.is_main() and cache_file is None:
        raise HarnessError("a multi-process dense search needs the corpus vector cache; run with the cache enabled")
    # every rank cuts its ties by doc id (doc_id_order), as the merge and the one-process search do
    where = (str(cache_file), len(doc_ids), int(vectors.shape[1]), doc_id_order(doc_ids)) if ranks.is_main() else None
    path, total, dim, order = D.control_broadcast(where)
    start, end = rank_rows(total, ranks.rank(), ranks.world_size())
    dev = torch.device(device or "cpu")
    dtype = torch.float16 if dev.type == "cuda" else torch.float32  # fp16 storage, fp32 accumulation
    rows = np.load(path, mmap_mode="r")
    if rows.shape != (total, dim):
        raise HarnessError(f"{path} holds vectors of shape {rows.shape}, not ({total}, {dim}); delete it to re-encode")
    out = torch.empty((end - start, dim), dtype=dtype, device=dev)
    for s in range(start, end, COPY_ROWS):
        e = min(end, s + COPY_ROWS)
        out[s - start : e - start] = torch.from_numpy(np.array(rows[s:e], dtype=np.float32)).to(dev, dtype)
    return RankShard(out, start, total, dim, str(dev), list(doc_ids) if ranks.is_main() else [], order)


def _gather(part: TopK) -> list[TopK] | None:
    """Every rank's lists on rank 0 (None elsewhere), through the gloo control group."""
    import torch.distributed as dist

    from harness.training import distributed as D

    box: list[Any] | None = [None] * ranks.world_size() if ranks.is_main() else None
    dist.gather_object(part, box, dst=0, group=D.control_group())
    return box


MERGE_QUERIES = 16_384  # queries whose per-rank lists rank 0 holds at once (chunked_topk): its memory bound
TOPK_ENTRY_BYTES = 12  # one per-rank top-k entry: a float32 score and an int64 row


def merge_bytes(queries: int, k: int, world: int, chunk: int = MERGE_QUERIES) -> int:
    """Bytes of per-rank top-k entries rank 0 holds at once while merging (a chunk of ``chunk`` queries
    from each of ``world`` ranks, before pickling), besides the merged run's own ``queries`` x ``k``."""
    return min(queries, chunk) * k * world * TOPK_ENTRY_BYTES


def chunked_topk(
    nq: int,
    k: int,
    part_lists: Callable[[int, int], list[TopK] | None],
    chunk: int = MERGE_QUERIES,
    order: np.ndarray | None = None,
) -> TopK | None:
    """The merged top-``k`` of ``nq`` queries, ``chunk`` at a time: ``part_lists(start, end)`` gives every
    rank's lists for queries [start, end) (None off rank 0); each chunk is merged and let go before the
    next, so rank 0 holds at most ``chunk`` queries' lists from every rank (:func:`merge_bytes`). Equal
    to one :func:`merge_topk` over all queries: every query is merged on its own."""
    if chunk < 1:
        raise HarnessError(f"the merge chunk must be positive, got {chunk}")
    scores = index = None
    for start in range(0, max(nq, 1), chunk):
        end = min(nq, start + chunk)
        parts = part_lists(start, end)
        if parts is None:
            continue
        best = merge_topk(parts, k, order)
        if scores is None or index is None:
            scores, index = np.empty((nq, k), np.float32), np.empty((nq, k), np.int64)
        scores[start:end], index[start:end] = best.scores, best.index
    return None if scores is None or index is None else TopK(scores, index)


def rank_topk(queries: np.ndarray, shard: RankShard, k: int, chunk: int = 4096) -> TopK:
    """This rank's top-``k`` of ``queries`` over its rows, global row numbers, ties by doc id: on a GPU by
    :func:`harness.retrieval.exact_search.shard_topk_ordered` (fp16 storage), on the CPU by the one-process
    search's own faiss scan (:func:`harness.retrieval.dense.search_vectors`), whose rows start on a
    multiple of FAISS_BLOCK (:func:`rank_rows`): the scores of the one-process search, bit for bit."""
    if shard.device != "cpu":
        return shard_topk_ordered(queries, shard.vectors, shard.offset, k, chunk=chunk, order=shard.order)
    rows = shard.vectors.numpy()
    local = None if shard.order is None else shard.order[shard.offset : shard.offset + len(rows)]
    scores, ids = search_vectors(rows, queries, k, order=local)
    return TopK(scores, np.where(ids >= 0, ids + shard.offset, -1))


def search_ranks(
    query_ids: Sequence[str],
    query_emb: np.ndarray,
    shard: RankShard,
    k: int,
    chunk: int = 4096,
    merge_chunk: int = MERGE_QUERIES,
) -> tuple[Run, dict[str, Any]]:
    """Every query's exact top-``k`` over the whole corpus, each rank searching its shard; the run and its
    stats on rank 0 (``{}`` and this rank's stats elsewhere). ``search_devices``/``search_processes``
    say where it ran. Queries are searched and merged ``merge_chunk`` at a time (:func:`chunked_topk`)."""
    import torch.distributed as dist

    from harness.training import distributed as D

    if len(query_ids) != len(query_emb):
        raise HarnessError(f"{len(query_ids)} query ids for {len(query_emb)} query embeddings")
    started = time.perf_counter()
    devices: list[Any] | None = [None] * ranks.world_size() if ranks.is_main() else None
    dist.gather_object(shard.device, devices, dst=0, group=D.control_group())

    def part_lists(start: int, end: int) -> list[TopK] | None:
        return _gather(rank_topk(query_emb[start:end], shard, k, chunk))

    best = chunked_topk(len(query_ids), k, part_lists, merge_chunk, shard.order)
    if best is None:
        return {}, {}
    seconds = time.perf_counter() - started
    assert devices is not None
    kinds = sorted({d.split(":")[0] for d in devices})
    stats = {
        "index": f"exact inner product over each rank's rows ({'faiss' if kinds == ['cpu'] else 'torch'}), merged on "
        f"rank 0, on {len(devices)} processes",
        "index_device": ", ".join(kinds),
        "search_devices": devices,
        "search_processes": len(devices),
        "shards": len(devices),
        "docs": shard.total,
        "dim": shard.dim,
        "index_bytes": shard.total * shard.dim * (2 if kinds == ["cuda"] else 4),
        "queries": len(query_ids),
        "k": k,
        "merge_chunk": merge_chunk,
        "search_seconds": seconds,
        "qps": len(query_ids) / seconds if seconds > 0 else float("inf"),
    }
    return to_run(query_ids, shard.doc_ids, best.scores, best.index), stats
