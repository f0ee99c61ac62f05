"""The GPU check, ready for whenever a GPU machine is here (under 10 minutes on one GPU): GPU encoding and search as
a run does them, then the rehearsal of a dense method (CoT-MAE) and of LexMAE on CUDA with the project's own torch,
written to bench/results/gpu_check_<card>_<date>.json with the card, the driver, torch and its CUDA.

    bash setup.sh --cuda            # the GPU set (requirements-cuda.txt): nothing installed by hand
    .venv/bin/python bench/gpu_check.py [--methods cotmae lexmae] [--json PATH] [--passages N]

Encoding and search (:func:`encode_search_check`, about a minute): a randomly initialised BERT-base-shaped encoder
(nothing downloaded) encodes synthetic passages on CUDA as the pipeline does (fp16 autocast, token-sorted batches
of 2048) and, beside it, as a CPU run batches (sorted by characters, 64 a batch): passages per second of each
and their largest difference. Then the exact search of those vectors on the GPUs when a GPU faiss is installed
(the merged index and the chunked search of stored vectors, each against the CPU's top 10), else one line saying
that faiss-cpu searched on the CPU. Each rehearsal runs through bench/rehearsal_device.py (its own ``harness run
--profile rehearsal`` from an empty cache, a step per stage).

Without CUDA it stops at once (exit 3), writing nothing, with one line saying why and one naming the CUDA parts it
skipped; with ``--cpu-smoke`` it first runs the same encoding and search check on the CPU at a tiny shape (the
token-sorted path forced: a smoke test of the code, no figure to keep).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's harness, whichever is installed
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


WORDS = [f"w{i}" for i in range(2000)]  # a synthetic vocabulary: a random encoder needs no real text
CPU_PASSAGES = 200  # the smoke test's passages without CUDA


def _random_encoder(folder: Path, device: str, precision: str, full: bool) -> Any:
    """A randomly initialised BERT (bert-base's shape when ``full``, else 2 layers x 64) loaded as a run loads one."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    from harness.retrieval.encoder import load_encoder

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]
    torch.manual_seed(0)
    small = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 128}
    BertModel(BertConfig(vocab_size=len(vocab), **({} if full else small))).save_pretrained(folder)
    BertTokenizerFast(vocab={w: i for i, w in enumerate(vocab)}).save_pretrained(folder)
    return load_encoder(folder, device=device, precision=precision)


def _rate(encoder: Any, texts: list[str], sort_by: str, batch_size: int) -> tuple[np.ndarray, float]:
    """(vectors, passages/s) of encoding ``texts`` end to end (tokenising included) batched by ``sort_by``."""
    import torch

    encoder.sort_by = sort_by
    encoder.encode(texts[:batch_size], batch_size=batch_size, kind="passage", show_progress=False)  # warm-up
    if encoder.device.type == "cuda":
        torch.cuda.synchronize()
    started = time.perf_counter()
    vectors = encoder.encode(texts, batch_size=batch_size, kind="passage", show_progress=False)
    return vectors, len(texts) / (time.perf_counter() - started)


def _overlap(a: dict[str, dict[str, float]], b: dict[str, dict[str, float]], k: int = 10) -> float:
    """Mean share of each query's top ``k`` that two runs agree on."""

    def top(run: dict[str, float]) -> set[str]:
        return set(sorted(run, key=lambda d: -run[d])[:k])

    return float(np.mean([len(top(a[q]) & top(b[q])) / k for q in a]))


