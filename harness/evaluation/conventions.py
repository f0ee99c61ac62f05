"""Per-benchmark evaluation conventions: exactly the measures and rules the papers used.

Measures are ir-measures strings; values are fractions in [0, 1].

MS MARCO dev (``msmarco-dev``, 6,980 queries, all grade 1)
    RR@10 (primary; the official MRR@10), R@50, R@100 and R@1000. Recall is trec_eval's
    ``recall_k`` ("all-positive macro" recall, LexMAE eq. 14); DPR's one-positive-enough
    recall is ``Success@50`` / ``Success@1000`` (LexMAE Table 2 prints it as "R@50"/"R@1K", Eq. 15),
    computed too so those cells are graded. R@100 is in LexMAE Table 1 only.

TREC DL 2019 / 2020 (``dl19`` 43 queries, ``dl20`` 54 queries, grades 0-3)
    nDCG@10 (primary) with graded gains 0..3, as ``trec_eval -m ndcg_cut.10``; passing
    ``-l 2`` (as the CoT-MAE QC scripts do) does not change nDCG: trec_eval's ndcg uses the
    raw grades as gains whatever the relevance level. Binary measures count grade >= 2 as
    relevant (TREC DL guidelines, Anserini's ``-l 2``): R(rel=2)@1000 and RR(rel=2)@10.
    Only judged queries are evaluated: the qrels hold exactly the 43 / 54 judged ones, so
    the 200 DL20 topics in a run do not dilute the mean.

BEIR (14 datasets)
    nDCG@10 (primary) and R@100, trec_eval semantics (through pytrec_eval, as BEIR's own
    ``EvaluateRetrieval`` does). Before evaluation, a retrieved document whose id equals
    its query id is removed from that query's ranking (BEIR's ``ignore_identical_ids=True``
    default; it matters for ArguAna and Quora, where a query is itself a corpus document).
    A search for such a benchmark asks for ``depth + 1`` hits and a ranking keeps them only
    when it holds its self-hit (:func:`trim_to_depth`), as BEIR's own ``top_k + 1`` search does.
    The mean is over the queries that have qrels. ``cqadupstack`` is the unweighted mean of
    its 12 sub-forums' means (BEIR's reported number), not a mean over all its queries.

Missing queries (all benchmarks)
    A query that has qrels but no (or an empty) ranking in the run scores 0 and stays in
    the mean. The papers ran tools that never face this case (every query gets a
    ranking), so the choice only matters for incomplete runs, where it must not make a
    run look better than it is. It equals ``trec_eval -c`` aggregation (pinned against
    trec_eval's own ``-c`` expected output in tests); whenever the run covers every judged
    query it equals plain ir-measures / trec_eval aggregation exactly. Queries in the run
    that have no qrels are ignored (as trec_eval and ir-measures do).

Ties
    Documents with equal scores are ordered as trec_eval orders them (score descending,
    then doc id descending), for every measure, so the msmarco provider (used for RR@k)
    and pytrec_eval agree on one ranking.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from harness.core import benchmarks as declared
from harness.core.errors import UnknownNameError

BEIR_NAMES, CQADUPSTACK_FORUMS = declared.beir(), declared.beir_forums()  # for callers that read them here

Run = dict[str, dict[str, float]]


@dataclass(frozen=True)
class Convention:
    """How one benchmark is scored."""

    benchmark: str
    kind: str  # "msmarco" | "trec-dl" | "beir"
    measures: tuple[str, ...]  # ir-measures strings, primary first
    primary: str
    drop_self_hits: bool = False  # BEIR: drop doc id == query id before evaluation
    subsets: tuple[str, ...] = ()  # cqadupstack: mean of these sub-benchmarks' means
    note: str = ""
    extra: dict[str, str] = field(default_factory=dict)  # measure -> where the papers use it

    def subset_benchmark(self, subset: str) -> str:
        """Full benchmark name of one subset (``android`` -> ``cqadupstack-android``)."""
        return f"{self.benchmark}-{subset}"


def _defaults(kind: str) -> dict:
    """A kind's measures, primary and self-hit rule, as its family declares them (benchmarks.yaml)."""
    fam = declared.family(kind)
    return {"measures": fam.measures, "primary": fam.primary, "drop_self_hits": fam.drop_self_hits}


def _convention(decl: declared.Declaration) -> Convention:
    dropped = "doc id == query id hits dropped" if declared.family(decl.kind).drop_self_hits else ""
    return Convention(
        decl.name,
        decl.kind,
        subsets=decl.forums,
        note=decl.note or dropped,
        extra=dict(decl.extra),
        **_defaults(decl.kind),
    )


def _build() -> dict[str, Convention]:
    """Every declared evaluation set's convention (not the training set's or the smoke subset's: the smoke
    subset is scored by its kind's defaults), each forum's after the 14 BEIR sets."""
    conv: dict[str, Convention] = {}
    forums: dict[str, Convention] = {}
    for decl in declared.declarations(include_user=False).values():
        if decl.kind not in declared.families() or decl.smoke:
            continue
        conv[decl.name] = _convention(decl)
        for name in decl.forum_names:
            forums[name] = Convention(name, decl.kind, note=f"one {decl.name} sub-forum", **_defaults(decl.kind))
    return {**conv, **forums}


CONVENTIONS: dict[str, Convention] = _build()
UNNAMED_PRIMARY = "nDCG@10"  # see primary_measure


def get_convention(benchmark: str, kind: str | None = None) -> Convention:
    """The convention of ``benchmark``; an unnamed benchmark of a known ``kind`` (e.g. the
    DL19 smoke subset, kind "trec-dl") gets that kind's convention."""
    if benchmark in CONVENTIONS:
        return CONVENTIONS[benchmark]
    decl = declared.find(benchmark)  # one declared in the user's folder
    if decl is not None and decl.kind in declared.families() and not decl.smoke:
        return _convention(decl)
    if kind in declared.families():
        return Convention(benchmark, kind, note=f"default conventions of kind '{kind}'", **_defaults(kind))
    raise UnknownNameError("benchmark (evaluation conventions)", benchmark, list(CONVENTIONS))


def primary_measure(benchmark: str) -> str:
    """The measure one number of ``benchmark`` is compared by (effects, plots): its convention's primary.

    A name without a convention of its own (the smoke subset, a rehearsal sample ``<name>@sample``: a
    record keeps no kind) gets ``UNNAMED_PRIMARY``, as effects and plots always gave it. So a sample of
    MS MARCO dev, scored by RR@10, shows no effect; resolving a sample to its base's convention would
    add those rows to ``check`` and ``effects``."""
    convention = CONVENTIONS.get(benchmark)
    return convention.primary if convention else UNNAMED_PRIMARY


def trim_to_depth(run: Run, depth: int, keep_self_hit: bool) -> Run:
    """Each ranking cut to ``depth`` (``depth + 1`` when it holds its self-hit and BEIR will drop it).

    Rankings arrive best first (faiss order), so the cut keeps a prefix.
    """
    out: Run = {}
    for qid, docs in run.items():
        keep = depth + 1 if keep_self_hit and qid in docs else depth
        out[qid] = docs if len(docs) <= keep else dict(itertools.islice(docs.items(), keep))
    return out
