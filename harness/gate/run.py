"""CI regression gate: every run record against what it must reproduce (`python -m harness check`).

* **Integrity first.** Every record is re-hashed against the seal written with it and its
  aggregates are recomputed from its own per-query scores (``harness/records/integrity.py``); an edited,
  unsealed or inconsistent record is CORRUPT (always failing), naming the part that changed; so is
  one whose run file, on this machine, differs from the digest its stage took when it wrote it.
* ``paper``-profile records are graded against the papers' reported cells for their method,
  re-computed with the current registry, conditions derived from the record's own spec and the
  one rule of ``harness.evaluation.verdict`` (so neither an edited ``comparison`` block nor a
  stale registry can hide a gap): DIFFERENT-BELOW / DIFFERENT-ABOVE fail, INCONCLUSIVE does not.
* ``checkpoint`` records (released weights scored by ``reproduce``) are re-graded against the rows
  the checkpoint registry says are that checkpoint (``harness.papers.released``), never a reference; a
  record of a checkpoint no longer registered is UNKNOWN-METHOD.
* Every other profile (``tiny``, ``mini``) is compared with its **reference**: the run named for its
  (method, profile) in ``references.json`` in the records folder, or the second one of its precision
  where the manifest names one ("<method>/<profile>/bf16": ``run --precision auto`` trains bf16 on one
  CPU and fp32 on another, and runs of different precisions are not compared). A reference is made only
  explicitly (``check --accept RUN_ID``), never because a record is the newest. Each metric of
  the reference must be matched within ``TINY_TOLERANCE`` points in either direction
  (``CROSS_MACHINE_TOLERANCE`` when the records name different machines, and the row says so); a record
  older than its reference is SUPERSEDED; a changed spec hash is STALE-REFERENCE (re-run and accept). A
  ``paper`` record whose method has a reference (BM25) is gated against both; a method without
  training must match its reference within ``TRAINING_FREE_TOLERANCE`` (float printing only).
* A reference named in ``references.json`` whose record is absent (or unusable) is MISSING
  (failing): the manifest is also the list of records the gate expects. An entry whose record is
  of another method or profile than its key is WRONG-REFERENCE (failing, and nothing is gated
  against it). A manifest that cannot be read, or an entry without the accepted record's sha256,
  stops the gate with one line (exit 2). A record whose method has no spec is UNKNOWN-METHOD, one
  with no reference NO-REFERENCE (both fail under ``--strict``).
* **Nothing is skipped silently.** Every ``*.json`` file in the folder is gated or fails: a file
  that cannot be read as a record (truncated or empty, not JSON, not UTF-8, a partial record
  missing a required key, a repeated ``run_id``) is UNREADABLE, and a record that loaded but
  could not be compared is ERROR, one row each naming the file and why. A record from a newer
  schema version is UNREADABLE too: the harness that checks it cannot vouch for fields it does
  not know, and in CI the records and the harness come from one commit, so a newer version means a
  record from elsewhere (or a version bump without a reader); upgrade the harness to check it.
  Only a temp file still being written (``harness.core.fsutil.is_temp``: ``atomic_path``'s
  ``.<name>.<random>.tmp.json``, and ``*.tmp``) is IN-PROGRESS: listed, never read, failing
  only under ``--strict`` (a reference still being written is MISSING until it is renamed into
  place, so ignoring the temp file lets nothing expected pass). The papers' cells are read too: a
  ``--reported`` file or registry that cannot be loaded is one UNREADABLE row naming it (paper
  records still show their stored comparison, but the gate cannot pass without the cells).
* **Training moved the weights.** A record in which a training stage left its weights where they
  started (its output's ``weight_change``, measured by harness.training.engine) is UNTRAINED,
  failing, one row per stage; records written before the field are not held to it.
* **Effects.** For every profile, each method minus each method its spec names in ``compare_with``
  (the control; QC minus non-QC; in the paper profile also every pair of methods and of stages a
  paper prints a difference of, at every stage both runs scored; ``harness.evaluation.effects``), on
  every benchmark and measure, with a paired-bootstrap CI, graded against the papers' printed
  difference where the runs share its setting (``harness.evaluation.claims``, the effect rule: a
  reversed or missed claim is DIFFERENT and fails the gate), and the papers' count claims from them
  (``harness.evaluation.count_claims``); otherwise EFFECT (no claim) or NOT-COMPARABLE.
* **Contributed runs** (docs/contributing-runs.md) pass the same checks as any other record, plus
  two that every record passes: its ``datasets`` checksums must be the catalog's for the same file
  (``harness.data.checksums``; else DATA-MISMATCH, failing, naming the dataset and file), and a
  record the gate would grade (against its reference, or the papers) must come from a spec it knows,
  the method's current spec for its profile or its reference's (else SPEC-CHANGED: not gated,
  failing under ``--strict``, and shown apart on the leaderboard). A reference, the records it
  superseded and a record without a reference are not graded, so not held to the spec here.
* ``check --accept RUN_ID`` accepts only a record that loads and passes integrity; an unsealed
  record is refused like an edited one (removing the seal of a doctored record must not turn it
  into a reference: every record written since sealing was introduced carries one).

Exit code: 1 when any row is FAIL, UNTRAINED, DIFFERENT-*, CORRUPT, DATA-MISMATCH, MISSING, WRONG-REFERENCE,
UNREADABLE or ERROR; with ``strict`` (and always for ``check --rerun``) also on NEAR, UNKNOWN-METHOD,
NO-REFERENCE, STALE-REFERENCE, SPEC-CHANGED and IN-PROGRESS.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import groupby
from pathlib import Path
from typing import Any

from harness.core.fsutil import is_temp
from harness.core.paths import local_runs_dir
from harness.core.points import fmt, points_decimals, reported_text

# Every status word, which fail the gate and the order rows are counted in: declared once there.
from harness.core.statuses import (
    CORRUPT,
    DATA_MISMATCH,
    ERROR,
    FAILING,
    IN_PROGRESS,
    NO_REFERENCE,
    NOT_COMPARABLE,
    REFERENCE,
    SPEC_CHANGED,
    STATUSES,
    STRICT_FAILING,
    SUPERSEDED,
    UNKNOWN_METHOD,
    UNREADABLE,
)
from harness.core.text_table import current_width, format_table, table_blocks, wrap_text
from harness.gate.admission import changed_run_files, data_mismatches, spec_change, unknown_checkpoint
from harness.gate.cell_state import CellState, cell_states
from harness.gate.grading import (
    CROSS_MACHINE_TOLERANCE,
    LOSS,
    PAPER_GRADED,
    TINY_TOLERANCE,
    TRAINING_FREE_FAMILIES,
    TRAINING_FREE_TOLERANCE,
    GateRow,
    against_reference,
    effect_rows,
    loss_rows,
    movement_rows,
    paper_rows,
    reference_rows,
)
from harness.gate.references import References, resolve_references
from harness.papers.registry import load_reported_cells
from harness.papers.released import CHECKPOINT_PROFILE
from harness.records.store import (
    REFERENCES_FILE,
    RunRecord,
    Skipped,
    load_precision_references,
    load_records,
    load_references,
    records_dir,
)
from harness.spec.files import list_methods


@dataclass
class GateResult:
    """``skipped``: the files not gated (each also has a row, UNREADABLE / ERROR / IN-PROGRESS,
    which is what decides the verdict)."""

    records_dir: Path
    rows: list[GateRow]
    skipped: list[Skipped]
    strict: bool = False
    n_records: int = 0
    cells: dict[str, CellState] = field(default_factory=dict)  # each papers' cell's one state (gate.cell_state)

    def counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for row in self.rows:
            counts[row.status] = counts.get(row.status, 0) + 1
        order = (*STATUSES, *counts)  # declaration order; a status not declared (a stored one) last
        return {s: counts[s] for s in sorted(counts, key=order.index)}

    def failures(self) -> list[GateRow]:
        bad = STRICT_FAILING if self.strict else FAILING
        return [r for r in self.rows if r.status in bad]

    @property
    def passed(self) -> bool:
        return not self.failures()

    @property
    def verdict(self) -> str:
        """The gate's one word: PASSED or FAILED."""
        return "PASSED" if self.passed else "FAILED"

    @property
    def exit_code(self) -> int:
        return 0 if self.passed else 1

    def to_dict(self) -> dict[str, Any]:
        return {
            "records_dir": str(self.records_dir),
            "strict": self.strict,
            "passed": self.passed,
            "exit_code": self.exit_code,
            "records": self.n_records,
            "counts": self.counts(),
            "rows": [r.to_dict() for r in self.rows],
            "skipped": [{"path": str(s.path), "reason": s.reason} for s in self.skipped],
            "tiny_tolerance": TINY_TOLERANCE,
            "cells": {k: {"state": c.state, "reason": c.reason, "command": c.command} for k, c in self.cells.items()},
        }


