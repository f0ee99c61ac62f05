"""``<benchmark>@sample``: a seeded sample of a benchmark, for rehearsals (never for a reported number).

The sample keeps :data:`QUERIES` judged queries of the evaluation split (seed 42) and a corpus of
their judged documents (at most :data:`JUDGED_PER_QUERY` each, the highest grades first) plus
:data:`DISTRACTORS` unjudged ones (the documents with the smallest
seeded hash, so the choice does not depend on corpus order or size). It is marked ``smoke``: its
scores are not comparable with the full benchmark's, and records say so. Its ``files()`` name the
sample's parameters, so cached stages of the full benchmark and of the sample never mix.
"""

from __future__ import annotations

import hashlib
import heapq
import random
from collections.abc import Iterator
from typing import Any

from harness.core.errors import UnknownNameError
from harness.core.seeds import DEFAULT_SEED

SUFFIX = "@sample"
QUERIES = 20
# Sized for the rehearsal's time: each retriever encodes every sampled corpus (LexMAE's rehearsal: nine
# impact indexes of bert-base SPLADE vectors). 10 judged + 100 distractors gave NFCorpus 203 documents,
# SciFact 120 and MS MARCO dev 121, about 240 s of a 2-core LexMAE rehearsal; 3 + 40 give 81, 60, 61.
JUDGED_PER_QUERY = 3
DISTRACTORS = 40


def base_name(name: str) -> str:
    """The full benchmark a (possibly sampled) benchmark name stands for."""
    return name[: -len(SUFFIX)] if name.endswith(SUFFIX) else name


def _rank(doc_id: str) -> int:
    return int.from_bytes(hashlib.sha1(f"{DEFAULT_SEED}:{doc_id}".encode()).digest()[:8], "big")


class SampledBenchmark:
    """A seeded sample of ``base`` (any catalog benchmark with queries, qrels and a corpus)."""

    smoke = True

    def __init__(
        self,
        base: Any,
        queries: int = QUERIES,
        distractors: int = DISTRACTORS,
        judged_per_query: int = JUDGED_PER_QUERY,
    ):
        self.base, self.n_queries, self.n_distractors = base, queries, distractors
        self.judged_per_query = judged_per_query
        self.name = base.name + SUFFIX
        self.kind, self.eval_split = base.kind, base.eval_split
        self.description = (
            f"REHEARSAL SAMPLE of {base.name}: {queries} seeded judged queries over <= "
            f"{judged_per_query} judged documents each + {distractors} distractors; not comparable "
            f"to {base.name}"
        )
        self._picked: tuple[dict[str, str], dict[str, dict[str, int]]] | None = None

    def __repr__(self) -> str:
        return f"SampledBenchmark({self.base.name!r}, queries={self.n_queries}, distractors={self.n_distractors})"

    def _sample(self) -> tuple[dict[str, str], dict[str, dict[str, int]]]:
        if self._picked is None:
            queries, qrels = self.base.queries(), self.base.qrels()
            judged = sorted(q for q in queries if q in qrels)
            keep = sorted(random.Random(DEFAULT_SEED).sample(judged, min(self.n_queries, len(judged))))
            self._picked = ({q: queries[q] for q in keep}, {q: dict(qrels[q]) for q in keep})
        return self._picked

    def splits(self) -> list[str]:
        return [self.eval_split]

    def has_split(self, split: str) -> bool:
        return split in (self.eval_split, None) or self.base._split_aliases.get(split) == self.eval_split

    def _check_split(self, split: str | None) -> None:
        if split is not None and not self.has_split(split):
            raise UnknownNameError(f"split of benchmark '{self.name}'", split, self.splits())

    def queries(self, split: str | None = None) -> dict[str, str]:
        self._check_split(split)
        return dict(self._sample()[0])

    def qrels(self, split: str | None = None) -> dict[str, dict[str, int]]:
        self._check_split(split)
        return {q: dict(d) for q, d in self._sample()[1].items()}

    def has_corpus(self) -> bool:
        return self.base.has_corpus()

    def sub_benchmarks(self) -> list[Any]:
        return []

    def sources(self) -> list[str]:
        return self.base.sources()

    def iter_corpus(self) -> Iterator[tuple[str, dict[str, str]]]:
        """The judged documents of the sampled queries and the distractors, in corpus order."""
        judged = {
            doc
            for docs in self._sample()[1].values()
            for doc in sorted(docs, key=lambda d: (-docs[d], d))[: self.judged_per_query]
        }
        every_judged = {doc for docs in self._sample()[1].values() for doc in docs}
        kept: list[tuple[int, str, dict[str, str]]] = []
        heap: list[tuple[int, int, str, dict[str, str]]] = []  # (-rank, position, id, doc): the smallest ranks
        for position, (doc_id, doc) in enumerate(self.base.iter_corpus()):
            if doc_id in judged:
                kept.append((position, doc_id, doc))
                continue
            if doc_id in every_judged:  # judged but over the cap: neither kept nor a distractor
                continue
            item = (-_rank(doc_id), position, doc_id, doc)
            if len(heap) < self.n_distractors:
                heapq.heappush(heap, item)
            elif item > heap[0]:
                heapq.heapreplace(heap, item)
        kept += [(position, doc_id, doc) for _, position, doc_id, doc in heap]
        for _, doc_id, doc in sorted(kept, key=lambda t: t[0]):
            yield doc_id, doc

    def corpus(self) -> dict[str, dict[str, str]]:
        return dict(self.iter_corpus())

    def _marker(self) -> dict[str, str]:
        return {
            f"sample/{self.base.name}": f"queries={self.n_queries},judged_per_query={self.judged_per_query},"
            f"distractors={self.n_distractors},seed={DEFAULT_SEED}"
        }

    def files(self) -> dict[str, str]:
        return {**self.base.files(), **self._marker()}

    def corpus_files(self) -> dict[str, str]:
        return {**self.base.corpus_files(), **self._marker()}
