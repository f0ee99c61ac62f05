"""The run record, built once for every run that writes one: `run`'s method runs and `reproduce`'s
released checkpoints (profile ``checkpoint``) have one shape, so `check`, the leaderboard and the
effects read both alike (:mod:`harness.records.store` reads them back, :mod:`harness.gate` gates them).

A field that does not apply is null rather than absent: a released checkpoint has no method spec
(``spec``, ``spec_hash`` and ``hardware.declared`` are null), and its one variant, ``checkpoint``,
keys ``metrics_by_stage``, ``efficiency_by_stage`` and ``run_files`` as a fine-tuning stage keys a
run's. What only one kind of run knows (a checkpoint's registry entry, its depth) comes in
``identity``, after the spec.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.core import ranks
from harness.core.seeds import DEFAULT_SEED
from harness.papers.model_pins import provenance
from harness.records.environment import git_commit, hardware, package_versions
from harness.records.run_record import IDENTITY_KEYS, RunRecord
from harness.records.writer import write_run_record

if TYPE_CHECKING:
    from harness.records.tracker import Tracker
    from harness.run.scores import RunScores
    from harness.spec.method import MethodSpec


def build_record(
    *,
    run_id: str,
    method: str,
    profile: str,
    spec: MethodSpec | None,
    scores: RunScores,
    comparisons: Sequence[Mapping[str, Any]],
    efficiency_by_stage: Mapping[str, Mapping[str, Any]],
    stages: list[dict[str, Any]],
    started: float,
    tracker: Tracker,
    identity: Mapping[str, Any] | None = None,
    models_used: Sequence[str] = (),
    seed: int = DEFAULT_SEED,
    pretrain_seed: int | None = None,
) -> RunRecord:
    """The record of a finished run (unsealed: :func:`write_record` seals it as it writes it).

    ``comparisons``: the cells graded, as dicts; ``efficiency_by_stage``: variant -> dataset ->
    numbers; ``stages``: the run's stage log entries; ``started``: ``time.time()`` at its start;
    ``models_used``: the checkpoints it read, each named in ``models`` with its source, revision and sha256s;
    ``seed``: the seed it ran under; ``pretrain_seed``: its pre-training seed in a `run --pretrain-seeds`
    study (written only then: every other record's bytes stay as they were)."""
    final = scores.final
    substitutions = spec.get("substitutions") if spec is not None else None
    identity = dict(identity or {})
    # Built field by field: the written key order is RunRecord's one order (run_record.BUILT_ORDER).
    return RunRecord(
        run_id=run_id,
        created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        method=method,
        profile=profile,
        spec_hash=spec.spec_hash if spec is not None else None,
        spec=spec.config if spec is not None else None,
        **{key: identity.pop(key) for key in IDENTITY_KEYS if key in identity},
        command=" ".join(sys.argv),
        seed=seed,
        pretrain_seed=pretrain_seed,
        git=git_commit(),
        packages=package_versions(),
        hardware={
            "declared": spec.get("hardware") if spec is not None else None,
            "detected": hardware(),
            "processes": ranks.launched_world_size(),
        },
        substitutions=list(substitutions) if substitutions else None,
        models=[provenance(name) for name in models_used],
        datasets=scores.datasets,
        finetune_stage=final if final.startswith("retriever") else None,
        metrics=scores.metrics,
        per_query=scores.per_query,
        metrics_by_stage=scores.by_stage,
        per_query_by_stage=scores.per_query_by_stage if len(scores.by_stage) > 1 else {},
        efficiency=dict(efficiency_by_stage.get(final, {})),
        efficiency_by_stage={variant: dict(by_dataset) for variant, by_dataset in efficiency_by_stage.items()},
        comparison=[dict(c) for c in comparisons],
        chance=scores.chance,
        stages=stages,
        run_files=scores.run_files,
        seconds=round(time.time() - started, 1),
        mlflow=tracker.info(),
        extras=identity,  # what one kind of run adds beyond the named identity keys: written after the spec
    )


def write_record(record: RunRecord, tracker: Tracker, seed_study: bool = False) -> Path:
    """Seal and write the record (runs/records/<run_id>.json), and log it to the run's MLflow run;
    ``seed_study``: the run is one seed of `run --seeds` (its record goes to runs/seeds/)."""
    path = write_run_record(record, seed_study=seed_study)
    tracker.log_artifact(path, subdir="record")
    return path
