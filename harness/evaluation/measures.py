"""Official measures, computed with ir-measures, under each benchmark's conventions.

    result = evaluate(run, qrels, "dl19")
    result.aggregate["nDCG@10"]            # mean over the 43 judged queries (fraction)
    result.per_query["nDCG@10"]["156493"]  # one query's score

``run`` is ``{qid: {doc_id: score}}`` and ``qrels`` ``{qid: {doc_id: grade}}`` (what
``harness.data.formats`` reads). See :mod:`harness.evaluation.conventions` for the rules
(missing queries score 0, trec_eval tie order, BEIR self-hit removal, cqadupstack mean).

Which ir-measures provider computes what (ir-measures 0.4.3 default pipeline): nDCG, R,
P, AP and RR *without* cutoff go to pytrec_eval (trec_eval's code); RR *with* a cutoff
(RR@10, RR(rel=2)@10) goes to the msmarco provider, because pytrec_eval's recip_rank has
no cutoff and the pytrec_eval provider would silently compute RR@inf instead. A test pins
this (first relevant document at rank 11 gives RR@10 = 0).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

import ir_measures
import numpy as np
from ir_measures.providers.base import NOT_PROVIDED

from harness.core.errors import HarnessError
from harness.data.catalog import get_benchmark
from harness.evaluation.conventions import Convention, get_convention

Run = Mapping[str, Mapping[str, float]]
Qrels = Mapping[str, Mapping[str, int]]

# Separator between a sub-benchmark and a query id in merged per-query tables
# ("cqadupstack-android/11546"): qids of different cqadupstack forums collide.
SUBSET_SEP = "/"

# (doc, score) items sorted descending by this key are in trec_eval order.
_SCORE_THEN_DOC = itemgetter(1, 0)


@dataclass
class EvalResult:
    """Scores of one run on one benchmark (fractions in [0, 1])."""

    benchmark: str
    measures: tuple[str, ...]
    aggregate: dict[str, float]
    per_query: dict[str, dict[str, float]]
    primary: str | None = None
    num_queries: int = 0  # judged queries averaged over
    missing_queries: list[str] = field(default_factory=list)  # judged, but no ranking: scored 0
    dropped_self_hits: int = 0  # BEIR: hits with doc id == query id removed
    subsets: dict[str, EvalResult] = field(default_factory=dict)  # cqadupstack forums

    def to_dict(self, per_query: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {
            "benchmark": self.benchmark,
            "primary": self.primary,
            "measures": list(self.measures),
            "aggregate": dict(self.aggregate),
            "num_queries": self.num_queries,
            "missing_queries": len(self.missing_queries),
            "dropped_self_hits": self.dropped_self_hits,
        }
        if self.subsets:
            out["subsets"] = {name: dict(r.aggregate) for name, r in self.subsets.items()}
        if per_query:
            out["per_query"] = {m: dict(v) for m, v in self.per_query.items()}
        return out


# ---------------------------------------------------------------------------- helpers


def _parse_measures(measures: Iterable[str]) -> dict[str, Any]:
    """``{measure string as given: ir-measures Measure}``; a clear error for a bad string."""

    parsed: dict[str, Any] = {}
    for text in measures:
        try:
            parsed[text] = ir_measures.parse_measure(text)
        except Exception as exc:  # noqa: BLE001 - ir-measures raises NameError/ValueError/TypeError
            raise HarnessError(
                f"cannot parse measure '{text}' ({exc}); use ir-measures names such as "
                "RR@10, R@1000, nDCG@10, R(rel=2)@1000"
            ) from None
    if not parsed:
        raise HarnessError("no measures to evaluate")
    return parsed


def canonical_ranking(ranking: Mapping[str, float]) -> Mapping[str, float]:
    """Scores that order documents as trec_eval does: score (a double, as trec_eval 10 reads it)
    descending, ties broken by doc id descending. Without ties the ranking is returned unchanged;
    with ties, scores are replaced by n, n-1, ..., 1 in that order so every provider sees the same
    ranking. A tie is looked for in float32 too: pytrec_eval (trec_eval 9) stores a score as a float,
    so 2e300 and 1e300 (both inf) or 100000001 and 100000000 tied there and were ordered by doc id
    while the msmarco provider ranked by the doubles; the ranks are exact in float32."""
    with np.errstate(over="ignore"):
        as_float32 = np.fromiter(ranking.values(), dtype=np.float64, count=len(ranking)).astype(np.float32)
    if len(np.unique(as_float32)) == len(ranking) and len(set(ranking.values())) == len(ranking):
        return ranking
    ordered = sorted(ranking.items(), key=_SCORE_THEN_DOC, reverse=True)
    return dict(zip((doc for doc, _ in ordered), map(float, range(len(ordered), 0, -1))))


def _provider_groups(measures: list[Any]) -> list[tuple[list[Any], int | None]]:
    """Measures split into (group, run depth). RR with a cutoff only looks at the top
    ``cutoff`` documents, so it gets a run cut to that depth: the msmarco provider sorts
    every ranking in Python, which dominated the time on a 1,000-deep MS MARCO dev run.
    The cut follows the trec_eval order, so the value is unchanged."""

    cut = [m for m in measures if m.NAME == "RR" and m["cutoff"] is not NOT_PROVIDED]
    rest = [m for m in measures if m not in cut]
    groups: list[tuple[list[Any], int | None]] = [(rest, None)] if rest else []
    if cut:
        groups.append((cut, max(int(m["cutoff"]) for m in cut)))
    return groups


def _top(ranking: Mapping[str, float], depth: int) -> Mapping[str, float]:
    """The first ``depth`` documents in trec_eval order (score, then doc id, descending)."""
    if len(ranking) <= depth:
        return ranking
    return dict(sorted(ranking.items(), key=_SCORE_THEN_DOC, reverse=True)[:depth])


def drop_self_hits(run: Run) -> tuple[dict[str, Mapping[str, float]], int]:
    """BEIR: remove each hit whose doc id equals its query id; returns (run, hits removed)."""
    out: dict[str, Mapping[str, float]] = {}
    dropped = 0
    for qid, docs in run.items():
        if qid in docs:
            docs = {d: s for d, s in docs.items() if d != qid}
            dropped += 1
        out[qid] = docs
    return out, dropped


# ---------------------------------------------------------------------------- evaluation


def evaluate_measures(run: Run, qrels: Qrels, measures: Iterable[str], benchmark: str = "") -> EvalResult:
    """Any ir-measures strings over the queries in ``qrels``.

    Per-query values come from ir-measures; a judged query with no ranking scores 0
    (``trec_eval -c``); the aggregate uses each measure's own aggregator (a mean for
    every measure the harness reports). Queries without qrels are ignored.
    """

    parsed = _parse_measures(measures)
    judged = [qid for qid, docs in qrels.items() if docs]
    if not judged:
        raise HarnessError(f"no judged queries in the qrels{f' of {benchmark}' if benchmark else ''}")
    judged_set = set(judged)
    ranked = {qid: canonical_ranking(docs) for qid, docs in run.items() if qid in judged_set and docs}
    missing = [qid for qid in judged if qid not in ranked]

    by_measure = {m: text for text, m in parsed.items()}
    per_query: dict[str, dict[str, float]] = {text: {} for text in parsed}
    if ranked:
        qrels_in = {qid: dict(qrels[qid]) for qid in judged}
        for group, depth in _provider_groups(list(by_measure)):
            group_run = ranked if depth is None else {q: _top(docs, depth) for q, docs in ranked.items()}
            try:
                for metric in ir_measures.iter_calc(group, qrels_in, group_run):
                    per_query[by_measure[metric.measure]][metric.query_id] = float(metric.value)
            except ValueError as exc:
                raise HarnessError(f"ir-measures cannot compute {sorted(parsed)}: {exc}") from None

    aggregate: dict[str, float] = {}
    for text, measure in parsed.items():
        values = per_query[text]
        # Zero-fill every judged query a provider did not score (no ranking, or the msmarco
        # provider skipping a query with no document at the measure's relevance level).
        for qid in judged:
            values.setdefault(qid, 0.0)
        per_query[text] = {qid: values[qid] for qid in judged}
        agg = measure.aggregator()
        for value in per_query[text].values():
            agg.add(value)
        aggregate[text] = float(agg.result())
    return EvalResult(
        benchmark=benchmark,
        measures=tuple(parsed),
        aggregate=aggregate,
        per_query=per_query,
        num_queries=len(judged),
        missing_queries=missing,
    )


def _benchmark_name_kind(benchmark: Any) -> tuple[str, str | None]:
    if isinstance(benchmark, str):
        return benchmark, None
    return benchmark.name, getattr(benchmark, "kind", None)


def evaluate(run: Run, qrels: Qrels, benchmark: Any, measures: Iterable[str] | None = None) -> EvalResult:
    """Evaluate ``run`` with the conventions of ``benchmark`` (a name or a catalog Benchmark).

    ``measures`` defaults to the benchmark's official ones. For a benchmark made of subsets
    (cqadupstack), query ids in ``run`` and ``qrels`` are namespaced ``<forum>/<qid>`` with
    ``<forum>`` either ``android`` or ``cqadupstack-android``; each forum is scored on its
    own and the result is the mean of the forum means (see :func:`combine_subsets`).
    """
    name, kind = _benchmark_name_kind(benchmark)
    conv = get_convention(name, kind)
    measures = tuple(measures) if measures is not None else conv.measures
    if conv.subsets:
        parts = split_subsets(run, qrels, conv)
        results = {
            sub: _evaluate_plain(r, q, sub, measures, get_convention(sub, conv.kind)) for sub, (r, q) in parts.items()
        }
        return combine_subsets(name, results, primary=conv.primary if conv.primary in measures else None)
    return _evaluate_plain(run, qrels, name, measures, conv)


def _evaluate_plain(run: Run, qrels: Qrels, name: str, measures: tuple[str, ...], conv: Convention) -> EvalResult:
    dropped = 0
    if conv.drop_self_hits:
        run, dropped = drop_self_hits(run)
    result = evaluate_measures(run, qrels, measures, benchmark=name)
    result.primary = conv.primary if conv.primary in measures else None
    result.dropped_self_hits = dropped
    return result


def normalise_subset_ids(table: Mapping[str, Any], benchmark: str) -> dict[str, Any]:
    """Write ``<forum>/<qid>`` keys as ``<sub-benchmark>/<qid>`` (``android/1`` -> ``cqadupstack-android/1``)."""
    conv = get_convention(benchmark)
    short = {s: conv.subset_benchmark(s) for s in conv.subsets}
    out: dict[str, Any] = {}
    for qid, value in table.items():
        prefix, sep, rest = qid.partition(SUBSET_SEP)
        out[f"{short[prefix]}{SUBSET_SEP}{rest}" if sep and prefix in short else qid] = value
    return out


def split_subsets(run: Run, qrels: Qrels, conv: Convention) -> dict[str, tuple[dict, dict]]:
    """Split namespaced ``<forum>/<qid>`` run and qrels into ``{sub-benchmark: (run, qrels)}``.

    Every subset must have qrels (the score is a mean over all of them); run entries of
    unknown subsets are ignored like any query without qrels.
    """
    full = {conv.subset_benchmark(s): conv.subset_benchmark(s) for s in conv.subsets}
    full.update({s: conv.subset_benchmark(s) for s in conv.subsets})

    def subset_of(qid: str) -> tuple[str | None, str]:
        prefix, sep, rest = qid.partition(SUBSET_SEP)
        return (full.get(prefix), rest) if sep else (None, qid)

    parts: dict[str, tuple[dict, dict]] = {full[s]: ({}, {}) for s in conv.subsets}
    for qid, docs in qrels.items():
        sub, bare = subset_of(qid)
        if sub is None:
            raise HarnessError(
                f"{conv.benchmark}: qrels query id '{qid}' is not of the form "
                f"<forum>/<qid> with forum one of {', '.join(conv.subsets)}"
            )
        parts[sub][1][bare] = docs
    for qid, scores in run.items():
        sub, bare = subset_of(qid)
        if sub is not None:
            parts[sub][0][bare] = scores
    empty = [s for s, (_, q) in parts.items() if not q]
    if empty:
        raise HarnessError(
            f"{conv.benchmark} is the mean over {len(conv.subsets)} subsets, but the qrels "
            f"have no queries for: {', '.join(empty)}"
        )
    return parts


def combine_subsets(benchmark: str, results: Mapping[str, EvalResult], primary: str | None = None) -> EvalResult:
    """Mean of subset means (cqadupstack: 12 forums, each counted once whatever its size).

    Per-query tables are merged with keys ``<subset>/<qid>`` so that bootstrap resampling
    can stratify by subset.
    """
    if not results:
        raise HarnessError(f"{benchmark}: no subset results to combine")
    measures = next(iter(results.values())).measures
    for sub, r in results.items():
        if r.measures != measures:
            raise HarnessError(f"{benchmark}: subset {sub} was evaluated with {r.measures}, expected {measures}")
    aggregate = {m: sum(r.aggregate[m] for r in results.values()) / len(results) for m in measures}
    per_query = {
        m: {f"{sub}{SUBSET_SEP}{qid}": v for sub, r in results.items() for qid, v in r.per_query[m].items()}
        for m in measures
    }
    return EvalResult(
        benchmark=benchmark,
        measures=measures,
        aggregate=aggregate,
        per_query=per_query,
        primary=primary,
        num_queries=sum(r.num_queries for r in results.values()),
        missing_queries=[f"{sub}{SUBSET_SEP}{q}" for sub, r in results.items() for q in r.missing_queries],
        dropped_self_hits=sum(r.dropped_self_hits for r in results.values()),
        subsets=dict(results),
    )


def merge_subsets(parts: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """``{subset: {qid: x}}`` -> ``{"<subset>/<qid>": x}`` (the namespaced form ``evaluate`` takes)."""
    return {f"{sub}{SUBSET_SEP}{qid}": value for sub, table in parts.items() for qid, value in table.items()}


def benchmark_qrels(benchmark: Any, split: str | None = None) -> dict[str, dict[str, int]]:
    """Qrels of a catalog benchmark; for one made of subsets (cqadupstack), the namespaced
    union of its sub-benchmarks' qrels."""
    subs = benchmark.sub_benchmarks()
    if subs:
        return merge_subsets({sub.name: sub.qrels(split) for sub in subs})
    return benchmark.qrels(split)


