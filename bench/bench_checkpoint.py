"""How long a pre-training checkpoint holds up training, at paper shapes, on this machine.

A randomly initialised bert-base-shaped masked-LM (12 x 768, vocabulary 30,522: the papers'
encoder; no download) with its AdamW state is trained for a few steps (``--batch`` passages of
``--length`` tokens: the step's length only decides how much of the copy it hides) and saved with
the engine's writer (harness.training.checkpoint.CheckpointWriter), as harness.training.engine does:
``save`` after a step, then the next step's forward and backward while a thread copies the weights
and optimizer state to CPU buffers, then ``before_update`` before its optimizer step. The time the
step is held up is the ``save`` call plus the wait in ``before_update``; the thread's copy and write
(torch.save + fsync of every file, then the atomic rename) are timed by waiting for it afterwards.
Steps without a save are timed too, so the slow-down of sharing the CPU with the writer shows. For
comparison the whole synchronous save (``save_checkpoint``: what every save cost before) is timed once.

    python bench/bench_checkpoint.py [--saves 2] [--batch 4] [--length 144] [--dir /tmp]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def cpu_name() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        return next(line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Model name"))
    except (OSError, subprocess.CalledProcessError, StopIteration):
        return platform.processor() or "unknown CPU"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--saves", type=int, default=2)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--length", type=int, default=144)
    parser.add_argument("--dir", default=None, help="where the checkpoints go (default: a temporary folder)")
    args = parser.parse_args(argv)

    import os

    import torch
    from transformers import BertConfig, BertForMaskedLM

    from harness.training import checkpoint as ckpt
    from harness.training.optim import linear_schedule

    torch.manual_seed(0)
    model = BertForMaskedLM(BertConfig())  # bert-base-uncased's shape
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    scheduler = linear_schedule(optimizer, 1000, 100)
    ids = torch.randint(0, 30522, (args.batch, args.length))
    params = sum(p.numel() for p in model.parameters())
    state = {"step": 1, "metrics": [{"loss": 1.0}] * 1000}

    def forward_backward() -> None:
        optimizer.zero_grad(set_to_none=True)
        model(input_ids=ids, labels=ids).loss.backward()

    def update() -> None:
        optimizer.step()
        scheduler.step()

    forward_backward()  # the first step creates AdamW's moments, as in training
    update()
    plain = []
    for _ in range(2):
        started = time.perf_counter()
        forward_backward()
        update()
        plain.append(time.perf_counter() - started)

    with tempfile.TemporaryDirectory(dir=args.dir) as out:
        writer = ckpt.CheckpointWriter()
        held, stepped, written = [], [], []
        for i in range(1, args.saves + 1):
            started = time.perf_counter()
            final = writer.save(
                out, i, model=model, optimizer=optimizer, scheduler=scheduler, scaler=None, trainer_state=state
            )
            call = time.perf_counter() - started
            forward_backward()  # the next step, while the thread copies
            waited = time.perf_counter()
            writer.before_update()
            held.append(call + time.perf_counter() - waited)
            update()
            stepped.append(time.perf_counter() - started)
            writer.wait()
            written.append(time.perf_counter() - started)
        size = sum(f.stat().st_size for f in final.iterdir()) / 2**30
        started = time.perf_counter()
        ckpt.save_checkpoint(
            out, args.saves + 1, model=model, optimizer=optimizer, scheduler=scheduler, scaler=None, trainer_state=state
        )
        synchronous = time.perf_counter() - started

    print(
        f"CPU: {cpu_name()} ({os.cpu_count()} cores visible, torch threads {torch.get_num_threads()}); "
        "measured while other sessions loaded the machine"
    )
    print(
        f"model: random bert-base masked LM, {params / 1e6:.1f}M parameters, AdamW; checkpoint {size:.2f} GiB; "
        f"step: {args.batch} x {args.length} tokens"
    )
    print(
        f"step held up by a save (save call + wait before the optimizer step): "
        f"{', '.join(f'{h:.3f} s' for h in held)} (save 1 allocates the CPU buffers)"
    )
    print(
        f"step time: {statistics.median(plain):.2f} s without a save, "
        f"{', '.join(f'{t:.2f} s' for t in stepped)} with the copy running alongside"
    )
    print(
        f"save on disk (copy + torch.save + fsync + rename), counted from the save call: {', '.join(f'{w:.2f} s' for w in written)}"
    )
    print(f"synchronous save for comparison (copy, write, fsync, all on the step): {synchronous:.2f} s")
    return 0 if max(held) < 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
