"""The multi-rank part of the GPU check (issue 51 item 8): two ranks on one GPU, sharing it over gloo
(``HARNESS_SHARE_GPU=1``: NCCL refuses a device twice), through the same code a multi-GPU run takes.

Each check is one command with its own time limit, run one after the other on CUDA:

- ``cotmae-2ranks``: CoT-MAE's rehearsal (the paper's shapes, fp16 with the loss scaler) with
  ``--nproc-per-node 2``: DDP, the scaler's inf checks across ranks, sharded encoding;
- ``cpdae-2ranks``: CPDAE's rehearsal with 2 ranks: the contrastive pool gathered across ranks;
- ``sharded-qgen``: tests/test_launch.py's 2-process tiny CoT-MAE + QC run (qgen and encoding sharded,
  the merged queries equal one process's);
- ``sigusr1``: tests/test_launch.py's SIGUSR1 to the launcher, both workers checkpoint, `run` again resumes
  to the same encoder (bit for bit: on CUDA this also tests that the resumed run is deterministic).

    .venv/bin/python bench/gpu_multirank.py [--only NAME ...] [--json PATH] [--timeout S]

Writes ``{"checks": [{"name", "command", "exit_status", "seconds", "tail"}], ...}`` (default:
bench/results/gpu_multirank_<card>_<date>.json). Without CUDA it says so and exits 3 before running anything.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from gpu_check import NO_CUDA, cuda_problem, device_facts  # noqa: E402 - after the sys.path line above, which makes bench/ importable

HARNESS = [sys.executable, "-m", "harness"]
PYTEST = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "slow"]
CHECKS: dict[str, list[str]] = {
    "cotmae-2ranks": [*HARNESS, "run", "--method", "cotmae", "--profile", "rehearsal", "--nproc-per-node", "2"],
    "cpdae-2ranks": [*HARNESS, "run", "--method", "cpdae", "--profile", "rehearsal", "--nproc-per-node", "2"],
    "sharded-qgen": [*PYTEST, "tests/test_launch.py", "-k", "two_processes_on_one_node"],
    "sigusr1": [*PYTEST, "tests/test_launch.py", "-k", "sigusr1_to_the_launcher"],
}


def run_check(name: str, command: list[str], timeout: int) -> dict[str, object]:
    """One check in a fresh cache and runs folder; its exit status, seconds and the last lines it printed."""
    started = time.time()
    with tempfile.TemporaryDirectory(prefix=f"gpu-{name}-") as tmp:
        env = {**os.environ, "HARNESS_SHARE_GPU": "1", "HARNESS_CACHE_DIR": f"{tmp}/cache"}
        env.update(HARNESS_RUNS_DIR=f"{tmp}/runs", MLFLOW_TRACKING_URI=f"sqlite:///{tmp}/mlflow.db")
        try:
            done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
            status, out = done.returncode, done.stdout + done.stderr
        except subprocess.TimeoutExpired as exc:
            status, out = 124, f"{exc.stdout or ''}{exc.stderr or ''}"
            out = out.decode(errors="replace") if isinstance(out, bytes) else out
    seconds = round(time.time() - started, 1)
    print(f"gpu_multirank: {name}: exit {status} in {seconds} s", flush=True)
    return {
        "name": name,
        "command": " ".join(command[1:]),
        "exit_status": status,
        "seconds": seconds,
        "tail": out[-3000:],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", nargs="+", choices=sorted(CHECKS), help="run these checks only (default: all, in order)")
    ap.add_argument("--json", type=Path, help="where to write the results")
    ap.add_argument("--timeout", type=int, default=150, help="seconds per check (default 150)")
    args = ap.parse_args(argv)
    problem = cuda_problem()
    if problem:
        print(f"gpu_multirank: not run: {problem}", file=sys.stderr)
        return NO_CUDA
    facts = device_facts()
    card = str(facts["card"]).lower().replace(" ", "-")
    out = (
        args.json
        or ROOT / "bench" / "results" / f"gpu_multirank_{card}_{time.strftime('%Y-%m-%d', time.gmtime())}.json"
    )
    checks = [run_check(name, CHECKS[name], args.timeout) for name in (args.only or CHECKS)]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({**facts, "share_gpu": True, "checks": checks}, indent=1))
    failed = [c["name"] for c in checks if c["exit_status"] != 0]
    print(
        f"gpu_multirank: {len(checks) - len(failed)} of {len(checks)} passed{'; failed: ' + ', '.join(failed) if failed else ''}; {out}"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