def encode_search_check(cuda: bool, passages: int, say: Any = print) -> dict[str, Any]:
    """GPU encoding (token-sorted batches of 2048 under fp16 autocast) against CPU-style batching on the same
    device, then GPU faiss search against the CPU's; on a CPU (``cuda`` False) the same code at a tiny shape."""
    from harness.retrieval.dense import retrieve_vectors
    from harness.retrieval.encoder import CUDA_BATCH_SIZE, DEFAULT_BATCH_SIZE
    from harness.retrieval.faiss_gpu import faiss_gpus
    from harness.retrieval.sharded import search_merged

    rng = np.random.default_rng(0)
    texts = [" ".join(rng.choice(WORDS, size=int(rng.integers(8, 200)))) for _ in range(passages)]
    device, precision, batch = ("cuda", "fp16", CUDA_BATCH_SIZE) if cuda else ("cpu", "fp32", 16)
    with tempfile.TemporaryDirectory() as tmp:
        encoder = _random_encoder(Path(tmp), device, precision, full=cuda)
        tokens, tokens_rate = _rate(encoder, texts, "tokens", batch)
        chars, chars_rate = _rate(encoder, texts, "characters", DEFAULT_BATCH_SIZE)
    shape = "bert-base shape (12 x 768)" if cuda else "2 x 64 (CPU smoke test)"
    result: dict[str, Any] = {
        "encoder": f"random BERT, {shape}, passages cut at 144 tokens",
        "passages": passages,
        "device": device,
        "precision": encoder.precision,
        "token_sorted": {"batch_size": batch, "passages_per_second": round(tokens_rate, 1)},
        "char_sorted": {"batch_size": DEFAULT_BATCH_SIZE, "passages_per_second": round(chars_rate, 1)},
        "max_abs_difference": float(np.abs(tokens - chars).max()),
        "max_abs_value": float(np.abs(chars).max()),
    }
    say(
        f"gpu_check: encoding on {device} ({encoder.precision}): token-sorted batches of {batch} "
        f"{tokens_rate:,.0f} passages/s, character-sorted batches of {DEFAULT_BATCH_SIZE} {chars_rate:,.0f} "
        f"passages/s; largest difference {result['max_abs_difference']:.2e} (entries up to {result['max_abs_value']:.2f})"
    )
    doc_ids = [f"d{i}" for i in range(passages)]
    queries = tokens[:256] + rng.standard_normal(tokens[:256].shape).astype(np.float32) * 0.1
    qids = [f"q{i}" for i in range(len(queries))]
    cpu_run, _ = search_merged(doc_ids, tokens, qids, queries, k=100)
    gpus = faiss_gpus(device)
    if not gpus:
        why = "no CUDA" if not cuda else "faiss-cpu is installed (faiss-gpu-cu12 would search on the GPUs)"
        say(f"gpu_check: faiss GPU search skipped: {why}; searched on the CPU")
        result["faiss"] = {"gpus": 0, "skipped": why}
        return result
    merged_run, merged = search_merged(doc_ids, tokens, qids, queries, k=100, device=device)
    rows = passages // 3 + 1  # three chunks: the running top-k merge runs too
    chunked_run, chunked = retrieve_vectors(qids, queries, doc_ids, tokens, k=100, rows=rows, device=device)
    faiss_result = {
        "gpus": gpus,
        "merged_index": merged["index_device"],
        "merged_top10_overlap_with_cpu": _overlap(merged_run, cpu_run),
        "chunked_search": chunked["index_device"],
        "chunked_top10_overlap_with_cpu": _overlap(chunked_run, cpu_run),
        "merged_qps": round(merged["qps"], 1),
        "chunked_qps": round(chunked["qps"], 1),
    }
    result["faiss"] = faiss_result
    say(
        f"gpu_check: faiss on {merged['index_device']}: top-10 overlap with the CPU "
        f"{faiss_result['merged_top10_overlap_with_cpu']:.3f} (merged index), "
        f"{faiss_result['chunked_top10_overlap_with_cpu']:.3f} (chunked search on {chunked['index_device']})"
    )
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--methods", nargs="+", default=["cotmae", "lexmae"], help="rehearsals to run (default: a dense one and LexMAE)"
    )
    ap.add_argument(
        "--json", type=Path, help="where to write the results (default: bench/results/gpu_check_<card>_<date>.json)"
    )
    ap.add_argument("--timeout", type=int, default=540, help="seconds for all rehearsals together (default 540)")
    ap.add_argument(
        "--passages", type=int, default=20_000, help="synthetic passages of the encoding check on CUDA (default 20000)"
    )
    ap.add_argument(
        "--cpu-smoke", action="store_true", help="without CUDA: run the encoding and search check on the CPU first"
    )
    args = ap.parse_args(argv)

    problem = cuda_problem()
    if problem:
        print(f"gpu_check: not run: {problem}", file=sys.stderr)
        if args.cpu_smoke:
            encode_search_check(False, CPU_PASSAGES, lambda line: print(line, file=sys.stderr))
        print(
            "gpu_check: CUDA parts skipped: fp16 token-sorted encoding at batch 2048, faiss GPU search, "
            "the rehearsals; nothing written"
            + ("" if args.cpu_smoke else " (--cpu-smoke checks the encoding code here)"),
            file=sys.stderr,
        )
        return NO_CUDA
    facts = device_facts()
    print(f"gpu_check: {facts['card']}, driver {facts['driver']}, torch {facts['torch']} (CUDA {facts['cuda']})")
    stamp = time.strftime("%Y-%m-%d", time.gmtime())
    card = str(facts["card"]).lower().replace(" ", "-")
    out = args.json or ROOT / "bench" / "results" / f"gpu_check_{card}_{stamp}.json"
    rows = out.with_suffix(".rehearsal.json")
    started = time.time()
    try:  # a failure here is a result too: the rehearsals still run on the one GPU session there may be
        encoding = encode_search_check(True, args.passages)
    except Exception as exc:  # noqa: BLE001 -- any failure of the check is recorded, not fatal to the rest
        print(f"gpu_check: encoding and search check failed: {exc!r}", file=sys.stderr)
        encoding = {"error": repr(exc)}
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
        "encode_search": encoding,
        "rehearsal": rehearsal,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))
    rows.unlink(missing_ok=True)
    print(f"gpu_check: exit {rc} in {result['seconds']} s; results in {out}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
