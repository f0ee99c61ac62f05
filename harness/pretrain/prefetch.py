"""Collate in the background: the next step's micro-batches are tokenised and masked while the
current step runs (issue 51), so a GPU does not wait for the CPU between steps.

:class:`Prefetcher` is one daemon thread that runs submitted calls in order and hands back
``concurrent.futures.Future`` objects. One thread, not a pool or DataLoader workers: the HF fast
tokenizer releases the GIL while it encodes, a collate is a pure function of its examples and its own
seeded ``torch.Generator`` (harness.pretrain.trainer.micro_generator; no global RNG), so the batches are
the same bit for bit, and a single thread means the tokenizer is never used by two threads at once
(a fast tokenizer raises "Already borrowed" then). The trainer keeps at most two steps in flight (the
current one and the next), which bounds the queue. The thread runs torch on one intra-op thread
(OpenMP's count is per thread, so the step keeps its own): a second team of OpenMP threads on the step's
cores made a CPU step 1.7x slower, one thread 1.09x (bench/bench_prefetch.py).

On by default when training on CUDA (the CPU is idle during a GPU step), off on a CPU (the step itself
uses the cores); ``HARNESS_PREFETCH=0|1`` decides instead. A run control: never in a stage key.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import torch

from harness.core.errors import HarnessError

PREFETCH_ENV = "HARNESS_PREFETCH"
JOIN_TIMEOUT_S = 10.0  # close() waits this long for a collate in progress, then leaves the daemon thread


def _openmp_backend() -> bool:
    """Whether torch's intra-op threads are OpenMP's, whose thread count is set per calling thread (another
    backend's is process-wide: setting it in the worker would change the step's)."""
    return "parallel backend: OpenMP" in torch.__config__.parallel_info()


def prefetch_enabled(device: torch.device) -> bool:
    """Whether to collate in the background: :data:`PREFETCH_ENV` when set, else on for CUDA only."""
    raw = os.environ.get(PREFETCH_ENV, "").strip()
    if not raw:
        return device.type == "cuda"
    if raw not in ("0", "1"):
        raise HarnessError(f"{PREFETCH_ENV}={raw!r}: give 1 (collate in the background) or 0 (in the step)")
    return raw == "1"


class Prefetcher:
    """A daemon thread running ``submit``-ted calls in submission order; :meth:`close` stops it."""

    def __init__(self, name: str = "collate-prefetch"):
        self._jobs: queue.SimpleQueue[tuple[Future[Any], Callable[[], Any]] | None] = queue.SimpleQueue()
        self._pending: list[Future[Any]] = []
        self._closed = False
        self._thread = threading.Thread(target=self._work, name=name, daemon=True)
        self._thread.start()

    def submit(self, call: Callable[[], Any]) -> Future[Any]:
        if self._closed:
            raise HarnessError("the collate prefetcher is closed")
        future: Future[Any] = Future()
        self._pending = [f for f in self._pending if not f.done()]
        self._pending.append(future)
        self._jobs.put((future, call))
        return future

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def _work(self) -> None:
        # One intra-op thread here, the step's count unchanged (module docstring); a collate's masks do not
        # depend on the thread count (each row is drawn and sorted on its own).
        if _openmp_backend():
            torch.set_num_threads(1)
        while (job := self._jobs.get()) is not None:
            future, call = job
            if not future.set_running_or_notify_cancel():  # cancelled by close()
                continue
            try:
                future.set_result(call())
            except BaseException as exc:  # noqa: BLE001 - handed to the step that waits for this batch, raised there
                future.set_exception(exc)

    def close(self, timeout: float = JOIN_TIMEOUT_S) -> bool:
        """Cancel what has not started, stop the thread and wait at most ``timeout`` s for the call in
        progress; True when the thread has ended. Safe to call twice."""
        if not self._closed:
            self._closed = True
            for future in self._pending:
                future.cancel()
            self._pending = []
            self._jobs.put(None)
        self._thread.join(timeout)
        return not self._thread.is_alive()
