"""The GPU check, ready for whenever a GPU machine is here (under 10 minutes on one GPU): the rehearsal of a dense
method (CoT-MAE) and of LexMAE on CUDA with the project's own torch, written to
bench/results/gpu_check_<card>_<date>.json with the card, the driver, torch and its CUDA.

    bash setup.sh --cuda            # the GPU set (requirements-cuda.txt): nothing installed by hand
    .venv/bin/python bench/gpu_check.py [--methods cotmae lexmae] [--json PATH]

Without CUDA it stops at once (exit 3) and says why, before it runs anything. Each rehearsal runs through
bench/rehearsal_device.py (its own ``harness run --profile rehearsal`` from an empty cache, a step per stage).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NO_CUDA = 3  # the exit status without a usable GPU


def cuda_problem() -> str | None:
    """Why this machine cannot run the check (None when it can)."""
    try:
        import torch
    except ImportError:
        return "torch is not installed: run `bash setup.sh --cuda` first"
    if not torch.version.cuda:
        return f"torch {torch.__version__} is a CPU build: run `bash setup.sh --cuda` (requirements-cuda.txt) on the GPU node"
    if not torch.cuda.is_available():
        return (
            f"torch {torch.__version__} (CUDA {torch.version.cuda}) sees no GPU: no NVIDIA driver or device here "
            "(`nvidia-smi` must list one; CUDA 13.0 needs a driver of the R580 branch or newer)"
        )
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


def device_facts() -> dict[str, object]:
    import torch

    props = torch.cuda.get_device_properties(0)
    return {
        "card": torch.cuda.get_device_name(0),
        "devices": torch.cuda.device_count(),
        "compute_capability": f"{props.major}.{props.minor}",
        "memory_gib": round(props.total_memory / 2**30, 1),
        "driver": driver_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--methods", nargs="+", default=["cotmae", "lexmae"], help="rehearsals to run (default: a dense one and LexMAE)"
    )
    ap.add_argument(
        "--json", type=Path, help="where to write the results (default: bench/results/gpu_check_<card>_<date>.json)"
    )
    ap.add_argument("--timeout", type=int, default=540, help="seconds for all rehearsals together (default 540)")
    args = ap.parse_args(argv)

    problem = cuda_problem()
    if problem:
        print(f"gpu_check: not run: {problem}", file=sys.stderr)
        return NO_CUDA
    facts = device_facts()
    print(f"gpu_check: {facts['card']}, driver {facts['driver']}, torch {facts['torch']} (CUDA {facts['cuda']})")
    stamp = time.strftime("%Y-%m-%d", time.gmtime())
    card = str(facts["card"]).lower().replace(" ", "-")
    out = args.json or ROOT / "bench" / "results" / f"gpu_check_{card}_{stamp}.json"
    rows = out.with_suffix(".rehearsal.json")
    started = time.time()
    cmd = [sys.executable, str(ROOT / "bench" / "rehearsal_device.py"), "--methods", *args.methods, "--json", str(rows)]
    try:
        rc = subprocess.call(cmd, cwd=ROOT, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        rc = 124
    rehearsal = json.loads(rows.read_text()) if rows.is_file() else None
    result = {
        **facts,
        "methods": args.methods,
        "exit_status": rc,
        "seconds": round(time.time() - started, 1),
        "rehearsal": rehearsal,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))
    rows.unlink(missing_ok=True)
    print(f"gpu_check: exit {rc} in {result['seconds']} s; results in {out}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