def run_gate(
    directory: str | Path | None = None,
    *,
    strict: bool = False,
    cells: Sequence[Mapping[str, Any]] | None = None,
    reported: str | Path | None = None,
    tiny_tolerance: float = TINY_TOLERANCE,
    references_from: str | Path | None = None,
    known_methods: Sequence[str] | None = None,
    cross_machine: float | None = CROSS_MACHINE_TOLERANCE,
) -> GateResult:
    """Gate every record in ``directory`` (default runs/records).

    ``cells`` (dicts) overrides the registry; ``reported`` names a JSON snapshot of cells;
    ``references_from`` is the folder whose ``references.json`` and reference records to use
    (default ``directory``: a fresh re-run in a scratch folder is gated against the committed
    references this way; then missing references are not expected in the scratch folder);
    ``cross_machine``: the tolerance of a trained record against a reference made on another
    machine (None: ``tiny_tolerance`` whatever the machines).
    """
    directory = Path(directory) if directory is not None else records_dir()
    ref_dir = Path(references_from) if references_from is not None else directory
    records, skipped = load_records(directory)
    result = GateResult(directory, [], skipped, strict, len(records))
    for s in skipped:  # one row per file not gated, so it counts in the verdict like any other
        status = IN_PROGRESS if is_temp(s.path) else UNREADABLE
        result.rows.append(GateRow(status, s.path.stem, "", "", note=f"{s.path.name}: {s.reason}"))
    if known_methods is None:
        known_methods = list_methods()
    usable = []
    for rec in records:
        rows, admitted = _admission(rec, known_methods)
        result.rows.extend(rows)
        if admitted:
            usable.append(rec)
    if cells is None and any(r.profile in PAPER_GRADED for r in usable):
        cells = _load_cells(result, reported)
    present = ({r.path.stem for r in records} | {s.path.stem for s in skipped}) if ref_dir == directory else None
    refs = resolve_references(
        load_references(ref_dir),
        usable if ref_dir == directory else load_records(ref_dir)[0],
        present,
        load_precision_references(ref_dir),
    )
    result.rows.extend(refs.rows)
    _drop_spec_changed(result, usable, refs)
    groups, compared = _grade_against_papers(result, usable, cells, refs)
    for group in groups.values():
        for rec in group:
            _grade_against_reference(result, rec, refs, ref_dir, tiny_tolerance, cross_machine)
    result.rows.extend(effect_rows(usable))
    if cells:  # the state every surface gives each papers' cell, over the records graded here
        result.cells = cell_states(cells, compared)
    return result


