"""GPU efficiency per stage kind at the papers' per-device shapes: throughput, peak memory and model FLOP
utilisation (MFU) next to the card's peak.

Each stage kind of the paper plans runs a few optimiser steps (or encoding batches) at bert-base shape
(12 x 768, random init, 144 tokens) with the shape one device holds in the paper run:

* pre-training: each paper objective at its spec's ``per_device_batch``;
* fine-tuning: the retriever 1 global batch of CoT-MAE's paper profile shared over its declared
  devices (queries per device x passages per query);
* encoding: 512 passages per batch, forward only, in half precision.

The FLOPs of a step are counted by ``torch.utils.flop_counter`` on the step itself
(bench/paper_shape_smoke.py does the stepping); MFU = achieved TFLOP/s / the card's dense bf16/fp16
peak from NVIDIA's datasheet (:data:`harness.run.projection.GPU_PEAK`). On a CPU the same code runs
in fp32 as a smoke test (``--smoke``: a 2-layer 128-wide BERT, batch 2, one step;
tests/test_bench_gpu.py), and MFU is taken
against this machine's measured fp32 matmul rate instead, labelled so.

On CUDA the rows go to ``bench/results/gpu_<card>_<date>.json`` (with torch's version, so a run on
another torch than the pinned one says so), unless ``--json`` names another file.

    python bench/bench_gpu.py                 # on a GPU machine
    python bench/bench_gpu.py --smoke         # anywhere: the code path only
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import sys
import time
from dataclasses import asdict
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.run.projection import GPU_PEAK, cpu_tflops  # noqa: E402 - after the sys.path line above, which makes the checkout importable
from harness.spec.method import load_method  # noqa: E402 - after the sys.path line above, which makes the checkout importable
from harness.spec.stage_settings import StageSettings  # noqa: E402 - after the sys.path line above, which makes the checkout importable

PINNED_TORCH = "2.13.0"
SMOKE_SHAPE = {"hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 512}


def _smoke_module():
    spec = importlib.util.spec_from_file_location("paper_shape_smoke", ROOT / "bench" / "paper_shape_smoke.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks itself up there
    spec.loader.exec_module(module)
    return module


def finetune_shape(method: str = "cotmae") -> tuple[int, int]:
    """(queries per device, passages per query) of the paper's retriever 1 on its declared devices."""
    spec = load_method(method, "paper")
    s = StageSettings.from_spec(spec, "retriever1")
    devices = int(spec.get("hardware.devices") or 1)
    return max(1, s.global_queries // devices), s.passages_per_query


def card_peak(device: torch.device) -> tuple[str, float, str]:
    """(card name, peak TFLOP/s, what the peak is)."""
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        peak = next((p for key, p in GPU_PEAK.items() if key in name), None)
        if peak is None:
            return name, float("nan"), "peak unknown (not in harness.run.projection.GPU_PEAK)"
        return name, peak, "dense bf16/fp16 datasheet peak"
    return f"CPU ({os.cpu_count()} cores)", cpu_tflops(), "this CPU's measured fp32 matmul rate"


def run(device: str, smoke: bool, steps: int) -> dict:
    bench = _smoke_module()
    if smoke:  # the code path only: a 2-layer, 128-wide BERT keeps the CPU test to seconds
        bench.BERT_BASE = {**bench.BERT_BASE, **SMOKE_SHAPE}
    dev = torch.device(device)
    name, peak, peak_is = card_peak(dev)
    precisions = None if dev.type == "cuda" else ("fp32",)
    rows = []
    for spec_name in bench.SPECS:
        rows += bench.run_smoke(device, 2 if smoke else "paper", steps, objectives=(spec_name,), precisions=precisions)
    queries, passages = (2, 2) if smoke else finetune_shape()
    rows += bench.run_finetune(device, queries, passages, steps=steps, precisions=precisions)
    rows += bench.run_encode(
        device, 2 if smoke else 512, steps=steps, precisions=precisions if dev.type != "cuda" else ("bf16",)
    )
    out = []
    for r in rows:
        sequences = r.batch * (passages + 1 if r.objective.startswith("finetune") else 1)
        out.append(
            {
                **asdict(r),
                "kind": r.objective.split()[0],
                "tflops": r.tflops,
                "sequences_per_s": sequences / r.step_seconds,
                "mfu": r.tflops / peak if peak == peak else None,
            }
        )
    return {
        "device": name,
        "peak_tflops": peak,
        "peak_is": peak_is,
        "torch": torch.__version__,
        "pinned_torch": torch.__version__.split("+")[0] == PINNED_TORCH,
        "smoke": smoke,
        "steps": steps,
        "measured": time.strftime("%Y-%m-%d"),
        "rows": out,
    }


def print_table(result: dict) -> None:
    torch_note = "" if result["pinned_torch"] else f" (NOT the pinned torch {PINNED_TORCH})"
    print(
        f"device: {result['device']}; torch {result['torch']}{torch_note}; peak {result['peak_tflops']:.3g} TFLOP/s "
        f"({result['peak_is']}); median of {result['steps']} step(s) after a warm-up"
        + ("; SMOKE: batch 2, figures say nothing" if result["smoke"] else "")
    )
    print(f"{'kind':<22} {'prec':<5} {'batch':>6} {'step s':>8} {'seq/s':>9} {'TFLOP/s':>8} {'MFU':>6} {'peak GiB':>8}")
    for r in result["rows"]:
        mfu = f"{100 * r['mfu']:.1f}%" if r["mfu"] is not None else "-"
        print(
            f"{r['objective']:<22} {r['precision']:<5} {r['batch']:>6} {r['step_seconds']:>8.3f} "
            f"{r['sequences_per_s']:>9.1f} {r['tflops']:>8.2f} {mfu:>6} {r['peak_gib']:>8.1f}"
        )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--smoke", action="store_true", help="batch 2 and one step: the code path only (CPU tests)")
    p.add_argument("--steps", type=int, default=None, help="timed steps after a warm-up (default 5; 1 with --smoke)")
    p.add_argument(
        "--json", type=Path, help="write the rows here (default on CUDA: bench/results/gpu_<card>_<date>.json)"
    )
    args = p.parse_args(argv)
    result = run(args.device, args.smoke, args.steps or (1 if args.smoke else 5))
    print_table(result)
    target = args.json
    if target is None and torch.device(args.device).type == "cuda" and not args.smoke:
        card = re.sub(r"[^a-z0-9]+", "-", result["device"].lower()).strip("-")
        target = ROOT / "bench" / "results" / f"gpu_{card}_{result['measured']}.json"
    if target is not None:
        target.write_text(json.dumps(result, indent=1) + "\n")
        print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
