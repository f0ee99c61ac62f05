"""Part (a) of bench/gpu_check.py: the sharded exact search (harness/retrieval/exact_search.py) against a CPU
flat search on a synthetic corpus. The corpus is cut into shards, each rank keeps its shards on its device in
half precision (fp16, on a CPU too), scores every query with ``shard_topk``, and rank 0 merges the
gathered lists with ``merge_topk``; a numpy exact inner-product search over the fp32 originals on a query subset
is the reference. Ranks talk over NCCL when two or more GPUs are present, else over gloo (two ranks sharing the
one GPU or the CPU), so the gather runs in every case."""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from gpu_check_result import CheckResult, judged

SHARDS = 4
K = 10


@dataclass(frozen=True)
class SearchShape:
    corpus: int  # vectors
    dim: int
    queries: int
    reference_queries: int  # the subset the CPU search checks
    chunk: int  # queries scored at a time by shard_topk


CUDA_SHAPE = SearchShape(corpus=1_048_576, dim=768, queries=4096, reference_queries=256, chunk=1024)
SMOKE_SHAPE = SearchShape(corpus=20_000, dim=32, queries=64, reference_queries=32, chunk=16)


def _shard_rows(shape: SearchShape, shard: int) -> tuple[int, int]:
    step = -(-shape.corpus // SHARDS)
    return shard * step, min(shape.corpus, (shard + 1) * step)


def _shard_vectors(shape: SearchShape, shard: int, device: Any) -> Any:
    """Shard ``shard``'s fp32 vectors, the same on every rank of a device type (seeded per shard)."""
    import torch

    lo, hi = _shard_rows(shape, shard)
    gen = torch.Generator(device=device).manual_seed(1000 + shard)
    return torch.randn(hi - lo, shape.dim, generator=gen, device=device)


def _queries(shape: SearchShape, device: Any) -> np.ndarray:
    """Corpus rows with noise: each query has a clear best row, and the rest of its top 10 is close."""
    import torch

    rng = np.random.default_rng(7)
    rows = np.sort(rng.choice(shape.corpus, size=shape.queries, replace=False))
    out = np.empty((shape.queries, shape.dim), dtype=np.float32)
    for shard in range(SHARDS):
        lo, hi = _shard_rows(shape, shard)
        mine = (rows >= lo) & (rows < hi)
        vecs = _shard_vectors(shape, shard, device)[torch.as_tensor(rows[mine] - lo, device=device)]
        out[mine] = vecs.float().cpu().numpy()
    return out + rng.standard_normal(out.shape).astype(np.float32)


def _rank(rank: int, world: int, port: int, shape: SearchShape, cuda: bool, results: Any) -> None:
    import torch
    import torch.distributed as dist

    from harness.retrieval.exact_search import merge_topk, shard_topk

    gpus = torch.cuda.device_count() if cuda else 0
    device = torch.device("cuda", rank % gpus) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    backend = "nccl" if gpus >= 2 else "gloo"
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        queries = _queries(shape, device)
        storage = torch.float16  # the GPU path's storage, on a CPU too: the same cast-per-block code runs
        mine = [s for s in range(SHARDS) if s % world == rank]
        stored = {s: _shard_vectors(shape, s, device).to(storage) for s in mine}
        if cuda:
            torch.cuda.synchronize()
        dist.barrier()
        started = time.perf_counter()
        parts = [shard_topk(queries, stored[s], _shard_rows(shape, s)[0], K, chunk=shape.chunk) for s in mine]
        if cuda:
            torch.cuda.synchronize()
        gathered: list[Any] = [None] * world
        dist.all_gather_object(gathered, parts)
        seconds = time.perf_counter() - started
        if rank == 0:
            merged = merge_topk([p for rank_parts in gathered for p in rank_parts], K)
            results.put((backend, seconds, merged.scores, merged.index))
        dist.barrier()
    finally:
        dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _cpu_reference(shape: SearchShape, queries: np.ndarray, cuda: bool) -> tuple[np.ndarray, np.ndarray]:
    """Exact fp32 inner-product top 10 of the reference queries over the fp32 originals, in numpy."""
    import torch

    device = torch.device("cuda", 0) if cuda else torch.device("cpu")
    best_s = np.full((len(queries), 0), 0, dtype=np.float32)
    best_i = np.full((len(queries), 0), 0, dtype=np.int64)
    for shard in range(SHARDS):
        lo, _ = _shard_rows(shape, shard)
        vecs = _shard_vectors(shape, shard, device).cpu().numpy()
        scores = queries @ vecs.T
        top = np.argpartition(-scores, K - 1, axis=1)[:, :K]
        best_s = np.concatenate([best_s, np.take_along_axis(scores, top, 1)], axis=1)
        best_i = np.concatenate([best_i, top + lo], axis=1)
    order = np.lexsort((best_i, -best_s), axis=1)[:, :K]
    return np.take_along_axis(best_s, order, 1), np.take_along_axis(best_i, order, 1)


def search_check(cuda: bool, min_overlap: float, smoke: bool) -> CheckResult:
    import torch
    import torch.multiprocessing as mp

    shape = SMOKE_SHAPE if smoke else CUDA_SHAPE
    gpus = torch.cuda.device_count() if cuda else 0
    world = gpus if gpus >= 2 else 2
    os.environ.setdefault("OMP_NUM_THREADS", "1" if not cuda else str(os.cpu_count() or 1))
    ctx = mp.get_context("spawn")
    results = ctx.SimpleQueue()
    ranks = mp.start_processes(
        _rank, args=(world, _free_port(), shape, cuda, results), nprocs=world, start_method="spawn", join=False
    )
    backend, seconds, scores, index = results.get()  # read before joining: a full pipe would block rank 0
    while not ranks.join():
        pass
    queries = _queries(shape, torch.device("cuda", 0) if cuda else torch.device("cpu"))
    ref = shape.reference_queries
    cpu_scores, cpu_index = _cpu_reference(shape, queries[:ref], cuda)
    overlap = float(np.mean([len(set(a) & set(b)) / K for a, b in zip(index[:ref], cpu_index, strict=True)]))
    top1 = float(np.mean(index[:ref, 0] == cpu_index[:, 0]))
    score_gap = float(np.abs(scores[:ref, 0] - cpu_scores[:, 0]).max() / np.abs(cpu_scores[:, 0]).max())
    flops = 2 * shape.queries * shape.corpus * shape.dim
    figures = {
        "corpus": shape.corpus,
        "dim": shape.dim,
        "queries": shape.queries,
        "reference_queries": ref,
        "shards": SHARDS,
        "ranks": world,
        "backend": backend,
        "storage": "fp16",
        "seconds": round(seconds, 3),
        "tflops": round(flops / seconds / 1e12, 2),
        "top10_overlap": overlap,
        "top1_agreement": top1,
        "top1_score_relative_gap": score_gap,
        "min_overlap": min_overlap,
    }
    where = f"{world} ranks over {backend}, {SHARDS} shards of {shape.corpus:,} x {shape.dim} ({figures['storage']})"
    line = (
        f"top-10 overlap with the CPU flat search {overlap:.4f} on {ref} queries (threshold >= {min_overlap}); "
        f"top-1 agreement {top1:.4f}; {shape.queries:,} queries in {seconds:.2f} s ({figures['tflops']} TFLOP/s); {where}"
    )
    return judged("search", overlap >= min_overlap, line, figures)
