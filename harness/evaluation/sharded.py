"""The command line of sharded, resumable corpus encoding (:mod:`harness.retrieval.shard_encoding`).

    # 2 CPU processes (gloo); on N GPUs the same line with --nproc_per_node N (nccl)
    torchrun --nproc_per_node 2 -m harness.evaluation.sharded --model models/all-MiniLM-L6-v2 \\
        --dataset msmarco-dl19-subset --out cache/shards/minilm-dl19 --shard-size 10000 --json summary.json

Every rank encodes its slice of the corpus; rank 0 then, with ``--dataset``, encodes the benchmark's
judged queries, searches the merged chunks and scores the run. It lives here, not in
:mod:`harness.retrieval`, because scoring is evaluation's: retrieval stays below evaluation.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from harness.core.errors import HarnessError
from harness.core.fsutil import atomic_write_json
from harness.data.catalog import get_benchmark
from harness.data.formats import iter_beir_corpus
from harness.evaluation.conventions import get_convention
from harness.evaluation.dense_run import retrieve
from harness.evaluation.measures import evaluate, warn_unretrievable
from harness.retrieval.dense import Shard
from harness.retrieval.faiss_gpu import faiss_gpus, placement
from harness.retrieval.shard_distributed import DistributedEncoding, encode_distributed
from harness.retrieval.shard_index import index_shards


def _evaluate(
    result: DistributedEncoding, dataset: str, depth: int, batch_size: int | None, fp16: bool
) -> dict[str, Any]:
    """Rank 0: encode the benchmark's judged queries, search the merged matrix (on the GPUs for a CUDA run
    with a GPU faiss), score the run."""

    bench = get_benchmark(dataset)
    device = result.encoder.device
    gpus = 0 if fp16 else faiss_gpus(device)
    doc_ids, index, label = index_shards(result.summary["out_dir"], fp16=fp16, device=device if gpus else None)
    run, stats = retrieve(
        result.encoder,
        bench,
        None,
        depth,
        corpus=Shard(index, doc_ids, placement(gpus, device, fp16=fp16)),
        batch_size=batch_size,
        keep_self_hits=get_convention(bench.name, bench.kind).drop_self_hits,
        show_progress=False,
    )
    qrels = bench.qrels()
    warn_unretrievable(qrels, doc_ids)
    scored = evaluate(run, qrels, bench)
    return {
        "benchmark": bench.name,
        "primary": scored.primary,
        "metrics": dict(scored.aggregate),
        "index": label,
        "index_device": stats["index_device"],
        "index_bytes": stats["index_bytes"],
        "qps": round(stats["qps"], 1),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m harness.evaluation.sharded",
        description="Sharded, resumable corpus encoding (see harness.retrieval.shard_encoding).",
    )
    parser.add_argument("--model", required=True, help="local model folder (or a name under models/)")
    parser.add_argument("--out", required=True, help="folder of the chunk files (resumed if it exists)")
    parser.add_argument("--corpus", help="BEIR corpus.jsonl(.gz) to encode (default: the --dataset corpus)")
    parser.add_argument("--dataset", help="benchmark whose queries are searched and scored after merging")
    parser.add_argument("--shard-size", type=int, default=10_000, help="passages per chunk file")
    parser.add_argument(
        "--batch-size", type=int, help="texts per batch (default: 64 on a CPU, 2048 sorted by tokens on CUDA)"
    )
    parser.add_argument("--device", help="cpu, cuda, cuda:1 (default: cuda:LOCAL_RANK when present)")
    parser.add_argument("--depth", type=int, default=1000)
    parser.add_argument("--index-fp16", action="store_true", help="store the index vectors in fp16 (half memory)")
    parser.add_argument("--json", help="write rank 0's summary here")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)
    try:
        if args.corpus:
            passages: dict[str, Any] = dict(iter_beir_corpus(args.corpus))
        elif args.dataset:
            passages = get_benchmark(args.dataset).corpus()
        else:
            raise HarnessError("give --corpus PATH or --dataset NAME")
        result = encode_distributed(
            args.model,
            passages,
            args.out,
            shard_size=args.shard_size,
            batch_size=args.batch_size,
            device=args.device,
            show_progress=not args.no_progress,
            merge=False,
        )
        if result.rank != 0:
            return 0
        summary = result.summary
        if args.dataset:
            summary["evaluation"] = _evaluate(result, args.dataset, args.depth, args.batch_size, args.index_fp16)
            ev = summary["evaluation"]
            print(f"{ev['benchmark']}: {ev['primary']} {ev['metrics'][ev['primary']]:.4f} ({ev['index']})")
        print(
            f"sharded encoding: {summary['docs']:,} passages x {summary['dim']} in {args.out}; "
            f"{summary['passages_encoded']:,} encoded by {summary['world_size']} rank(s) at "
            f"{summary['passages_per_second'] or 0:,.1f} passages/s; {summary['chunks_skipped']} chunk(s) resumed"
        )
        if args.json:
            atomic_write_json(args.json, summary)
        return 0
    except HarnessError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
