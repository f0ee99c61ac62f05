"""Hard negatives for dense fine-tuning, as Tevatron v1 builds them.

Pool
    :func:`negative_pool` keeps, for each training query with a positive, the documents of a
    ranking (BM25 or a dense retriever's run) at ranks 1..``depth`` (200 by default, 1,000 for
    LexMAE's BM25 negatives), minus every judged positive, in rank order. That pool is what
    Tevatron's ``build_train_hn.py`` writes (``--depth 200``).
Sampling
    Tevatron draws the negatives of a query afresh each epoch from its pool: the pool is
    shuffled once with a per-query seed and epoch ``e`` reads ``n`` items starting at offset
    ``e * n`` (wrapping around); a pool smaller than ``n`` is sampled with replacement.
    :func:`sample_group` does the same with a stable per-query seed (sha256 of seed and query
    id, where Tevatron used Python's ``hash`` of the row index), so a run is reproducible
    across processes and machines. :func:`mine_negatives` with ``n`` returns epoch 0's sample.
Stage 2
    Tevatron v1's coCondenser recipe trains retriever 2 on the mined groups *plus* the BM25
    groups: the BM25 training files are linked into the hard-negative folder
    (``ln -s bert/train/* bert/train-hn``), so each query appears once with mined negatives and
    once with BM25 negatives. :func:`make_examples` builds that with ``mode="groups"``;
    ``mode="union"`` instead merges the pools into one group per query (mined first).
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.core.errors import HarnessError
from harness.core.fsutil import atomic_path
from harness.core.seeds import DEFAULT_SEED
from harness.data.formats import by_score_then_id

Run = Mapping[str, Mapping[str, float]]
Qrels = Mapping[str, Mapping[str, int]]
Pool = dict[str, list[str]]
Example = tuple[str, list[str], list[str]]
COMBINE_MODES = ("groups", "union")


def ranked(ranking: Mapping[str, float]) -> list[str]:
    """Doc ids by descending score, ties by doc id (the order trec_eval and ir-measures use)."""
    return [d for d, _ in by_score_then_id(ranking.items())]


def positives(qrels: Qrels, qid: str, min_rel: int = 1) -> list[str]:
    return sorted(d for d, rel in qrels.get(qid, {}).items() if rel >= min_rel)


def iter_negative_pool(
    run: Run | Iterable[tuple[str, Mapping[str, float]]], qrels: Qrels, depth: int = 200, min_rel: int = 1
) -> Iterator[tuple[str, list[str]]]:
    """:func:`negative_pool` one query at a time, in the run's order: with
    :func:`harness.data.formats.iter_trec_run` as ``run``, only one query's ranking is in memory,
    not the depth-200 run of every training query (100M entries for MS MARCO)."""
    if depth < 1:
        raise HarnessError(f"negative depth must be positive, got {depth}")
    for qid, ranking in run.items() if isinstance(run, Mapping) else run:
        pos = set(positives(qrels, qid, min_rel))
        if not pos:
            continue
        yield qid, [d for d in ranked(ranking)[:depth] if d not in pos]


def negative_pool(
    run: Run | Iterable[tuple[str, Mapping[str, float]]], qrels: Qrels, depth: int = 200, min_rel: int = 1
) -> Pool:
    """Top-``depth`` doc ids of each judged query, judged positives (rel >= ``min_rel``) removed.

    Queries with no positive are left out (they cannot form a training group). A document
    judged but non-relevant (rel < ``min_rel``) stays a candidate negative, as in Tevatron.
    ``run`` is a whole run or ``(qid, ranking)`` pairs (:func:`harness.data.formats.iter_trec_run`).
    """
    return dict(iter_negative_pool(run, qrels, depth, min_rel))


def write_negative_pool(pool: Iterable[tuple[str, Sequence[str]]], path: Path) -> int:
    """Pools as lines ``qid<TAB>doc id<TAB>doc id...`` (rank order), written as they come: the
    training negatives on disk, one query in memory. Returns the number of queries written."""
    count = 0
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8", newline="\n") as fh:
        for qid, negs in pool:
            fh.write("\t".join((qid, *negs)) + "\n")
            count += 1
    return count


def iter_negative_pool_file(path: Path) -> Iterator[tuple[str, list[str]]]:
    """The pools :func:`write_negative_pool` wrote, one query at a time."""
    with open(path, encoding="utf-8", newline="\n") as fh:
        for line in fh:
            qid, *negs = line.rstrip("\n").split("\t")
            yield qid, negs


def _query_seed(seed: int, qid: str) -> int:
    return int.from_bytes(hashlib.sha256(f"{seed}/{qid}".encode()).digest()[:8], "little")


def sample_group(items: Sequence[Any], n: int, seed: int, key: str, epoch: int = 0) -> list[Any]:
    """``n`` items for epoch ``epoch`` of the group ``key`` (Tevatron's rotation; see module doc)."""
    if n <= 0:
        return []
    if not items:
        raise HarnessError(f"no negatives to sample for {key!r}")
    qseed = _query_seed(seed, key)
    if len(items) < n:
        return random.Random(qseed + epoch).choices(list(items), k=n)
    shuffled = list(items)
    random.Random(qseed).shuffle(shuffled)
    offset = (epoch * n) % len(shuffled)
    return (shuffled + shuffled)[offset : offset + n]


def mine_negatives(
    run: Run, qrels: Qrels, depth: int = 200, n: int | None = None, seed: int = DEFAULT_SEED, min_rel: int = 1
) -> Pool:
    """Hard negatives per query: the whole depth-limited pool (``n=None``) or ``n`` sampled from it.

    Queries whose pool is empty (every retrieved document is a positive) are dropped.
    """
    pool = negative_pool(run, qrels, depth, min_rel)
    if n is None:
        return {q: negs for q, negs in pool.items() if negs}
    return {q: sample_group(negs, n, seed, q) for q, negs in pool.items() if negs}


def pool_stats(pool: Pool, qrels: Qrels, min_rel: int = 1) -> dict[str, Any]:
    """Counts for the run record: queries with negatives, judged queries without, pool sizes."""
    judged = [q for q in qrels if positives(qrels, q, min_rel)]
    sizes = sorted(len(v) for v in pool.values())
    return {
        "queries": sum(1 for v in pool.values() if v),
        "judged_queries": len(judged),
        "queries_without_negatives": sum(1 for q in judged if not pool.get(q)),
        "pool_min": sizes[0] if sizes else 0,
        "pool_median": sizes[len(sizes) // 2] if sizes else 0,
        "pool_max": sizes[-1] if sizes else 0,
    }


def make_examples(
    queries: Mapping[str, str],
    qrels: Qrels,
    pools: Sequence[Pool],
    mode: str = "groups",
    min_rel: int = 1,
) -> list[Example]:
    """Training groups ``(query text, positive doc ids, negative doc ids)`` for ``train_dense``.

    Pass the doc ids with ``passages=`` (the corpus texts) to ``train_dense``, which samples
    one positive and ``n`` negatives per group and epoch. ``mode`` says how several pools
    (e.g. mined and BM25) combine: "groups" = one group per (pool, query), Tevatron v1's
    stage 2; "union" = one group per query with the pools merged in the given order.
    Queries without text, positives or negatives are skipped.
    """
    if mode not in COMBINE_MODES:
        raise HarnessError(f"negative combination mode must be one of {', '.join(COMBINE_MODES)}, got {mode!r}")
    examples: list[Example] = []

    def add(qid: str, negs: list[str]) -> None:
        pos = positives(qrels, qid, min_rel)
        if qid in queries and pos and negs:
            examples.append((queries[qid], pos, negs))

    if mode == "groups":
        for pool in pools:
            for qid in sorted(pool):
                add(qid, list(pool[qid]))
    else:
        qids = sorted({q for pool in pools for q in pool})
        for qid in qids:
            merged = list(dict.fromkeys(d for pool in pools for d in pool.get(qid, ())))
            add(qid, merged)
    return examples
