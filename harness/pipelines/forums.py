"""A benchmark made of parts (BEIR cqadupstack: 12 StackExchange forums, each its own corpus) is
retrieved part by part, as BEIR and Pyserini do, and its runs are merged into one run file whose
query ids are ``<forum>/<qid>``; scoring takes the mean of the forums' means
(:func:`harness.evaluation.measures.evaluate_benchmark`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.data.catalog import get_benchmark
from harness.data.formats import read_trec_run, write_trec_run
from harness.evaluation.measures import merge_subsets
from harness.pipelines.context import input_key

if TYPE_CHECKING:
    from harness.pipelines.context import RunContext


def retrieve_parts(ctx: RunContext, label: str, dataset: str, retrieve: Callable[[str], Path]) -> Path:
    """``retrieve(name)`` for the benchmark, or for each of its parts and their runs merged."""

    parts = get_benchmark(dataset).sub_benchmarks()
    if not parts:
        return retrieve(dataset)
    runs = {part.name: retrieve(part.name) for part in parts}

    def build(work: Path) -> dict[str, Any]:
        merged = merge_subsets({name: read_trec_run(path) for name, path in runs.items()})
        write_trec_run(merged, work / "run.trec", tag=f"{ctx.spec.name}-{label}")
        return {"parts": len(runs), "queries": len(merged)}

    inputs = {name: input_key(path) for name, path in runs.items()}
    return (
        ctx.cached_stage("merge_parts", f"{dataset}/{label}", {"parts": sorted(runs)}, inputs, build).dir / "run.trec"
    )
