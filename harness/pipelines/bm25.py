"""BM25 pipeline: Lucene index (cached per corpus) -> top-k search (cached per queries+params).

Also used by the dense and lexical pipelines for BM25 negatives of the training queries.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.data import download
from harness.data.catalog import Benchmark, get_benchmark
from harness.data.formats import stream_trec_run, write_trec_run
from harness.data.negatives import NEGATIVE_SOURCES, read_published_negatives
from harness.retrieval import bm25
from harness.spec.block_settings import RetrievalSettings
from harness.spec.run_settings import DataSettings
from harness.stages import registry
from harness.stages.graph import LEXICAL

if TYPE_CHECKING:
    from harness.pipelines.context import RunContext


def bm25_run(ctx: RunContext, dataset: str, split: str, depth: int) -> Path:
    """TREC run of BM25 top-`depth` for the split's queries (cached)."""

    bench = get_benchmark(dataset)
    cfg = RetrievalSettings.from_spec(ctx.spec)  # the papers' BM25 setting (baselines/bm25.yaml) unless stated
    fields = dict(cfg.fields)
    corpus_inputs = bench.corpus_files()
    index = ctx.cached_stage(
        "index",
        dataset,
        {"engine": "lucene", **cfg.key("index")},
        corpus_inputs,
        lambda work: bm25.build_index(bench.iter_corpus(), work / "index", fields, cfg.threads),
    )
    search_cfg = {**cfg.key("retrieve"), "depth": depth, "split": split}
    query_inputs = {"index": index.key, **{k: v for k, v in bench.files().items() if k not in corpus_inputs}}

    def retrieve(work: Path) -> dict[str, float]:
        queries = bench.queries(split)
        # Streamed: one batch of queries' hits in memory, written in the bytes write_trec_run writes.
        hits = bm25.iter_search(index.dir / "index", queries, depth, cfg.k1, cfg.b, fields, cfg.threads)
        return {"queries": stream_trec_run(hits, work / "run.trec", tag=f"bm25-{dataset}")}

    label = dataset if split == bench.eval_split else f"{dataset}/{split}"
    return ctx.cached_stage("retrieve", label, search_cfg, query_inputs, retrieve).dir / "run.trec"


def bm25_negatives_run(ctx: RunContext, dataset: str, split: str, depth: int) -> Path:
    """The training queries' BM25 negatives as a TREC run (rank order = the source's order): the
    harness's own BM25 (``data.bm25_negatives: own``, the default) or a published set."""

    source = DataSettings.from_spec(ctx.spec).bm25_negatives
    if source == "own":
        return bm25_run(ctx, dataset, split, depth)
    bench = get_benchmark(dataset)
    key = NEGATIVE_SOURCES[source]

    def build(work: Path) -> dict[str, Any]:
        qrels = bench.qrels(split)
        negatives = read_published_negatives(source, download.fetch_source(key), qrels, depth)
        run = {q: {pid: float(len(pids) - rank) for rank, pid in enumerate(pids)} for q, pids in negatives.items()}
        write_trec_run(run, work / "run.trec", tag=f"{source}-{dataset}")
        missing = len(qrels) - len(run)
        print(
            f"  bm25_negatives: {source}: negatives for {len(run):,} of {len(qrels):,} training queries"
            + (f" ({missing:,} without any: they train on in-batch negatives only)" if missing else "")
        )
        return {"queries": len(run), "queries_without_negatives": missing}

    return (
        ctx.cached_stage(
            "bm25_negatives",
            f"{dataset}/{split}",
            {"source": source, "depth": depth},
            {**bench.files(), **Benchmark._download_files(key)},
            build,
        ).dir
        / "run.trec"
    )


@registry.pipeline(LEXICAL)
def run_bm25(ctx: RunContext, datasets: list[str]) -> dict[str, dict[str, Path]]:
    depth = RetrievalSettings.from_spec(ctx.spec).depth
    return {"bm25": {d: bm25_run(ctx, d, get_benchmark(d).eval_split, depth) for d in datasets}}
