"""Exact inner-product search with faiss (``IndexFlatIP``), as Tevatron's retriever does by default.

- :func:`build_index` adds float32 vectors to a flat inner-product index (no training, no
  approximation: the ranking equals brute-force ``q @ D.T``).
- :func:`search` runs queries in batches and returns (scores, row ids), best first.
- :func:`retrieve` is the whole step: index(es) + query vectors -> a run
  ``{qid: {docid: score}}`` plus efficiency numbers (index bytes, queries per second), which
  the run record keeps. Indexes built per rank (sharded encoding) are searched one by one and
  merged: the union of per-shard top-k holds the global top-k, so merging is exact.
- :func:`search_vectors` / :func:`retrieve_vectors`: the same exact search over a matrix that may be
  memory-mapped (the corpus-vector cache), read in row chunks: no copy of the whole matrix is made,
  each chunk's top-k is merged into the running top-k. A corpus of at most :func:`chunk_rows` rows is
  one faiss call, exactly today's single flat index; a bigger one gives the same scores and the same
  ranking. Every search here cuts a tie at the k-th place by doc id (not by faiss's own pick, which for
  k >= 100 depends on its scan order), as the multi-process search and every run file do: faiss returns
  :data:`TIE_SLACK` extra candidates and the cut is :func:`harness.retrieval.exact_search.merge_topk`'s.
- :func:`save_index` / :func:`load_index`: faiss file + doc-id list, for the stage cache.

On a CUDA run with a GPU build of faiss, an index moves to the GPUs and the stored vectors are searched
there (:mod:`harness.retrieval.faiss_gpu`); the stats' ``index_device`` says where every search ran.

Self-hits (doc id == query id) are *not* dropped here: that is an evaluation convention
(BEIR) applied by ``harness.evaluation``; callers wanting BEIR's depth after the drop ask for
``k + 1``.
"""

from __future__ import annotations

import json
import mmap
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from harness.core.errors import HarnessError
from harness.core.fsutil import atomic_path, atomic_write_text
from harness.retrieval.exact_search import TopK, doc_id_order, merge_topk
from harness.retrieval.faiss_gpu import faiss_gpus, placement, to_gpus

Run = dict[str, dict[str, float]]


@dataclass
class Shard:
    """One flat index and the doc ids of its rows (row i of the index is ``doc_ids[i]``)."""

    index: Any  # faiss.IndexFlatIP (or its GPU copy)
    doc_ids: list[str]
    device: str = "cpu"  # where the index lies (harness.retrieval.faiss_gpu.placement)


def _as_matrix(x: np.ndarray, what: str) -> np.ndarray:
    arr = np.ascontiguousarray(x, dtype=np.float32)
    if arr.ndim != 2:
        raise HarnessError(f"{what} must be a 2-D array (n, dim), got shape {arr.shape}")
    if not np.isfinite(arr).all():
        raise HarnessError(f"{what} contain NaN or infinite values (a diverged model or fp16 overflow)")
    return arr


def build_index(embeddings: np.ndarray, device: Any = None) -> Any:
    """A ``faiss.IndexFlatIP`` holding ``embeddings`` (rows in the given order); on the GPUs for a run on a
    CUDA ``device`` with a GPU faiss (:func:`harness.retrieval.faiss_gpu.faiss_gpus`), else on the CPU."""
    import faiss

    emb = _as_matrix(embeddings, "passage embeddings")
    index = faiss.IndexFlatIP(emb.shape[1])
    if len(emb):
        index.add(emb)
    return to_gpus(index) if faiss_gpus(device) else index


def index_bytes(index: Any) -> int:
    """Memory held by the vectors of a flat index (what ``write_index`` stores, less a small header)."""
    return int(index.ntotal) * int(getattr(index, "code_size", 4 * int(index.d)))  # a GPU copy has no code_size


def search(index: Any, query_emb: np.ndarray, k: int, batch: int = 1024) -> tuple[np.ndarray, np.ndarray]:
    """Top-``k`` (scores, row ids) per query, best first; rows past ``ntotal`` have id -1."""
    q = _as_matrix(query_emb, "query embeddings")
    if k < 1:
        raise HarnessError(f"k must be positive, got {k}")
    if q.shape[1] != index.d:
        raise HarnessError(f"query dimension {q.shape[1]} does not match the index dimension {index.d}")
    if batch < 1:
        raise HarnessError(f"batch must be positive, got {batch}")
    scores = np.empty((len(q), k), dtype=np.float32)
    ids = np.empty((len(q), k), dtype=np.int64)
    for start in range(0, len(q), batch):
        s, i = index.search(q[start : start + batch], k)
        scores[start : start + batch], ids[start : start + batch] = s, i
    return scores, ids


