"""Score a released checkpoint on the benchmarks its reported cells cover and grade it (`harness reproduce`).

    record = reproduce_checkpoint("co-condenser-marco-retriever")          # msmarco-dev, dl19, dl20
    record = reproduce_checkpoint("co-condenser-marco-retriever", ["scifact"])

    torchrun --nproc_per_node 8 -m harness reproduce --checkpoint co-condenser-marco-retriever

Each benchmark is encoded, searched exactly and scored by the zero-shot path
(:mod:`harness.evaluation.zero_shot`) with the encoder settings the registry gives (the authors'
pooling, similarity and lengths, never the folder's guesses). The scores are compared with the
cells the checkpoint reproduces (tolerance and bootstrap CI), every other cell of its method
is listed as NOT-COMPARABLE with the registry's reason, and a run record with profile
``checkpoint`` is written for ``check`` and the leaderboard ("released checkpoint"). Scoring,
MLflow and the record are a method run's (:mod:`harness.run.scores`, :mod:`harness.run.record`):
one variant, ``checkpoint``, and one record shape.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.core import ranks
from harness.core.errors import HarnessError
from harness.core.paths import cache_dir
from harness.core.seeds import DEFAULT_SEED
from harness.data.catalog import get_benchmark
from harness.evaluation.zero_shot import run_zero_shot
from harness.gate.grading import checkpoint_comparisons
from harness.papers.registry import load_reported_cells
from harness.papers.released import (
    CHECKPOINT_PROFILE,
    Checkpoint,
    Registry,
    get_checkpoint,
    load_checkpoints,
    unmatched_selectors,
)
from harness.pipelines.context import StageLog
from harness.records.parent_run import log_parent_summary, parent_tracker
from harness.records.run_record import RunRecord
from harness.records.writer import new_run_id
from harness.retrieval.corpus_vectors import encode_corpus_shards
from harness.retrieval.encoder import load_zero_shot_encoder
from harness.retrieval.shard_distributed import waiting_group
from harness.run.record import build_record, write_record
from harness.run.scores import Scored, score_variants
from harness.stages.checkpoints import model_fingerprint, resolve_checkpoint


def encode_shards_distributed(
    folder: str, enc: Mapping[str, Any], benches: Any, batch_size: int, device: str | None, precision: str
) -> str | None:
    """Each torchrun rank encodes its slice of every benchmark corpus into the embedding cache's
    chunk folders (:mod:`harness.retrieval.shard_encoding`: atomic, resumed after a kill), then all wait.

    Returns rank 0's device (it goes on to merge, search, score and record); None on other ranks.
    """

    import torch.distributed as dist

    from harness.training import distributed as D

    info = D.init_distributed(device)
    try:
        encoder = load_zero_shot_encoder(
            Path(folder),
            enc.get("pooling"),
            enc.get("normalize"),
            enc.get("query_max_length"),
            enc.get("passage_max_length"),
            str(info.device),
            precision,
        )
        fingerprint = model_fingerprint(Path(folder))
        for bench in benches:
            encode_corpus_shards(
                encoder, bench, fingerprint, batch_size, info.rank, info.world_size, show_progress=info.is_main
            )
        dist.barrier(group=waiting_group())
        if not info.is_main:
            print(f"rank {info.rank}/{info.world_size}: shards encoded; rank 0 merges, searches and records")
            return None
        return str(info.device)
    finally:
        D.cleanup()


def reproduce_checkpoint(
    name: str,
    benchmarks: Sequence[str] | None = None,
    *,
    batch_size: int = 32,
    depth: int = 1000,
    device: str | None = None,
    precision: str = "fp32",
    use_cache: bool = True,
    track: bool = True,
    reported: str | None = None,
) -> RunRecord | None:
    """Score, compare, record (see the module docstring); returns the record, its ``path`` the file written.

    Under torchrun (WORLD_SIZE > 1) the corpora are encoded by all ranks in shards first; only
    rank 0 searches, scores and records (the other ranks return None).
    """

    registry = load_checkpoints()
    ckpt = _released_retriever(name, registry)
    benchmarks = list(benchmarks or ckpt.benchmarks)
    if not benchmarks:
        raise HarnessError(f"{name}: no benchmarks given and none declared in {registry.path}")
    benches = {b: get_benchmark(b) for b in benchmarks}  # unknown names fail before any model is loaded
    cells = _cells_for(name, ckpt, registry, reported)
    folder = resolve_checkpoint(ckpt.source, what=f"checkpoint '{name}'")
    enc = ckpt.encoder
    if ranks.world_size() > 1:  # under torchrun: every rank encodes its slice; rank 0 goes on alone
        if not use_cache:
            raise HarnessError(
                "--no-cache cannot run under torchrun: the ranks hand their shards over through the embedding cache"
            )
        device = encode_shards_distributed(folder, enc, benches.values(), batch_size, device, precision)
        if device is None:
            return None
    run_id = new_run_id(name, CHECKPOINT_PROFILE)
    print(_describe(name, ckpt, folder, benchmarks, depth))
    # Named <checkpoint>/checkpoint/<seed>: two checkpoints of one method share its experiment.
    tracker = parent_tracker(
        ckpt.record_method,
        name,
        CHECKPOINT_PROFILE,
        DEFAULT_SEED,
        run_id,
        {"checkpoint": name, "source": ckpt.source},
        enabled=track,
    )
    stages = StageLog()

    score = _scorer(folder, enc, benches, run_id, batch_size, depth, device, precision, use_cache)

    started = time.time()
    with tracker.run():
        tracker.log_params({"checkpoint": ckpt.to_dict(), "depth": depth, "seed": DEFAULT_SEED, "precision": precision})
        scores = score_variants(tracker, stages, benches, {CHECKPOINT_PROFILE: list(benches)}, score)
        comparisons = checkpoint_comparisons(ckpt, scores.metrics, scores.per_query, cells)
        identity = {
            "checkpoint": {**ckpt.to_dict(), "folder": str(folder), "fingerprint": model_fingerprint(folder)},
            "conditions": {"checkpoint": name},
            "depth": depth,
        }
        record = build_record(
            run_id=run_id,
            method=ckpt.record_method,
            profile=CHECKPOINT_PROFILE,
            spec=None,
            scores=scores,
            comparisons=comparisons,
            efficiency_by_stage=scores.efficiency_by_stage,
            stages=stages.entries,
            started=started,
            tracker=tracker,
            identity=identity,
        )
        log_parent_summary(tracker, record)
        path = write_record(record, tracker)
    return record.replace(mlflow=tracker.info(), source=path)  # the tracker's last word, after the write


def _released_retriever(name: str, registry: Registry) -> Checkpoint:
    """The registered checkpoint ``name``; refused when it is a pre-trained encoder (no cell scores it as is)."""
    ckpt = get_checkpoint(name, registry)
    if ckpt.kind != "retriever":
        method = f" --method {ckpt.method}" if ckpt.method else ""
        raise HarnessError(
            f"{name} is a pre-trained encoder, not a retriever: no reported cell scores it as is. "
            f"Fine-tune it (python -m harness run{method} --profile paper, with the weights under "
            f"models/{ckpt.source})"
        )
    return ckpt


def _describe(name: str, ckpt: Checkpoint, folder: Path, benchmarks: Sequence[str], depth: int) -> str:
    """The one line saying what is about to be scored and how."""
    enc = ckpt.encoder
    return (
        f"{name}: released {ckpt.kind} {ckpt.source} ({folder}); benchmarks: {', '.join(benchmarks)}; "
        f"{enc.get('pooling')} pooling, {'cosine' if enc.get('normalize') else 'dot product'}, "
        f"{enc.get('query_max_length')}/{enc.get('passage_max_length')} tokens, depth {depth}"
    )


def _cells_for(name: str, ckpt: Checkpoint, registry: Registry, reported: str | None) -> list[dict[str, Any]] | None:
    """The papers' cells (from ``reported``, default the registry), refused when they cannot be loaded or
    miss a row the checkpoint names."""
    cells, error = load_reported_cells(reported)
    if error:
        raise HarnessError(error)
    missing = unmatched_selectors(ckpt, cells or [])
    if missing:
        raise HarnessError(
            f"{registry.path}: checkpoint '{name}' names rows no reported cell has: "
            + "; ".join(" / ".join(s) for s in missing)
            + " (check paper, table and row spelling)"
        )
    return cells


def _scorer(
    folder: Path,
    enc: Mapping[str, Any],
    benches: Mapping[str, Any],
    run_id: str,
    batch_size: int,
    depth: int,
    device: str | None,
    precision: str,
    use_cache: bool,
) -> Callable[[str, str], Scored]:
    """Scores the checkpoint zero-shot on one benchmark, its run file kept under the run's cache folder."""

    def score(variant: str, bench_name: str) -> Scored:
        # no folder made ahead: the run file's writer makes it, so a failed load leaves none behind
        run_path = cache_dir() / "reproduce" / run_id / f"{bench_name}.trec"
        outcome = run_zero_shot(
            folder,
            benches[bench_name],
            pooling=enc.get("pooling"),
            normalize=enc.get("normalize"),
            query_max_length=enc.get("query_max_length"),
            passage_max_length=enc.get("passage_max_length"),
            batch_size=batch_size,
            depth=depth,
            save_run=run_path,
            device=device,
            precision=precision,
            use_cache=use_cache,
            track=False,
        )
        efficiency = outcome.summary["efficiency"]
        return Scored(
            outcome.result, run_path, cached=efficiency.get("corpus_embeddings_cached") is True, efficiency=efficiency
        )

    return score
