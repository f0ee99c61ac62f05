"""Two training processes on one machine: does each slow down about 2x (fair sharing) or 15-30x
(OpenMP threads spinning while they wait for cores the other process holds)?

Times the tiny profile's CoT-MAE pre-training step (2 layers x 128, vocabulary 8,000, batch 32 x 64
tokens, the tiny spec's objective parameters, fp32, torch's default thread count) in a worker
process: once alone, then two workers side by side, under OpenMP's default wait policy and under
``OMP_WAIT_POLICY=PASSIVE`` (threads sleep instead of spinning when they wait) and with a short spin
(``GOMP_SPINCOUNT``, libgomp's: spin that many times, then sleep). The thread count is
the same in every run, so the numbers each worker computes are the same too (a different thread
count would change the summation order: docs/ci-gate.md, "What is bit-identical").

    python bench/bench_threads.py [--steps 30] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TINY = {
    "vocab_size": 8000,
    "hidden_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 512,
    "max_position_embeddings": 512,
}


def worker(steps: int) -> dict[str, float]:
    """Median and mean seconds of one tiny CoT-MAE pre-training step (after 3 warm-up steps)."""
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "bench"))
    sys.path.insert(0, str(ROOT / "tests"))  # objective_fixtures: the toy tokenizer
    import torch
    from objective_fixtures import toy_tokenizer
    from paper_shape_smoke import _examples, _step

    from harness.pretrain.models import bert_config_from_dict
    from harness.pretrain.objectives import build_objective
    from harness.spec.method import load_method

    spec = load_method("cotmae", "tiny")
    torch.manual_seed(42)
    model = build_objective(
        spec.get("pretrain.objective"), bert_config_from_dict(TINY), **dict(spec.get("pretrain.objective_params") or {})
    )
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3)
    dev = torch.device("cpu")
    with tempfile.TemporaryDirectory() as tmp:
        batch = model.collate(_examples(32, 64, 0), toy_tokenizer(tmp), 64, torch.Generator().manual_seed(0))
    times = []
    for i in range(steps + 3):
        t0 = time.perf_counter()
        _step(model, model, optimizer, None, batch, "fp32", dev)
        if i >= 3:
            times.append(time.perf_counter() - t0)
    return {"median": statistics.median(times), "mean": statistics.fmean(times), "threads": torch.get_num_threads()}


def _launch(n: int, steps: int, env: dict[str, str]) -> list[dict[str, float]]:
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, "--worker", "--steps", str(steps)], env=env, stdout=subprocess.PIPE, text=True
        )
        for _ in range(n)
    ]
    out = []
    for p in procs:
        stdout, _ = p.communicate()
        if p.returncode != 0:
            raise SystemExit(f"worker failed (exit {p.returncode})")
        out.append(json.loads(stdout.strip().splitlines()[-1]))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=30, help="timed steps per worker (default 30)")
    ap.add_argument("--json", type=Path, help="write the rows here")
    ap.add_argument(
        "--spincount",
        type=int,
        default=10000,
        help="GOMP_SPINCOUNT of the third row: how long an idle thread spins before it sleeps "
        "(libgomp's default is 300000 spins)",
    )
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args.steps)))
        return 0
    rows = []
    base = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    policies = {
        "default": {},
        "PASSIVE": {"OMP_WAIT_POLICY": "PASSIVE"},
        f"spin {args.spincount}": {"GOMP_SPINCOUNT": str(args.spincount)},
    }
    for policy, extra in policies.items():
        env = {**base, **extra}
        solo = _launch(1, args.steps, env)[0]
        pair = _launch(2, args.steps, env)
        worst = max(p["median"] for p in pair)
        rows.append(
            {
                "policy": policy,
                "threads": solo["threads"],
                "solo": solo["median"],
                "pair": [p["median"] for p in pair],
                "ratio": worst / solo["median"],
            }
        )
    print(
        f"tiny CoT-MAE pre-training step (batch 32 x 64 tokens, fp32); {os.cpu_count()} CPUs; "
        f"median of {args.steps} steps per worker"
    )
    print(f"{'OpenMP waiting':<16} {'threads':>7} {'alone s/step':>12} {'side by side s/step':>22} {'x alone':>8}")
    for r in rows:
        pair = " / ".join(f"{p:.3f}" for p in r["pair"])
        print(f"{r['policy']:<16} {r['threads']:>7} {r['solo']:>12.3f} {pair:>22} {r['ratio']:>8.1f}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
