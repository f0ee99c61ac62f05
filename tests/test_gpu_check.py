"""bench/gpu_check.py, the check a lent GPU machine runs: its ``--cpu-smoke`` runs every part's code on this CPU
and writes its files under ``--out``; a failing check makes the exit non-zero; a missing module skips a part;
a timeout kills the part's whole process tree; without CUDA (and no smoke test) it stops at once."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.core.paths import PROJECT_ROOT

SCRIPT = PROJECT_ROOT / "bench" / "gpu_check.py"
LOGS = {"search.log", "encode.log", "finetune.log", "rehearsal.log"}


def _load():
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=900)


@pytest.mark.slow
@pytest.mark.alone  # its rehearsal and its checks run ranks of their own
def test_cpu_smoke_runs_every_check_and_writes_its_results_and_logs_under_out(tmp_path):
    done = _run("--cpu-smoke", "--out", str(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert {p.name for p in tmp_path.iterdir()} == LOGS | {"summary.json"}
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert [(c["name"], c["status"]) for c in summary["checks"]] == [
        ("search", "pass"),
        ("encode", "pass"),
        ("finetune", "pass"),
        ("rehearsal", "pass"),
    ]
    search = summary["checks"][0]["figures"]
    assert search["ranks"] == 2 and search["backend"] == "gloo" and search["top10_overlap"] >= 0.99
    assert "threshold >= 0.99" in summary["checks"][0]["line"] and "4 passed, 0 failed" in done.stdout


def test_a_failing_check_makes_the_exit_non_zero_and_says_which(tmp_path):
    done = _run("--cpu-smoke", "--only", "search", "--min-overlap", "1.01", "--out", str(tmp_path))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "FAIL search: top-10 overlap" in done.stdout and "(threshold >= 1.01)" in done.stdout
    assert json.loads((tmp_path / "summary.json").read_text())["failed"] == ["search"]


def test_a_missing_module_skips_its_check_with_one_line(monkeypatch, tmp_path):
    check = _load()
    monkeypatch.setitem(sys.modules, "transformers", None)  # as on a machine without it
    args = check.parse(["--part", "encode", "--cpu-smoke", "--out", str(tmp_path)])
    result = check.run_part(args)
    assert result.status == "skip" and "python module 'transformers' is not installed" in result.line
    assert check._missing_module("x\nModuleNotFoundError: No module named 'mlflow.tracking'\n") == "mlflow"


def test_a_timeout_kills_the_check_and_every_process_it_started(tmp_path):
    check = _load()
    pids = tmp_path / "pids"
    # a child that starts a grandchild in a session of its own, as a launcher's workers are
    script = f"import subprocess,time; p=subprocess.Popen(['sleep','300'],start_new_session=True); open('{pids}','w').write(str(p.pid)); time.sleep(300)"
    proc = subprocess.Popen([sys.executable, "-c", script], start_new_session=True)
    for _ in range(200):
        if pids.exists() and pids.read_text():
            break
        time.sleep(0.05)
    grandchild = int(pids.read_text())
    check.kill_tree(proc)
    assert proc.returncode == -9
    for _ in range(100):
        try:
            os.kill(grandchild, 0)
        except ProcessLookupError:
            break
        if Path(f"/proc/{grandchild}/stat").read_text().split(")")[1].split()[0] == "Z":
            break  # killed, waiting for its reaper
        time.sleep(0.05)
    else:
        pytest.fail("the grandchild outlived the timeout")


def test_a_check_past_its_limit_fails_with_one_line(tmp_path):
    check = _load()
    args = check.parse(["--cpu-smoke", "--out", str(tmp_path)])
    args.out = tmp_path
    result = check.run_child(args, "search", timeout=1)
    assert result.status == "fail" and result.line == "FAIL search: timed out after 1 s (process group killed)"


def test_without_cuda_it_stops_at_once_and_writes_nothing(capsys, tmp_path, monkeypatch):
    check = _load()
    monkeypatch.setattr(check, "cuda_problem", lambda: "no GPU here")
    assert check.main(["--out", str(tmp_path / "out")]) == check.NO_CUDA == 3
    assert "gpu_check: not run: no GPU here" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
