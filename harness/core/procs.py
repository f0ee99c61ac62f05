"""Child processes that die with the harness, and signals that unwind it.

A child started here (the Lucene indexer, ``mlflow server``, Streamlit, a re-run) runs in a process
group of its own and is stopped with every process in that group:

* when the harness leaves the ``child_group`` block, normally or by an exception (Ctrl-C, or SIGTERM
  turned into one by :func:`terminate_raises`): the group gets ``stop_signal``, then SIGKILL after
  ``grace`` seconds;
* when the harness dies without unwinding (SIGKILL, a crash): on Linux the kernel sends the direct
  child its parent-death signal (``prctl(PR_SET_PDEATHSIG)``), and a small watchdog process (this
  file run as a script, in a session of its own) sees its pipe from the harness close and stops the
  whole group, so the server's own workers (uvicorn, huey consumers) do not outlive it either.

It also says whether a process recorded earlier still runs (:func:`process_tags`,
:func:`process_gone`), which the tracker uses to close MLflow runs whose process is gone.

Only the standard library is imported: the watchdog runs this file with ``python -I`` and no
harness package on its path.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
_prctl_fn: Any = None


class Terminated(KeyboardInterrupt):
    """SIGTERM / SIGHUP / SIGUSR1 raised as an exception in the main thread. A KeyboardInterrupt, so every
    place that already handles Ctrl-C (``finally`` blocks, the tracker marking runs KILLED, the CLI's
    "interrupted" line) handles a kill from ``kill``, a scheduler or a closed terminal the same way."""

    def __init__(self, signum: int):
        super().__init__(f"terminated by {signal.Signals(signum).name}")
        self.signum = signum

    @property
    def exit_code(self) -> int:
        """The shell's status for death by the signal; a preemption notice (SIGUSR1, SLURM's
        ``--signal``) ends as SIGTERM does, 143, the status a scheduler's requeue logic looks for."""
        preempt = getattr(signal, "SIGUSR1", None)
        return 128 + (signal.SIGTERM if self.signum == preempt else self.signum)


@contextlib.contextmanager
def terminate_raises(signums: tuple[int, ...] | None = None) -> Iterator[None]:
    """Within the block, these signals raise :class:`Terminated` instead of ending Python on the
    spot (which runs no ``finally`` and leaves children and RUNNING MLflow runs behind). A signal
    the caller ignores (``nohup``) stays ignored; a second one ends the process at once, so a stuck
    clean-up can still be stopped. SIGUSR1 too: a scheduler's preemption notice (SLURM's ``--signal=USR1@300``,
    which the launcher forwards to every worker) must end any stage, encoding or Lucene as much as training
    (whose loop takes it over to checkpoint first, training/engine.py), not kill the process uncleaned."""
    if signums is None:
        signums = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP", "SIGUSR1") if hasattr(signal, name))

    def handler(signum: int, _frame: object) -> None:
        signal.signal(signum, signal.SIG_DFL)
        raise Terminated(signum)

    with signal_handlers(signums, handler):
        yield


@contextlib.contextmanager
def signal_handlers(signums: tuple[int, ...], handler: Callable[[int, Any], None]) -> Iterator[None]:
    """`handler` for these signals within the block, the previous handlers back after it. A signal the
    caller ignores (``nohup``) stays ignored; outside the main thread, or for a signal this platform
    lacks, nothing is installed."""
    old: dict[int, Any] = {}
    for signum in signums:
        with contextlib.suppress(ValueError, OSError):  # not the main thread, or no such signal here
            if signal.getsignal(signum) is not signal.SIG_IGN:
                old[signum] = signal.signal(signum, handler)
    try:
        yield
    finally:
        for signum, previous in old.items():
            signal.signal(signum, previous)


# --- children in a group of their own -------------------------------------------------------------


def _prctl() -> Any:
    """libc's prctl, looked up before any fork (the forked child must not load libraries)."""
    global _prctl_fn
    if _prctl_fn is None and sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
            _prctl_fn = libc.prctl
    return _prctl_fn


def _death_signal(signum: int) -> Callable[[], None] | None:
    """A preexec_fn asking the kernel to send ``signum`` to the child when the thread that started
    it dies (SIGKILL included). Call from a thread that outlives the child (the harness's main
    thread). None where prctl is missing (not Linux): the watchdog still stops the group."""
    prctl = _prctl()
    if prctl is None:
        return None
    parent = os.getpid()

    def set_it() -> None:
        prctl(PR_SET_PDEATHSIG, signum, 0, 0, 0)
        if os.getppid() != parent:  # the parent died between fork and prctl: nobody would signal us
            os.kill(os.getpid(), signum)

    return set_it


