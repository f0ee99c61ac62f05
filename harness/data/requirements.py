"""What data a planned run reads, and which of it this machine does not have yet.

A dry-run lists each missing download with the command that fetches it (`python -m harness fetch
NAME`), so that a paper run does not discover at hour 3 that a file is missing or unreachable.
"""

from __future__ import annotations

from typing import Any

from harness.data import download
from harness.data.catalog import PRETRAIN_CORPORA, benchmark_split, get_benchmark
from harness.data.hard_negatives import HARD_NEGATIVE_SOURCES
from harness.data.negatives import NEGATIVE_SOURCES


def train_split(spec: Any) -> tuple[str, str]:
    """(benchmark, split) of ``finetune.train_queries``: ``<benchmark>-<split>`` (nfcorpus-train; the
    benchmark's name may have dashes itself: msmarco-passage-train), or a benchmark (its train split)."""

    return benchmark_split(str(spec.finetune_block().train_queries))


def required_sources(spec: Any, datasets: list[str]) -> list[str]:
    """Download keys (harness.data.download.SOURCES) a run of ``spec`` on ``datasets`` reads, in the
    order its stages first read them: pre-training corpus, training data and negatives, benchmarks."""

    keys: list[str] = []
    # the spec is a harness.spec.method.MethodSpec, read through its typed blocks (a layer above this one)
    sources = spec.corpus_block().source if spec.pretrains() else None
    for name in sources if isinstance(sources, list) else [sources] if sources else []:
        if name in PRETRAIN_CORPORA:
            keys += get_benchmark(name).sources()
    if spec.finetune_block().train_queries:
        keys += get_benchmark(train_split(spec)[0]).sources()
        published = spec.finetune_block().hard_negatives
        negatives = spec.data_block().bm25_negatives
        if published:  # retriever 1 trains on the file's negatives instead of BM25's
            keys.append(HARD_NEGATIVE_SOURCES[published])
        elif negatives in NEGATIVE_SOURCES:
            keys.append(NEGATIVE_SOURCES[negatives])
    for name in datasets:
        keys += get_benchmark(name).sources()
    return list(dict.fromkeys(keys))


def missing_inputs(spec: Any, datasets: list[str]) -> list[str]:
    """One line per download the run needs and this machine lacks (none are reachable from a mirror)."""
    return [line for key in required_sources(spec, datasets) if (line := missing_line(key))]


def missing_line(key: str) -> str | None:
    """The line saying download ``key`` is not on this machine, with its fetch command; None when it is."""
    if download.available(key):
        return None
    src = download.SOURCES[key]
    return f"missing download {key} ({src.filename}{': ' + src.note if src.note else ''}); fetch: {src.fetch_command()}"
