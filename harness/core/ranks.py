"""Where this process sits in a multi-process run: the package's one world size, rank and main rank (no torch).

PyTorch's elastic launcher (``harness run --nproc-per-node N`` starts it, or ``torchrun``) gives each
worker ``RANK``, ``LOCAL_RANK`` and ``WORLD_SIZE``. Everything that needs to know *who* it is --
which rank prints, writes the record, logs to MLflow; how a global batch divides; which slice a rank
encodes; whether a collective has anyone to talk to -- reads it here, without importing torch. The
collectives live in :mod:`harness.training.distributed`, whose process group is made from these values;
once a process has joined a group (or a test's workers joined one without the launcher's variables),
the group's rank and size are the answer, so a collective and its callers never disagree.

:func:`solo` marks a block that one rank runs alone (a data stage built by rank 0 while the others
wait): inside it the process counts as a single-process run (world size 1, rank 0, main), so a trainer
or encoder it calls never starts a collective the other ranks are not in. Only rank 0 enters a solo
block (:meth:`harness.pipelines.context.RunContext.cached_stage`), so :func:`is_main` is the same inside.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

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
    """Processes in the run the launcher started (1 without a launcher), whatever :func:`solo` says:
    what a record states and what decides whether to join a process group; work sharing reads
    :func:`world_size`."""
    return max(1, env_int("WORLD_SIZE", 1))


def _joined_group() -> tuple[int, int] | None:
    """(rank, world size) of the torch process group this process joined, if it joined one: a group
    made without the launcher's environment (a test's own gloo workers) is still the one the
    collectives talk to. torch is only looked at where something else imported it."""
    dist = sys.modules.get("torch.distributed")
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return None
    return dist.get_rank(), dist.get_world_size()


def world_size() -> int:
    """Processes sharing the work now: 1 inside :func:`solo` or without a launcher; else the joined
    process group's size (made from WORLD_SIZE by harness.training.distributed), else WORLD_SIZE."""
    if _SOLO[0]:
        return 1
    group = _joined_group()
    return group[1] if group else launched_world_size()


def rank() -> int:
    """This process's global rank: 0 inside :func:`solo` or without a launcher (as :func:`world_size`)."""
    if _SOLO[0]:
        return 0
    group = _joined_group()
    return group[0] if group else env_int("RANK", 0)


def local_rank() -> int:
    return env_int("LOCAL_RANK", 0)


def is_main() -> bool:
    """True on global rank 0 (and in single-process runs and :func:`solo` blocks): the rank that
    prints, tracks, saves and records."""
    return rank() == 0


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
