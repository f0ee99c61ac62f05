"""The artifact layer: every cached thing of the harness, keyed by content, finished by one marker.

One rule: the output is written first and the finished marker last, atomically, so a killed writer
never leaves something that looks finished.

The finished marker (:func:`mark_finished`, :func:`is_finished`, :func:`finished_meta`)
    A folder is finished when it holds ``done.json``: a JSON object written last and atomically,
    whose ``key`` says what the folder was built from (the same key loads instead of rebuilding)
    and whatever else its builder keeps. Nothing else says "finished": no output file doubles as
    the marker, and a folder under a temp name (:func:`harness.core.fsutil.is_temp`) is never finished,
    whatever it holds.
Folders written whole (:func:`harness.core.fsutil.atomic_dir`)
    A folder built in one go is filled under a temp name (``.<name>.<token>.tmp``) and renamed into
    place with its marker inside, so it appears finished or not at all; a killed build leaves a temp
    name only, which every scan of records and caches skips.
Output digests (:func:`output_digests`, :func:`changed_output`)
    A stage folder's and a corpus embedding's marker also holds the size and sha256 of each file it
    holds (a sampled digest for a very large vector store); reusing it checks them, so damage done to
    a finished output after it was built rebuilds it instead of being used silently.

Who uses it:

- Stage folders (:class:`StageCache`): ``cache/<stage>/<key>/``, ``key`` = 16 hex digits of
  :func:`config_hash` over the stage config, the keys of its inputs and the stage's code version,
  so a changed hyper-parameter re-runs only what depends on it. Built in a temp folder (a resumable
  stage in ``.<key>.partial.tmp``, kept across a killed run) and renamed into place with its marker.
- Builders given a folder (the corpus builders, the tiny T5, query generation): the marker is
  cleared, the folder written in place, the marker (``key`` = :func:`builder_key`) written last.
  Query generation's per-rank files share one folder, so each has its own marker named after it,
  ``<file>.done.json``: the same scheme, one marker per artifact.
- Trained models (:mod:`harness.training.finished`): ``train_stats.json`` holds the stats callers
  read; the marker (``key`` = the run's fingerprint) says the folder is finished.
- Corpus embeddings (:mod:`harness.evaluation.zero_shot`): ``cache/embeddings/<key>/`` (vectors,
  doc ids, the marker), written whole; encoded first into its resumable ``.<key>.partial.tmp``.

Kept apart on purpose: a training checkpoint's ``trainer_state.json`` is a resume point, not a
finished artifact (:mod:`harness.training.checkpoint`; its step folders are renamed into place
whole); a sharded encoding folder (:mod:`harness.retrieval.shard_encoding`) is filled by several ranks
at once and resumes chunk by chunk, so each chunk's ``.json`` (after its ``.npy``) marks that chunk
and ``manifest.json`` fixes the settings first; a download's ``<name>.part`` is a transfer resumed
by byte offset (:mod:`harness.data.download`).

Keys: one scheme, the full sha256 of canonical JSON (:func:`hash_json`), of a stream of strings
(:func:`hash_texts`) or of contents (:func:`hash_file`, :func:`hash_dir`). One exception:
:func:`config_hash` (16 hex digits of ASCII JSON) names stage folders and spec hashes, and stays as
it is because the cache folders already built and the keys ``run --dry-run`` prints are named by it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import shutil
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.core.digests import sampled_digest
from harness.core.errors import HarnessError

# atomic_write_text is re-exported: the builders write through this module.
from harness.core.fsutil import (  # noqa: F401 - re-exported, as said above
    PARTIAL,
    atomic_dir,
    atomic_write_json,
    atomic_write_text,
    is_temp,
    remove_temps,
    temp_name,
)
from harness.core.paths import cache_dir
from harness.core.seeds import DEFAULT_SEED
from harness.stages.graph import PRETRAIN_SEEDED, seed_shared

# Bump when the on-disk layout of any builder changes: old caches then rebuild.
# 2: one finished marker (done.json) for trained models too, temp names for work folders.
CACHE_FORMAT = 2
DONE_NAME = "done.json"  # the finished marker of every folder (see the module docstring)
BUILD_SECONDS = "build_seconds"  # kept in a stage's done.json: what a cached stage once cost
# What StageCache.mark_finished writes into a stage's done.json besides the build's own outputs.
# The content digests of a finished folder's files, kept in its done.json (see "Output digests" below).
DIGESTS = "digests"
STAGE_BOOKKEEPING = frozenset({"stage", "key", "config", "inputs", "finished", BUILD_SECONDS, DIGESTS})
# A file at least this large that is a vector store (SAMPLED_SUFFIXES) gets the sampled digest, not a full sha256.
# sha256 runs at about 1 GB/s on one core here (measured: 1.08 GB/s in memory), so a run file, a
# Lucene index or a model (hundreds of MB at paper scale) is hashed whole in well under a few seconds per
# reuse; a corpus's vectors at paper scale (tens of GB) would cost tens of seconds and more disk reads.
SAMPLED_ABOVE = 1 << 30
SAMPLED_SUFFIXES = (".npy",)
SAMPLE_BLOCK = 1 << 20  # bytes hashed per sampled block
SAMPLE_BLOCKS = 64  # blocks at fixed offsets, besides the first and the last


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


class TextHasher:
    """:func:`hash_texts` fed one string at a time, so a stream (a corpus of millions of ids) is hashed
    without being held: ``TextHasher().update(t)`` for each ``t``, then ``hexdigest()``."""

    def __init__(self) -> None:
        self._h = hashlib.sha256()

    def update(self, text: str) -> None:
        b = text.encode("utf-8")
        self._h.update(len(b).to_bytes(8, "little"))
        self._h.update(b)

    def hexdigest(self) -> str:
        return self._h.hexdigest()


def hash_file(path: str | Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def hash_dir(path: str | Path, exclude: Iterable[str] = (DONE_NAME,)) -> str:
    """Hash of every file's relative path and content under ``path`` (sorted, so stable); what is
    still being written (a temp name, :func:`harness.core.fsutil.is_temp`) is no part of it."""
    root = Path(path)
    skip = set(exclude)
    h = hashlib.sha256()
    files = (
        q
        for q in root.rglob("*")
        if q.is_file() and q.name not in skip and not any(is_temp(part) for part in q.relative_to(root).parts)
    )
    for p in sorted(files):
        h.update(p.relative_to(root).as_posix().encode("utf-8") + b"\0")
        h.update(hash_file(p).encode("ascii"))
    return h.hexdigest()


# --- output digests ---------------------------------------------------------------------------
#
# A finished folder records what it holds when it is marked finished (``done.json``'s ``digests``:
# each file's relative path -> size and sha256), and whoever reuses it checks the files still match,
# so a cut run file or overwritten model bytes (a full disk, a bad copy, a stray edit) is rebuilt instead
# of being scored silently. Every file is hashed whole, except a vector store (a ``.npy`` of at least
# SAMPLED_ABOVE bytes): its ``sampled`` digest hashes its size, its first and last block and
# SAMPLE_BLOCKS blocks at fixed offsets spread over the file, which catches a truncation (the size), a
# rewritten header or tail, and any overwritten run of bytes longer than the gap between two samples
# (1/65 of the file), at 66 MiB read per check whatever the file's size.


def _sampled_digest(path: Path, size: int) -> str:
    return sampled_digest(path, size, SAMPLE_BLOCK, SAMPLE_BLOCKS)


def _file_digest(path: Path) -> dict[str, Any]:
    size = path.stat().st_size
    if size >= SAMPLED_ABOVE and path.suffix in SAMPLED_SUFFIXES:
        return {"size": size, "sampled": _sampled_digest(path, size)}
    return {"size": size, "sha256": hash_file(path)}


def _content_files(root: Path) -> dict[str, Path]:
    """Every file under ``root`` but its finished markers and what is still being written (temp names)."""
    return {
        q.relative_to(root).as_posix(): q
        for q in sorted(root.rglob("*"))
        if q.is_file()
        and q.name != DONE_NAME
        and not q.name.endswith(f".{DONE_NAME}")
        and not any(is_temp(part) for part in q.relative_to(root).parts)
    }


def output_digests(folder: str | Path) -> dict[str, dict[str, Any]]:
    """Relative path -> ``{"size", "sha256"}`` (or ``"sampled"``, see above) of each file in ``folder``;
    taken once its files are written, just before its marker."""
    return {name: _file_digest(path) for name, path in _content_files(Path(folder)).items()}


def changed_output(folder: str | Path, digests: Mapping[str, Any]) -> str | None:
    """The first file of ``folder`` that differs from ``digests`` (changed, missing, or not there when
    they were taken), as ``<path> (<what>)``; None when all match. The sizes are compared first, so a
    truncated or extended file costs no hashing."""
    root = Path(folder)
    files = _content_files(root)
    for name in sorted(set(digests) - set(files)):
        return f"{name} (missing)"
    for name in sorted(set(files) - set(digests)):
        return f"{name} (not there when it was built)"
    for name, want in sorted(digests.items()):
        if (problem := _size_differs(files[name], want)) is not None:
            return f"{name} ({problem})"
    for name, want in sorted(digests.items()):
        if _file_digest(files[name]) != dict(want):
            return f"{name} (content differs)"
    return None


def _size_differs(path: Path, want: Any) -> str | None:
    size = path.stat().st_size
    built = want.get("size") if isinstance(want, Mapping) else None
    return None if built == size else f"size {size} bytes, built {built}"


def changed_file(path: str | Path) -> str | None:
    """How the file ``path`` differs from the digest its finished folder (the nearest of its three parent
    folders whose marker holds digests) took when it was built; None when it matches, or when it is not
    there or no folder above it holds a digest of it (nothing to check it against)."""
    path = Path(path)
    if not path.is_file():
        return None
    for folder in list(path.parents)[:3]:
        digests = (finished_meta(folder) or {}).get(DIGESTS)
        if isinstance(digests, dict):
            want = digests.get(path.relative_to(folder).as_posix())
            if want is None:
                return None
            problem = _size_differs(path, want)
            return problem if problem is not None or _file_digest(path) == dict(want) else "content differs"
    return None


def builder_key(config: Mapping[str, Any], inputs: Mapping[str, str] | None = None) -> str:
    """Key of one build: its config and the hashes of what it read."""
    return hash_json({"format": CACHE_FORMAT, "config": dict(config), "inputs": dict(inputs or {})})


# --- the finished marker ------------------------------------------------------------------------


def _read_marker(folder: Path, name: str) -> dict[str, Any] | None:
    try:
        meta = json.loads((folder / name).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return meta if isinstance(meta, dict) else None


def finished_meta(folder: str | Path, *, name: str = DONE_NAME) -> dict[str, Any] | None:
    """The marker of a finished ``folder``; None when it is unfinished (no marker, an unreadable
    one, or a folder under a temp name: a build that has not been renamed into place)."""
    folder = Path(folder)
    return None if is_temp(folder) else _read_marker(folder, name)


def is_finished(folder: str | Path, key: str | None = None, *, name: str = DONE_NAME) -> bool:
    """Whether ``folder`` is finished (and, given ``key``, was built from it)."""
    meta = finished_meta(folder, name=name)
    return meta is not None and (key is None or meta.get("key") == key)


def mark_finished(folder: str | Path, meta: Mapping[str, Any], *, name: str = DONE_NAME) -> None:
    """Say ``folder`` is finished, once everything else in it is written: ``meta`` (with the
    ``key`` it was built from) goes to the marker atomically. ``name`` only for several artifacts
    sharing one folder (query generation's per-rank files: ``<file>.done.json``)."""
    atomic_write_json(Path(folder) / name, dict(meta))


def clear_finished(folder: str | Path, *, name: str = DONE_NAME) -> None:
    """Invalidate before rebuilding in place, so a half-rewritten folder never passes as finished."""
    (Path(folder) / name).unlink(missing_ok=True)


# --- stage folders ----------------------------------------------------------------------------


@dataclass
class StageCache:
    stage: str
    config: dict[str, Any]
    inputs: dict[str, str]
    code_version: str = "1"
    seed: int = DEFAULT_SEED  # the run's seed
    seed_study: bool = False  # the run is one seed of a `run --seeds` study
    pretrain_seed: int = DEFAULT_SEED  # a study's pre-training seed (`--pretrain-seeds`; 42 without)

    @property
    def key(self) -> str:
        payload = {"stage": self.stage, "config": self.config, "inputs": self.inputs, "code": self.code_version}
        # another seed is another artifact; seed 42's keys stay as they were, and so do the stages a seed
        # study shares across its seeds (corpus, pre-training: seed 42's)
        if self.seed != DEFAULT_SEED and not seed_shared(self.stage, self.seed_study):
            payload["seed"] = self.seed
        # a study's other pre-training seed: another pre-training, and (through their inputs) another
        # everything downstream of it; pre-training seed 42's keys are a plain study's
        if self.seed_study and self.pretrain_seed != DEFAULT_SEED and self.stage in PRETRAIN_SEEDED:
            payload["pretrain_seed"] = self.pretrain_seed
        return config_hash(payload)

    @property
    def dir(self) -> Path:
        return cache_dir() / self.stage / self.key

    @property
    def partial(self) -> Path:
        """The work folder a resumable stage keeps across a killed run (``.<key>.partial.tmp``)."""
        return temp_name(self.dir, PARTIAL)

    @property
    def lock_path(self) -> Path:
        return self.dir.with_name(self.dir.name + ".lock")

    def is_done(self) -> bool:
        return is_finished(self.dir, self.key)

    def meta(self) -> dict[str, Any]:
        """The finished stage's marker: its bookkeeping and what its build returned."""
        return finished_meta(self.dir) or {}

    @contextlib.contextmanager
    def building(self, keep_partial: bool = False) -> Iterator[Path]:
        """The work folder of a build, renamed into place when the block ends (an older output
        stays readable until then); the block calls :meth:`mark_finished` in it last. A failed
        build is removed, unless ``keep_partial`` (a stage that resumes from its own checkpoints)
        keeps it for the next attempt. The caller holds :attr:`lock_path`: what killed builds of
        this key left is removed first (a resumable stage's work folder only when not resuming)."""
        if self.seed != DEFAULT_SEED and seed_shared(self.stage, self.seed_study):
            # built under this seed, it would sit under seed 42's key: every seed would read it
            raise HarnessError(
                f"seed study: stage {self.stage} is shared by every seed and runs under seed {DEFAULT_SEED}, "
                f"which has not built it yet: put {DEFAULT_SEED} first in --seeds (e.g. --seeds "
                f"{DEFAULT_SEED}-{DEFAULT_SEED + 4}), or run the method without --seeds first"
            )
        remove_temps(self.dir, keep=self.partial if keep_partial else None)
        with atomic_dir(self.dir, keep_partial=keep_partial) as work:
            yield work
            if _read_marker(work, DONE_NAME) is None:  # renamed into place, it would rebuild forever
                raise RuntimeError(f"stage {self.stage}: the build ended without mark_finished; nothing cached")

    def mark_finished(self, work: Path, meta: dict[str, Any] | None = None) -> None:
        """The stage's marker in its work folder: its key, config and inputs, when it finished, what
        the build returned (``meta``) and the digests of what it wrote (:func:`output_digests`)."""
        mark_finished(
            work,
            {
                "stage": self.stage,
                "key": self.key,
                "config": self.config,
                "inputs": self.inputs,
                "finished": time.time(),
                **(meta or {}),
                DIGESTS: output_digests(work),
            },
        )

    def changed_output(self) -> str | None:
        """The file of the finished output that differs from its digests (:func:`changed_output`), or None.

        A folder finished before digests were kept has none: it is accepted this once and its digests
        are written now, since its key says it was built from the same inputs and rebuilding every older
        folder (hours of pre-training at paper scale) for a damage nothing hints at would cost more than
        it guards; from then on it is checked like any other."""
        meta = self.meta()
        digests = meta.get(DIGESTS)
        if not isinstance(digests, dict):
            with contextlib.suppress(OSError):  # a read-only cache stays usable, unchecked as before
                mark_finished(self.dir, {**meta, DIGESTS: output_digests(self.dir)})
            return None
        return changed_output(self.dir, digests)

    def clear(self) -> None:
        for path in (self.dir, self.partial):
            if path.exists():
                shutil.rmtree(path)