def _admission(rec: RunRecord, known_methods: Sequence[str]) -> tuple[list[GateRow], bool]:
    """The rows a record earns before grading, and whether it is graded: CORRUPT (integrity, or run files
    changed since), DATA-MISMATCH or UNKNOWN-METHOD keep it out; an admitted one brings its UNTRAINED
    movement rows (any profile, graded or not: it trained nothing)."""
    base: dict[str, Any] = dict(run_id=rec.run_id, method=rec.method, profile=rec.profile)
    if rec.integrity_problems:
        return [GateRow(CORRUPT, **base, note=f"{rec.path.name}: {p}") for p in rec.integrity_problems], False
    if changed := changed_run_files(rec):  # its numbers no longer follow from the run files it names
        return [GateRow(CORRUPT, **base, note=f"{rec.path.name}: {p}; re-run to rebuild it") for p in changed], False
    data_problems = data_mismatches(rec)
    if data_problems:  # run on other data than the catalog's: none of its numbers can be compared
        return [
            GateRow(
                DATA_MISMATCH,
                **base,
                benchmark=m.dataset,
                note=(f"{rec.path.name}: {m.describe()}; re-run on the catalog's data (`python -m harness fetch`)"),
            )
            for m in data_problems
        ], False
    if rec.profile == CHECKPOINT_PROFILE:
        unknown = unknown_checkpoint(rec)
        if unknown:
            return [GateRow(UNKNOWN_METHOD, **base, note=f"{rec.path.name}: {unknown}; not gated")], False
    elif rec.method not in known_methods:
        known = ", ".join(sorted(known_methods))
        note = f"{rec.path.name}: no method spec named '{rec.method}' (known: {known}); not gated"
        return [GateRow(UNKNOWN_METHOD, **base, note=note)], False
    return movement_rows(rec), True


