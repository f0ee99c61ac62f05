"""BM25 pipeline: Lucene index (cached per corpus) -> top-k search (cached per queries+params)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from harness.retrieval import bm25

if TYPE_CHECKING:
    from harness.runner import RunContext


def run_bm25(ctx: "RunContext", dataset: str) -> Path:
    from harness.data.catalog import get_benchmark
    from harness.data.formats import write_trec_run

    bench = get_benchmark(dataset)
    cfg = ctx.spec.get("retrieval")
    fields = dict(cfg["fields"])
    files = bench.files()
    corpus_inputs = bench.corpus_files()
    index = ctx.cached_stage(
        "index", dataset, {"engine": "lucene", "fields": sorted(fields)}, corpus_inputs,
        lambda work: bm25.build_index(bench.corpus(), work / "index", fields, cfg.get("threads", 2)),
    )
    queries = bench.queries("test")
    search_cfg = {"k1": cfg["k1"], "b": cfg["b"], "fields": fields, "depth": cfg["depth"]}
    query_inputs = {"index": index.key, **{k: v for k, v in files.items() if k not in corpus_inputs}}

    def retrieve(work: Path) -> dict[str, float]:
        run = bm25.search(index.dir / "index", queries, cfg["depth"], cfg["k1"], cfg["b"], fields, cfg.get("threads", 2))
        write_trec_run(run, work / "run.trec", tag=f"bm25-{dataset}")
        return {"queries": len(run)}

    retrieved = ctx.cached_stage("retrieve", dataset, search_cfg, query_inputs, retrieve)
    return retrieved.dir / "run.trec"
