"""Which record is a (method, profile)'s reference: ``references.json`` in the records folder, changed
only by ``check --accept RUN_ID`` (never because a record is the newest). A (method, profile) may have
a second reference in another precision ("<method>/<profile>/bf16"): a run is gated against the
reference of its own precision where there is one (:meth:`References.for_record`).

A reference named there whose record is absent or unusable is MISSING; one whose record is of
another method or profile is WRONG-REFERENCE (nothing is gated against it); one whose record
differs from the accepted one (sha256) is CORRUPT.
"""

from __future__ import annotations

import datetime as _dt
import json
import shutil
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.core.errors import HarnessError, UnknownNameError
from harness.core.fsutil import NO_SUCH_FILE, atomic_write_text, file_problem
from harness.core.paths import local_runs_dir
from harness.core.statuses import CORRUPT, MISSING, WRONG_REFERENCE
from harness.gate.admission import acceptance_problem
from harness.gate.grading import GateRow
from harness.records.run_precision import precision_label
from harness.records.store import (
    REFERENCES_FILE,
    RunRecord,
    Skipped,
    load_precision_references,
    load_record,
    load_records,
    load_references,
    read_references,
    records_dir,
)
from harness.records.writer import record_path
from harness.training.precision import FLAG_CHOICES


def admit_local(run_id: str, directory: str | Path | None = None, local: str | Path | None = None) -> Path | None:
    """Move a user's own record ``run_id`` from ``local`` (default runs/local/) into the records
    folder ``directory`` (default runs/records/), where the gate checks it; None when ``local``
    holds no such record (it may be in ``directory`` already).

    Only a record that passes :func:`~harness.gate.admission.acceptance_problem` moves (sealed,
    untouched, the catalog's data): the gate fails on any other, so it stays where it was."""

    directory = Path(directory) if directory is not None else records_dir()
    local = Path(local) if local is not None else local_runs_dir()
    source = record_path(local, run_id)  # a run id with a folder part is refused: nothing outside local moves
    problem = file_problem(source)
    if problem == NO_SUCH_FILE:
        return None
    if problem:  # a folder or a pipe named like a record: reading a pipe would wait forever
        raise HarnessError(f"{source}: cannot be added: {problem}; move it away")
    rec = load_record(source)
    if isinstance(rec, Skipped):
        raise HarnessError(f"{source}: cannot be added: {rec.reason}")
    if rec.run_id != run_id:
        raise HarnessError(f"{source}: holds run {rec.run_id}, not {run_id}; add the file the run wrote")
    why = acceptance_problem(rec)
    if why:
        raise HarnessError(f"{source}: {why.replace('as a reference', 'into ' + str(directory))}")
    target = directory / source.name
    if target.exists():
        raise HarnessError(f"{target}: already exists; remove {source} instead of adding it twice")
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copy2(source, target)  # copy, then remove: runs/local may be on another file system
    source.unlink()
    return target