def _load_cells(result: GateResult, reported: str | Path | None) -> list[dict[str, Any]] | None:
    """The papers' cells from ``reported`` (default the registry); an UNREADABLE row when they cannot be
    loaded: they are what paper records are gated against, so there is no silent fall-back."""
    cells, error = load_reported_cells(reported)
    if error:
        result.rows.append(
            GateRow(
                UNREADABLE,
                str(reported or "baselines/reported"),
                "-",
                "-",
                note=(f"{error}; paper records cannot be graded without the papers' cells"),
            )
        )
    return cells


def _drop_spec_changed(result: GateResult, usable: list[RunRecord], refs: References) -> None:
    """Remove from ``usable`` (in place) each record the gate would grade that comes from a spec it does not
    know, the method's current one or the one its reference ran (STALE-REFERENCE covers that case), with a
    SPEC-CHANGED row: it is set apart, never graded."""
    for rec in list(usable):
        ref = refs.for_record(rec)
        standing = _standing(rec, ref)
        if (
            rec.profile == CHECKPOINT_PROFILE
            or standing in (REFERENCE, SUPERSEDED)
            or (standing == NO_REFERENCE and rec.profile not in PAPER_GRADED)
        ):
            continue  # not graded anyway: NO-REFERENCE, REFERENCE or SUPERSEDED below
        why = spec_change(rec, ref)
        if why:
            usable.remove(rec)
            result.rows.append(
                GateRow(
                    SPEC_CHANGED,
                    rec.run_id,
                    rec.method,
                    rec.profile,
                    note=(f"{rec.path.name}: {why}; not gated (re-run with the committed spec)"),
                )
            )


def _grade_against_papers(
    result: GateResult, usable: list[RunRecord], cells: Sequence[Mapping[str, Any]] | None, refs: References
) -> tuple[dict[tuple[str, str], list[RunRecord]], list[RunRecord]]:
    """Grade the paper-graded records against the papers' cells; return the records to gate against their
    reference, grouped by (method, profile), and the records compared with the cells."""
    groups: dict[tuple[str, str], list[RunRecord]] = {}
    compared: list[RunRecord] = []
    for rec in usable:
        if rec.profile in PAPER_GRADED:
            try:
                result.rows.extend(paper_rows(rec, cells))
                compared.append(rec)
            except Exception as exc:  # noqa: BLE001 - one odd record must not stop the gate
                _unusable(result, rec, f"could not be compared with the papers: {type(exc).__name__}: {exc}")
            if rec.profile == CHECKPOINT_PROFILE or (rec.method, rec.profile) not in refs.entries:
                continue  # gated against the papers only; with a reference, also against it below
        groups.setdefault((rec.method, rec.profile), []).append(rec)
    return groups, compared