def stop_group(pgid: int, stop_signal: int, grace: float, leader: subprocess.Popen | None = None) -> None:
    """``stop_signal`` to every process of the group, SIGKILL to what is left after ``grace`` s.
    ``leader``: our own child (the group's first process), waited for (a zombie still counts as a
    group member, so polling the group would wait out the grace for nothing)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, stop_signal)
    if leader is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            leader.wait(timeout=grace)
    else:
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            try:
                os.killpg(pgid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):  # workers that outlived their server
        os.killpg(pgid, signal.SIGKILL)
    if leader is not None:
        leader.wait()


def _start_watchdog(pgid: int, stop_signal: int, grace: float) -> subprocess.Popen | None:
    """The watchdog holds the read end of a pipe whose write end only the harness has (Popen closes
    other descriptors in later children); EOF without "done" means the harness died."""
    try:
        return subprocess.Popen(
            [sys.executable, "-I", str(Path(__file__).resolve()), str(pgid), str(int(stop_signal)), str(grace)],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # neither Ctrl-C on the terminal nor stopping the group reach it
        )
    except OSError:
        return None  # the parent-death signal and the in-process stop still apply


def _dismiss_watchdog(watchdog: subprocess.Popen | None) -> None:
    if watchdog is None:
        return
    with contextlib.suppress(OSError, ValueError):
        assert watchdog.stdin is not None
        watchdog.stdin.write(b"done\n")
        watchdog.stdin.close()
    try:
        watchdog.wait(timeout=10)
    except subprocess.TimeoutExpired:
        watchdog.kill()
        watchdog.wait()


@contextlib.contextmanager
def child_group(
    cmd: list[str],
    *,
    stop_signal: int = signal.SIGTERM,
    grace: float = 10.0,
    death_signal: int | None = None,
    **popen: Any,
) -> Iterator[subprocess.Popen]:
    """Start ``cmd`` (``subprocess.Popen`` keywords in ``popen``) as the first process of a new
    session and yield it; on leaving the block, by any path, stop its whole group (see the module
    docstring). ``death_signal`` (default ``stop_signal``) is what the child gets if the harness
    dies: SIGTERM lets a server or a nested harness run shut down cleanly, SIGKILL suits a worker
    whose output is discarded anyway."""
    proc = subprocess.Popen(cmd, start_new_session=True, preexec_fn=_death_signal(death_signal or stop_signal), **popen)
    watchdog = None
    try:
        watchdog = _start_watchdog(proc.pid, stop_signal, grace)
        yield proc
    finally:
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
        stop_group(proc.pid, stop_signal, grace, leader=proc)
        # Only now: if the stop above was cut short (a second Ctrl-C), the watchdog's pipe just
        # closes without "done" when we exit, and it finishes the stop.
        _dismiss_watchdog(watchdog)


def run(
    cmd: list[str], *, stop_signal: int = signal.SIGKILL, grace: float = 10.0, **popen: Any
) -> subprocess.CompletedProcess:
    """``subprocess.run(cmd, capture_output=True, text=True)`` for a child that must not outlive
    the harness (its output is captured as text)."""
    with child_group(
        cmd, stop_signal=stop_signal, grace=grace, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen
    ) as proc:
        out, err = proc.communicate()
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


# --- is a recorded process still running? ---------------------------------------------------------


def _boot_id() -> str:
    with contextlib.suppress(OSError):
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    return ""


def _stat(pid: int) -> tuple[str, str] | None:
    """(state, start time in clock ticks since boot) of a live pid from /proc, else None."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()  # the command name may hold spaces and parentheses
    return fields[0], fields[19]


def process_tags(pid: int | None = None) -> dict[str, str]:
    """Tags naming a process across pid reuse and reboots: host, pid and, on Linux, boot id and
    start time."""
    pid = os.getpid() if pid is None else pid
    tags = {"harness.host": socket.gethostname(), "harness.pid": str(pid)}
    stat = _stat(pid)
    if stat is not None and _boot_id():
        tags["harness.pid_start"] = f"{_boot_id()}:{stat[1]}"
    return tags


def process_gone(tags: dict[str, str]) -> bool:
    """True only when the process ``tags`` (from :func:`process_tags`) name certainly no longer runs
    on this host; a run from another host, or a record without a pid, is never called gone."""
    if tags.get("harness.host") != socket.gethostname() or not tags.get("harness.pid", "").isdigit():
        return False
    pid = int(tags["harness.pid"])
    started = tags.get("harness.pid_start")
    if started and Path("/proc/self/stat").exists():
        stat = _stat(pid)
        # gone: no such pid, a zombie nobody has reaped yet, another boot, or another process on the pid
        return stat is None or stat[0] == "Z" or started != f"{_boot_id()}:{stat[1]}"
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # somebody else's live process
        return False
    return False


# --- the watchdog ---------------------------------------------------------------------------------


def _watchdog(argv: list[str]) -> int:
    """``procs.py PGID SIGNAL GRACE``: wait for the harness to say "done" on stdin; EOF before that
    means it died without stopping its group, so stop the group now."""
    pgid, stop_signal, grace = int(argv[0]), int(argv[1]), float(argv[2])
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    line = sys.stdin.buffer.readline()
    if line.strip() != b"done":
        stop_group(pgid, stop_signal, grace)
    return 0


if __name__ == "__main__":
    sys.exit(_watchdog(sys.argv[1:]))
