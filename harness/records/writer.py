"""Writing a run record: its run id, its file's path (a run id is a file name, never a path) and the
sealed, atomic write that never overwrites another run's record. Reading is :mod:`harness.records.store`'s."""

from __future__ import annotations

import datetime as _dt
import json
import secrets
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.core.errors import HarnessError
from harness.core.fsutil import atomic_write_text, is_plain_name
from harness.core.paths import local_runs_dir, runs_dir
from harness.core.seeds import DEFAULT_SEED
from harness.records.integrity import seal

if TYPE_CHECKING:
    from harness.records.run_record import RunRecord

RECORD_SCHEMA_VERSION = 1


def new_run_id(method: str, profile: str, seed: int = DEFAULT_SEED, pretrain_seed: int | None = None) -> str:
    """``<method>__<profile>__<UTC second>-<6 hex>`` (``seed<N>__`` before the time under another seed,
    ``pt<P>__`` before that under a study's pre-training seed ``pretrain_seed``): sorts by time, and two
    runs started in the same second (two terminals, a CI matrix) still get different ids and records."""
    stamp = _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%S")

    pretraining = "" if pretrain_seed is None else f"pt{pretrain_seed}__"
    other = "" if seed == DEFAULT_SEED else f"seed{seed}__"
    return f"{method}__{profile}__{pretraining}{other}{stamp}-{secrets.token_hex(3)}"


def record_path(directory: str | Path, run_id: Any) -> Path:
    """``<directory>/<run_id>.json``: a run id is its record's file name, never a path, so no run id
    reads, moves or writes a file outside ``directory`` (``check --add ../x`` once moved a file from
    outside runs/local/ into runs/records/, and ``foo/bar`` became runs/records/bar.json)."""
    if not is_plain_name(run_id) or run_id.endswith(".json"):  # "x.json" would look for x.json.json
        stem = Path(str(run_id)).name.removesuffix(".json")
        example = f", e.g. '{stem}'" if is_plain_name(stem) and stem != run_id else ""
        raise HarnessError(
            f"run id {run_id!r} is not a run id: a run id is a record's file name without "
            f"folder or .json (fix: give the run id alone{example}, as `python -m harness check` "
            "lists it)"
        )
    return Path(directory) / f"{run_id}.json"


def write_run_record(record: RunRecord, directory: Path | None = None, seed_study: bool = False) -> Path:
    """Atomically write a run record; returns its path (runs/local/<run_id>.json by default).

    A run's own record goes to the git-ignored runs/local/, never straight into the committed, gated
    runs/records/ (`check --accept` / `check --add` move it there); one under another seed (its
    ``seed``), or any seed of a seed study (``seed_study``: `run --seeds`), measures spread and goes to
    runs/seeds/."""

    # a seed study's seed 42 is one of its seeds
    seeds = (record.seed if record.seed is not None else DEFAULT_SEED) != DEFAULT_SEED or seed_study
    directory = directory or (runs_dir() / "seeds" if seeds else local_runs_dir())
    directory.mkdir(parents=True, exist_ok=True)
    # Sealed as it will read back (JSON turns tuples into lists, Paths into strings).
    body = {"schema_version": RECORD_SCHEMA_VERSION, **record.to_json()}
    sealed = seal(json.loads(json.dumps(body, default=str)))
    path = record_path(directory, sealed["run_id"])
    if path.exists():  # never overwrite another run's record
        raise HarnessError(f"{path}: a run record with this run_id already exists; refusing to overwrite it")
    atomic_write_text(path, record_text(sealed))
    return path


def record_text(data: dict[str, Any]) -> str:
    """A record's file content: what :func:`write_run_record` writes and every committed record is, byte for byte."""
    return json.dumps(data, indent=1, sort_keys=False) + "\n"