def unretrievable_line(qrels: Qrels, corpus_ids: Iterable[str], examples: int = 2) -> str | None:
    """One line when the qrels judge documents the corpus does not hold (a qrels file of another corpus
    version, or an edited one): they lower nDCG and recall, since no run can retrieve them. ``corpus_ids``
    is streamed: only the judged ids are held."""

    judged = {doc for docs in qrels.values() for doc in docs}
    missing = set(judged)
    for doc in corpus_ids:
        if not missing:  # all found: the rest of the corpus need not be read
            return None
        missing.discard(doc)
    if not missing:
        return None
    named = ", ".join(sorted(missing)[:examples])
    return (
        f"{len(missing)} of {len(judged)} judged documents are not in the corpus (e.g. {named}): "
        "scores count them as unretrievable"
    )


def warn_unretrievable(qrels: Qrels, corpus_ids: Iterable[str]) -> None:
    """:func:`unretrievable_line` printed once, as a warning, where an evaluation meets its corpus."""
    line = unretrievable_line(qrels, corpus_ids)
    if line:
        print(f"warning: {line}", file=sys.stderr)


def evaluate_benchmark(
    run: Run, benchmark: Any, split: str | None = None, measures: Iterable[str] | None = None
) -> EvalResult:
    """Evaluate ``run`` on a catalog benchmark (name or object) with its conventions."""
    if isinstance(benchmark, str):
        benchmark = get_benchmark(benchmark)
    return evaluate(run, benchmark_qrels(benchmark, split), benchmark, measures)
