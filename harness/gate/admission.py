"""What a record must satisfy before the gate grades it, the leaderboard shows it beside the papers,
or ``check --accept`` makes it a reference.

* Its seal and per-query aggregates hold (``RunRecord.integrity_problems``, ``harness.records.integrity``).
* Its ``datasets`` checksums are the catalog's (``harness.data.checksums``): else DATA-MISMATCH.
* Each run file it names that is on this machine still matches the digest its stage took when it
  wrote it (``harness.stages.artifacts.changed_file``): else CORRUPT, since a cut or overwritten run
  file no longer gives the record's numbers (records from elsewhere name paths not here: unchecked).
* Its method has a spec here (else UNKNOWN-METHOD), or its checkpoint is in the checkpoint registry.
* Its spec settings are the method's current ones or its reference's (else SPEC-CHANGED).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from harness.core.errors import HarnessError
from harness.core.statuses import SPEC_CHANGED, SUPERSEDED, UNKNOWN_METHOD
from harness.data.checksums import mismatches
from harness.papers.released import CHECKPOINT_PROFILE, load_checkpoints
from harness.records.store import RunRecord
from harness.spec.files import list_methods
from harness.spec.hashing import settings_hash
from harness.spec.method import load_method
from harness.stages.artifacts import changed_file


def data_mismatches(rec: RunRecord) -> list[Any]:
    """The files of the record's ``datasets`` whose checksums are not the catalog's
    (``harness.data.checksums.Mismatch``; empty when every file the catalog pins matches)."""

    return mismatches(rec.datasets)


def changed_run_files(rec: RunRecord) -> list[str]:
    """One line per run file of the record (``run_files``: dataset -> path, or variant -> dataset ->
    path) that is on this machine and differs from the digest its stage took when it wrote it."""

    def paths(value: Any) -> list[str]:
        if isinstance(value, str):
            return [value]
        return [p for v in value.values() for p in paths(v)] if isinstance(value, dict) else []

    problems = []
    for path in sorted(set(paths(rec.run_files or {}))):
        if (changed := changed_file(path)) is not None:
            problems.append(f"run file {path} changed since its stage wrote it ({changed})")
    return problems


def spec_change(rec: RunRecord, ref: RunRecord | None = None) -> str:
    """Why the record's spec settings are neither those of its method's current spec (for its profile)
    nor those of ``ref`` (its reference); "" when one of them matches. Settings as STALE-REFERENCE
    compares them (``harness.spec.hashing.settings_hash``: documentation keys left out)."""

    if not rec.spec:
        return "the record holds no spec, so the settings it ran cannot be known"
    mine = settings_hash(rec.spec)
    if ref is not None and ref.spec and settings_hash(ref.spec) == mine:
        return ""
    try:
        current = settings_hash(load_method(rec.method, rec.profile).config)
    except HarnessError as exc:
        return f"the {rec.method} spec cannot be resolved for profile '{rec.profile}' ({exc})"
    if current == mine:
        return ""
    theirs = f" nor the reference {ref.run_id}'s ({settings_hash(ref.spec)})" if ref is not None and ref.spec else ""
    return f"spec settings {mine} are not the current {rec.method} [{rec.profile}] spec's ({current}){theirs}"


def set_apart(rec: RunRecord, reference_of: Callable[[RunRecord], RunRecord | None] | None) -> tuple[str, str] | None:
    """(status, why) when ``rec`` must be shown apart: a method without a spec here, or spec settings
    that are neither the method's current ones nor its reference's (:func:`spec_change`, the
    gate's rule). Unlike the gate, which grades only the newest runs, every record is held to it: a run
    of an older spec is never a row beside the papers'. One older than its reference is SUPERSEDED
    whatever its spec, the word `check` gives it (its why says the spec changed too), so the
    leaderboard, the report and `check` name each record alike. ``reference_of``: what the gate grades a
    record against (``References.for_record``: the reference of its own precision where there is one);
    None without a readable manifest: then only the method is checked (the reference's spec cannot be
    known)."""

    if rec.profile == CHECKPOINT_PROFILE:  # a released checkpoint has no spec; its registry names it
        return None
    if rec.method not in list_methods():
        return UNKNOWN_METHOD, f"no method spec named '{rec.method}' in this harness"
    if reference_of is None:
        return None
    ref = reference_of(rec)
    why = spec_change(rec, ref)
    if why and ref is not None and (rec.created, rec.run_id) < (ref.created, ref.run_id):
        return SUPERSEDED, f"older than the reference {ref.run_id}, and {why}"
    return (SPEC_CHANGED, why) if why else None


def unknown_checkpoint(rec: RunRecord) -> str:
    """Why a checkpoint record cannot be graded ("" when its checkpoint is in the registry)."""

    name = (rec.checkpoint or {}).get("name")
    try:
        registry = load_checkpoints()
    except HarnessError as exc:
        return f"checkpoint registry not loadable ({exc})"
    if name not in registry.checkpoints:
        return f"no checkpoint named '{name}' in {registry.path}"
    return ""


def acceptance_problem(rec: RunRecord) -> str:
    """Why ``rec`` cannot be accepted as a reference ("" when it can): it must pass integrity, seal
    included (a record without its seal cannot be told from an edited one whose seal was removed),
    and have run on the catalog's data (else every later run on the catalog's data would fail)."""
    problems = rec.integrity_problems
    if problems and problems[0].startswith("unsealed"):
        return (
            "not sealed (no integrity block), so it cannot be accepted as a reference: "
            "a record without its seal cannot be told from an edited one; re-run the method"
        )
    if problems:
        more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
        return f"fails its seal or integrity check, so it cannot be accepted as a reference: {problems[0]}{more}"
    mismatched = data_mismatches(rec)
    if mismatched:
        return (
            f"its data checksums are not the catalog's ({mismatched[0].describe()}), "
            "so it cannot be accepted as a reference: re-run on the catalog's data"
        )
    return ""
