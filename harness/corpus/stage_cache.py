"""Content-addressed completion markers for corpus builders.

Every builder in ``harness.corpus`` writes its outputs into a folder and, as its very
last step, a ``done.json`` marker holding a key: the sha256 of its JSON config plus the
hashes of its inputs. A re-run with the same key loads the outputs instead of rebuilding;
a different key (changed input or hyper-parameter) rebuilds. Because the marker is
written last and atomically, a killed build never looks finished.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Iterable, Mapping

from harness.fsutil import atomic_write_bytes, atomic_write_json, atomic_write_text  # noqa: F401 (re-exported)

# Bump when the on-disk layout of any corpus builder changes: old caches then rebuild.
CACHE_FORMAT = 1
DONE_NAME = "done.json"


def canonical_json(obj: Any) -> str:
    """One spelling per value: sorted keys, no whitespace, non-ASCII kept."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def hash_json(obj: Any) -> str:
    return hashlib.sha256(canonical_json(obj).encode("utf-8")).hexdigest()


def hash_texts(texts: Iterable[str]) -> str:
    """Order-sensitive hash of a sequence of strings (length-prefixed, so no ambiguity)."""
    h = hashlib.sha256()
    for t in texts:
        b = t.encode("utf-8")
        h.update(len(b).to_bytes(8, "little"))
        h.update(b)
    return h.hexdigest()


def hash_file(path: str | Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def hash_dir(path: str | Path, exclude: Iterable[str] = (DONE_NAME,)) -> str:
    """Hash of every file's relative path and content under ``path`` (sorted, so stable)."""
    root = Path(path)
    skip = set(exclude)
    h = hashlib.sha256()
    for p in sorted(q for q in root.rglob("*") if q.is_file() and q.name not in skip):
        h.update(p.relative_to(root).as_posix().encode("utf-8") + b"\0")
        h.update(hash_file(p).encode("ascii"))
    return h.hexdigest()


def stage_key(config: Mapping[str, Any], inputs: Mapping[str, str] | None = None) -> str:
    """Key of one build: its config and the hashes of what it read."""
    return hash_json({"format": CACHE_FORMAT, "config": dict(config), "inputs": dict(inputs or {})})


def read_done(folder: str | Path, name: str = DONE_NAME) -> dict[str, Any] | None:
    """The marker's payload, or None when absent or unreadable (then: not done)."""
    p = Path(folder) / name
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def is_done(folder: str | Path, key: str, name: str = DONE_NAME) -> bool:
    done = read_done(folder, name)
    return bool(done) and done.get("key") == key


def clear_done(folder: str | Path, name: str = DONE_NAME) -> None:
    """Invalidate before rebuilding, so a half-rewritten folder never passes as finished."""
    (Path(folder) / name).unlink(missing_ok=True)


def mark_done(
    folder: str | Path,
    key: str,
    config: Mapping[str, Any] | None = None,
    inputs: Mapping[str, str] | None = None,
    name: str = DONE_NAME,
    **info: Any,
) -> None:
    payload = {"key": key, "format": CACHE_FORMAT, "config": dict(config or {}), "inputs": dict(inputs or {})}
    payload.update(info)
    atomic_write_json(Path(folder) / name, payload)
