"""The GPU check for a lent GPU machine (one command, under 8 minutes on one GPU, the machine's own Python and
torch; nothing downloaded, no Java): every result and log goes under ``--out`` (default a new temporary folder),
and the exit status is 1 when any check fails, 0 when all pass or were skipped, 3 without a usable GPU.

    python3 bench/gpu_check.py --out "$OUT"          # on the GPU machine
    .venv/bin/python bench/gpu_check.py --cpu-smoke  # every code path on this CPU at tiny sizes (the test suite's)

Checks, each in its own process session with its own time limit (on a timeout its whole process group and
every descendant are killed, and the check fails):

- ``search`` (bench/gpu_check_search.py): the sharded exact GPU search (fp16 storage, 4 shards of a 1,048,576 x
  768 synthetic corpus) merged across ranks (NCCL with two or more GPUs, else two ranks over gloo) against the
  CPU's exact fp32 flat search on 256 queries: top-10 overlap >= ``--min-overlap``;
- ``encode`` (bench/gpu_check_models.py): the encoder end to end against forward-only at the same shapes,
  rate >= ``--min-rate`` of forward-only on CUDA, and its fp16 vectors against fp32 ones: cosine >= ``--min-vector-cosine``;
- ``finetune``: one fp16 (loss-scaled) contrastive step against fp32: gradient cosine >= ``--min-grad-cosine``,
  relative loss gap <= ``--max-loss-gap``;
- ``rehearsal``: CoT-MAE + QC's rehearsal on CUDA through bench/rehearsal_device.py (a tiny ``--dry-run`` in the
  smoke test). A check whose Python dependency is missing on the machine (transformers, mlflow, ...) is
  skipped with one line naming the module, never a crash.

Files under ``--out``: ``summary.json`` (card, driver, torch, CUDA, thresholds, every check's figures),
``<check>.log`` for each check, ``rehearsal.json`` when the rehearsal ran: at most 7 files, flat.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
for _path in (str(ROOT), str(BENCH)):  # this checkout's harness and the check's parts, whatever is installed
    if _path not in sys.path:
        sys.path.insert(0, _path)

from gpu_check_result import CheckResult, skipped  # noqa: E402 - after the sys.path lines above

NO_CUDA = 3  # the exit status without a usable GPU (and no --cpu-smoke)
CHECKS = ("search", "encode", "finetune", "rehearsal")
TIMEOUTS = {"search": 120, "encode": 90, "finetune": 60, "rehearsal": 180}  # seconds on CUDA: 7.5 min at most
SMOKE_TIMEOUTS = {"search": 180, "encode": 180, "finetune": 180, "rehearsal": 240}  # a loaded 2-core CPU
REHEARSAL_METHOD = "cotmae_qc"


def cuda_problem() -> str | None:
    """Why this machine cannot run the CUDA checks (None when it can)."""
    try:
        import torch
    except ImportError:
        return "torch is not installed (the GPU machine's own python3 has it; here: `bash setup.sh --cuda`)"
    if not torch.version.cuda:
        return f"torch {torch.__version__} is a CPU build: run `bash setup.sh --cuda` (requirements-cuda.txt) on the GPU node"
    if not torch.cuda.is_available():
        return f"torch {torch.__version__} (CUDA {torch.version.cuda}) sees no GPU: `nvidia-smi` must list one"
    return None


def driver_version() -> str | None:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None


def device_facts(cuda: bool) -> dict[str, object]:
    import torch

    facts: dict[str, object] = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "numpy": __import__("numpy").__version__,
    }
    if not cuda:
        return {**facts, "card": f"CPU x {os.cpu_count()} (smoke test)", "devices": 0}
    props = torch.cuda.get_device_properties(0)
    return {
        **facts,
        "card": torch.cuda.get_device_name(0),
        "devices": torch.cuda.device_count(),
        "compute_capability": f"{props.major}.{props.minor}",
        "memory_gib": round(props.total_memory / 2**30, 1),
        "driver": driver_version(),
        "cudnn": torch.backends.cudnn.version(),
    }


def _descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (read from /proc: a launcher's workers may sit in process groups of their own)."""
    parents: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def kill_tree(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the process group ``proc`` leads (started with start_new_session) and every descendant."""
    below = _descendants(proc.pid)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    for pid in below:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait()


def _missing_module(log: str) -> str | None:
    found = re.findall(r"ModuleNotFoundError: No module named '([^']+)'", log)
    return found[-1].split(".")[0] if found else None


def rehearsal_check(out: Path, cuda: bool, smoke: bool) -> CheckResult:
    """CoT-MAE + QC's rehearsal on CUDA (its own harness processes, scratch in a temporary folder); the smoke
    test plans a tiny run instead. A module missing on this machine skips the check."""
    with tempfile.TemporaryDirectory(prefix="gpu-check-rehearsal-") as tmp:
        env = {**os.environ, "HARNESS_CACHE_DIR": f"{tmp}/cache", "HARNESS_RUNS_DIR": f"{tmp}/runs"}
        env.update(MLFLOW_TRACKING_URI=f"sqlite:///{tmp}/mlflow.db", PYTHONUNBUFFERED="1")
        if smoke or not cuda:
            cmd = [
                sys.executable,
                "-m",
                "harness",
                "run",
                "--method",
                REHEARSAL_METHOD,
                "--profile",
                "tiny",
                "--dry-run",
            ]
        else:
            cmd = [sys.executable, str(BENCH / "rehearsal_device.py"), "--methods", REHEARSAL_METHOD]
            cmd += ["--cache", f"{tmp}/stages", "--json", str(out / "rehearsal.json")]
        started = time.perf_counter()
        done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    log = done.stdout + done.stderr
    print(log, flush=True)
    missing = _missing_module(log)
    if done.returncode != 0 and missing:
        return skipped("rehearsal", missing)
    what = f"{REHEARSAL_METHOD} {'tiny --dry-run' if smoke or not cuda else 'rehearsal on CUDA'}"
    status = "pass" if done.returncode == 0 else "fail"
    tail = log.strip().splitlines()[-1] if log.strip() else ""
    line = f"{status.upper()} rehearsal: {what}: exit {done.returncode} in {seconds:.0f} s; {tail[:200]}"
    figures = {"command": " ".join(cmd[1:]), "exit_status": done.returncode, "seconds": round(seconds, 1)}
    return CheckResult("rehearsal", status, line, figures)


def run_part(args: argparse.Namespace) -> CheckResult:
    """One check in this process (the driver starts one process per check)."""
    cuda = not args.cpu_smoke
    try:
        if args.part == "search":
            from gpu_check_search import search_check

            return search_check(cuda, args.min_overlap, args.cpu_smoke)
        if args.part == "encode":
            from gpu_check_models import encode_check

            return encode_check(cuda, args.cpu_smoke, args.min_rate, args.min_vector_cosine)
        if args.part == "finetune":
            from gpu_check_models import finetune_check

            return finetune_check(cuda, args.cpu_smoke, args.min_grad_cosine, args.max_loss_gap)
    except ModuleNotFoundError as exc:
        return skipped(args.part, (exc.name or "?").split(".")[0])
    return rehearsal_check(args.out, cuda, args.cpu_smoke)


def _child_args(args: argparse.Namespace, name: str) -> list[str]:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--part", name, "--out", str(args.out)]
    cmd += ["--min-overlap", str(args.min_overlap), "--min-rate", str(args.min_rate)]
    cmd += ["--min-vector-cosine", str(args.min_vector_cosine), "--min-grad-cosine", str(args.min_grad_cosine)]
    cmd += ["--max-loss-gap", str(args.max_loss_gap)]
    return cmd + (["--cpu-smoke"] if args.cpu_smoke else [])


def run_child(args: argparse.Namespace, name: str, timeout: int) -> CheckResult:
    """``name`` in its own process session, its output in ``<out>/<name>.log``; killed with all it started on a timeout."""
    result_file = args.out / f"{name}.result.json"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with (args.out / f"{name}.log").open("w") as log:
        proc = subprocess.Popen(
            _child_args(args, name), cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_tree(proc)
            return CheckResult(name, "fail", f"FAIL {name}: timed out after {timeout} s (process group killed)", {})
    if not result_file.is_file():
        lines = (args.out / f"{name}.log").read_text(errors="replace").strip().splitlines()
        last = lines[-1] if lines else "no output"
        return CheckResult(name, "fail", f"FAIL {name}: exit {rc} without a result; last line: {last[:200]}", {})
    result = CheckResult.read(result_file)
    result_file.unlink()  # folded into summary.json: few files come back from the machine
    return result


def parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, help="folder for every result and log (default: a new temporary folder)")
    ap.add_argument("--cpu-smoke", action="store_true", help="every check's code on this CPU at tiny sizes")
    ap.add_argument("--only", nargs="+", choices=CHECKS, help="run these checks only (default: all, in order)")
    ap.add_argument("--min-overlap", type=float, default=0.99, help="search: top-10 overlap with the CPU (0.99)")
    ap.add_argument("--min-rate", type=float, default=0.5, help="encode: end-to-end / forward-only rate (0.5)")
    ap.add_argument("--min-vector-cosine", type=float, default=0.99, help="encode: fp16 vs fp32 vectors (0.99)")
    ap.add_argument("--min-grad-cosine", type=float, default=0.99, help="finetune: half vs fp32 gradients (0.99)")
    ap.add_argument("--max-loss-gap", type=float, default=0.02, help="finetune: relative loss difference (0.02)")
    ap.add_argument("--part", choices=CHECKS, help=argparse.SUPPRESS)  # the driver's per-check child
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.part:
        args.out.mkdir(parents=True, exist_ok=True)
        result = run_part(args)
        print(result.line, flush=True)
        result.write(args.out / f"{args.part}.result.json")
        return 0
    problem = cuda_problem()
    if problem and not args.cpu_smoke:
        print(f"gpu_check: not run: {problem} (--cpu-smoke runs the code paths on this CPU)", file=sys.stderr)
        return NO_CUDA
    args.out = (args.out or Path(tempfile.mkdtemp(prefix="gpu-check-"))).resolve()
    args.out.mkdir(parents=True, exist_ok=True)
    facts = device_facts(cuda=not args.cpu_smoke)
    print(f"gpu_check: {facts['card']}, driver {facts.get('driver')}, torch {facts['torch']} (CUDA {facts['cuda']})")
    limits = SMOKE_TIMEOUTS if args.cpu_smoke else TIMEOUTS
    started = time.time()
    results = []
    for name in args.only or CHECKS:
        result = run_child(args, name, limits[name])
        print(f"gpu_check: {result.line}", flush=True)
        results.append(result)
    failed = [r.name for r in results if r.status == "fail"]
    summary = {
        **facts,
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "cpu_smoke": args.cpu_smoke,
        "seconds": round(time.time() - started, 1),
        "timeouts_s": {n: limits[n] for n in args.only or CHECKS},
        "checks": [vars(r) for r in results],
        "failed": failed,
    }
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1))
    counts = {s: sum(r.status == s for r in results) for s in ("pass", "fail", "skip")}
    print(
        f"gpu_check: {counts['pass']} passed, {counts['fail']} failed, {counts['skip']} skipped in "
        f"{summary['seconds']} s; results in {args.out}"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
