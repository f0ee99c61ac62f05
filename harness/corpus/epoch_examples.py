"""One epoch of pre-training pairs as a lazy sequence: :func:`harness.corpus.pairs.make_examples`'s
list, element for element, with a pair built only when the trainer indexes it (issue 39).

make_examples returns the whole epoch's (anchor, context) texts: a second copy of the corpus in
every process. :class:`EpochExamples` holds what decides each pair (the epoch's random draws and
order, one number per passage, and the document grouping as arrays) and reads the passages from a
:class:`harness.corpus.passage_file.PassageFile` when pair ``j`` is asked for. The trainer shuffles
and shards by index (harness.pretrain.trainer._EpochData), so each DDP rank builds only its share.
Generated queries (``qc``, ``mixed``) are still a dict in memory. For ``mixed`` the trainer reads a step's
examples through :meth:`EpochExamples.at_step`: one kind for the whole step, as QC v2 §5.2 mixes.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from harness.core.errors import HarnessError, UnknownNameError
from harness.corpus.pairs import (
    _STREAM_MIX,
    _STREAM_ORDER,
    _STREAM_QUERY,
    _STREAM_SPAN,
    KINDS,
    MIX_PROB_QC,
    _rng,
    halves,
    step_uses_qc,
)

Pair = tuple[str, str]


def _doc_layout(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """From each passage's document number: passages by document (stable), each document's first slot
    in that order, and each passage's position within its document (pairs._doc_positions, as arrays)."""
    by_doc = np.argsort(codes, kind="stable")
    first = np.searchsorted(codes[by_doc], np.arange(int(codes.max()) + 2 if len(codes) else 1))
    pos = np.empty(len(codes), dtype=np.int64)
    pos[by_doc] = np.arange(len(codes)) - first[codes[by_doc]]
    return by_doc, first, pos


class EpochExamples(Sequence[Pair]):
    """``make_examples(kind, passages, queries_by_pid, epoch, seed, rank, world_size, shuffle)``, lazily."""

    def __init__(
        self,
        kind: str,
        passages: Any,
        queries_by_pid: Mapping[str, Sequence[str]] | None = None,
        epoch: int = 0,
        seed: int = 42,
        rank: int = 0,
        world_size: int = 1,
        shuffle: bool = True,
    ):
        if kind not in KINDS:
            raise UnknownNameError("pair kind", kind, list(KINDS))
        if world_size < 1 or not 0 <= rank < world_size:
            raise HarnessError(f"invalid shard: rank {rank} of world size {world_size}")
        if kind in ("qc", "mixed") and queries_by_pid is None:
            raise HarnessError(f"pair kind '{kind}' needs generated queries (queries_by_pid)")
        n = len(passages)
        self.kind, self.passages, self.queries = kind, passages, queries_by_pid
        self.seed, self.epoch = seed, epoch
        self.step_qc: bool | None = None  # set on the view at_step returns: one kind for every pair of a step
        # The same draws, in the same order, as make_examples.
        self.use_qc = np.zeros(n, dtype=bool)
        if kind == "qc":
            self.use_qc[:] = True
        elif kind == "mixed":
            self.use_qc = _rng(seed, epoch, _STREAM_MIX).random(n) < MIX_PROB_QC
        self.u_span = _rng(seed, epoch, _STREAM_SPAN).random(n)
        self.u_query = _rng(seed, epoch, _STREAM_QUERY).random(n)
        order = _rng(seed, epoch, _STREAM_ORDER).permutation(n) if shuffle else np.arange(n)
        self.mine = order[rank::world_size]
        if kind in ("qc", "mixed"):
            self._check_queries()
        if kind in ("span", "mixed"):
            codes = passages.doc_codes() if hasattr(passages, "doc_codes") else _codes(passages)
            self.doc_of = codes
            self.by_doc, self.first, self.pos_of = _doc_layout(codes)

    def _check_queries(self) -> None:
        """make_examples' check, without building the candidate lists: every passage has a query."""
        missing = []
        for i in range(len(self.passages)):
            pid = self.passages[i].pid
            if not [q for q in self.queries.get(pid, ()) if q and q.strip()]:
                missing.append(pid)
        if missing:
            raise HarnessError(
                f"{len(missing)} of {len(self.passages)} passages have no non-empty generated query (e.g. "
                f"{missing[:3]}); run query generation for this passage set first, or fix the query source that "
                "left them empty"
            )

    def at_step(self, step: int) -> EpochExamples:
        """These examples as training step ``step`` of the epoch reads them. For "mixed", every pair of the
        step has the kind :func:`harness.corpus.pairs.step_uses_qc` draws for it (QC v2 §5.2: passage-query or
        passage-passage per training step, probability 0.5 each); the other kinds are the same at every step.
        A shallow view: the draws, order and passages are shared, nothing is copied per step."""
        if self.kind != "mixed":
            return self
        view = copy.copy(self)
        view.step_qc = step_uses_qc(self.seed, self.epoch, step)
        return view

    def __len__(self) -> int:
        return len(self.mine)

    def __getitem__(self, j: int) -> Pair:  # type: ignore[override]  # a Sequence's slices, too, as below
        if isinstance(j, slice):
            return [self[k] for k in range(*j.indices(len(self)))]  # type: ignore[return-value]  # the slice case
        i = int(self.mine[j])
        p = self.passages[i]
        if self.kind == "single":
            return p.text, p.text
        use_qc = self.use_qc[i] if self.step_qc is None else self.step_qc
        if use_qc:
            qs = [q for q in self.queries.get(p.pid, ()) if q and q.strip()]
            return p.text, qs[int(self.u_query[i] * len(qs))]
        d = int(self.doc_of[i])
        start, end = int(self.first[d]), int(self.first[d + 1])
        if end - start == 1:
            return halves(p.text)
        k = int(float(self.u_span[i]) * (end - start - 1))
        if k >= int(self.pos_of[i]):
            k += 1
        return p.text, self.passages[int(self.by_doc[start + k])].text


def _codes(passages: Sequence[Any]) -> np.ndarray:
    """Document numbers by first appearance for an in-memory passage list."""
    first: dict[str, int] = {}
    return np.fromiter((first.setdefault(p.doc_id, len(first)) for p in passages), dtype=np.int64, count=len(passages))
