"""One query-generation step at the tiny T5's shape on this CPU: its time, and its FLOPs counted by
``torch.utils.flop_counter`` against the analytic model the dry-run prices query generation with
(harness/run/generation_flops.py; the projection applies it at t5-base shape).

A step is ``model.generate`` on ``--batch`` passages of ``--input-tokens`` tokens, ``--returns``
sampled queries each, exactly ``--new-tokens`` new tokens (min = max, so the count is the model's
upper bound reached). The model is a randomly initialised T5 of the tiny profile's shape
(harness/corpus/tiny_t5.py defaults): the FLOPs do not depend on the weights.

    python bench/bench_qgen.py [--batch 8] [--input-tokens 144] [--returns 5] [--new-tokens 16] [--repeats 3]

Prints one JSON object; exit status 0 always (it measures; bench/README.md says what it showed).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.run.generation_flops import T5Shape, generation_flops

TINY = {"d_model": 128, "d_ff": 256, "d_kv": 32, "num_heads": 4, "num_layers": 2, "num_decoder_layers": 2}


def measure(batch: int, input_tokens: int, returns: int, new_tokens: int, repeats: int) -> dict[str, object]:
    import torch
    from torch.utils.flop_counter import FlopCounterMode
    from transformers import T5Config, T5ForConditionalGeneration

    torch.manual_seed(0)
    config = T5Config(vocab_size=8192, decoder_start_token_id=0, pad_token_id=0, eos_token_id=1, **TINY)
    model = T5ForConditionalGeneration(config).eval()
    ids = torch.randint(2, config.vocab_size, (batch, input_tokens))

    def step() -> None:
        with torch.no_grad():
            model.generate(
                input_ids=ids,
                attention_mask=torch.ones_like(ids),
                do_sample=True,
                top_k=25,
                top_p=0.95,
                num_return_sequences=returns,
                max_new_tokens=new_tokens,
                min_new_tokens=new_tokens,
            )

    step()  # warm-up
    with FlopCounterMode(display=False) as counter:
        step()
    counted = counter.get_total_flops()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        step()
        best = min(best, time.perf_counter() - start)
    shape = T5Shape.from_config(config)
    model_flops = batch * generation_flops(shape, input_tokens, returns, new_tokens)
    # flop_counter misses CPU scaled-dot-product attention: compare it with the model's other terms
    dense_flops = batch * generation_flops(shape, input_tokens, returns, new_tokens, attention=False)
    return {
        "shape": {**TINY, "vocab_size": config.vocab_size},
        "batch": batch,
        "input_tokens": input_tokens,
        "returns": returns,
        "new_tokens": new_tokens,
        "step_seconds": round(best, 4),
        "counted_gflop": round(counted / 1e9, 4),
        "model_gflop": round(model_flops / 1e9, 4),
        "model_without_attention_gflop": round(dense_flops / 1e9, 4),
        "model_without_attention_over_counted": round(dense_flops / counted, 4),
        "model_gflop_per_s": round(model_flops / best / 1e9, 2),
        "torch_threads": torch.get_num_threads(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--input-tokens", type=int, default=144)
    parser.add_argument("--returns", type=int, default=5)
    parser.add_argument("--new-tokens", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    print(json.dumps(measure(args.batch, args.input_tokens, args.returns, args.new_tokens, args.repeats), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