def search_shards(
    shards: Sequence[Shard], query_emb: np.ndarray, k: int, batch: int = 1024, order: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-k over several indexes: (scores, *global* row ids into the concatenated doc ids), a tie at
    the k-th place cut by ``order`` (:func:`harness.retrieval.exact_search.doc_id_order`; None: by row)
    among the :data:`TIE_SLACK` extra candidates each index returns."""
    if not shards:
        raise HarnessError("no index to search")
    parts, offset = [], 0
    for shard in shards:
        s, i = search(shard.index, query_emb, k + TIE_SLACK, batch)
        parts.append(TopK(s, np.where(i >= 0, i + offset, -1)))
        offset += shard.index.ntotal
    best = merge_topk(parts, k, order)
    return best.scores, best.index


# faiss computes inner products in BLAS blocks of this many database rows (distance_compute_blas_database_bs):
# chunks that start on a multiple of it make the same BLAS calls as one flat index, so the same float scores.
FAISS_BLOCK = 1024
CHUNK_BYTES = 2 * 2**30  # vectors searched per chunk (float32): MS MARCO at dim 768 is 13 chunks
PAD_SCORE = np.float32(-np.finfo(np.float32).max)  # what faiss returns beside id -1 for inner product
# Candidates past the k-th that faiss returns so that a tie at the k-th place is cut by doc id, not by faiss's
# own pick: exact while at most TIE_SLACK + 1 documents share the k-th score (duplicate passages do, rarely more).
TIE_SLACK = 16


def chunk_rows(dim: int, budget: int = CHUNK_BYTES) -> int:
    """Rows per search chunk: ``budget`` bytes of float32 vectors, a multiple of :data:`FAISS_BLOCK`."""
    return max(FAISS_BLOCK, budget // (4 * dim) // FAISS_BLOCK * FAISS_BLOCK)


def _knn(query: np.ndarray, block: np.ndarray, k: int, gpu: Any = None) -> tuple[np.ndarray, np.ndarray]:
    """faiss's exact inner-product top-k of ``block`` (what ``IndexFlatIP.search`` runs, without copying
    the rows into an index), padded with (PAD_SCORE, -1) past the block's rows; on a GPU with ``gpu``
    (a ``faiss.StandardGpuResources``: ``faiss.knn_gpu``)."""
    import faiss

    kk = min(k, len(block))
    if gpu is not None:
        s, i = faiss.knn_gpu(gpu, query, block, kk, metric=faiss.METRIC_INNER_PRODUCT)
        s = np.where(i >= 0, s, PAD_SCORE)  # the CPU's padding score, whatever the GPU pads with
    else:
        s, i = faiss.knn(query, block, kk, metric=faiss.METRIC_INNER_PRODUCT)
    if kk == k:
        return s, i
    pad = ((0, 0), (0, k - kk))
    return np.pad(s, pad, constant_values=PAD_SCORE), np.pad(i, pad, constant_values=-1)


def _drop_pages(doc_emb: np.ndarray, start: int, end: int) -> None:
    """Unmap the pages of rows [start, end) of a ``np.load(mmap_mode="r")`` matrix once searched: they stay
    in the page cache, but leave this process's RSS, which then holds one chunk, not the file read so far."""
    if (
        not isinstance(doc_emb, np.memmap)
        or getattr(doc_emb, "_mmap", None) is None
        or not hasattr(mmap, "MADV_DONTNEED")
    ):
        return  # an in-memory matrix, or a view: nothing to give back
    row = doc_emb.shape[1] * doc_emb.itemsize
    first = doc_emb.offset % mmap.ALLOCATIONGRANULARITY + start * row  # byte of row `start` in the mapping
    begin = first - first % mmap.PAGESIZE
    doc_emb._mmap.madvise(mmap.MADV_DONTNEED, begin, first + (end - start) * row - begin)


Results = tuple[np.ndarray, np.ndarray]  # (scores, row ids) per query


