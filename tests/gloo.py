"""Start gloo worker processes for a test and wait for them under a deadline (a hung rendezvous fails the
test instead of hanging the suite)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
import torch.multiprocessing as mp


def run_forked(worker: Callable[..., None], args: tuple[Any, ...], nprocs: int, deadline_s: float = 120) -> None:
    """``worker(rank, *args)`` in ``nprocs`` forked processes (they reuse the imported torch), joined; the
    test fails when they have not finished within ``deadline_s``."""
    workers = mp.start_processes(worker, args=args, nprocs=nprocs, join=False, start_method="fork")
    deadline = time.monotonic() + deadline_s
    while not workers.join(timeout=2):
        if time.monotonic() > deadline:
            for process in workers.processes:
                process.kill()
            pytest.fail(f"gloo workers did not finish in {deadline_s:.0f} s")
