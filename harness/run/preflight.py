"""Before the first stage: every input the whole plan reads, checked, so that nothing starts that a later stage
would stop for want of (a paper run pre-training for days, then stopping at fine-tuning for the MS MARCO
collection).

An input is a data download (present and verified: its publisher's checksum, or its declared structural check),
a checkpoint (present; each pinned file's sha256 as harness/papers/model_pins.yaml pins it), or anything else a
stage's plan says a run would stop at. :func:`problems` gives one line per missing or mismatched input, each
ending in the command that fetches it; ``run`` refuses (exit 2) while there is one, and ``--dry-run`` and
``fetch --method M --list`` print the same lines.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from harness.core.errors import HarnessError
from harness.data import download
from harness.data.requirements import missing_line, required_sources
from harness.papers import model_pins as models
from harness.pipelines.context import STOP

if TYPE_CHECKING:
    from harness.pipelines.context import RunContext


@dataclass(frozen=True)
class Input:
    """One input of a plan: ``kind`` data or model, its name, how it is verified, and its problem (None: ready)."""

    kind: str
    name: str
    verified_by: str
    problem: str | None


def plan_inputs(spec: Any, datasets: list[str], ctx: RunContext) -> list[Input]:
    """Every data download and checkpoint a planned run (``ctx``, from ``plan_method``) reads, in stage order."""
    out = []
    for key in required_sources(spec, datasets):
        src = download.SOURCES[key]
        try:
            md5, sha256 = src.expected()
            check = "sha256" if sha256 else "md5" if md5 else f"structure: {src.structure}" if src.structure else ""
        except HarnessError:
            check = "fixture mirror"
        out.append(Input("data", key, check or f"sha256 {models.TOFU}", missing_line(key)))
    for name in ctx.models_read:
        pin = models.registry().get(name)
        how = pin.verified_by() if pin else "packaged (pip)" if name in models.PACKAGED else "local folder (no pin)"
        out.append(Input("model", name, how, models.problem(name)))
    return out


def problems(spec: Any, datasets: list[str], ctx: RunContext) -> list[str]:
    """One line per missing or mismatched input of the whole plan, each with the command that fetches it; then
    whatever else the plan says a run would stop at (a stage's own check, e.g. a split the catalog lacks)."""
    lines = [i.problem for i in plan_inputs(spec, datasets, ctx) if i.problem]
    covered = set(ctx.models_read)
    for _, text in ctx.plan_notes:
        if text.startswith(STOP) and not any(f"'{name}'" in text for name in covered):
            lines.append(text[len(STOP) :].split("\n", 1)[0])
    return list(dict.fromkeys(lines))


def refuse(spec: Any, lines: list[str]) -> HarnessError:
    """The error a run stops with before its first stage (exit 2)."""
    return HarnessError(
        f"{spec.name} [{spec.profile}]: not started: {len(lines)} input(s) the plan reads are missing or do not "
        "match (nothing runs until every stage's inputs are here; `fetch --method "
        f"{spec.name} --profile {spec.profile}` gets them):\n" + "\n".join(f"  ! {line}" for line in lines)
    )
