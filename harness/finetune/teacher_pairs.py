"""The (query, candidate passage) pairs a stage-3 teacher scores, produced in chunks (issue 39).

LexMAE's stage 3 scores ~36M pairs at MS MARCO scale (502,939 queries x 3 positives and 69
negatives, retriever 3's 3 epochs x 24 passages); built up front, their texts alone are tens of GB.
:func:`iter_pair_chunks` yields them ``chunk`` at a time, in the order the whole list had, so the
scorer holds one chunk's texts (~40 MB at 2**16 pairs). The default chunk is larger than any tiny or
mini run's pair count (at most 640 queries x 4 candidates = 2,560): those score exactly the one list
they always did (the cross-encoder sorts a chunk by length into batches, so another chunking could
move a pair into another batch, with other padding).

The candidates may come as a stream of ``(qid, doc ids)`` (each query's produced when its chunk needs
it) and the scores leave as one per query (:func:`iter_query_scores`), written as they come
(:func:`write_scores_json`, the bytes of ``json.dumps`` of the whole dict): neither grows with the
queries. What still does in harness.pipelines.learned_sparse.teacher_stage: the groups list and the
corpus dict the texts are looked up in.

The chunks are also what the ranks of a run share (:func:`iter_key_chunks` gives their keys alone):
chunk i goes to rank i mod N and is scored as one process scores it (harness.finetune.teacher_shards).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.core.chunks import chunked
from harness.retrieval.encoder import passage_text

PAIR_CHUNK = 1 << 16
Keys = list[tuple[str, str]]
Pairs = list[tuple[str, str]]


Candidates = Mapping[str, Sequence[str]] | Iterable[tuple[str, Sequence[str]]]


def iter_key_chunks(candidates: Candidates, chunk: int = PAIR_CHUNK) -> Iterator[Keys]:
    """The ``(qid, doc id)`` keys of :func:`iter_pair_chunks`, ``chunk`` at a time, without their texts: what
    decides which rank scores a chunk (harness.finetune.teacher_shards) and how its scores merge back."""
    if chunk < 1:
        raise ValueError(f"chunk must be positive, got {chunk}")
    pairs = candidates.items() if isinstance(candidates, Mapping) else candidates
    return chunked(((qid, d) for qid, docs in pairs for d in dict.fromkeys(docs)), chunk)


def pair_texts(keys: Keys, queries: Mapping[str, str], passages: Mapping[str, Any], title_separator: str) -> Pairs:
    """``(query text, passage text)`` of each key."""
    return [(queries[qid], passage_text(passages[d], title_separator)) for qid, d in keys]


def iter_pair_chunks(
    queries: Mapping[str, str],
    candidates: Candidates,
    passages: Mapping[str, Any],
    title_separator: str,
    chunk: int = PAIR_CHUNK,
) -> Iterator[tuple[Keys, Pairs]]:
    """``(keys, pairs)`` chunks: ``(qid, doc id)`` and ``(query text, passage text)``, each query's
    candidates once, in order (a repeated candidate is scored once). ``candidates``: a dict or a stream
    of ``(qid, doc ids)``, read as the chunks need it."""
    for keys in iter_key_chunks(candidates, chunk):
        yield keys, pair_texts(keys, queries, passages, title_separator)


def iter_query_scores(scored: Iterable[tuple[Keys, Sequence[float]]]) -> Iterator[tuple[str, dict[str, float]]]:
    """Scored chunks -> ``(qid, {doc id: score})`` one query at a time, in order (a query's pairs are
    consecutive, possibly across two chunks); only the current query's scores are held."""
    current: str | None = None
    scores: dict[str, float] = {}
    for keys, values in scored:
        for (qid, d), value in zip(keys, values, strict=True):
            if qid != current:
                if current is not None:
                    yield current, scores
                current, scores = qid, {}
            scores[d] = value
    if current is not None:
        yield current, scores


def write_scores_json(per_query: Iterable[tuple[str, Mapping[str, float]]], path: str | Path) -> int:
    """``{qid: {doc id: score}}`` written one query at a time: the bytes ``json.dumps`` gives for the
    whole dict (each qid once, in order); returns the number of pairs."""
    pairs = 0
    with open(path, "w", encoding="utf-8") as f:
        f.write("{")
        for i, (qid, scores) in enumerate(per_query):
            f.write((", " if i else "") + json.dumps(qid) + ": " + json.dumps(scores))
            pairs += len(scores)
        f.write("}")
    return pairs
