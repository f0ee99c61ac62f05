"""Atomic writes and inter-process locks: the two file-system guarantees every cache relies on.

An atomic write goes to a temp file unique to the writer in the target's folder, is fsynced and
renamed over the target, so a reader (or a killed writer) never sees half a file and two
writers never share a temp file. A stage lock is an ``flock`` on ``<name>.lock``: a second
process that wants to build the same thing waits (saying so) instead of colliding with the first.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterator


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """A temp file beside ``path`` for the block to write (any writer that wants a name: np.save,
    faiss, torch.save); fsynced and renamed over ``path`` when the block succeeds, removed if not."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp" + path.suffix)
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write to a temp file in the same folder, fsync, then rename over ``path``."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def atomic_write_text(path: str | Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | Path, payload: Any) -> None:
    atomic_write_text(path, json.dumps(payload, indent=2, sort_keys=True, ensure_ascii=False, default=str) + "\n")


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
            print(f"[{label}] another process (pid {holder}) is building this; waiting for it to finish",
                  file=sys.stderr, flush=True)
            fcntl.flock(fh, fcntl.LOCK_EX)
        fh.seek(0)
        fh.truncate()
        fh.write(str(os.getpid()))
        fh.flush()
        try:
            yield waited
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
