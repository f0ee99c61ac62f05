"""Which record is a (method, profile)'s reference: ``references.json`` in the records folder, changed
only by ``check --accept RUN_ID`` (never because a record is the newest).

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
from harness.records.store import (
    REFERENCES_FILE,
    RunRecord,
    Skipped,
    load_record,
    load_records,
    read_references,
    records_dir,
)
from harness.records.writer import record_path


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
    """Make ``run_id`` the reference of its (method, profile): it must load and pass
    :func:`~harness.gate.admission.acceptance_problem` (integrity, seal included, and the catalog's
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
    refs[f"{rec.method}/{rec.profile}"] = entry
    data["about"] = (
        "The reference run of each (method, profile): `python -m harness check` gates other runs "
        "against it and fails when its record is missing. Changed only by `check --accept RUN_ID`."
    )
    data["references"] = dict(sorted(refs.items()))
    atomic_write_text(path, json.dumps(data, indent=1) + "\n")
    return path, entry


@dataclass
class References:
    """The manifest's entries and the reference records they name that can be gated against."""

    entries: dict[tuple[str, str], dict[str, Any]]
    records: dict[str, RunRecord]  # by run id; a record that differs from the accepted one is left out
    wrong: set[tuple[str, str]] = field(default_factory=set)  # keys naming a record of another method or profile
    rows: list[GateRow] = field(default_factory=list)  # MISSING, WRONG-REFERENCE and CORRUPT

    def of(self, method: str, profile: str) -> RunRecord | None:
        """The reference record of (method, profile), if it can be gated against."""
        entry = self.entries.get((method, profile))
        return self.records.get(entry["run_id"]) if entry and (method, profile) not in self.wrong else None


def resolve_references(
    entries: dict[tuple[str, str], dict[str, Any]], records: Iterable[RunRecord], present: set[str] | None = None
) -> References:
    """The manifest ``entries`` against the usable ``records`` of its folder. ``present`` (the names
    of every file there) is given when the folder is the one gated: then an entry whose record is
    not among ``records`` is MISSING (a scratch re-run's folder is not expected to hold them)."""
    refs = References(entries, {r.run_id: r for r in records})
    if present is not None:
        for (method, profile), entry in sorted(entries.items()):
            if entry["run_id"] not in refs.records:
                where = (
                    "is here but not usable (its row above says why)" if entry["run_id"] in present else "is not here"
                )
                refs.rows.append(
                    GateRow(
                        MISSING,
                        entry["run_id"],
                        method,
                        profile,
                        note=(
                            f"{REFERENCES_FILE} names {entry['run_id']} as the {method} [{profile}] reference, but its "
                            f"record {where} (restore it from git, or accept another run)"
                        ),
                    )
                )
    for (method, profile), entry in entries.items():
        ref = refs.records.get(entry["run_id"])
        if ref is not None and (ref.method, ref.profile) != (method, profile):
            # Gating cotmae runs against a cocondenser record would compare unlike with unlike.
            refs.rows.append(
                GateRow(
                    WRONG_REFERENCE,
                    ref.run_id,
                    method,
                    profile,
                    note=(
                        f"{REFERENCES_FILE}: '{method}/{profile}' names {ref.path.name}, a record of {ref.method} "
                        f"[{ref.profile}]: accept a {method} [{profile}] run with `python -m harness check --accept RUN_ID`"
                    ),
                )
            )
            refs.wrong.add((method, profile))
            continue
        sealed = (ref.integrity or {}).get("sha256") if ref else None
        if ref is not None and sealed != entry["sha256"]:
            refs.rows.append(
                GateRow(
                    CORRUPT,
                    ref.run_id,
                    method,
                    profile,
                    note=(
                        f"{ref.path.name}: differs from the record accepted as the reference (sha256 "
                        f"{str(sealed)[:12]}... vs accepted {entry['sha256'][:12]}...): re-sealed after an edit?"
                    ),
                )
            )
            refs.records.pop(entry["run_id"])
    return refs
