"""Training pairs (anchor, context) for context-supervised pre-training, one per passage per epoch.

Kinds (QC paper §2.1, §3.1, §5.2 / Table 4):

* ``"span"``  -- passage-passage: the context is another passage of the same document,
  drawn uniformly (coCondenser / CoT-MAE; the official script's 100-span window covers
  whole documents in practice). A document with a single passage falls back to that
  passage's two halves (first half of its words is the anchor, second half the context),
  so no example pairs a text with itself; a one-word passage pairs with itself.
* ``"qc"``    -- passage-query (query-as-context): the context is one of the passage's C
  generated candidate queries, drawn uniformly each epoch (y_i = sample({q_ij})).
  Empty candidates are ignored; a passage without any candidate is an error.
* ``"mixed"`` -- "qc" or "span" with probability 0.5 each. QC v2 §5.2 makes the choice per training
  step ("In a training step, we randomly choose to use either the passage-query or passage-passage
  pair as input with the same probability"): the trainer reads each step's examples through
  :meth:`harness.corpus.epoch_examples.EpochExamples.at_step`, one draw of :func:`step_uses_qc` for the
  whole global batch. Read without a step (:func:`make_examples`, plain indexing) the draw is per
  passage, the same probability.
* ``"single"`` -- (text, text): for objectives without a context (MLM, CPDAE, LexMAE);
  they use or ignore the copy.

Randomness is a pure function of (seed, epoch, passage index): arrays are drawn once for
the whole corpus from numpy generators keyed by (seed, epoch, stream), so every rank sees
the same epoch and the result never depends on world size. Examples are shuffled per
(seed, epoch) when ``shuffle`` (default) -- contrastive batches then rarely hold two spans
of one document -- and sharded by ``rank::world_size`` (disjoint and covering).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from harness.core.errors import HarnessError, UnknownNameError
from harness.corpus.passages import Passage
from harness.spec.stage_settings import PAIR_KINDS

KINDS = PAIR_KINDS  # declared with the setting that names them (pretrain.context), so validation knows them
MIX_PROB_QC = 0.5
_STREAM_MIX, _STREAM_SPAN, _STREAM_QUERY, _STREAM_ORDER, _STREAM_STEP = 1, 2, 3, 4, 5


def _rng(seed: int, epoch: int, stream: int) -> np.random.Generator:
    return np.random.default_rng([int(seed), int(epoch), stream])


def step_uses_qc(seed: int, epoch: int, step: int) -> bool:
    """For "mixed": whether training step ``step`` of ``epoch`` pairs every passage with a query (else with
    another passage of its document). A function of (seed, epoch, step) alone, so every rank of the step
    draws the same and the choice does not depend on world size or on a resume."""
    return bool(np.random.default_rng([int(seed), int(epoch), _STREAM_STEP, int(step)]).random() < MIX_PROB_QC)


def halves(text: str) -> tuple[str, str]:
    """Split a passage into two halves of its words (single-passage document fallback)."""
    words = text.split()
    if len(words) < 2:
        return text, text
    mid = len(words) // 2
    return " ".join(words[:mid]), " ".join(words[mid:])


def _doc_positions(passages: Sequence[Passage]) -> tuple[list[list[int]], list[int], list[int]]:
    """Passage indices of each document, and each passage's document number and position in it."""
    groups: dict[str, list[int]] = {}
    for i, p in enumerate(passages):
        groups.setdefault(p.doc_id, []).append(i)
    docs = list(groups.values())
    doc_of = [0] * len(passages)
    pos_of = [0] * len(passages)
    for d, members in enumerate(docs):
        for j, i in enumerate(members):
            doc_of[i], pos_of[i] = d, j
    return docs, doc_of, pos_of


def _span_pair(i: int, u: float, passages: Sequence[Passage], docs, doc_of, pos_of) -> tuple[str, str]:
    members = docs[doc_of[i]]
    if len(members) == 1:
        return halves(passages[i].text)
    k = int(u * (len(members) - 1))  # uniform over the other passages
    if k >= pos_of[i]:
        k += 1
    return passages[i].text, passages[members[k]].text


def _candidates(queries_by_pid: Mapping[str, Sequence[str]], passages: Sequence[Passage]) -> list[list[str]]:
    cands: list[list[str]] = []
    missing: list[str] = []
    for p in passages:
        qs = [q for q in queries_by_pid.get(p.pid, ()) if q and q.strip()]
        if not qs:
            missing.append(p.pid)
        cands.append(qs)
    if missing:
        raise HarnessError(
            f"{len(missing)} of {len(passages)} passages have no non-empty generated query (e.g. {missing[:3]}); "
            "run query generation for this passage set first, or fix the query source that left them empty"
        )
    return cands


def make_examples(
    kind: str,
    passages: Sequence[Passage],
    queries_by_pid: Mapping[str, Sequence[str]] | None = None,
    epoch: int = 0,
    seed: int = 42,
    rank: int = 0,
    world_size: int = 1,
    shuffle: bool = True,
) -> list[tuple[str, str]]:
    """(anchor, context) pairs of this rank's shard for one epoch."""
    if kind not in KINDS:
        raise UnknownNameError("pair kind", kind, list(KINDS))
    if world_size < 1 or not 0 <= rank < world_size:
        raise HarnessError(f"invalid shard: rank {rank} of world size {world_size}")
    n = len(passages)
    if kind in ("qc", "mixed") and queries_by_pid is None:
        raise HarnessError(f"pair kind '{kind}' needs generated queries (queries_by_pid)")

    # Draw every stream for the whole corpus, so a draw never depends on rank/world size.
    use_qc = np.zeros(n, dtype=bool)
    if kind == "qc":
        use_qc[:] = True
    elif kind == "mixed":
        use_qc = _rng(seed, epoch, _STREAM_MIX).random(n) < MIX_PROB_QC
    u_span = _rng(seed, epoch, _STREAM_SPAN).random(n)
    u_query = _rng(seed, epoch, _STREAM_QUERY).random(n)
    order = _rng(seed, epoch, _STREAM_ORDER).permutation(n) if shuffle else np.arange(n)
    mine = order[rank::world_size]

    cands = _candidates(queries_by_pid, passages) if kind in ("qc", "mixed") else None
    docs, doc_of, pos_of = _doc_positions(passages) if kind in ("span", "mixed") else ([], [], [])

    out: list[tuple[str, str]] = []
    for i in mine.tolist():
        p = passages[i]
        if kind == "single":
            out.append((p.text, p.text))
        elif use_qc[i]:
            qs = cands[i]
            out.append((p.text, qs[int(u_query[i] * len(qs))]))
        else:
            out.append(_span_pair(i, float(u_span[i]), passages, docs, doc_of, pos_of))
    return out


def example_kinds(kind: str, n: int, epoch: int = 0, seed: int = 42) -> np.ndarray:
    """For "mixed": which passage indices use a query (True) this epoch; for reporting/tests."""
    if kind == "mixed":
        return _rng(seed, epoch, _STREAM_MIX).random(n) < MIX_PROB_QC
    return np.full(n, kind == "qc", dtype=bool)
