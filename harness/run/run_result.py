"""What :func:`harness.run.runner.run_method` returns: a finished run, a run stopped after a stage, a dry-run's
plan, or a launched worker's share (rank > 0, which scores and records nothing)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.records.run_record import RunRecord
from harness.run.run_plan import RunPlan


@dataclass(frozen=True)
class RunResult:
    """One `run`'s outcome. ``run_record``: the record written (None: a dry-run, ``--stage``, rank > 0), and
    ``record`` its content; ``output``: the folder ``--stage NAME`` stopped at; ``plan``: what the run executed
    (or, a dry-run, would execute); ``mlflow``: the tracker's info (None where nothing was tracked)."""

    method: str
    profile: str
    spec_hash: str | None
    stages: list[dict[str, Any]]
    plan: RunPlan
    run_id: str | None = None
    metrics: dict[str, dict[str, float]] = field(default_factory=dict)
    metrics_by_stage: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)
    comparison: list[dict[str, Any]] = field(default_factory=list)
    run_record: Path | None = None
    record: RunRecord | None = None
    mlflow: dict[str, Any] | None = None
    seconds: float | None = None
    finetune_stage: str | None = None
    output: Path | None = None
    config_hash: str | None = None
    dry_run: bool = False

    @property
    def plan_notes(self) -> list[str]:
        """The plan's notes, without where they sit among the stages."""
        return [text for _, text in self.plan.notes]

    @property
    def warning(self) -> str | None:
        """The tracking's warning (a failing MLflow server), if it gave one."""
        return (self.mlflow or {}).get("warning")

    def summary(self) -> dict[str, Any]:
        """What ``run --json`` writes: the metrics and comparison cells, the record's path, each stage with its
        cache key (a dry-run's: planned, with ``plan``: cached / to run / reused)."""
        return {
            "method": self.method,
            "profile": self.profile,
            "run_id": self.run_id,
            "spec_hash": self.spec_hash,
            "metrics": self.metrics,
            **({"metrics_by_stage": self.metrics_by_stage} if self.metrics_by_stage else {}),
            "comparison": self.comparison,
            "run_record": str(self.run_record) if self.run_record is not None else None,
            "mlflow": self.mlflow,
            "stages": self.stages,
            **({"dry_run": True} if self.dry_run else {}),
        }
