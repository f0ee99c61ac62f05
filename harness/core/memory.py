"""Peak resident memory of one stage, and the machine's memory: what a run records per stage and what
``run --dry-run`` compares its projected footprints with.

A stage's own peak, not the process's: on Linux the kernel keeps a high-water mark of the resident set
(``VmHWM`` in /proc/self/status) that writing ``5`` to /proc/self/clear_refs resets, so the mark read
after the stage is the stage's peak. Where that is not possible (another OS, a locked-down /proc) the
only number is ``ru_maxrss``: the process's peak since it started, which an earlier, larger stage
dominates; it is recorded as such (``basis`` says which), never passed off as the stage's own.

Child processes (the Lucene indexer, a launcher's workers) have their own resident sets, not in the
parent's. ``RUSAGE_CHILDREN``'s ``ru_maxrss`` is the largest of every child waited for since the
process started; when it rose during the stage, a child of this stage reached that peak, and that is
recorded next to the process's own (a child still running or one that did not rise past earlier
children is not seen: stated with the number's name, ``children_peak_rss_mib``).

Between stages the memory a finished stage freed is handed back to the OS (:func:`release_memory`):
glibc keeps freed heap pages in its arenas, so after pre-training the process held about 4 GiB it no
longer used, and every later stage's peak (retriever 2's: 7.4 GiB on the mini main job) stood on it.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import gc
import resource
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CLEAR_REFS = Path("/proc/self/clear_refs")
STATUS = Path("/proc/self/status")
STAGE = "stage"  # basis: the stage's own high-water mark (VmHWM after a reset)
CUMULATIVE = "process"  # basis: the process's peak since it started (ru_maxrss), the stage's at most


def _maxrss_mib(who: int) -> float:
    """``ru_maxrss`` in MiB: kilobytes on Linux, bytes on macOS."""
    value = resource.getrusage(who).ru_maxrss
    return value / 2**20 if sys.platform == "darwin" else value / 1024


def _status_kib(field_name: str, status: Path = STATUS) -> int | None:
    with contextlib.suppress(OSError, ValueError):
        for line in status.read_text().splitlines():
            if line.startswith(field_name + ":"):
                return int(line.split()[1])
    return None


def reset_high_water_mark(clear_refs: Path = CLEAR_REFS, status: Path = STATUS) -> bool:
    """Reset the process's VmHWM to its current RSS; whether it worked (and VmHWM can be read)."""
    try:
        clear_refs.write_text("5")
    except OSError:
        return False
    return _status_kib("VmHWM", status) is not None


@dataclass
class PeakRSS:
    """The peak of one stage, filled in when :func:`measure_peak` ends."""

    basis: str = CUMULATIVE
    peak_mib: float | None = None
    children_mib: float | None = None  # a child of this stage (largest child finished during it)
    _children_before: float = field(default=0.0, repr=False)
    _seen_mib: float = field(default=0.0, repr=False)  # marks read before a nested measurement reset them

    def fields(self) -> dict[str, Any]:
        """The stage entry's fields: ``peak_rss_mib`` (with ``peak_rss_basis`` when it is the process's
        cumulative peak) and ``children_peak_rss_mib`` when a child of the stage was seen."""
        if self.peak_mib is None:
            return {}
        out: dict[str, Any] = {"peak_rss_mib": round(self.peak_mib, 1)}
        if self.basis != STAGE:
            out["peak_rss_basis"] = "process peak so far (ru_maxrss, cumulative)"
        if self.children_mib is not None:
            out["children_peak_rss_mib"] = round(self.children_mib, 1)
        return out

    def describe(self) -> str:
        """', peak RSS 512 MiB' for a progress line ('' when nothing was measured)."""
        if self.peak_mib is None:
            return ""
        text = f", peak RSS {self.peak_mib:,.0f} MiB" + ("" if self.basis == STAGE else " (process so far)")
        if self.children_mib is not None:
            text += f", child process {self.children_mib:,.0f} MiB"
        return text


@contextlib.contextmanager
def measure_peak(clear_refs: Path = CLEAR_REFS, status: Path = STATUS) -> Iterator[PeakRSS]:
    """Measure the peak resident memory of the code in the ``with`` block (module docstring)."""
    _note_mark(status)  # an enclosing measurement keeps the mark this one is about to reset
    peak = PeakRSS(STAGE if reset_high_water_mark(clear_refs, status) else CUMULATIVE)
    peak._children_before = _maxrss_mib(resource.RUSAGE_CHILDREN)
    _OPEN.append(peak)
    try:
        yield peak
    finally:
        _OPEN.remove(peak)
        hwm = _status_kib("VmHWM", status) if peak.basis == STAGE else None
        own = hwm / 1024 if hwm is not None else _maxrss_mib(resource.RUSAGE_SELF)
        peak.peak_mib = max(own, peak._seen_mib)
        if hwm is None:
            peak.basis = CUMULATIVE
        for outer in _OPEN:
            outer._seen_mib = max(outer._seen_mib, peak.peak_mib)
        children = _maxrss_mib(resource.RUSAGE_CHILDREN)
        if children > peak._children_before:
            peak.children_mib = children


_OPEN: list[PeakRSS] = []  # the measurements under way, outermost first (a stage built inside another's)


def _note_mark(status: Path) -> None:
    """Before a nested measurement resets the mark: every enclosing one keeps the mark reached so far."""
    if _OPEN and (hwm := _status_kib("VmHWM", status)) is not None:
        for outer in _OPEN:
            outer._seen_mib = max(outer._seen_mib, hwm / 1024)


@functools.cache
def _libc() -> ctypes.CDLL | None:
    """glibc, whose ``malloc_trim`` returns free arena pages to the OS (None elsewhere: musl, macOS)."""
    name = ctypes.util.find_library("c") if sys.platform.startswith("linux") else None
    try:
        libc = ctypes.CDLL(name) if name else None
    except OSError:
        return None
    return libc if libc is not None and hasattr(libc, "malloc_trim") else None


def release_memory() -> bool:
    """Collect garbage (a finished stage's model, optimizer and batches are unreachable by now) and hand
    the freed heap back to the OS; whether anything was trimmed (False where there is no glibc)."""
    gc.collect()
    libc = _libc()
    return bool(libc.malloc_trim(0)) if libc is not None else False
