"""One run's plan, built once per `run` (:func:`harness.run.runner.build_plan`): what the run will execute.

``--dry-run`` prints it (:meth:`RunPlan.describe`); a real run checks it (the preflight's problems refuse the
run before its first stage), warns from its projection and executes it, its pipeline receiving the stage count
and the disk each stage would write through the :class:`~harness.pipelines.context.StageLog` it starts with.
Every planned stage comes from the run's own pipeline in plan mode, so the plan holds each stage's cache key
exactly as the run computes it.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from harness.core.seeds import DEFAULT_SEED
from harness.pipelines.context import StageLog
from harness.run.plan import describe
from harness.run.projection import Cost, stage_costs

if TYPE_CHECKING:
    from harness.core.hardware import Hardware
    from harness.run.footprint import Footprint
    from harness.spec.method import MethodSpec


class ProfileChoice(NamedTuple):
    """The profile a run takes and why (asked with --profile, or what the machine and the inputs allow)."""

    profile: str
    why: str


@dataclass(frozen=True)
class RunPlan:
    """Everything a run decides before its first stage.

    ``stages``: the planned entries in a run record's ``stages`` shape plus ``plan`` (cached, to run or reused),
    each with its cache key, then the evaluation entries; ``notes``: (entry index, text) lines the plan reports
    besides (a missing checkpoint); ``problems``: the preflight's lines, each an input the run refuses to start
    without; ``footprints``: the projected memory and disk of each data stage (empty when it cannot be
    projected); ``needs_mib``: (stage, dataset) -> MiB it would write, what a full disk's message says."""

    spec: MethodSpec
    choice: ProfileChoice
    seed: int
    datasets: tuple[str, ...]
    stop_after: str | None
    force: bool
    stages: tuple[dict[str, Any], ...]
    notes: tuple[tuple[int, str], ...]
    problems: tuple[str, ...]
    footprints: tuple[Footprint, ...]
    needs_mib: Mapping[tuple[str, str | None], float]
    seed_study: bool = False  # this run is one seed of `run --seeds` (its record goes to runs/seeds/)
    pretrain_seed: int | None = None  # its pre-training seed under `run --pretrain-seeds` (None: seed 42's, unsaid)

    @functools.cached_property
    def costs(self) -> tuple[Cost, ...]:
        """The projection of each stage that runs (TFLOPs, harness/run/projection.py): computed once, when the
        plan is first described (a real run that prints no plan never needs it)."""
        return tuple(stage_costs(self.spec, list(self.stages)))

    @property
    def precision(self) -> str | None:
        """What the spec's ``precision: auto`` resolved to for this run (None: every training stage states its own)."""
        return self.spec.precision

    @property
    def hardware(self) -> dict[str, Any]:
        """The hardware the profile declares (devices, device type, GPU)."""
        return dict(self.spec.get("hardware") or {})

    def stage_names(self) -> list[str]:
        """Each stage name the plan runs, once, in order (``evaluate`` last)."""
        return list(dict.fromkeys(entry["stage"] for entry in self.stages))

    @property
    def pretraining_seed(self) -> int:
        """The pre-training seed the run's context carries (42 where the study names none)."""
        return DEFAULT_SEED if self.pretrain_seed is None else self.pretrain_seed

    def stage_log(self) -> StageLog:
        """The log a run starts with: the N of its "[k/N] stage" lines and each data stage's projected disk."""
        return StageLog(total=len(self.stages), needs_mib=dict(self.needs_mib))

    def describe(self, hw: Hardware | None = None) -> str:
        """What ``--dry-run`` prints (harness/run/plan.py)."""
        return describe(
            self.spec,
            list(self.datasets),
            list(self.stages),
            list(self.notes),
            hw,
            preflight=list(self.problems),
            seed=self.seed,
            costs=self.costs,
        )
