"""Scoring what a run produced, the one way `run` and `reproduce` both do it.

Each run file of each variant (a fine-tuning stage of a method run, or ``checkpoint`` for a
released checkpoint) is scored inside its own MLflow stage run (``evaluate/<variant>/<dataset>``),
its metrics and run file logged there and its scores collected in the shapes a run record keeps
(:mod:`harness.run.record`); the final variant's scores are then checked against chance.
How a run file comes to be scored stays with the caller: `run` reads a pipeline's file back
(:func:`harness.run.runner.score_run_file`), `reproduce` scores the zero-shot search it just made.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.core.seeds import DEFAULT_SEED
from harness.evaluation.chance import chance_check
from harness.records.parent_run import stage_metrics

if TYPE_CHECKING:
    from harness.pipelines.context import StageLog
    from harness.records.tracker import Tracker


@dataclass
class Scored:
    """One run file scored."""

    result: Any  # harness.evaluation.measures.EvalResult
    run_path: Path
    cached: bool = False  # its costly part was read from a cache (a checkpoint's corpus embeddings)
    efficiency: dict[str, Any] | None = None  # measured while it was made (zero-shot); None: the pipeline keeps it


@dataclass
class RunScores:
    """Every (variant, dataset) scored in one run, in a run record's shapes."""

    final: str  # the variant a record's top-level metrics are
    by_stage: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)
    per_query_by_stage: dict[str, dict[str, dict[str, dict[str, float]]]] = field(default_factory=dict)
    primaries: dict[str, str] = field(default_factory=dict)  # dataset -> its primary measure
    datasets: dict[str, dict[str, str]] = field(default_factory=dict)  # dataset -> its files' checksums
    run_files: dict[str, dict[str, str]] = field(default_factory=dict)
    efficiency_by_stage: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    chance: dict[str, dict[str, Any]] = field(default_factory=dict)  # final datasets no better than chance

    @property
    def metrics(self) -> dict[str, dict[str, float]]:
        return self.by_stage.get(self.final, {})

    @property
    def per_query(self) -> dict[str, dict[str, dict[str, float]]]:
        return self.per_query_by_stage.get(self.final, {})

    def add(self, variant: str, dataset: str, bench: Any, scored: Scored) -> None:
        result = scored.result
        self.datasets[dataset] = bench.files()
        self.run_files.setdefault(variant, {})[dataset] = str(scored.run_path)
        self.by_stage.setdefault(variant, {})[dataset] = dict(result.aggregate)
        self.primaries[dataset] = result.primary or result.measures[0]
        self.per_query_by_stage.setdefault(variant, {})[dataset] = {m: dict(v) for m, v in result.per_query.items()}
        if scored.efficiency is not None:
            self.efficiency_by_stage.setdefault(variant, {})[dataset] = scored.efficiency


def score_variants(
    tracker: Tracker,
    stages: StageLog,
    benchmarks: Mapping[str, Any],
    variants: Mapping[str, Iterable[str]],
    score: Callable[[str, str], Scored],
    seed: int = DEFAULT_SEED,
) -> RunScores:
    """``score(variant, dataset)`` for each dataset of each variant, in order; the last variant is the final one.
    ``seed``: the run's, which draws the random ranking each final score is checked against."""

    scores = RunScores(final=list(variants)[-1])
    for variant, datasets in variants.items():
        for name in datasets:
            stages.announce(f"evaluate/{variant}/{name}", "scoring")
            t0 = time.time()
            with tracker.stage(f"evaluate/{variant}/{name}", {"benchmark": name, "finetune_stage": variant}):
                scored = score(variant, name)
                tracker.log_metrics(stage_metrics(name, scored.result.aggregate))  # in points, as printed
                tracker.log_artifact(scored.run_path, subdir=f"runs/{variant}/{name}")
            stages.add("evaluate", f"{variant}/{name}", scored.cached, time.time() - t0)
            # Its metrics stay on the stage run: the parent gets only the final variant's, under keys
            # every method shares (parent_run.log_parent_summary), for MLflow's compare view.
            scores.add(variant, name, benchmarks[name], scored)
    for name in scores.metrics:  # a trained model that ranks no better than a random ranking is flagged
        primary = scores.primaries[name]
        check = chance_check(benchmarks[name], scores.per_query[name][primary], primary, seed=seed)
        if check:
            scores.chance[name] = check
    return scores
