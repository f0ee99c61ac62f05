"""Temp names, atomic files and folders, and inter-process locks: the file-system guarantees every
cache relies on.

One temp-name rule: anything being written lives under a hidden sibling of its target,
``.<name>.<token>.tmp<suffix>`` (:func:`temp_name`). The target's suffix stays last, so a writer
that adds or checks an extension (``np.save`` appends ``.npy`` otherwise) writes the very name it
was given; ``<token>`` is random for a writer of its own (two writers never share a temp) and
``partial`` for a resumable work folder. :func:`is_temp` recognises the rule (and the ``<name>.tmp``
of older writers), and every scan of records and caches skips what it matches: a temp name is
never read as a finished thing, so a killed writer leaves nothing that looks finished.

An atomic file (:func:`atomic_path`, :func:`atomic_write_bytes` ...) is written under its temp
name, fsynced and renamed over the target. An atomic folder (:func:`atomic_dir`) is filled under
its temp name and renamed into place when the block succeeds (:func:`replace_dir`), removed when it
fails; with ``keep_partial`` the folder is the fixed ``partial`` one, kept for the next attempt to
resume. A stage lock is an ``flock`` on ``<name>.lock``: a second process that wants to build the
same thing waits (saying so) instead of colliding with the first.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import secrets
import shutil
import stat
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeGuard

from harness.core.errors import DiskFull, HarnessError, disk_full

TEMP_TAG = ".tmp"
PARTIAL = "partial"  # the token of a resumable work folder: a fixed name the next attempt finds


# --- the temp-name rule -------------------------------------------------------------------------


def temp_name(path: str | Path, token: str | None = None) -> Path:
    """The temp sibling of ``path``: ``.<name>.<token>.tmp<suffix>`` (``token`` random unless given)."""
    path = Path(path)
    token = token or secrets.token_hex(4)
    if "." in token or "/" in token:
        raise ValueError(f"a temp token is one dot-free word, got {token!r}")
    return path.with_name(f".{path.name}.{token}{TEMP_TAG}{path.suffix}")


def is_temp(path: str | Path) -> bool:
    """Whether ``path`` names something still being written: a temp name of :func:`temp_name`, or
    ``<name>.tmp`` (older writers), so a file a killed writer left is never read either."""
    name = Path(path).name
    return name.endswith(TEMP_TAG) or Path(name).stem.endswith(TEMP_TAG)


def is_temp_of(candidate: str | Path, path: str | Path) -> bool:
    """Whether ``candidate`` is a temp sibling of ``path`` (any token), not of another target."""
    candidate, path = Path(candidate), Path(path)
    head, tail = f".{path.name}.", f"{TEMP_TAG}{path.suffix}"
    name = candidate.name
    if candidate.parent != path.parent or not (name.startswith(head) and name.endswith(tail)):
        return False
    token = name[len(head) : len(name) - len(tail)]
    return bool(token) and "." not in token


def remove_temps(path: str | Path, keep: Path | None = None) -> list[Path]:
    """Delete the temp siblings of ``path`` that killed writers left (files or folders), except
    ``keep``. Only while no other process writes ``path``: hold its lock."""
    path = Path(path)
    if not path.parent.is_dir():
        return []
    stale = [p for p in path.parent.iterdir() if is_temp_of(p, path) and p != keep]
    for p in stale:
        _remove(p)
    return stale


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _claim(path: Path, make: Callable[[Path], None]) -> Path:
    """A fresh temp sibling of ``path``, created exclusively by ``make`` (so no two writers share it).
    Not mkstemp/mkdtemp: their 0600/0700 modes would become the finished artifact's."""
    while True:
        candidate = temp_name(path)
        try:
            make(candidate)
            return candidate
        except FileExistsError:
            continue


# --- usable places -----------------------------------------------------------------------------


