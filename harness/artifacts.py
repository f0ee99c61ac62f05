"""The artifact layer: every cached thing of the harness, keyed by content, finished atomically.

Three kinds of artifact, one rule: the output is written first and a marker last, atomically
(:mod:`harness.fsutil`), so a killed writer never leaves something that looks finished.

Stage folders (:class:`StageCache`)
    A pipeline stage's output lives in ``cache/<stage>/<key>/``; ``key`` (16 hex digits of
    :func:`config_hash`) covers the stage config, the keys of its inputs and the stage's code
    version, so a changed hyper-parameter re-runs only what depends on it. A stage writes into
    ``<key>.partial/`` and is renamed into place with its ``done.json`` when it finishes.
Builder markers (:func:`mark_done` / :func:`is_done`)
    A builder that writes into a folder it is given (the corpus builders, the tiny T5, query
    generation) ends with a ``done.json`` whose ``key`` is :func:`builder_key` (the sha256 of its
    JSON config and the hashes of what it read); the same key loads instead of rebuilding.
Trained models and embeddings
    A training folder is finished when its ``train_stats.json`` is there
    (:mod:`harness.training.finished`); chunked embedding caches verify each chunk's sha256
    (:mod:`harness.retrieval.sharded`). Both hash their inputs with the helpers below.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

from harness import DEFAULT_SEED, SEED
from harness.fsutil import atomic_write_json, atomic_write_text
from harness.paths import cache_dir

# Bump when the on-disk layout of any builder changes: old caches then rebuild.
CACHE_FORMAT = 1
DONE_NAME = "done.json"
BUILD_SECONDS = "build_seconds"  # kept in a stage's done.json: what a cached stage once cost
# What StageCache.finish writes into a stage's done.json besides the build's own outputs.
STAGE_BOOKKEEPING = frozenset({"stage", "key", "config", "inputs", "finished", BUILD_SECONDS})


# --- hashing ----------------------------------------------------------------------------------


def config_hash(config: Any) -> str:
    """16 hex digits of a JSON value (stage keys, spec hashes)."""
    blob = json.dumps(config, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


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


def builder_key(config: Mapping[str, Any], inputs: Mapping[str, str] | None = None) -> str:
    """Key of one build: its config and the hashes of what it read."""
    return hash_json({"format": CACHE_FORMAT, "config": dict(config), "inputs": dict(inputs or {})})


# --- builder markers ------------------------------------------------------------------------


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


# --- stage folders ----------------------------------------------------------------------------


@dataclass
class StageCache:
    stage: str
    config: dict[str, Any]
    inputs: dict[str, str]
    code_version: str = "1"

    @property
    def key(self) -> str:
        payload = {"stage": self.stage, "config": self.config, "inputs": self.inputs, "code": self.code_version}
        if SEED != DEFAULT_SEED:  # another seed is another artifact; seed 42's keys stay as they were
            payload["seed"] = SEED
        return config_hash(payload)

    @property
    def dir(self) -> Path:
        return cache_dir() / self.stage / self.key

    @property
    def partial(self) -> Path:
        return self.dir.with_name(self.dir.name + ".partial")

    @property
    def lock_path(self) -> Path:
        return self.dir.with_name(self.dir.name + ".lock")

    def is_done(self) -> bool:
        return (self.dir / DONE_NAME).exists()

    def meta(self) -> dict[str, Any]:
        return json.loads((self.dir / DONE_NAME).read_text())

    def begin(self, keep_partial: bool = False) -> Path:
        """Fresh work folder (kept when the stage can resume from its own checkpoints)."""
        if self.partial.exists() and not keep_partial:
            shutil.rmtree(self.partial)
        self.partial.mkdir(parents=True, exist_ok=True)
        return self.partial

    def finish(self, meta: dict[str, Any] | None = None) -> Path:
        payload = {"stage": self.stage, "key": self.key, "config": self.config, "inputs": self.inputs,
                   "finished": time.time(), **(meta or {})}
        atomic_write_text(self.partial / DONE_NAME, json.dumps(payload, indent=1, default=str))
        # Swap in two renames so a reader of the old output never finds the folder missing
        # for longer than a rename; the old one is deleted after.
        old = None
        if self.dir.exists():
            old = self.dir.with_name(f"{self.dir.name}.old-{os.getpid()}")
            self.dir.rename(old)
        self.partial.rename(self.dir)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
        return self.dir

    def clear(self) -> None:
        for path in (self.dir, self.partial):
            if path.exists():
                shutil.rmtree(path)