def _grade_against_reference(
    result: GateResult,
    rec: RunRecord,
    refs: References,
    ref_dir: Path,
    tiny_tolerance: float,
    cross_machine: float | None,
) -> None:
    """The rows of one record against its (method, profile) reference: NO-REFERENCE, REFERENCE (it is it),
    SUPERSEDED (older), or each metric and loss graded within the tolerance (ERROR when it cannot be)."""
    method, profile = rec.method, rec.profile
    ref = refs.for_record(rec)
    base: dict[str, Any] = dict(run_id=rec.run_id, method=method, profile=profile)
    standing = _standing(rec, ref)
    if ref is None:
        note = (
            f"no reference for {method} [{profile}] in {ref_dir / REFERENCES_FILE}: "
            f"`python -m harness check --accept {rec.run_id}` makes this run the reference"
        )
        result.rows.append(GateRow(NO_REFERENCE, **base, note=note))
    elif standing == REFERENCE:
        if rec.profile != "paper":  # a paper reference is gated against the papers above
            accepted = f"accepted {refs.accepted(ref)}".strip()
            result.rows.append(GateRow(REFERENCE, **base, against="(is the reference)", note=accepted))
    elif standing == SUPERSEDED:
        note = "older than the reference; not gated"
        result.rows.append(GateRow(SUPERSEDED, **base, against=against_reference(ref), note=note))
    else:
        try:
            training_free = (rec.spec or {}).get("family") in TRAINING_FREE_FAMILIES
            tolerance = TRAINING_FREE_TOLERANCE if training_free else tiny_tolerance
            result.rows.extend(reference_rows(rec, ref, tolerance, None if training_free else cross_machine))
            result.rows.extend(loss_rows(rec, ref))
        except Exception as exc:  # noqa: BLE001 - any failure to start Java means: skip
            _unusable(result, rec, f"could not be compared with {ref.run_id}: {type(exc).__name__}: {exc}")


def _standing(rec: RunRecord, ref: RunRecord | None) -> str:
    """A record against its reference, the one ordering of the two: NO-REFERENCE, REFERENCE (it is the
    reference), SUPERSEDED (older: by creation time, then run id) or "" (newer: gated against it)."""
    if ref is None:
        return NO_REFERENCE
    if rec.run_id == ref.run_id:
        return REFERENCE
    return SUPERSEDED if (rec.created, rec.run_id) < (ref.created, ref.run_id) else ""


YOUR_RUNS = "your runs"  # what check, the report and the leaderboard call the records in runs/local/


def your_runs(
    references_from: str | Path | None = None,
    *,
    strict: bool = False,
    cells: Sequence[Mapping[str, Any]] | None = None,
    reported: str | Path | None = None,
    tiny_tolerance: float = TINY_TOLERANCE,
    cross_machine: float | None = CROSS_MACHINE_TOLERANCE,
) -> GateResult | None:
    """The user's own records (runs/local/, git-ignored) graded as the gate would grade them,
    against the references of ``references_from`` (default runs/records); None when there are none.

    `check`, the report and the leaderboard show the result as "your runs", apart: a run made on a
    fresh clone never changes the gate's verdict (``check --add`` / ``--accept`` moves one in)."""
    local = local_runs_dir()
    if not local.is_dir() or not any(p.suffix == ".json" for p in local.iterdir()):
        return None
    ref_dir = Path(references_from) if references_from is not None else records_dir()
    return run_gate(
        local,
        strict=strict,
        cells=cells,
        reported=reported,
        tiny_tolerance=tiny_tolerance,
        references_from=ref_dir,
        cross_machine=cross_machine,
    )


def _unusable(result: GateResult, rec: RunRecord, reason: str) -> None:
    """A record that validated but cannot be compared is not gated: an ERROR row fails the gate
    (it may be a harness bug as much as an odd record; either way nothing vouched for it)."""
    result.skipped.append(Skipped(rec.path, reason))
    result.rows.append(GateRow(ERROR, rec.run_id, rec.method, rec.profile, note=f"{rec.path.name}: {reason}"))
    result.n_records -= 1