def _merge(best: Results, new: Results, k: int, order: np.ndarray | None = None) -> Results:
    """The top-k of two result sets per row: descending score, an exact tie kept for the lower ``order``
    key (:func:`harness.retrieval.exact_search.doc_id_order`; None: the lower row id)."""
    top = merge_topk([TopK(*best), TopK(*new)], k, order)
    return top.scores, top.index


def gpu_resources(device: Any, k: int) -> Any:
    """A ``faiss.StandardGpuResources`` when the stored vectors are searched on a GPU (a CUDA run, a GPU
    faiss with ``knn_gpu``, ``k`` within its limit), else None: the CPU, as before."""
    if not faiss_gpus(device, k):
        return None
    import faiss

    return faiss.StandardGpuResources() if hasattr(faiss, "knn_gpu") else None


def search_vectors(
    doc_emb: np.ndarray,
    query_emb: np.ndarray,
    k: int,
    batch: int = 1024,
    rows: int | None = None,
    gpu: Any = None,
    order: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Top-``k`` (scores, row ids) per query over ``doc_emb`` (an array or a ``np.load(mmap_mode="r")`` memory
    map), best first, read ``rows`` at a time (default :func:`chunk_rows`): memory holds one chunk's pages
    and the running top-k, never a copy of the matrix. Rows past the corpus have id -1. ``gpu``
    (:func:`gpu_resources`) searches each chunk on the GPU. Ties at the k-th place are cut by ``order``
    (:func:`harness.retrieval.exact_search.doc_id_order`; None: the lowest rows) among :data:`TIE_SLACK` extra
    candidates per chunk."""
    q = _as_matrix(query_emb, "query embeddings")
    if doc_emb.ndim != 2 or doc_emb.shape[1] != q.shape[1]:
        raise HarnessError(f"passage embeddings of shape {doc_emb.shape} do not match query dimension {q.shape[1]}")
    if k < 1 or batch < 1:
        raise HarnessError(f"k and batch must be positive, got {k} and {batch}")
    rows = rows or chunk_rows(q.shape[1])
    n = len(doc_emb)
    scores = np.full((len(q), k), PAD_SCORE, dtype=np.float32)
    ids = np.full((len(q), k), -1, dtype=np.int64)
    for start in range(0, max(n, 1), rows):
        block = _as_matrix(doc_emb[start : start + rows], "passage embeddings")  # a float32 map's view: no copy
        if not len(block):
            break
        for qs in range(0, len(q), batch):
            s, i = _knn(q[qs : qs + batch], block, k + TIE_SLACK, gpu)
            i = np.where(i >= 0, i + start, -1)
            scores[qs : qs + batch], ids[qs : qs + batch] = _merge(
                (scores[qs : qs + batch], ids[qs : qs + batch]), (s, i), k, order
            )
        del block
        _drop_pages(doc_emb, start, min(n, start + rows))
    return scores, ids


def retrieve_vectors(
    query_ids: Sequence[str],
    query_emb: np.ndarray,
    doc_ids: Sequence[str],
    doc_emb: np.ndarray,
    k: int = 1000,
    batch: int = 1024,
    rows: int | None = None,
    device: Any = None,
) -> tuple[Run, dict[str, Any]]:
    """:func:`retrieve` over vectors searched where they lie (:func:`search_vectors`), no index built; on a
    GPU for a run on a CUDA ``device`` with a GPU faiss (``index_device`` says where)."""
    if len(doc_ids) != len(doc_emb):
        raise HarnessError(f"{len(doc_ids)} doc ids for {len(doc_emb)} passage embeddings")
    rows = rows or chunk_rows(int(doc_emb.shape[1]))
    gpu = gpu_resources(device, k)
    where = placement(1 if gpu is not None else 0, device, k)
    started = time.perf_counter()
    scores, ids = search_vectors(doc_emb, query_emb, k, batch, rows, gpu, doc_id_order(doc_ids))
    seconds = time.perf_counter() - started
    stats = {
        "index": "faiss exact inner product (flat) over the stored vectors"
        + (f", in chunks of {rows:,} rows" if len(doc_emb) > rows else "")
        + (f", on {where}" if gpu is not None else ""),
        "index_device": where,
        "shards": 1,
        "chunks": max(1, -(-len(doc_emb) // rows)),
        "docs": len(doc_ids),
        "dim": int(doc_emb.shape[1]),
        "index_bytes": int(len(doc_emb)) * int(doc_emb.shape[1]) * 4,  # a flat index's bytes for these vectors
        "queries": len(query_ids),
        "k": k,
        "search_seconds": seconds,
        "qps": len(query_ids) / seconds if seconds > 0 else float("inf"),
    }
    return to_run(query_ids, doc_ids, scores, ids), stats


def to_run(query_ids: Sequence[str], doc_ids: Sequence[str], scores: np.ndarray, ids: np.ndarray) -> Run:
    """Rows of (scores, ids) -> ``{qid: {docid: score}}`` (missing rows, id -1, are skipped)."""
    if len(query_ids) != len(scores):
        raise HarnessError(f"{len(query_ids)} query ids for {len(scores)} result rows")
    run: Run = {}
    for qid, row_s, row_i in zip(query_ids, scores.tolist(), ids.tolist()):
        run[qid] = {doc_ids[i]: float(s) for s, i in zip(row_s, row_i) if i >= 0}
    return run


def retrieve(
    query_ids: Sequence[str],
    query_emb: np.ndarray,
    shards: Shard | Sequence[Shard],
    k: int = 1000,
    batch: int = 1024,
) -> tuple[Run, dict[str, Any]]:
    """Search every query; returns the run and ``{"qps", "search_seconds", "index_bytes", ...}``."""
    shard_list = [shards] if isinstance(shards, Shard) else list(shards)
    for shard in shard_list:
        if shard.index.ntotal != len(shard.doc_ids):
            raise HarnessError(f"an index holds {shard.index.ntotal} vectors but {len(shard.doc_ids)} doc ids")
    doc_ids = [d for shard in shard_list for d in shard.doc_ids]
    started = time.perf_counter()
    scores, ids = search_shards(shard_list, query_emb, k, batch, doc_id_order(doc_ids))
    seconds = time.perf_counter() - started
    run = to_run(query_ids, doc_ids, scores, ids)
    where = ", ".join(sorted({s.device for s in shard_list}))
    stats = {
        "index": "faiss.IndexFlatIP (exact inner product)" + (f", on {where}" if "GPU" in where else ""),
        "index_device": where,
        "shards": len(shard_list),
        "docs": len(doc_ids),
        "dim": int(shard_list[0].index.d),
        "index_bytes": sum(index_bytes(s.index) for s in shard_list),
        "queries": len(query_ids),
        "k": k,
        "search_seconds": seconds,
        "qps": len(query_ids) / seconds if seconds > 0 else float("inf"),
    }
    return run, stats


def dense_retrieve(
    query_ids: Sequence[str],
    query_emb: np.ndarray,
    doc_ids: Sequence[str],
    doc_emb: np.ndarray,
    k: int = 1000,
    batch: int = 1024,
    device: Any = None,
) -> tuple[Run, dict[str, Any]]:
    """Convenience: build one flat index over ``doc_emb`` (on the GPUs for a CUDA ``device`` with a GPU
    faiss) and :func:`retrieve`."""
    if len(doc_ids) != len(doc_emb):
        raise HarnessError(f"{len(doc_ids)} doc ids for {len(doc_emb)} passage embeddings")
    gpus = faiss_gpus(device, k)
    shard = Shard(build_index(doc_emb, device if gpus else None), list(doc_ids), placement(gpus, device, k))
    return retrieve(query_ids, query_emb, shard, k, batch)


def save_index(shard: Shard, folder: str | Path) -> Path:
    """Write ``index.faiss`` and ``doc_ids.json`` into ``folder`` (ids written last: a complete pair)."""
    import faiss

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    with atomic_path(folder / "index.faiss") as tmp:
        faiss.write_index(shard.index, str(tmp))
    atomic_write_text(folder / "doc_ids.json", json.dumps(shard.doc_ids))
    return folder


def load_index(folder: str | Path) -> Shard:
    import faiss

    folder = Path(folder)
    ids_file, index_file = folder / "doc_ids.json", folder / "index.faiss"
    if not ids_file.is_file() or not index_file.is_file():
        raise HarnessError(f"{folder} holds no complete dense index (index.faiss + doc_ids.json); rebuild it")
    shard = Shard(faiss.read_index(str(index_file)), json.loads(ids_file.read_text(encoding="utf-8")))
    if shard.index.ntotal != len(shard.doc_ids):
        raise HarnessError(
            f"{folder}: index holds {shard.index.ntotal} vectors but {len(shard.doc_ids)} ids; rebuild it"
        )
    return shard