def accept_reference(run_id: str, directory: str | Path | None = None) -> tuple[Path, dict[str, Any]]:
    """Make ``run_id`` the reference of its (method, profile) in its precision (:func:`_accepted_key`): it
    must load and pass :func:`~harness.gate.admission.acceptance_problem` (integrity, seal included, and the catalog's
    data). Returns the manifest path and the new entry (commit both the record and the manifest).

    Raises HarnessError (one line naming the file) for an unreadable manifest or record, and for an
    unsealed one: a record without its seal cannot be told from an edited one whose seal was
    removed, and accepting it would make the doctored numbers the reference."""

    directory = Path(directory) if directory is not None else records_dir()
    data = read_references(directory)  # first: an unreadable manifest must not be overwritten
    admit_local(run_id, directory)  # a user's own run (runs/local/) joins the committed records first
    records, skipped = load_records(directory)
    rec = next((r for r in records if r.run_id == run_id), None)
    if rec is None:
        why = next((s.reason for s in skipped if s.path.stem == run_id), None)
        known = [r.run_id for r in records]
        if why:
            raise HarnessError(f"{record_path(directory, run_id)}: cannot be accepted: {why}")
        raise UnknownNameError("run record", run_id, known)
    why = acceptance_problem(rec)
    if why:
        raise HarnessError(f"{rec.path}: {why}")
    path = directory / REFERENCES_FILE
    refs = data["references"]
    entry = {
        "run_id": rec.run_id,
        "sha256": (rec.integrity or {}).get("sha256"),
        "accepted": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    refs[_accepted_key(refs, rec, records)] = entry
    data["about"] = (
        "The reference run of each (method, profile): `python -m harness check` gates other runs "
        "against it and fails when its record is missing. Changed only by `check --accept RUN_ID`."
    )
    data["references"] = dict(sorted(refs.items()))
    atomic_write_text(path, json.dumps(data, indent=1) + "\n")
    return path, entry


def _accepted_key(refs: dict[str, Any], rec: RunRecord, records: list[RunRecord]) -> str:
    """The manifest key ``rec`` is accepted under: its (method, profile)'s reference ("<method>/<profile>")
    unless that one is usable and trained in another precision; then the reference of its own precision
    ("<method>/<profile>/<precision>"), so a bf16 run and an fp32 run each keep one to be gated against."""
    key = f"{rec.method}/{rec.profile}"
    precision = precision_label(rec.stages)
    current = refs.get(key)
    ref = next((r for r in records if current and r.run_id == current["run_id"]), None)
    if ref is None or ref.run_id == rec.run_id or precision_label(ref.stages) == precision:
        return key
    return f"{key}/{precision}" if precision in FLAG_CHOICES else key


@dataclass
class References:
    """The manifest's entries and the reference records they name that can be gated against.

    ``entries``: each (method, profile)'s reference ("<method>/<profile>"); ``by_precision``: a second
    reference of a (method, profile) in another precision ("<method>/<profile>/<precision>")."""

    entries: dict[tuple[str, str], dict[str, Any]]
    records: dict[str, RunRecord]  # by run id; a record that differs from the accepted one is left out
    wrong: set[tuple[str, ...]] = field(default_factory=set)  # keys naming a record of another method/profile/precision
    rows: list[GateRow] = field(default_factory=list)  # MISSING, WRONG-REFERENCE and CORRUPT
    by_precision: dict[tuple[str, str, str], dict[str, Any]] = field(default_factory=dict)

    def of(self, method: str, profile: str) -> RunRecord | None:
        """The reference record of (method, profile), if it can be gated against."""
        entry = self.entries.get((method, profile))
        return self.records.get(entry["run_id"]) if entry and (method, profile) not in self.wrong else None

    def in_precision(self, method: str, profile: str, precision: str) -> RunRecord | None:
        """The reference of (method, profile) trained in ``precision`` (its reference, or the second one of
        that precision), if one can be gated against."""
        key = (method, profile, precision)
        entry = self.by_precision.get(key)
        second = self.records.get(entry["run_id"]) if entry and key not in self.wrong else None
        if second is not None:
            return second
        ref = self.of(method, profile)
        return ref if ref is not None and precision_label(ref.stages) == precision else None

    def for_record(self, rec: RunRecord) -> RunRecord | None:
        """What ``rec`` is gated against: the reference of its (method, profile) in its own precision where
        one exists, else its (method, profile)'s reference (compared only where precisions agree)."""
        return self.in_precision(rec.method, rec.profile, precision_label(rec.stages)) or self.of(
            rec.method, rec.profile
        )

    def accepted(self, ref: RunRecord) -> str:
        """When ``ref`` (a reference record) was accepted, from its manifest entry."""
        for entry in (*self.entries.values(), *self.by_precision.values()):
            if entry["run_id"] == ref.run_id:
                return str(entry.get("accepted", ""))
        return ""


def resolve_references(
    entries: dict[tuple[str, str], dict[str, Any]],
    records: Iterable[RunRecord],
    present: set[str] | None = None,
    by_precision: dict[tuple[str, str, str], dict[str, Any]] | None = None,
) -> References:
    """The manifest ``entries`` (and ``by_precision``) against the usable ``records`` of its folder.
    ``present`` (the names of every file there) is given when the folder is the one gated: then an entry
    whose record is not among ``records`` is MISSING (a scratch re-run's folder is not expected to hold
    them)."""
    refs = References(entries, {r.run_id: r for r in records}, by_precision=dict(by_precision or {}))
    keyed: list[tuple[tuple[str, ...], dict[str, Any]]] = [*entries.items(), *refs.by_precision.items()]
    if present is not None:
        for key, entry in sorted(keyed):
            if entry["run_id"] not in refs.records:
                refs.rows.append(_missing(key, entry, present))
    for key, entry in keyed:
        ref = refs.records.get(entry["run_id"])
        if ref is None:
            continue
        wrong = _wrong_reference(key, ref)
        if wrong is not None:  # gating cotmae runs against a cocondenser record would compare unlike with unlike
            refs.rows.append(wrong)
            refs.wrong.add(key)
            continue
        sealed = (ref.integrity or {}).get("sha256")
        if sealed != entry["sha256"]:
            refs.rows.append(
                GateRow(
                    CORRUPT,
                    ref.run_id,
                    key[0],
                    key[1],
                    note=(
                        f"{ref.path.name}: differs from the record accepted as the reference (sha256 "
                        f"{str(sealed)[:12]}... vs accepted {entry['sha256'][:12]}...): re-sealed after an edit?"
                    ),
                )
            )
            refs.records.pop(entry["run_id"])
    return refs


def folder_references(directory: Path, records: Iterable[RunRecord]) -> References:
    """The manifest of ``directory`` resolved against ``records`` (its loaded records), both precisions'
    keys: what the glance and the leaderboard set a record apart by (``References.for_record``), as the
    gate grades it. Raises HarnessError for an unreadable manifest."""
    return resolve_references(load_references(directory), records, None, load_precision_references(directory))


def committed_references(method: str, profile: str, directory: Path) -> References:
    """The usable references of (method, profile) named by ``directory``'s manifest, its reference and any
    of another precision (loaded one by one: the closing check and a re-run read no other record)."""
    entries = {k: e for k, e in load_references(directory).items() if k == (method, profile)}
    second = {k: e for k, e in load_precision_references(directory).items() if k[:2] == (method, profile)}
    loaded = [load_record(record_path(directory, e["run_id"])) for e in (*entries.values(), *second.values())]
    return resolve_references(entries, [r for r in loaded if isinstance(r, RunRecord)], None, second)


def _label(key: tuple[str, ...]) -> str:
    """'cotmae [mini]', or 'cotmae [mini] bf16' for a reference of one precision."""
    return f"{key[0]} [{key[1]}]" + (f" {key[2]}" if len(key) > 2 else "")


def _missing(key: tuple[str, ...], entry: dict[str, Any], present: set[str]) -> GateRow:
    where = "is here but not usable (its row above says why)" if entry["run_id"] in present else "is not here"
    return GateRow(
        MISSING,
        entry["run_id"],
        key[0],
        key[1],
        note=(
            f"{REFERENCES_FILE} names {entry['run_id']} as the {_label(key)} reference, but its "
            f"record {where} (restore it from git, or accept another run)"
        ),
    )


def _wrong_reference(key: tuple[str, ...], ref: RunRecord) -> GateRow | None:
    """WRONG-REFERENCE where the record named under ``key`` is of another method or profile, or (a key
    naming a precision) trained in another precision; else None."""
    precision = precision_label(ref.stages)
    if (ref.method, ref.profile) == key[:2] and (len(key) < 3 or precision == key[2]):
        return None
    found = f"{ref.method} [{ref.profile}]" + (f" {precision}" if len(key) > 2 else "")
    return GateRow(
        WRONG_REFERENCE,
        ref.run_id,
        key[0],
        key[1],
        note=(
            f"{REFERENCES_FILE}: '{'/'.join(key)}' names {ref.path.name}, a record of {found}: accept a "
            f"{_label(key)} run with `python -m harness check --accept RUN_ID`"
        ),
    )