def row_numbers(r: GateRow) -> list[str]:
    """expected, reproduced, delta, tol, CI of a row as printed: points (the paper's cell at its printed
    precision, with the printed fraction beside it), a loss row's losses with delta and tol in %,
    no delta on a NOT-COMPARABLE row, "-" for what is missing."""
    graded = r.status != NOT_COMPARABLE
    ci = "-" if r.ci_low is None or r.ci_high is None or not graded else f"[{r.ci_low:+.2f}, {r.ci_high:+.2f}]"
    if r.unit == LOSS:

        def loss(v: float | None) -> str:
            return "-" if v is None else f"{v:.4g}"

        return [
            loss(r.expected),
            loss(r.reproduced),
            fmt(r.delta, 2, True) + "%" if r.delta is not None else "-",
            f"{r.tolerance:g}%" if r.tolerance is not None else "-",
            ci,
        ]
    digits = points_decimals(r.printed, r.expected) if r.printed else 2
    expected = reported_text(r.expected, r.printed) if r.printed else fmt(r.expected)
    return [expected, fmt(r.reproduced, digits), fmt(r.delta, digits, True) if graded else "-", fmt(r.tolerance), ci]


NOTE_WIDTH = 70  # a row's note wraps onto continuation lines past this width
HEADERS = ["status", "run", "benchmark", "stage", "measure", "against", "expected", "reproduced", "delta", "tol"]
HEADERS += ["CI(delta)", "note"]


def format_gate(result: GateResult, apart: bool = False) -> str:
    """One plain-text table of every gated number (and of every file not gated), then the verdict
    (``apart``: records outside the gate, a user's own runs: what the gate would say once added)."""
    lines = []
    if result.rows:
        lines.append(format_rows(result.rows))
    else:
        lines.append(f"no run records in {result.records_dir}")
    lines.append(count_line(result, apart))
    return "\n".join(lines)


def format_rows(rows: Sequence[GateRow]) -> str:
    """Gate rows as one plain-text table, long notes wrapped; wider than the output (``current_width``):
    by run. Under ``--wide``: the one table, a line per row."""
    table = [
        [r.status, r.run_id, r.benchmark, r.stage or "-", r.measure, r.against, *row_numbers(r), r.note] for r in rows
    ]
    limit = current_width()
    text = format_table(HEADERS, table, wrap={len(HEADERS) - 1: NOTE_WIDTH} if limit else None, width=None)
    return text if limit is None or max(map(len, text.splitlines())) <= limit else _rows_by_run(rows)


def _rows_by_run(rows: Sequence[GateRow]) -> str:
    """The rows without the run and note columns, which made them too wide: a line naming the run
    (and what its rows are checked against, when they share it) above its rows, each note (and an
    "against" the table has no room for) on the lines under its row."""
    headers = [h for h in HEADERS if h not in ("run", "note")]
    groups = [list(g) for _, g in groupby(rows, key=lambda r: r.run_id)]
    shared = [len({r.against for r in g}) == 1 for g in groups]  # a run's rows against one thing: said once
    table = [
        [r.status, r.benchmark, r.stage or "-", r.measure, "" if one else r.against, *row_numbers(r)]
        for g, one in zip(groups, shared)
        for r in g
    ]
    head, blocks = table_blocks(headers, table, below=[headers.index("against")])
    out, rest = head, iter(blocks)
    for g, one in zip(groups, shared):
        against = g[0].against if one else ""
        against = f" {against}" if against.startswith("(") else f" (against {against})" if against else ""
        out.append(wrap_text(f"run {g[0].run_id}{against}:", indent="    "))
        for r in g:
            out += next(rest)
            if r.note:
                out.append(wrap_text(f"    note: {r.note}", indent=" " * 10))
    return "\n".join(out)


def verdict_text(result: GateResult, apart: bool = False) -> str:
    """ "gate PASSED", "gate FAILED (3 failing row(s))", or for records outside the gate what it would say."""
    why = f" ({len(result.failures())} failing row(s))" if not result.passed else ""
    mode = " [strict: NEAR, ungated records and unfinished writes fail]" if result.strict else ""
    verdict = (
        f"would {'pass' if result.passed else 'fail'} the gate once added (not gated now)"
        if apart
        else f"gate {result.verdict}"
    )
    return f"{verdict}{why}{mode}"


def count_line(result: GateResult, apart: bool = False) -> str:
    """The records, the rows per status and the verdict, in one line."""
    counts = ", ".join(f"{k} {v}" for k, v in result.counts().items()) or "nothing gated"
    return f"{result.n_records} record(s), {len(result.skipped)} skipped; {counts} -> {verdict_text(result, apart)}"
