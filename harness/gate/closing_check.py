"""A finished run against the committed reference of its own precision: what the run's last lines say
its numbers were checked against (the same grading ``check`` gives it among "your runs").

The reference is chosen as the gate chooses it (:meth:`harness.gate.references.References.for_record`):
the (method, profile)'s reference in the run's precision where the manifest names one, else none of its
precision, which the line says rather than comparing unlike with unlike.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from harness.core.seeds import DEFAULT_SEED
from harness.core.statuses import FAILING, PASS
from harness.evaluation.compare import TRAINING_FREE_FAMILIES
from harness.gate.grading import (
    CROSS_MACHINE_TOLERANCE,
    TINY_TOLERANCE,
    TRAINING_FREE_TOLERANCE,
    GateRow,
    loss_rows,
    reference_rows,
)
from harness.gate.references import committed_references
from harness.records.run_precision import precision_label
from harness.records.store import (
    RunRecord,
    records_dir,
)

NOT_CHECKED = "not checked"


@dataclass(frozen=True)
class ClosingCheck:
    """``run`` against ``reference`` (None: none of its precision; ``other``: the committed one of another
    precision, if any). ``verdict``: PASS, the worst failing status, another status, or NOT_CHECKED."""

    run: RunRecord
    precision: str
    reference: RunRecord | None
    other: RunRecord | None = None
    rows: list[GateRow] = field(default_factory=list)
    verdict: str = NOT_CHECKED
    why: str = ""  # when not checked and no reference is the reason (a seed other than the references')


def check_run(rec: RunRecord, directory: str | Path | None = None) -> ClosingCheck:
    """``rec`` graded against the committed reference of its precision in ``directory`` (default runs/records),
    at the cross-machine tolerance where the reference ran elsewhere (as ``check`` grades "your runs")."""
    folder = Path(directory) if directory is not None else records_dir()
    precision = precision_label(rec.stages)
    refs = committed_references(rec.method, rec.profile, folder)
    same = refs.in_precision(rec.method, rec.profile, precision)
    other = next((r for r in refs.records.values() if r is not same), None)
    if (rec.seed if rec.seed is not None else DEFAULT_SEED) != DEFAULT_SEED:
        why = f"seed {rec.seed}: the references are seed {DEFAULT_SEED}'s"
        return ClosingCheck(rec, precision, same, other, why=why)
    if same is None:
        return ClosingCheck(rec, precision, None, other)
    training_free = (rec.spec or {}).get("family") in TRAINING_FREE_FAMILIES
    tolerance = TRAINING_FREE_TOLERANCE if training_free else TINY_TOLERANCE
    rows = reference_rows(rec, same, tolerance, None if training_free else CROSS_MACHINE_TOLERANCE)
    rows += loss_rows(rec, same)
    return ClosingCheck(rec, precision, same, other, rows, _verdict(rows))


def _verdict(rows: list[GateRow]) -> str:
    """PASS when every row passes; else the first failing status, else the first other status."""
    statuses = [r.status for r in rows]
    if statuses and all(s == PASS for s in statuses):
        return PASS
    return next((s for s in statuses if s in FAILING), next((s for s in statuses if s != PASS), NOT_CHECKED))


def closing_line(check: ClosingCheck) -> str:
    """One line: what the run's numbers were checked against and the verdict, or why they were not."""
    rec, precision = check.run, check.precision
    what = f"{rec.method} [{rec.profile}]"
    if check.why:
        return f"{NOT_CHECKED} against a committed reference: {check.why}"
    if check.reference is None:
        other = (
            f" (the committed {precision_label(check.other.stages)} one, {_shown(check.other.path)}, is another condition)"
            if check.other is not None
            else ""
        )
        return f"{NOT_CHECKED}: no committed {what} reference in {precision}{other}"
    passed = sum(r.status == PASS for r in check.rows)
    return (
        f"checked against the committed {precision} {rec.profile} reference {_shown(check.reference.path)}: "
        f"{check.verdict} ({passed} of {len(check.rows)} numbers and losses within tolerance)"
    )


def _shown(path: Path) -> str:
    """``path`` relative to the working folder where it lies under it (runs/records/...), else whole."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)
