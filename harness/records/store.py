"""Load and validate run records (runs/records/<run_id>.json) for the leaderboard and the gate.

A record that cannot be read never stops a reader: it is returned as ``Skipped(path, reason)``
so every reader can list it and carry on (the leaderboard shows it; ``check`` fails on it,
harness/gate/). A record is skipped when it is not valid JSON, is not an object, lacks a
required key or has one of the wrong type, comes from a newer schema (``schema_version`` > the
one this harness writes) or repeats a ``run_id`` already loaded. A file still being written (a
temp name, :func:`harness.core.fsutil.is_temp`: the ``.<name>.<random>.tmp.json`` of
``harness.core.fsutil.atomic_path``, or an older writer's ``*.tmp``) is skipped by its name, never
read: half a record must not be parsed, and a whole one about to be renamed must not shadow the
record it becomes.

A valid record is read as :class:`harness.records.run_record.RunRecord`, the class the writer writes:
unknown keys are kept untouched and written back in place, so a record re-serialises byte for byte.
"""

from __future__ import annotations

import errno
import json
import math
import os
import stat
from pathlib import Path
from typing import Any, NamedTuple

from harness.core import jsonsafe
from harness.core.errors import HarnessError
from harness.core.fsutil import file_problem, is_plain_name, is_temp
from harness.core.paths import runs_dir
from harness.records.run_record import RunRecord
from harness.records.writer import RECORD_SCHEMA_VERSION
from harness.training.precision import FLAG_CHOICES

# key -> (type, what it means); a record missing one of these cannot be shown or gated.
REQUIRED_KEYS: dict[str, tuple[type, str]] = {
    "schema_version": (int, "record format version"),
    "run_id": (str, "<method>__<profile>__<UTC stamp>"),
    "method": (str, "method name"),
    "profile": (str, "paper | tiny"),
    "metrics": (dict, "{dataset: {measure: fraction}}"),
}
# Optional keys whose type readers rely on when present.
OPTIONAL_TYPES: dict[str, type | tuple[type, ...]] = {
    "created": str,
    "spec_hash": str,
    "spec": dict,
    "per_query": dict,
    "comparison": list,
    "stages": list,
    "hardware": dict,
    "efficiency": dict,
    "reference": bool,
    "run_files": dict,
    "mlflow": dict,
    "finetune_stage": str,
    "conditions": dict,
}

# Optional keys a reader iterates as they are (RunRecord's fields keep the JSON's values): absent is fine, null is not.
NEVER_NULL = ("created", "per_query", "comparison", "stages", "efficiency")


class Skipped(NamedTuple):
    """A record file that readers ignore, and why (unpacks as ``(path, reason)``)."""

    path: Path
    reason: str


def records_dir() -> Path:
    """Default folder of run records: <runs_dir>/records (HARNESS_RUNS_DIR overrides)."""
    return runs_dir() / "records"


