"""Retriever 1's negatives from a published hard-negative file (``finetune.hard_negatives``), as one cached
stage: the file read and selected by harness.data.hard_negatives, written as a TREC run (rank order = the
selection's order) that the chain trains retriever 1 on in place of the BM25 negatives."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.data import download
from harness.data.catalog import Benchmark, get_benchmark
from harness.data.formats import write_trec_run
from harness.data.hard_negatives import (
    CE_SCORE_MARGIN,
    HARD_NEGATIVE_SOURCES,
    NEGATIVES_PER_SYSTEM,
    read_negative_pools,
)

if TYPE_CHECKING:
    from harness.pipelines.context import RunContext


def hard_negatives_run(ctx: RunContext, choice: str, dataset: str, split: str) -> Path:
    """The training queries' negatives from the file ``choice`` names, as a TREC run (cached)."""
    bench = get_benchmark(dataset)
    key = HARD_NEGATIVE_SOURCES[choice]

    def build(work: Path) -> dict[str, Any]:
        qrels = bench.qrels(split)
        read = read_negative_pools(download.fetch_source(key), qrels)
        run = {q: {pid: float(len(pids) - rank) for rank, pid in enumerate(pids)} for q, pids in read.pools.items()}
        write_trec_run(run, work / "run.trec", tag=f"{choice}-{dataset}")
        missing = len(qrels) - len(run)
        print(
            f"  hard_negatives: {choice}: {sum(map(len, read.pools.values())):,} negatives for {len(run):,} of "
            f"{len(qrels):,} training queries (up to {NEGATIVES_PER_SYSTEM} per system"
            + (
                f", cross-encoder margin {CE_SCORE_MARGIN:g})"
                if read.denoised
                else "; the file has no cross-encoder scores: not denoised)"
            )
            + (f"; {missing:,} without any train on in-batch negatives only" if missing else "")
        )
        return {
            "queries": len(run),
            "queries_without_negatives": missing,
            "lines": read.lines,
            "lines_unjudged": read.unjudged,
            "denoised": read.denoised,
        }

    settings = {"file": choice, "per_system": NEGATIVES_PER_SYSTEM, "ce_score_margin": CE_SCORE_MARGIN}
    inputs = {**bench.files(), **Benchmark._download_files(key)}
    return ctx.cached_stage("hard_negatives", f"{dataset}/{split}", settings, inputs, build).dir / "run.trec"
