"""The (query, candidate passage) pairs a stage-3 teacher scores, produced in chunks (issue 39).

LexMAE's stage 3 scores ~36M pairs at MS MARCO scale (502,939 queries x 3 positives and 69
negatives, retriever 3's 3 epochs x 24 passages); built up front, their texts alone are tens of GB.
:func:`iter_pair_chunks` yields them ``chunk`` at a time, in the order the whole list had, so the
scorer holds one chunk's texts (~40 MB at 2**16 pairs). The default chunk is larger than any tiny or
mini run's pair count (at most 640 queries x 4 candidates = 2,560): those score exactly the one list
they always did (the cross-encoder sorts a chunk by length into batches, so another chunking could
move a pair into another batch, with other padding). What still grows with the queries: the
candidate ids and the scores (harness.pipelines.learned_sparse.teacher_stage holds both whole).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from harness.retrieval.encoder import passage_text

PAIR_CHUNK = 1 << 16
Keys = list[tuple[str, str]]
Pairs = list[tuple[str, str]]


def iter_pair_chunks(queries: Mapping[str, str], candidates: Mapping[str, Sequence[str]],
                     passages: Mapping[str, Any], title_separator: str,
                     chunk: int = PAIR_CHUNK) -> Iterator[tuple[Keys, Pairs]]:
    """``(keys, pairs)`` chunks: ``(qid, doc id)`` and ``(query text, passage text)``, each query's
    candidates once, in order (a repeated candidate is scored once)."""
    if chunk < 1:
        raise ValueError(f"chunk must be positive, got {chunk}")
    keys: Keys = []
    pairs: Pairs = []
    for qid, docs in candidates.items():
        for d in dict.fromkeys(docs):
            keys.append((qid, d))
            pairs.append((queries[qid], passage_text(passages[d], title_separator)))
            if len(keys) == chunk:
                yield keys, pairs
                keys, pairs = [], []
    if keys:
        yield keys, pairs