def validate_record(data: Any) -> str | None:
    """The reason a parsed record cannot be used, or None when it is valid."""
    if not isinstance(data, dict):
        return f"not a JSON object (top level is {type(data).__name__})"
    version = data.get("schema_version")
    if "schema_version" not in data:
        return "missing required key 'schema_version'"
    if not isinstance(version, int) or isinstance(version, bool):
        return f"schema_version {version!r} is not an integer"
    if version > RECORD_SCHEMA_VERSION:
        return (
            f"schema_version {version} is newer than this harness reads ({RECORD_SCHEMA_VERSION}): "
            "written by a newer harness; upgrade to read it"
        )
    if version < 1:
        return f"schema_version {version} is not a known record format"
    for key, (typ, meaning) in REQUIRED_KEYS.items():
        if key not in data:
            return f"missing required key '{key}' ({meaning}): a partial record"
        if not isinstance(data[key], typ) or isinstance(data[key], bool):
            return f"'{key}' must be a {typ.__name__} ({meaning}), got {type(data[key]).__name__}"
    for key in ("run_id", "method", "profile"):
        if not data[key].strip():
            return f"'{key}' is empty"
    for key in NEVER_NULL:
        if key in data and data[key] is None:
            return (
                f"'{key}' is null (absent or an empty {OPTIONAL_TYPES[key].__name__}, never null, is what readers take)"
            )
    for key, typ in OPTIONAL_TYPES.items():
        if data.get(key) is not None and not isinstance(data[key], typ):
            want = typ.__name__ if isinstance(typ, type) else " or ".join(t.__name__ for t in typ)
            return f"'{key}' must be a {want}, got {type(data[key]).__name__}"
    for dataset, values in data["metrics"].items():
        if not isinstance(values, dict):
            return f"metrics.{dataset} must be an object {{measure: value}}"
        for measure, value in values.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                return f"metrics.{dataset}.{measure} is not a finite number ({value!r})"
    for dataset, by_measure in (data.get("per_query") or {}).items():
        if not isinstance(by_measure, dict) or not all(isinstance(v, dict) for v in by_measure.values()):
            return f"per_query.{dataset} must be an object {{measure: {{qid: value}}}}"
        for measure, scores in by_measure.items():
            bad = next(
                (
                    q
                    for q, v in scores.items()
                    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)
                ),
                None,
            )
            if bad is not None:
                return f"per_query.{dataset}.{measure}.{bad} is not a finite number ({scores[bad]!r})"
    bad_stage = next((i for i, x in enumerate(data.get("stages") or []) if not isinstance(x, dict)), None)
    if bad_stage is not None:  # readers take each entry as an object
        return f"stages[{bad_stage}] must be an object"
    for dataset, values in (data.get("efficiency") or {}).items():
        if not isinstance(values, dict):
            return f"efficiency.{dataset} must be an object"
    for i, comp in enumerate(data.get("comparison") or []):
        if not isinstance(comp, dict):
            return f"comparison[{i}] must be an object"
        for key in ("reproduced", "reported", "delta", "tolerance", "ci_low", "ci_high"):
            value = comp.get(key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
                return f"comparison[{i}].{key} must be a number or null, got {value!r}"
    return None


def load_record(path: str | Path) -> RunRecord | Skipped:
    """One record file, validated (never raises for a bad file: returns Skipped)."""
    path = Path(path)
    if is_temp(path):
        return Skipped(
            path,
            "unfinished write (a temp file not renamed into place yet): a run in progress, or one killed while writing",
        )
    problem = file_problem(path)
    if problem:  # a pipe named like a record would block the read forever
        return Skipped(path, f"cannot be read: {problem}")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return Skipped(path, f"cannot be read: {exc}")
    if not text.strip():
        return Skipped(path, "empty file (a write cut short?)")
    try:
        data = jsonsafe.loads(text)  # depth and size bounded
    except json.JSONDecodeError as exc:
        return Skipped(path, f"not valid JSON ({exc.msg}; line {exc.lineno}, column {exc.colno})")
    reason = validate_record(data)
    if reason:
        return Skipped(path, reason)
    return RunRecord.from_json(data, path)


def _unfollowable(path: Path) -> Skipped | None:
    """Why a ``*.json`` entry is no file to read (a symlink loop, a link to nothing, a folder), or None:
    ``is_file()`` answers False for each, which once skipped them without a word and let the gate pass."""
    try:
        target = path.stat()  # follows a link
    except OSError as exc:
        if path.is_symlink():
            kind = (
                "a symbolic link loop"
                if exc.errno == errno.ELOOP
                else f"a symbolic link to nothing ({os.readlink(path)}: {exc.strerror})"
            )
            return Skipped(path, f"cannot be read: {kind}; remove the link or point it at a record")
        return Skipped(path, f"cannot be read: {exc.strerror or exc}")
    if not stat.S_ISREG(target.st_mode):
        return Skipped(path, "cannot be read: not a file (a folder or a device named like a record); move it away")
    return None


def load_records(directory: str | Path | None = None) -> tuple[list[RunRecord], list[Skipped]]:
    """All records in ``directory`` (default runs/records), oldest first, and the skipped files.

    A missing folder is not an error: there are simply no records yet.
    """
    directory = Path(directory) if directory is not None else records_dir()
    if not directory.is_dir():
        return [], []
    records: list[RunRecord] = []
    skipped: list[Skipped] = []
    seen: dict[str, Path] = {}
    # Temp files of records are listed too (as skipped, never read): a run still writing one.
    files = sorted(
        p
        for p in directory.iterdir()
        if p.name != "references.json" and (p.suffix == ".json" or (is_temp(p) and ".json" in p.name))
    )
    for path in files:
        loaded = (None if is_temp(path) else _unfollowable(path)) or load_record(path)
        if isinstance(loaded, Skipped):
            skipped.append(loaded)
        elif loaded.run_id in seen:
            skipped.append(
                Skipped(path, f"duplicate run_id '{loaded.run_id}' (already loaded from {seen[loaded.run_id].name})")
            )
        else:
            seen[loaded.run_id] = path
            records.append(loaded)
    records.sort(key=lambda r: (r.created, r.run_id))
    return records, skipped


REFERENCES_FILE = "references.json"  # (method, profile) -> the accepted reference record
SHA256_HEX = frozenset("0123456789abcdef")


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """json.loads keeps the last of two equal keys without a word; in the manifest that would
    hide one of two references given for one (method, profile)."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"key '{key}' appears twice")
        out[key] = value
    return out


def read_references(directory: str | Path) -> dict[str, Any]:
    """The whole ``<records>/references.json`` manifest, validated (``{"references": {}}`` when absent).

    Raises HarnessError (one line naming the file) when it cannot be read or an entry is malformed:
    a manifest read wrongly would un-gate every run it names, so it is never guessed at."""
    path = Path(directory) / REFERENCES_FILE
    if not path.exists():
        return {"references": {}}
    fix = (
        "restore it from git (or delete it, then accept each reference again with "
        "`python -m harness check --accept RUN_ID`)"
    )
    problem = file_problem(path)
    if problem:  # a pipe would block the read forever
        raise HarnessError(f"{path}: cannot be read: {problem}; {fix}")
    try:
        data = jsonsafe.loads(path.read_text(encoding="utf-8"), object_pairs_hook=_no_duplicate_keys)
    except (OSError, UnicodeDecodeError, ValueError) as exc:  # JSONDecodeError is a ValueError
        raise HarnessError(f"{path}: cannot be read as JSON ({exc}); {fix}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("references"), dict):
        raise HarnessError(
            f'{path}: not a references manifest (want {{"references": {{"<method>/<profile>": '
            f'{{"run_id": ..., "sha256": ...}}}}}}); {fix}'
        )
    for key, entry in data["references"].items():
        parts = key.split("/")
        if not 2 <= len(parts) <= 3 or not all(parts) or (len(parts) == 3 and parts[2] not in FLAG_CHOICES):
            raise HarnessError(
                f"{path}: entry '{key}' must be keyed \"<method>/<profile>\" or "
                f'"<method>/<profile>/<{"|".join(FLAG_CHOICES)}>"; {fix}'
            )
        if not isinstance(entry, dict) or not isinstance(entry.get("run_id"), str) or not entry["run_id"].strip():
            raise HarnessError(f'{path}: entry \'{key}\' must be {{"run_id": "<run id>", "sha256": ...}}; {fix}')
        if not is_plain_name(entry["run_id"]):  # it names <records>/<run_id>.json: never a file outside
            raise HarnessError(
                f"{path}: entry '{key}' names run id {entry['run_id']!r}, which is not a "
                f"record's file name (no folder, no leading dot); {fix}"
            )
        sha = entry.get("sha256")
        # Without the accepted seal's hash a reference re-sealed after an edit would pass unseen.
        if not isinstance(sha, str) or len(sha) != 64 or not set(sha) <= SHA256_HEX:
            raise HarnessError(f"{path}: entry '{key}' has no sha256 of the accepted record (got {sha!r}); {fix}")
    return data


def load_references(directory: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """(method, profile) -> {"run_id", "sha256", "accepted"} from ``<records>/references.json``: each
    (method, profile)'s reference, whatever its precision (:func:`load_precision_references`: the others)."""
    refs = {}
    for key, entry in read_references(directory)["references"].items():
        method, _, profile = key.partition("/")
        if "/" not in profile:
            refs[(method, profile)] = entry
    return refs


def load_precision_references(directory: Path) -> dict[tuple[str, str, str], dict[str, Any]]:
    """(method, profile, precision) -> entry, from the manifest's "<method>/<profile>/<precision>" keys: a
    second reference of a (method, profile) in another precision than its reference's (``run
    --precision auto`` picks bf16 on one CPU and fp32 on another; each run is gated against its own)."""
    refs = {}
    for key, entry in read_references(directory)["references"].items():
        parts = key.split("/")
        if len(parts) == 3:
            refs[(parts[0], parts[1], parts[2])] = entry
    return refs
