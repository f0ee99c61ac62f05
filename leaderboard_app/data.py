"""Everything the leaderboard shows, loaded once: run records, reported cells, comparisons,
the registry's consistency report and the regression gate.

Nothing here raises for bad inputs: a broken registry or an unreadable record becomes an
error message or a skipped entry that the page displays.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from harness.core.errors import HarnessError
from harness.core.paths import REPORTED_DIR, local_runs_dir
from harness.gate.admission import data_mismatches, set_apart
from harness.gate.answer import Answer, gate_answer
from harness.gate.grading import PAPER_GRADED, paper_comparisons
from harness.gate.references import folder_references
from harness.gate.run import GateResult, run_gate, your_runs
from harness.gate.tables import TableCount, table_counts
from harness.papers.citation import citation
from harness.papers.registry import load_reported_cells
from harness.records.store import (
    RunRecord,
    Skipped,
    load_precision_references,
    load_records,
    load_references,
    records_dir,
)

# `python -m harness leaderboard --records/--reported` hands its options to the app this way.
RECORDS_ENV = "HARNESS_LEADERBOARD_RECORDS"
REPORTED_ENV = "HARNESS_LEADERBOARD_REPORTED"


class Apart(NamedTuple):
    """A record shown apart, never beside the papers' rows or a reference: its spec is unknown or
    changed (the gate's word for it, and why)."""

    record: RunRecord
    status: str  # UNKNOWN_METHOD | SPEC_CHANGED | SUPERSEDED (older than its reference, of an older spec)
    reason: str


@dataclass
class LeaderboardData:
    records_dir: Path
    records: list[RunRecord]
    skipped: list[Skipped]
    cells: list[dict[str, Any]]
    cells_error: str | None
    comparisons: dict[str, list[dict[str, Any]]]  # run_id -> comparison dicts
    gate: GateResult | None = None
    references: set[str] = field(default_factory=set)  # run ids named in references.json
    apart: list[Apart] = field(default_factory=list)  # records of an unknown or changed spec (not in ``records``)
    # The user's own runs (runs/local/, git-ignored), graded as `check` would and shown apart: never
    # in ``records``, the gate's verdict or its counts. None: none there (or another folder is shown).
    yours: GateResult | None = None
    your_records: list[RunRecord] = field(default_factory=list)
    # The answer the page opens with (harness.gate.answer), from the gate's cell states: the same text as
    # `check`, the README and the report. None without the gate or the papers' cells.
    answer: Answer | None = None
    # Every printed table with how many of its cells a run can grade and its command (harness.gate.tables),
    # from the same cell states: the counts `table --list` and the report give. Empty without the gate.
    tables: list[TableCount] = field(default_factory=list)

    @property
    def n_records(self) -> int:
        """Every record file read as a record: the count `check` and the report give (the gate's own
        when it ran), whether shown as a result, set apart or skipped for its seal or data."""
        return self.gate.n_records if self.gate is not None else len(self.records) + len(self.apart)

    @property
    def profiles(self) -> list[str]:
        return sorted({r.profile for r in self.records})

    @property
    def methods(self) -> list[str]:
        return sorted({r.method for r in self.records})

    def paper_label(self, paper: str) -> str:
        """'Wu et al. 2023 (QC v2)': the paper as every surface names it (harness.papers.citation)."""
        return citation(paper)

    @property
    def papers(self) -> list[str]:
        seen: dict[str, None] = {}
        for c in self.cells:
            seen.setdefault(str(c.get("paper") or ""), None)
        return [p for p in seen if p]


def default_records_dir() -> Path:
    return Path(os.environ[RECORDS_ENV]) if os.environ.get(RECORDS_ENV) else records_dir()


def default_reported() -> str | None:
    return os.environ.get(REPORTED_ENV) or None


def inconsistency_report() -> tuple[list[dict[str, Any]], str | None]:
    """The papers' consistency checks (``validate``'s report) as rows, or an error message."""
    try:
        from harness.papers.consistency import check_papers
    except ImportError as exc:
        return [], f"consistency checks are not available in this version ({exc})"
    try:
        found = check_papers()
    except Exception as exc:  # noqa: BLE001 - a display-only report must not take the page down
        return [], f"consistency checks could not run: {type(exc).__name__}: {exc}"
    rows = []
    for item in found:
        get = item.get if isinstance(item, dict) else lambda k, o=item: getattr(o, k, None)
        rows.append({k: get(k) for k in ("paper", "table", "kind", "message")})
    return rows, None


def load(
    records: str | Path | None = None, reported: str | Path | None = None, *, with_gate: bool = True
) -> LeaderboardData:
    """Load records and cells; paper-profile records are compared with the current cells.

    The registry's consistency report is separate (``inconsistency_report``): it parses every
    registry file and the page shows it last, so the tables do not wait for it.
    """
    directory = Path(records) if records is not None else default_records_dir()
    recs, skipped = load_records(directory)
    snapshot = reported if reported is not None else default_reported()
    cells, error = load_reported_cells(snapshot)
    comparisons = {}
    references, manifest_error = _references(directory)
    apart: list[Apart] = []
    # each record against the reference the gate grades it against (the one of its own precision)
    reference_of = folder_references(directory, recs).for_record if references is not None else None
    for rec in list(recs):
        if rec.integrity_problems:  # an edited record is listed with why, never shown as a result
            recs.remove(rec)
            skipped.append(Skipped(rec.path, "integrity: " + "; ".join(rec.integrity_problems[:3])))
            continue
        mismatched = data_mismatches(rec)
        if mismatched:  # run on other data: its numbers are not the benchmark's
            recs.remove(rec)
            skipped.append(
                Skipped(
                    rec.path,
                    "data checksums differ from the catalog's (DATA-MISMATCH): "
                    + "; ".join(m.describe() for m in mismatched[:3]),
                )
            )
            continue
        why = set_apart(rec, reference_of)
        if why is not None:
            recs.remove(rec)
            apart.append(Apart(rec, *why))
            continue
        if rec.profile in PAPER_GRADED and cells is not None:
            try:
                comparisons[rec.run_id] = paper_comparisons(rec, cells)
            except Exception as exc:  # noqa: BLE001 - one odd record must not take the page down
                recs.remove(rec)
                skipped.append(Skipped(rec.path, f"could not be compared with the papers: {type(exc).__name__}: {exc}"))
        else:  # tiny runs are NOT-COMPARABLE with the papers; keep what the run stored
            comparisons[rec.run_id] = rec.comparison
    data = LeaderboardData(directory, recs, skipped, cells or [], error, comparisons, apart=apart)
    if references is not None:
        seconds = load_precision_references(directory)  # a second reference in another precision (bf16)
        data.references = {entry["run_id"] for entry in (*references.values(), *seconds.values())}
    else:
        data.cells_error = f"{data.cells_error}; {manifest_error}" if data.cells_error else manifest_error
    if with_gate:
        try:
            data.gate = run_gate(
                directory, cells=cells, reported=snapshot
            )  # None: the gate falls back to stored comparisons
        except HarnessError:  # an unreadable references.json stops the gate; its message is in cells_error above
            data.gate = None
        if data.gate is not None and cells:
            data.answer = gate_answer(data.gate.cells, cells)
            data.tables = table_counts(cells, data.gate.cells)
    if directory.resolve() == records_dir().resolve():  # runs/local/ sits beside the committed records only
        try:
            data.yours = your_runs(directory, cells=cells, reported=snapshot)
        except HarnessError:
            data.yours = None
        if data.yours is not None:
            data.your_records = load_records(data.yours.records_dir)[0]
    return data


def _references(directory: Path) -> tuple[dict[tuple[str, str], dict[str, Any]] | None, str]:
    """The references manifest, or None and why it cannot be read (the page shows the reason)."""
    try:
        return load_references(directory), ""
    except HarnessError as exc:
        return None, str(exc)


def signature(records: str | Path | None = None, reported: str | Path | None = None) -> tuple:
    """Changes whenever a record, the registry or the snapshot changes (a cache key)."""

    directory = Path(records) if records is not None else default_records_dir()
    paths: list[Path] = []
    for folder, pattern in ((directory, "*.json*"), (local_runs_dir(), "*.json*"), (REPORTED_DIR, "*.yaml")):
        if folder.is_dir():
            paths.extend(sorted(folder.glob(pattern)))
    snap = reported if reported is not None else default_reported()
    if snap and Path(snap).is_file():
        paths.append(Path(snap))
    out = []
    for p in paths:
        try:
            st = p.stat()
            out.append((str(p), st.st_mtime_ns, st.st_size))
        except OSError:
            continue
    return tuple(out)