def writable_dir(path: str | Path, name: str, fix: str) -> Path:
    """Create the folder ``path`` (and its parents) and prove a file can be written in it, else one
    HarnessError naming it (``name``: how the user gave it, ``--records DIR``), the reason and ``fix``:
    checked before the work, so a file where a folder belongs, a read-only or immutable folder or a full
    disk is one line at the start instead of a traceback from the first stage (or after the last)."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise HarnessError(f"{name} {path} is a file, not a folder (fix: {fix})")
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = temp_name(path / ".write-probe")
        with open(probe, "wb") as fh:
            fh.write(b"probe")
            fh.flush()
            os.fsync(fh.fileno())
        probe.unlink()
    except OSError as exc:
        raise HarnessError(f"{name} {path}: cannot write there ({exc.strerror or exc}) (fix: {fix})") from None
    return path


def writable_file(path: str | Path, name: str) -> Path:
    """``path`` can be written as a file: it is not a folder and its folder can be written (see
    :func:`writable_dir`); checked before the work whose summary it will hold."""
    path = Path(path)
    if path.is_dir():
        raise HarnessError(f"{name} {path} is a folder (fix: give a file path, e.g. {path / 'summary.json'})")
    writable_dir(path.parent, f"{name} {path}: its folder", "give a path in a folder you can write")
    return path


def is_plain_name(name: object) -> TypeGuard[str]:
    """Whether ``name`` names an entry directly inside one folder (a run id, a fragment, a spec): text
    without a folder part (``/``, ``\\``), not ``.`` or ``..``, not hidden (temp names start with a dot).
    ``folder / name`` of any other value may leave the folder (``../x``, an absolute path)."""
    return isinstance(name, str) and bool(name) and not name.startswith(".") and not any(c in name for c in "/\\\0")


NO_SUCH_FILE = "no such file"
NOT_REGULAR = "not a regular file (a pipe, socket or device)"


def file_problem(path: str | Path) -> str | None:
    """Why ``path`` is no regular file to read ("no such file", "a folder, not a file", ...), or None
    (a link to a regular file is one). Asked before opening: opening a pipe (FIFO) waits for a writer
    forever, and a folder or a device fails with a traceback."""
    try:
        mode = Path(path).stat().st_mode  # follows a link
    except FileNotFoundError:
        return NO_SUCH_FILE
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    if stat.S_ISDIR(mode):
        return "a folder, not a file"
    if not stat.S_ISREG(mode):
        return NOT_REGULAR
    return None


# --- atomic files -----------------------------------------------------------------------------


def _create_file(path: Path) -> None:
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """A temp file beside ``path`` for the block to write (any writer that wants a name: np.save,
    faiss, torch.save); fsynced and renamed over ``path`` when the block succeeds, removed if not."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _claim(path, _create_file)
    try:
        yield tmp
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        full = _full(exc, path)  # asked before the temp goes: removing it frees the space torch's check needs
        tmp.unlink(missing_ok=True)
        if full is not None:
            raise full from exc
        raise


def _full(exc: BaseException, path: Path, work: Path | None = None) -> DiskFull | None:
    """A new DiskFull naming ``path`` (the target, not its temp; a file in the folder ``work`` that fills
    ``path``: that file as it would be named when finished) if a full disk made the write fail."""
    full = disk_full(exc, (path,)) if isinstance(exc, Exception) else None
    if full is None:
        return None
    named = full.path
    inside = work is not None and named is not None and named.is_relative_to(work)
    if isinstance(exc, DiskFull) and not inside:
        return None  # named already, by a writer nearer the file
    return DiskFull(path / named.relative_to(work) if inside and named and work else path, full.needs_mib)


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write to a temp file in the same folder, fsync, then rename over ``path``."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def atomic_write_text(path: str | Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | Path, payload: Any) -> None:
    atomic_write_text(path, json.dumps(payload, indent=2, sort_keys=True, ensure_ascii=False, default=str) + "\n")


# --- atomic folders ---------------------------------------------------------------------------


def replace_dir(work: str | Path, path: str | Path, replace: bool = True) -> Path:
    """Rename the filled folder ``work`` to ``path``.

    An existing ``path`` is first renamed to a temp name and removed after, so a reader never finds
    it missing for longer than a rename. ``replace=False`` keeps an existing ``path`` instead (an
    identical build that another process finished first) and drops ``work``."""
    work, path = Path(work), Path(path)
    if path.exists() or path.is_symlink():
        if not replace:
            _remove(work)
            return path
        old = temp_name(path)
        os.replace(path, old)
        os.replace(work, path)
        _remove(old)
        return path
    try:
        os.replace(work, path)
    except OSError as exc:  # another writer renamed its folder in between
        if replace or exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
            raise
        _remove(work)
    return path


@contextlib.contextmanager
def atomic_dir(path: str | Path, *, keep_partial: bool = False, replace: bool = True) -> Iterator[Path]:
    """A temp folder beside ``path`` for the block to fill, renamed to ``path`` when the block
    succeeds (:func:`replace_dir`; ``replace`` as there) and removed when it raises, so ``path``
    appears whole or not at all.

    ``keep_partial``: the work folder is the fixed ``.<name>.partial.tmp``, reused when it exists
    (the block resumes from what a killed attempt left) and kept when the block raises. Its writer
    must be the only one: hold a lock on ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if keep_partial:
        work = temp_name(path, PARTIAL)
        work.mkdir(exist_ok=True)
    else:
        work = _claim(path, Path.mkdir)
    try:
        yield work
        replace_dir(work, path, replace=replace)
    except BaseException as exc:
        full = _full(exc, path, work)
        if not keep_partial:
            _remove(work)
        if full is not None:
            raise full from exc
        raise


# --- locks ------------------------------------------------------------------------------------


@contextlib.contextmanager
def exclusive_lock(lock_path: str | Path, label: str) -> Iterator[bool]:
    """Hold an exclusive ``flock`` on ``lock_path`` for the block; yields whether it had to wait.
    If another process holds it, print one line naming ``label`` and the holder's pid, then wait.
    The kernel drops the lock when its holder dies, so a killed run never leaves a stale lock."""
    path = Path(lock_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        waited = False
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            waited = True
            fh.seek(0)
            holder = fh.read().strip() or "?"
            print(
                f"[{label}] another process (pid {holder}) is building this; waiting for it to finish",
                file=sys.stderr,
                flush=True,
            )
            fcntl.flock(fh, fcntl.LOCK_EX)
        fh.seek(0)
        fh.truncate()
        fh.write(str(os.getpid()))
        fh.flush()
        try:
            yield waited
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
