"""Issue 41, done-when 1: the README's tiny command, run as a new user would on a fresh copy of the
checkout (no cache/, no runs/local/), never turns the gate red, and its record shows as "your runs"
in `check`, the static report and the leaderboard's data.

The copy is the working tree's tracked and untracked-but-not-ignored files, so work not yet
committed is tested too. The run builds every stage from scratch (3 to 5 minutes on 2 CPU cores), so it is also CI's fresh re-run of
cotmae_qc tiny: its record is gated against the committed reference exactly as `check --rerun` gates one
(harness.gate.rerun.gate_fresh), and .ci/run's re-run part leaves cotmae_qc tiny to this test
(tests/test_ci_run.py pins that every re-run of RERUNS happens once in CI)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.core.paths import PROJECT_ROOT
from harness.gate.rerun import gate_fresh
from harness.gate.run import YOUR_RUNS

# alone: gated against the committed reference, at the machine's default torch threads
pytestmark = [pytest.mark.slow, pytest.mark.alone]

README_TINY = ["run", "--method", "cotmae_qc", "--profile", "tiny"]  # `bash setup.sh run ...` after set-up


def _fresh_copy(dest: Path) -> None:
    """What a clone of this working tree holds: git's tracked files plus new ones it does not ignore."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=PROJECT_ROOT,
        check=True,
        capture_output=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = PROJECT_ROOT / name
        if source.is_file():  # a tracked file deleted in the working tree is not in the copy either
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)


def _harness(copy: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """``python -m harness ARGS`` in the copy as a user runs it there: its own runs/ and cache/ (the
    tests' HARNESS_* folders dropped), so the copy's package and the copy's folders are the ones used."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HARNESS_") and k != "MLFLOW_TRACKING_URI"}
    return subprocess.run([sys.executable, *args], cwd=copy, env=env, capture_output=True, text=True, timeout=timeout)


def test_the_readmes_tiny_run_on_a_fresh_copy_keeps_the_gate_passed(tmp_path: Path) -> None:
    readme = (PROJECT_ROOT / "README.md").read_text(encoding="utf-8")
    assert "bash setup.sh run --method cotmae_qc" in readme and "`--profile tiny`" in readme, (
        "the README no longer gives the command this test runs"
    )
    copy = tmp_path / "clone"
    _fresh_copy(copy)
    assert not (copy / "cache").exists() and not (copy / "runs" / "local").exists()
    committed = sorted(p.name for p in (copy / "runs" / "records").iterdir())

    started = time.monotonic()
    ran = _harness(copy, "-m", "harness", *README_TINY, timeout=1200)
    seconds = time.monotonic() - started
    assert ran.returncode == 0, f"run failed after {seconds:.0f}s:\n{ran.stdout[-3000:]}\n{ran.stderr[-3000:]}"
    mine = sorted((copy / "runs" / "local").glob("cotmae_qc__tiny__*.json"))
    assert len(mine) == 1, ran.stdout[-2000:]
    run_id = mine[0].stem
    assert sorted(p.name for p in (copy / "runs" / "records").iterdir()) == committed  # the gated folder untouched
    fresh = gate_fresh(copy / "runs" / "local", copy / "runs" / "records")  # what `check --rerun` would say
    graded = [r for r in fresh.rows if r.run_id == run_id]
    assert fresh.passed and graded, [(r.status, r.benchmark, r.measure, r.note) for r in fresh.rows]

    checked = _harness(copy, "-m", "harness", "check")
    gate_part, _, yours_part = checked.stdout.partition(f"\n{YOUR_RUNS} (")
    assert checked.returncode == 0 and re.search(r"\bgate PASSED\b", gate_part), checked.stdout[-3000:]
    assert run_id not in gate_part and run_id in yours_part

    site = tmp_path / "site"
    reported = _harness(copy, "-m", "harness", "report", "--html", str(site))
    assert reported.returncode == 0, reported.stderr[-2000:]
    assert "gate PASSED" in reported.stdout and f"1 of {YOUR_RUNS}" in reported.stdout
    # the gate's page: its rows, then your runs (ids carry <wbr> break points)
    page = (site / "gate.html").read_text(encoding="utf-8").replace("<wbr>", "")
    assert run_id not in page.split('id="yours"', 1)[0] and run_id in page.split('id="yours"', 1)[1]

    # the leaderboard's data function, imported from the copy (its package, its runs/)
    board = _harness(
        copy,
        "-c",
        "import json; from leaderboard_app import data; d = data.load(); "
        "print(json.dumps({'passed': d.gate.passed, "
        "'yours': [r.run_id for r in d.your_records], "
        "'gated': [r.run_id for r in d.records]}))",
    )
    assert board.returncode == 0, board.stderr[-2000:]
    shown = json.loads(board.stdout.strip().splitlines()[-1])
    assert shown["passed"] and shown["yours"] == [run_id] and run_id not in shown["gated"]
    print(f"README tiny run on a fresh copy: {seconds:.0f}s")
