"""The vendored data under ``harness/data/embedded``: lookup and integrity check.

``MANIFEST.json`` (written by ``python -m harness.data.vendor``) lists every stored file
with the sha256 of its stored (gzip) bytes. :func:`path` returns a file only after its
sha256 matched; the check runs once per file per process (and again if the file's size
or mtime change), so repeated loads stay cheap.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from harness.core.errors import HarnessError
from harness.core.paths import EMBEDDED_DATA_DIR

MANIFEST_NAME = "MANIFEST.json"

# (path, size, mtime_ns) of files whose sha256 matched in this process.
_verified: set[tuple[str, int, int]] = set()
_manifests: dict[str, dict[str, dict[str, Any]]] = {}


def _root(root: Path | None) -> Path:
    return Path(root) if root is not None else EMBEDDED_DATA_DIR


def manifest(root: Path | None = None) -> dict[str, dict[str, Any]]:
    """Manifest entries keyed by stored relative path (e.g. ``beir/scifact/corpus.jsonl.gz``)."""
    base = _root(root)
    key = str(base)  # not resolved: a plan reads the manifest hundreds of times, and resolving each is most of it
    if key not in _manifests:
        mpath = base / MANIFEST_NAME
        try:
            data = json.loads(mpath.read_text(encoding="utf-8"))
            _manifests[key] = {e["path"]: e for e in data["files"]}
        except FileNotFoundError:
            raise HarnessError(
                f"embedded data manifest {mpath} is missing; restore harness/data/embedded from the "
                "repository (git checkout -- harness/data/embedded) or reinstall the harness"
            ) from None
        except (ValueError, KeyError, TypeError) as exc:
            raise HarnessError(
                f"embedded data manifest {mpath} is unreadable ({exc}); restore it with "
                "git checkout -- harness/data/embedded/MANIFEST.json"
            ) from None
    return _manifests[key]


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    """Hex sha256 of a file, streamed."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(chunk), b""):
            h.update(block)
    return h.hexdigest()


def path(rel: str, root: Path | None = None) -> Path:
    """Absolute path of an embedded file, after checking its sha256 against the manifest.

    ``rel`` is the stored relative path; the ``.gz`` suffix may be left out.
    """
    base = _root(root)
    entries = manifest(root)
    rel = stored_name(rel, root)
    full = base / rel
    try:
        st = full.stat()
    except FileNotFoundError:
        raise HarnessError(
            f"embedded data file {full} is missing; restore it with "
            f"git checkout -- harness/data/embedded/{rel} (or reinstall the harness)"
        ) from None
    key = (str(full), st.st_size, st.st_mtime_ns)  # another spelling of the path is only checked once more
    if key not in _verified:
        expected = entries[rel]["sha256"]
        actual = sha256_file(full)
        if actual != expected:
            raise HarnessError(
                f"embedded data file {full} is corrupted or was modified: sha256 {actual} does not match "
                f"{expected} in {base / MANIFEST_NAME}; restore it with "
                f"git checkout -- harness/data/embedded/{rel} (or rebuild all with python -m harness.data.vendor)"
            )
        _verified.add(key)
    return full


def stored_name(rel: str, root: Path | None = None) -> str:
    """The stored relative path for ``rel`` (adds ``.gz`` where the manifest has it)."""
    entries = manifest(root)
    if rel in entries:
        return rel
    if rel + ".gz" in entries:
        return rel + ".gz"
    raise HarnessError(f"'{rel}' is not part of the embedded data (see {_root(root) / MANIFEST_NAME})")


def sha256(rel: str, root: Path | None = None) -> str:
    """Recorded sha256 of a stored file (for run records)."""
    return manifest(root)[stored_name(rel, root)]["sha256"]


def has(rel: str, root: Path | None = None) -> bool:
    """Whether ``rel`` (with or without ``.gz``) is an embedded file."""
    entries = manifest(root)
    return rel in entries or rel + ".gz" in entries


def verify_all(root: Path | None = None) -> list[str]:
    """Check every embedded file; returns the stored paths checked (raises on the first mismatch)."""
    checked = []
    for rel in sorted(manifest(root)):
        path(rel, root)
        checked.append(rel)
    return checked
