"""`.ci/run`: the README's test command as is, and at the end, after the parts' times (also when a part
fails), where this run's screenshots are and how many (issue 53: the browser tests' pictures are the
CI job's artifacts). Run in a scratch copy whose setup.sh only pretends."""

from __future__ import annotations

import os
import shutil
import subprocess

from harness.core.paths import PROJECT_ROOT

# A setup.sh whose tests write one screenshot and whose gate fails.
FAKE_SETUP = """case "$1" in
  test) mkdir -p "${HARNESS_SCREENSHOTS:-test-artifacts}" && printf png > "${HARNESS_SCREENSHOTS:-test-artifacts}/tab.png" ;;
  harness) exit 3 ;;
esac
"""


def _ci(tmp_path, env: dict[str, str]) -> subprocess.CompletedProcess:
    (tmp_path / ".ci").mkdir(exist_ok=True)
    shutil.copy(PROJECT_ROOT / ".ci" / "run", tmp_path / ".ci" / "run")
    (tmp_path / "setup.sh").write_text(FAKE_SETUP)
    return subprocess.run(
        ["bash", str(tmp_path / ".ci" / "run")], capture_output=True, text=True, timeout=60, env={**os.environ, **env}
    )


def test_ci_runs_the_readme_test_command_and_says_where_its_screenshots_are(tmp_path):
    assert "\npart tests bash setup.sh test\n" in (PROJECT_ROOT / ".ci" / "run").read_text()
    stale = tmp_path / "test-artifacts" / "older-run.png"
    stale.parent.mkdir()
    stale.write_text("png")
    os.utime(stale, (0, 0))  # an earlier run's picture: not counted
    done = _ci(tmp_path, {"HARNESS_SCREENSHOTS": ""})  # unset: the clone's test-artifacts/
    assert done.returncode == 3, done.stderr  # the gate failed: the report is still printed
    times, shots = done.stdout.splitlines()[-2:]
    assert times.startswith("ci: set-up ") and "tests " in times and "gate" not in times
    assert shots == f"ci: screenshots: 1 in {tmp_path / 'test-artifacts'}"

    elsewhere = tmp_path / "artifacts"
    done = _ci(tmp_path, {"HARNESS_SCREENSHOTS": str(elsewhere)})
    assert done.stdout.splitlines()[-1] == f"ci: screenshots: 1 in {elsewhere}"


def test_every_rerun_runs_once_in_ci():
    """CI re-runs each of RERUNS from scratch exactly once, inside the suite: BM25 as `check --rerun` in
    tests/test_run_bm25.py, cotmae_qc tiny in tests/test_fresh_copy_tiny_run.py (the README's run on a fresh
    copy, gated by gate_fresh); .ci/run re-runs nothing of its own."""
    from harness.gate.rerun import RERUNS, parse_reruns
    from tests.test_fresh_copy_tiny_run import README_TINY
    from tests.test_run_bm25 import IN_THE_SUITE

    assert "--rerun" not in (PROJECT_ROOT / ".ci" / "run").read_text()
    in_suite = parse_reruns(",".join(IN_THE_SUITE))
    fresh_copy = [r for r in RERUNS if ["--method", r.method, "--profile", r.profile] == README_TINY[1:]]
    everywhere = [*in_suite, *fresh_copy]
    assert len(fresh_copy) == 1 and len(set(everywhere)) == len(everywhere) and set(everywhere) == set(RERUNS)
