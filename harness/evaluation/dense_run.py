"""One dense retrieval of a benchmark split: its judged queries encoded, an exact inner-product top-k
over the corpus vectors (:mod:`harness.retrieval.dense`), the run and, when asked, its TREC file.

    run, stats = retrieve(encoder, bench, "test", 1000)                        # encodes the corpus too
    run, stats = retrieve(encoder, bench, None, 1000, corpus=(doc_ids, vectors), keep_self_hits=True)

Every dense run goes through here: the dense pipeline's ``dense_retrieve`` stage (evaluation and
mining), zero-shot evaluation (``eval --model``, ``reproduce``) and the sharded encoder's scoring.
Where the corpus vectors come from stays with each caller: the pipeline's stage encodes them (its
stage cache holds the run), zero-shot reads its embedding cache, the sharded command builds its
index from its chunk files.

It sits in evaluation rather than retrieval for BEIR's depth (``keep_self_hits``): a ranking is
searched one deeper and keeps the extra hit only when it holds its self-hit, which the scoring then
drops (:func:`harness.evaluation.conventions.trim_to_depth`); retrieval stays below evaluation.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from harness.core import ranks
from harness.core.errors import HarnessError
from harness.data.formats import write_trec_run
from harness.evaluation.conventions import trim_to_depth
from harness.retrieval.dense import Shard
from harness.retrieval.dense import retrieve as search
from harness.retrieval.dense import retrieve_vectors as search_vectors
from harness.retrieval.rank_search import RankShard, search_ranks

Run = dict[str, dict[str, float]]
CorpusVectors = tuple[Sequence[str], np.ndarray]  # (doc ids, float32 vectors), row i is doc_ids[i]


def judged_queries(benchmark: Any, split: str | None) -> dict[str, str]:
    """The split's judged queries; none is an error (a wrong split, not an empty run to score)."""
    queries = benchmark.queries(split)
    if not queries:
        raise HarnessError(f"'{benchmark.name}' has no judged queries in split {split or benchmark.eval_split}")
    return queries


def retrieve(
    encoder: Any,
    benchmark: Any,
    split: str | None,
    depth: int,
    *,
    corpus: CorpusVectors | Shard | RankShard | None = None,
    batch_size: int | None = None,
    keep_self_hits: bool = False,
    show_progress: bool = True,
    run_file: Path | None = None,
    tag: str = "dense",
    query_vectors: tuple[list[str], np.ndarray, float] | None = None,
) -> tuple[Run, dict[str, Any]]:
    """The run of ``benchmark``'s ``split`` (None: its evaluation split) at ``depth``, and its
    efficiency numbers (:func:`harness.retrieval.dense.retrieve`'s, plus ``query_encode_seconds``
    and ``index_build_seconds``: 0 for vectors, searched in place by
    :func:`harness.retrieval.dense.retrieve_vectors`).

    ``corpus``: the corpus vectors, or an index built already; None encodes ``benchmark.corpus()``
    here; a :class:`~harness.retrieval.rank_search.RankShard` (a launched run: every rank calls this)
    searches each rank's rows there and merges on rank 0, which alone gets the run and writes the file. ``query_vectors``: (query ids, vectors, seconds) encoded already (by every rank of a launched
    run), else the judged queries are encoded here. ``batch_size`` None is the encoder's own default. ``run_file`` is written as a TREC run
    tagged ``tag``: exactly the run returned.
    """

    queries = judged_queries(benchmark, split)  # first: a corpus is not encoded for nothing
    sizes = {} if batch_size is None else {"batch_size": batch_size}
    if corpus is None:
        corpus = encoder.encode_corpus(benchmark.corpus(), show_progress=show_progress, **sizes)
    if query_vectors is None:
        started = time.perf_counter()
        qids, q_emb = encoder.encode_queries(queries, show_progress=show_progress, **sizes)
        query_vectors = (qids, q_emb, time.perf_counter() - started)
    qids, q_emb, seconds = query_vectors
    timings = {"query_encode_seconds": seconds}
    k = depth + 1 if keep_self_hits else depth
    if isinstance(corpus, RankShard):
        run, stats = search_ranks(qids, q_emb, corpus, k)
        if not ranks.is_main():
            return run, stats
    elif isinstance(corpus, Shard):
        run, stats = search(qids, q_emb, corpus, k=k)
    else:
        # searched where they lie (a memory map of the vector cache), chunk by chunk: no index, no copy
        doc_ids, doc_emb = corpus
        run, stats = search_vectors(qids, q_emb, doc_ids, doc_emb, k=k, device=getattr(encoder, "device", None))
        timings["index_build_seconds"] = 0.0
    stats.setdefault("search_processes", 1)  # one process: faiss, where index_device says
    stats.setdefault("search_devices", [stats["index_device"]])
    if keep_self_hits:
        run = trim_to_depth(run, depth, True)
    if run_file is not None:
        write_trec_run(run, run_file, tag=tag)
    stats.update(timings)
    return run, stats
