"""Pre-training seconds per step with the collate (tokenise + mask) in the step and prefetched in a
background thread (harness.pretrain.prefetch, ``HARNESS_PREFETCH=0|1``), through the real trainer.

Runs ``harness.pretrain.trainer.train`` twice on the same data and model (CoT-MAE by default, at a
small shape: 2 layers x 128, the toy WordPiece tokenizer of tests/objective_fixtures.py, texts of
``--words`` words cut at ``--max-length`` tokens), once per setting, and reports the median seconds
between consecutive steps (the first two and the last, which writes the final checkpoint, left out),
the collate time of one step alone, and whether the two runs' losses are the same bit for bit.
On a CPU the step itself uses the cores, so prefetch is off by default there; on CUDA the collate
runs while the GPU computes and the step no longer waits for it.

    python bench/bench_prefetch.py [--steps 12] [--batch 64] [--per-device 32] [--objective cotmae]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # objective_fixtures: the toy tokenizer

from objective_fixtures import WORDS, toy_tokenizer

from harness.pretrain.models import bert_config_from_dict
from harness.pretrain.objectives import build_objective
from harness.pretrain.prefetch import PREFETCH_ENV
from harness.pretrain.trainer import TrainConfig, micro_generator, train

SHAPE = {
    "vocab_size": 8000,
    "hidden_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 512,
    "max_position_embeddings": 512,
}


def _pairs(n: int, words: int, seed: int = 0) -> list[tuple[str, str]]:
    g = torch.Generator().manual_seed(seed)

    def pick() -> str:
        return " ".join(WORDS[int(i)] for i in torch.randint(len(WORDS), (words,), generator=g))

    return [(pick(), pick()) for _ in range(n)]


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def _run(prefetch: str, args: argparse.Namespace, pairs: list[tuple[str, str]], tok, out: Path):
    os.environ[PREFETCH_ENV] = prefetch
    torch.manual_seed(42)
    model = build_objective(args.objective, bert_config_from_dict(SHAPE))
    stamps: list[float] = []
    config = TrainConfig(
        steps=args.steps,
        global_batch=args.batch,
        per_device_batch=args.per_device,
        lr=1e-4,
        warmup_ratio=0.1,
        max_length=args.max_length,
        log_every=1,
        checkpoint_every=0,
        progress=False,
        output_dir=out,
        weight_decay=0.01,
        grad_clip=None,
        grad_cache_chunk=None,
        precision="fp32",
        device=args.device,
    )
    result = train(
        model, lambda epoch, rank, world: pairs, tok, config, logger=lambda s, m: stamps.append(time.perf_counter())
    )
    intervals = [b - a for a, b in zip(stamps[1:-2], stamps[2:-1])]
    return statistics.median(intervals), result, model


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=12, help="optimizer steps per run (default 12; >= 5)")
    ap.add_argument("--batch", type=int, default=64, help="global batch, pairs per step (default 64)")
    ap.add_argument("--per-device", type=int, default=32, help="micro-batch (default 32: 2 accumulation steps)")
    ap.add_argument("--words", type=int, default=100, help="words per text (default 100)")
    ap.add_argument("--max-length", type=int, default=128, help="tokens per text (default 128)")
    ap.add_argument("--objective", default="cotmae", help="objective (default cotmae)")
    ap.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    args = ap.parse_args(argv)
    if args.steps < 5:
        ap.error("--steps must be >= 5")
    os.environ.setdefault("HARNESS_CHECKPOINT_MINUTES", "0")
    pairs = _pairs(args.batch * args.steps, args.words)
    before = os.environ.get(PREFETCH_ENV)
    with tempfile.TemporaryDirectory() as tmp:
        tok = toy_tokenizer(Path(tmp) / "tok")
        off, off_res, off_model = _run("0", args, pairs, tok, Path(tmp) / "off")
        on, on_res, on_model = _run("1", args, pairs, tok, Path(tmp) / "on")
        t0 = time.perf_counter()
        for m in range(args.batch // args.per_device):
            micro = pairs[m * args.per_device : (m + 1) * args.per_device]
            off_model.collate(micro, tok, args.max_length, micro_generator(42, 0, m))
        collate_s = time.perf_counter() - t0
    if before is None:
        os.environ.pop(PREFETCH_ENV, None)
    else:
        os.environ[PREFETCH_ENV] = before
    same = off_res.loss_history == on_res.loss_history and all(
        torch.equal(a, b) for a, b in zip(off_model.state_dict().values(), on_model.state_dict().values())
    )
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"{args.objective} pre-training, {SHAPE['num_hidden_layers']} layers x {SHAPE['hidden_size']}, global batch "
        f"{args.batch} = {args.per_device} x {args.batch // args.per_device}, {args.max_length} tokens, fp32; "
        f"device {args.device or ('cuda' if torch.cuda.is_available() else 'cpu')}; "
        f"CPU {cpu_name()}, {os.cpu_count()} CPUs, torch threads {torch.get_num_threads()}, "
        f"1-min load average {load:.2f}"
    )
    print(f"{'collate':<28} {'s/step (median)':>16}")
    print(f"{'in the step (PREFETCH=0)':<28} {off:>16.3f}")
    print(f"{'prefetched (PREFETCH=1)':<28} {on:>16.3f}")
    print(f"collate alone, one step's micro-batches: {collate_s:.3f} s; prefetch/in-step ratio {on / off:.2f}")
    print(f"losses and weights bit-identical: {'yes' if same else 'NO'}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
