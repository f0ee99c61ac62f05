"""The torchrun / ``torch.multiprocessing`` driver of sharded encoding: every rank encodes its slice, all
wait, then rank 0 merges.

RANK/WORLD_SIZE come from the environment (:func:`harness.training.distributed.init_distributed`: gloo on
CPU, nccl on CUDA), a barrier on a gloo group with a long timeout waits for every rank (a resumed rank
may wait hours for one that has more left), then rank 0 merges. Under ``torch.multiprocessing.spawn``
set RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT in each child before calling it (as torchrun does).
Every rank reads the whole corpus (the manifest fingerprints all of it) but encodes only its slice. The
command line (:mod:`harness.evaluation.sharded`) builds the index chunk by chunk
(:func:`harness.retrieval.shard_index.index_shards`), so the fp32 matrix is never held whole.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np

from harness.retrieval.encoder import default_batch_size, load_zero_shot_encoder
from harness.retrieval.shard_encoding import ShardReport, encode_corpus_sharded
from harness.retrieval.shard_layout import Passages
from harness.retrieval.shard_manifest import read_manifest
from harness.retrieval.shard_merge import merge_shards
from harness.stages.checkpoints import resolve_model_path

BARRIER_TIMEOUT_S = 48 * 3600


def waiting_group(timeout_s: float = BARRIER_TIMEOUT_S) -> Any:
    """A gloo process group for waiting on every rank after encoding: CPU objects on any backend,
    and a timeout long enough for a resumed rank with nothing left to wait for one with hours left."""

    import torch.distributed as dist

    return dist.new_group(backend="gloo", timeout=timedelta(seconds=timeout_s))


@dataclass
class DistributedEncoding:
    """One process's view: every rank's report; the merged ids/matrix on rank 0 only."""

    rank: int
    world_size: int
    encoder: Any
    reports: list[ShardReport]
    doc_ids: list[str] | None = None
    embeddings: np.ndarray | None = None
    summary: dict[str, Any] = field(default_factory=dict)


def encode_distributed(
    model: str | Path,
    passages: Passages,
    out_dir: str | Path,
    *,
    shard_size: int = 10_000,
    batch_size: int | None = None,
    device: str | None = None,
    show_progress: bool = True,
    barrier_timeout_s: float = BARRIER_TIMEOUT_S,
    merge: bool = True,
) -> DistributedEncoding:
    """Every rank encodes its slice (resuming), waits for the others, then rank 0 merges
    (``merge=False``: leaves the chunks for :func:`harness.retrieval.shard_index.index_shards`, without the fp32 matrix in RAM).

    Under torchrun RANK/WORLD_SIZE/MASTER_* come from the environment; without them this is one
    process doing all the work. The process group is left (destroyed) if this call created it.
    """
    import torch.distributed as dist

    from harness.training import distributed as D

    created = not (dist.is_available() and dist.is_initialized())
    info = D.init_distributed(device)
    try:
        encoder = load_zero_shot_encoder(resolve_model_path(model), device=str(info.device))
        batch_size = default_batch_size(encoder.device) if batch_size is None else batch_size
        report = encode_corpus_sharded(
            encoder,
            passages,
            out_dir,
            rank=info.rank,
            world_size=info.world_size,
            shard_size=shard_size,
            batch_size=batch_size,
            show_progress=show_progress,
        )
        reports = [report]
        if info.distributed:
            group = waiting_group(barrier_timeout_s)
            gathered: list[Any] = [None] * info.world_size
            dist.all_gather_object(gathered, asdict(report), group=group)
            dist.barrier(group=group)
            reports = [ShardReport(**r) for r in gathered]
        result = DistributedEncoding(info.rank, info.world_size, encoder, reports)
        if info.is_main:
            if merge:
                result.doc_ids, result.embeddings = merge_shards(out_dir)
            manifest = read_manifest(Path(out_dir))
            seconds = max(r.seconds for r in reports)
            encoded = sum(r.passages_encoded for r in reports)
            result.summary = {
                "out_dir": str(out_dir),
                "docs": int(manifest["passages"]),
                "dim": int(encoder.dim),
                "world_size": info.world_size,
                "shard_size": shard_size,
                "batch_size": batch_size,
                "batching": encoder.batching(batch_size),
                "precision": encoder.precision,
                "device": str(info.device),
                "passages_encoded": encoded,
                "chunks_skipped": sum(r.chunks_skipped for r in reports),
                "encode_seconds": round(seconds, 3),
                "passages_per_second": round(encoded / seconds, 1) if seconds > 0 else None,
                "ranks": [asdict(r) for r in reports],
            }
        return result
    finally:
        if created:
            D.cleanup()
