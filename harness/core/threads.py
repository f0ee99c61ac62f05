"""How many threads the numeric libraries use: the cores this process may actually run on.

``os.cpu_count()`` counts the machine's cores, not the ones a container or ``taskset`` grants, and
OpenMP (torch, faiss, MKL) starts one spinning thread per counted core: in a 2-CPU container on a
large host that is dozens of threads fighting for two cores. :func:`available_cores` takes the
smallest of the CPU affinity mask and the cgroup CPU quota (``cpu.max``, cgroup v2; ``cpu.cfs_*``,
v1); ``HARNESS_THREADS`` overrides both. :func:`configure` puts the result in ``OMP_NUM_THREADS``
and ``MKL_NUM_THREADS`` before torch starts (unless the user set them), so every library and child
process reads it. On a machine where nothing restricts the process nothing is set: torch's own
default stands, and with it every summation order the committed records were made with.

Sharing a machine with a second harness process is measured in ``bench/bench_threads.py``: the
short spin below (:data:`SPIN_COUNT`) is what keeps two processes from collapsing each other.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from harness.core.errors import HarnessError

ENV = "HARNESS_THREADS"
LIBRARY_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")
# How long an idle OpenMP thread of torch's libgomp spins before it sleeps (libgomp's default:
# 300,000 spins). Two tiny pre-trainings side by side on 2 cores, each against its time alone
# (bench/bench_threads.py, 2026-11-25): default 2.4x to 19x (the spinning threads of one process
# take the cores the other's need, now and then), 3,000 spins 2.0x, PASSIVE 1.5x; alone, 3,000
# spins cost nothing measurable and PASSIVE 5-22%. Waiting only: no number computed changes.
SPIN_VARIABLE, SPIN_COUNT = "GOMP_SPINCOUNT", "3000"


def cgroup_quota(root: Path = Path("/sys/fs/cgroup")) -> int | None:
    """Whole cores the cgroup's CPU quota allows (rounded up), or None when unlimited / unknown."""
    try:
        quota, period = (root / "cpu.max").read_text().split()[:2]  # cgroup v2: "max 100000" or "200000 100000"
        if quota == "max":
            return None
        return max(1, math.ceil(int(quota) / int(period)))
    except (OSError, ValueError):
        pass
    try:  # cgroup v1
        quota_us = int((root / "cpu" / "cpu.cfs_quota_us").read_text())
        period_us = int((root / "cpu" / "cpu.cfs_period_us").read_text())
        return max(1, math.ceil(quota_us / period_us)) if quota_us > 0 and period_us > 0 else None
    except (OSError, ValueError):
        return None


def available_cores(
    environ: dict[str, str] | os._Environ = os.environ, cgroup_root: Path = Path("/sys/fs/cgroup")
) -> tuple[int, str]:
    """(threads, where the number came from): ``HARNESS_THREADS``, else min(affinity, cgroup quota)."""
    raw = environ.get(ENV, "").strip()
    if raw:
        if not raw.isdigit() or int(raw) < 1:
            raise HarnessError(f"{ENV}={raw!r}: give a positive whole number of threads")
        return int(raw), ENV
    try:
        cores, source = len(os.sched_getaffinity(0)), "CPU affinity"
    except (AttributeError, OSError):  # not on Linux
        cores, source = os.cpu_count() or 1, "cpu_count"
    quota = cgroup_quota(cgroup_root)
    if quota is not None and quota < cores:
        return quota, "cgroup CPU quota"
    return cores, source


LAUNCHED = "TORCHELASTIC_RUN_ID"  # set in every worker torchrun (or `run --nproc-per-node`) starts
OWN_LAUNCHER = "HARNESS_OWN_LAUNCHER"  # set by `run --nproc-per-node` (run/launch.py): it sets no thread count


def drop_torchrun_default(environ: dict[str, str] | os._Environ = os.environ) -> bool:
    """Undo torchrun's ``OMP_NUM_THREADS=1`` in a launched worker (it sets it in every worker of a
    multi-process launch where the user did not): rank 0's CPU stages (Punkt, Lucene, the merge) would run on
    one core, where `run --nproc-per-node`, which sets nothing, gives them the node's. A worker that wants one
    thread says so with ``HARNESS_THREADS=1``. True when it was dropped."""
    by_torchrun = LAUNCHED in environ and OWN_LAUNCHER not in environ  # there a 1 is the user's own
    if by_torchrun and environ.get("OMP_NUM_THREADS") == "1" and not environ.get(ENV, "").strip():
        del environ["OMP_NUM_THREADS"]
        return True
    return False


def configure(environ: dict[str, str] | os._Environ = os.environ) -> int | None:
    """Set the libraries' thread variables the user has not set: the spin count always, the thread
    counts when something restricts this process (``HARNESS_THREADS``, an affinity mask or a quota
    below the machine's core count); returns the count set, or None when torch's default stands.
    Under torchrun its one-thread default is dropped first (:func:`drop_torchrun_default`)."""
    drop_torchrun_default(environ)
    environ.setdefault(SPIN_VARIABLE, SPIN_COUNT)
    threads, source = available_cores(environ)
    if source != ENV and threads >= (os.cpu_count() or 1):
        return None  # unrestricted: torch's own default is kept, as every record was made
    for name in LIBRARY_VARIABLES:
        environ.setdefault(name, str(threads))
    return threads
