"""Each built stage's entry (the run record's ``stages``) carries its own peak RSS (issue 39 item 4):
a stage that holds a few hundred MiB shows it, a later stage that holds nothing does not inherit it
(the kernel's high-water mark is reset per stage); where the reset is impossible the number is the
process's cumulative peak and the entry says so; a child process's peak is recorded beside it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness.core import memory

BIG_MIB = 400


def _fresh(script: str) -> list[float]:
    """Run ``script`` in a fresh interpreter and read the numbers on its last line. The high-water mark is the
    process's: in the test process, what earlier tests left resident (5 GiB late in a full run) and
    their freed memory being reused can hide a 400 MiB stage, so each measurement starts clean."""
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=root)
    return [float(x) for x in out.stdout.strip().splitlines()[-1].split()]


# written, so resident (a zero-filled bytearray may not be)
HOLD = "def hold(mib):\n    block = b'\\x01' * (mib * 2**20)\n    return {'held': len(block) // 2**20}\n"


@pytest.mark.skipif(not memory.reset_high_water_mark(), reason="needs Linux's /proc/self/clear_refs")
def test_a_stage_holding_memory_peaks_above_a_later_stage_that_holds_none(tmp_path):
    script = HOLD + (
        "import os\n"
        f"os.environ['HARNESS_CACHE_DIR'] = {str(tmp_path / 'cache')!r}\n"
        "from harness.pipelines.context import RunContext, StageLog\n"
        "from harness.records.tracker import Tracker\n"
        "from harness.spec.method import load_method\n"
        "ctx = RunContext(load_method('nopretrain', 'tiny'), Tracker(experiment='t', run_name='t', tags={}, enabled=False), StageLog())\n"
        f"ctx.cached_stage('pretrain', None, {{'big': 1}}, {{}}, lambda work: hold({BIG_MIB}))\n"
        "ctx.cached_stage('tokenizer', None, {'small': 1}, {}, lambda work: {'held': 0})\n"
        "big, small = ctx.stages.entries\n"
        "assert 'peak_rss_basis' not in big and 'peak_rss_basis' not in small  # each its own, not cumulative\n"
        "print(big['peak_rss_mib'], small['peak_rss_mib'])\n"
    )
    big, small = _fresh(script)  # the stages' progress lines come before
    # The big stage held 400 MiB above whatever the process held before; the small one, run after it,
    # must not show that peak again. Margins wide: the baseline RSS (imports) is in both.
    assert big >= small + 0.75 * BIG_MIB, (big, small)


def test_without_the_reset_the_peak_is_the_process_peak_and_says_so(tmp_path):
    not_writable = tmp_path / "clear_refs"
    not_writable.mkdir()  # writing to a folder fails: no reset possible
    with memory.measure_peak(clear_refs=not_writable) as rss:
        pass
    fields = rss.fields()
    assert fields["peak_rss_basis"].startswith("process peak so far")
    assert fields["peak_rss_mib"] > 0 and "process so far" in rss.describe()


def test_a_child_process_peak_is_recorded_beside_the_stage(tmp_path):
    """In a fresh interpreter (this one's earlier children would hide a smaller child's peak)."""
    script = (
        "import subprocess, sys\n"
        "from harness.core import memory\n"
        "with memory.measure_peak() as rss:\n"
        f"    subprocess.run([sys.executable, '-c', 'b = bytes([1]) * ({BIG_MIB} * 2**20)'], check=True)\n"
        "print(rss.fields().get('children_peak_rss_mib', 0))\n"
    )
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=root)
    assert float(out.stdout.strip()) >= 0.75 * BIG_MIB, out


@pytest.mark.skipif(not memory.reset_high_water_mark(), reason="needs Linux's /proc/self/clear_refs")
def test_a_stage_built_inside_another_keeps_the_outer_peak():
    """The inner stage's reset must not hide what the outer stage held before it."""
    outer, inner = _fresh(
        HOLD
        + (
            "from harness.core import memory\n"
            "with memory.measure_peak() as outer:\n"
            f"    block = hold({BIG_MIB})\n"
            "    del block\n"
            "    with memory.measure_peak() as inner:\n"
            "        pass\n"
            "print(outer.peak_mib, inner.peak_mib)\n"
        )
    )
    assert outer >= inner + 0.75 * BIG_MIB, (outer, inner)


FRAGMENT = """
from pathlib import Path
from harness.core.memory import release_memory

def rss():
    return next(int(l.split()[1]) / 1024 for l in Path("/proc/self/status").read_text().splitlines() if l.startswith("VmRSS:"))

# 160 MiB of 64 KiB blocks (under glibc's mmap threshold: they live in the heap), every tenth kept, so
# freeing the rest leaves holes glibc keeps until trimmed, as a finished stage's training leaves them
blocks = [b"\\x01" * (64 * 1024) for _ in range(2560)]
kept = blocks[::10]
del blocks
freed = rss()
trimmed = release_memory()
print(int(trimmed), freed - rss())
"""


@pytest.mark.skipif(memory._libc() is None, reason="malloc_trim is glibc's")
def test_freed_heap_goes_back_to_the_os_between_stages():
    trimmed, handed_back = _fresh(FRAGMENT)
    assert trimmed == 1
    assert handed_back > 80, f"release_memory handed {handed_back:.0f} MiB of the 144 MiB freed back to the OS"
