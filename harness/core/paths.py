"""Where things live. Everything is relative to the project root unless overridden."""

from __future__ import annotations

import os
from pathlib import Path

from harness.core.fsutil import writable_dir

PACKAGE_DIR = Path(__file__).resolve().parent.parent  # harness/ (this file is harness/core/paths.py)
PROJECT_ROOT = PACKAGE_DIR.parent
BASELINES_DIR = PROJECT_ROOT / "baselines"
REPORTED_DIR = BASELINES_DIR / "reported"
EMBEDDED_DATA_DIR = PACKAGE_DIR / "data" / "embedded"


def specs_dir() -> Path:
    """Method specs: baselines/ (HARNESS_SPECS_DIR points at a folder of your own specs instead)."""
    return Path(os.environ.get("HARNESS_SPECS_DIR", BASELINES_DIR))


def runs_dir() -> Path:
    """Run records and the local MLflow store (HARNESS_RUNS_DIR overrides, e.g. in tests)."""
    return Path(os.environ.get("HARNESS_RUNS_DIR", PROJECT_ROOT / "runs"))


def local_runs_dir() -> Path:
    """A user's own run records (<runs_dir>/local, git-ignored): `run` and `reproduce` write there, so
    a run on a fresh clone never changes what the gate checks; `check --accept` / `check --add` move
    one into runs/records/ (docs/contributing-runs.md)."""
    return runs_dir() / "local"


def cache_dir() -> Path:
    """Stage outputs, indexes and downloads (HARNESS_CACHE_DIR overrides)."""
    return Path(os.environ.get("HARNESS_CACHE_DIR", PROJECT_ROOT / "cache"))


def require_writable_homes() -> None:
    """The cache and runs folders exist (made here) and take files: checked before a run's first stage,
    so a file, a read-only or immutable folder or a full disk there is one line naming the folder and
    its variable instead of a traceback from whichever stage first writes."""
    for var, name, where in (
        ("HARNESS_CACHE_DIR", "the cache folder", cache_dir()),
        ("HARNESS_RUNS_DIR", "the runs folder", runs_dir()),
    ):
        writable_dir(where, name, f"point {var} at a folder you can write, on a disk with room")
