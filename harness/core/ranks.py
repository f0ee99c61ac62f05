"""Where this process sits in a multi-process run, read from the launcher's environment (no torch).

PyTorch's elastic launcher (``harness run --nproc-per-node N`` starts it, or ``torchrun``) gives each
worker ``RANK``, ``LOCAL_RANK`` and ``WORLD_SIZE``. Everything that only needs to know *who* it is --
which rank prints, writes the record, logs to MLflow; how a global batch divides -- reads it here,
without importing torch. The collectives themselves live in :mod:`harness.training.distributed`.

:func:`solo` marks a block that one rank runs alone (a data stage built by rank 0 while the others
wait): inside it the process counts as a single-process run, so a trainer or encoder it calls never
starts a collective the other ranks are not in.
"""

from __future__ import annotations

import contextlib
import os
from typing import Iterator

from harness.core.errors import HarnessError

_SOLO = [0]  # depth of nested solo() blocks in this process


def env_int(name: str, default: int) -> int:
    """An integer from the environment (the launcher's RANK / WORLD_SIZE, a timeout); `default` when unset."""
    raw = os.environ.get(name, "")
    if raw == "":
        return default
    try:
        return int(raw)
    except ValueError as exc:
        raise HarnessError(f"environment variable {name}={raw!r} is not an integer") from exc


def launched_world_size() -> int:
    """Processes in the run the launcher started (1 without a launcher), whatever :func:`solo` says."""
    return max(1, env_int("WORLD_SIZE", 1))


def world_size() -> int:
    """Processes sharing the work now: 1 inside :func:`solo` or without a launcher."""
    return 1 if _SOLO[0] else launched_world_size()


def rank() -> int:
    return 0 if _SOLO[0] else env_int("RANK", 0)


def local_rank() -> int:
    return env_int("LOCAL_RANK", 0)


def is_main() -> bool:
    """True on global rank 0 (and in single-process runs): the rank that prints, tracks and records."""
    return env_int("RANK", 0) == 0


def in_solo() -> bool:
    return bool(_SOLO[0])


@contextlib.contextmanager
def solo() -> Iterator[None]:
    """Run the block as a single-process run (see the module docstring)."""
    _SOLO[0] += 1
    try:
        yield
    finally:
        _SOLO[0] -= 1
