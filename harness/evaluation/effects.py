"""Effects: what pre-training (or QC, or fine-tuning) changes, measured on the same queries.

The papers' claims are differences (method vs no pre-training, with vs without QC, one method vs
another, retriever 2 vs retriever 1), so the harness reports them as such: for two runs of the
same profile, the paired bootstrap of the per-query difference (``harness.evaluation.bootstrap``)
on every benchmark and measure both runs scored: mean difference, 95% CI and two-sided p-value,
in points. In the ``paper`` profile every fine-tuning stage both runs scored is compared too (a
paper prints retriever 1 and retriever 2 rows), and a method's stages against each other
(``claims.claim_pairs``); elsewhere the final stages. A BEIR average a paper prints is the mean of
its datasets' effects, where both runs scored every one.

A CI over queries alone says what another query sample would change, not what another seed would:
two runs of one recipe on the same queries differ too. Where the seed spread was measured (the
``mini`` profile, ``noise.yaml``: the control under several seeds, ``sd`` of one run's mean per
benchmark and measure), an effect between two single runs adds the variance of their difference,
``2 sd**2``, to the bootstrap's (each side of the CI widened as ``sqrt(half**2 + z**2 * 2 sd**2)``,
the p-value recomputed from the combined normal se; a stage minus the untrained start adds
``sd**2``); the query-only CI is kept beside it. A benchmark the seeds did not measure takes
``noise.sigma``'s transfer, said so in ``seed_why``.

``stage_effects`` does the same inside one run, between its fine-tuning stages and the zero-shot
start (``start``), which is the check that fine-tuning itself works. Where a paper printed the same
difference, the effect is graded against that claim by the effect rule (``harness.evaluation.claims``:
REPRODUCED, DIFFERENT-BELOW / -ABOVE, INCONCLUSIVE, or NOT-COMPARABLE when the runs do not share the
claim's setting: every profile but ``paper``); the claims of one table are one Holm family.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from harness.core.points import p_text
from harness.core.text_table import format_table
from harness.data.catalog import AGGREGATES
from harness.evaluation import noise
from harness.evaluation import verdict as rule
from harness.evaluation.bootstrap import paired_bootstrap
from harness.evaluation.claims import Claim, Pairing, claim_pairs, claims_for, grade
from harness.evaluation.compare import PAPER_PROFILE
from harness.evaluation.conventions import primary_measure
from harness.evaluation.count_claims import CountCheck, check_count, count_claims_for
from harness.evaluation.tolerances import canonical_measure
from harness.records.run_precision import precision_label
from harness.records.store import RunRecord
from harness.spec.method import comparisons

SEED_SPREAD_PROFILES = (noise.PROFILE,)  # where noise.yaml measured the seed spread (mini)
Z95 = rule.z(0.975)


@dataclass
class Effect:
    profile: str
    a: str  # method (or stage, for stage effects)
    b: str
    a_run: str
    b_run: str
    dataset: str
    measure: str
    a_value: float  # points
    b_value: float
    delta: float
    ci_low: float  # 95% CI over the queries, and over the seeds where measured (``seed_sd``)
    ci_high: float
    p_value: float
    queries: int
    claims: list[dict] = field(default_factory=list)  # ClaimCheck dicts: the papers' printed differences
    claim_status: str = ""  # worst over the comparable claims; "" without one
    a_stage: str = ""  # the fine-tuning stage each side's scores come from ("": the run names none)
    b_stage: str = ""
    final: bool = True  # both sides are their runs' final stage
    seed_sd: float | None = None  # seed SD of one run's mean folded into the CI (None: queries only)
    seed_why: str = ""
    query_ci_low: float | None = None  # the bootstrap CI over the queries alone
    query_ci_high: float | None = None
    # The papers' cells of its claims (their two rows) -> the state every surface gives each
    # (gate.cell_state, set by the `effects` command), and those states as one status.
    cells: dict[str, str] = field(default_factory=dict)
    cells_state: str = ""

    @property
    def significant(self) -> bool:
        return self.ci_low > 0 or self.ci_high < 0

    @property
    def label(self) -> str:
        """'A - B'; with each side's stage where they are not both the runs' final one."""
        if self.final and self.a != self.b:
            return f"{self.a} - {self.b}"
        return f"{' '.join(filter(None, (self.a, self.a_stage)))} - {' '.join(filter(None, (self.b, self.b_stage)))}"

    @property
    def cell_ids(self) -> list[str]:
        """The registry cells of the rows of the papers' claims it is graded against, in order."""
        return list(dict.fromkeys(c[side] for c in self.claims for side in ("a_cell", "b_cell") if c.get(side)))

    def to_dict(self) -> dict:
        return {**asdict(self), "label": self.label}


def _effect(
    profile: str,
    a: str,
    b: str,
    a_run: str,
    b_run: str,
    dataset: str,
    measure: str,
    pq_a: Mapping[str, float],
    pq_b: Mapping[str, float],
) -> Effect:
    res = paired_bootstrap(pq_a, pq_b)

    def mean(pq: Mapping[str, float]) -> float:
        return 100.0 * sum(pq.values()) / len(pq)

    return Effect(
        profile,
        a,
        b,
        a_run,
        b_run,
        dataset,
        measure,
        mean(pq_a),
        mean(pq_b),
        100.0 * res.mean_diff,
        100.0 * res.low,
        100.0 * res.high,
        res.p_value,
        res.n_queries,
    )


def latest_by_method(records: Sequence[RunRecord], profile: str) -> dict[str, RunRecord]:
    """The newest usable record of each method in ``profile``, in the precision most of its methods have
    records in (:func:`shared_precision`), else the method's newest: an effect, a learned row or a plot
    compares runs of one precision (a bf16 reference beside fp32 ones must not make QC minus non-QC a
    precision difference too)."""
    mine = sorted((r for r in records if r.profile == profile and not r.integrity_problems), key=_age)
    shared = shared_precision(mine)
    out: dict[str, RunRecord] = {}
    for rec in mine:
        if (
            rec.method not in out
            or precision_label(rec.stages) == shared
            or precision_label(out[rec.method].stages) != shared
        ):
            out[rec.method] = rec
    return out


def _age(rec: RunRecord) -> tuple[str, str]:
    return (rec.created, rec.run_id)


def shared_precision(records: Sequence[RunRecord]) -> str:
    """The precision the most methods among ``records`` have a record in (fp32 first on a tie)."""
    methods: dict[str, set[str]] = {}
    for rec in records:
        methods.setdefault(precision_label(rec.stages), set()).add(rec.method)
    return max(sorted(methods), key=lambda p: (len(methods[p]), p == "fp32"), default="")


# ----------------------------------------------------------------------------- the seed spread


def seed_spread(dataset: str, measure: str) -> tuple[float, str]:
    """The seed SD of one run's mean (points) that the mini profile's seed records measured on
    ``dataset`` / ``measure`` (``noise.yaml``: ``sd``), else the harness's transfer of it."""
    data = noise.load()
    measured = (data.get("benchmarks") or {}).get(dataset, {}).get(measure)
    if measured:
        return float(measured["sd"]), (
            f"seed SD {measured['sd']:.2f} measured: {data['method']} "
            f"[{data['profile']}] x {len(data['runs'])} seeds on {dataset}"
        )
    sigma = noise.sigma(dataset, measure)
    return sigma.points, f"seed SD {sigma.points:.2f} {sigma.why}"


def widen_by_seeds(effect: Effect, sd: float, why: str, trained_sides: int = 2) -> None:
    """Fold the seed spread into the effect's 95% CI and p-value: variance ``sd**2`` for each side
    that is one trained run (two runs: ``2 sd**2``; a stage minus the untrained start: ``sd**2``);
    the query-only CI is kept."""
    effect.query_ci_low, effect.query_ci_high = effect.ci_low, effect.ci_high
    seeds = trained_sides * sd**2
    effect.ci_low = effect.delta - math.sqrt(max(0.0, effect.delta - effect.ci_low) ** 2 + Z95**2 * seeds)
    effect.ci_high = effect.delta + math.sqrt(max(0.0, effect.ci_high - effect.delta) ** 2 + Z95**2 * seeds)
    se_queries = (effect.query_ci_high - effect.query_ci_low) / (2.0 * Z95)
    effect.p_value = rule.p_zero(effect.delta, math.sqrt(se_queries**2 + seeds))
    effect.seed_sd, effect.seed_why = sd, why


# ----------------------------------------------------------------------------- effects of two runs


def scores_by_stage(record: RunRecord) -> tuple[dict[str, dict[str, Any]], str]:
    """The record's per-query scores of each fine-tuning stage, in order, and its final stage (a
    record that kept no stages: its scores under its ``finetune_stage``, or "")."""
    by_stage = {s: v for s, v in (record.per_query_by_stage or {}).items() if s.startswith("retriever")}
    final = record.finetune_stage or (list(by_stage)[-1] if by_stage else "")
    return (by_stage or {final: record.per_query}), final


def _conditions(record: RunRecord, stage: str) -> dict[str, Any]:
    """The record's conditions for the numbers of one stage (as ``gate.grading.paper_comparisons``)."""
    conditions = record.run_conditions()
    if stage.startswith("retriever"):
        conditions["finetune_stage"] = stage
    return conditions


def _aggregate(parts: Sequence[Effect], name: str) -> Effect:
    """A printed average's effect: the mean of its datasets' effects (independent query sets)."""
    k = len(parts)
    first = parts[0]
    delta = sum(e.delta for e in parts) / k
    se = math.sqrt(sum(((e.ci_high - e.ci_low) / (2.0 * Z95)) ** 2 for e in parts)) / k
    out = Effect(
        first.profile,
        first.a,
        first.b,
        first.a_run,
        first.b_run,
        name,
        first.measure,
        sum(e.a_value for e in parts) / k,
        sum(e.b_value for e in parts) / k,
        delta,
        delta - Z95 * se,
        delta + Z95 * se,
        rule.p_zero(delta, se),
        sum(e.queries for e in parts),
        a_stage=first.a_stage,
        b_stage=first.b_stage,
        final=first.final,
    )
    sds = [e.seed_sd for e in parts if e.seed_sd is not None]
    if len(sds) == len(parts):
        out.seed_sd = math.sqrt(sum(sd**2 for sd in sds)) / k
        out.seed_why = f"the mean of {k} datasets' seed spreads"
    return out


def _stage_pair_effects(
    profile: str,
    a: str,
    b: str,
    ra: RunRecord,
    rb: RunRecord,
    xa: str,
    xb: str,
    final: bool,
    pq_a: Mapping[str, Any],
    pq_b: Mapping[str, Any],
) -> list[Effect]:
    """A minus B on every benchmark and measure both scored (A's stage ``xa``, B's ``xb``), and on
    every printed average whose datasets both scored."""
    out = []
    for dataset in (d for d in pq_a if d in pq_b):
        for measure in (m for m in pq_a[dataset] if m in pq_b[dataset]):
            if pq_a[dataset][measure] and pq_b[dataset][measure]:
                e = _effect(
                    profile,
                    a,
                    b,
                    ra.run_id,
                    rb.run_id,
                    dataset,
                    measure,
                    pq_a[dataset][measure],
                    pq_b[dataset][measure],
                )
                e.a_stage, e.b_stage, e.final = xa, xb, final
                if profile in SEED_SPREAD_PROFILES and ra is not rb:
                    widen_by_seeds(e, *seed_spread(dataset, measure))
                out.append(e)
    for name, aggregate in AGGREGATES.items():
        members = {d: [e for e in out if e.dataset == d] for d in aggregate.members}
        if all(members.values()):
            shared = set.intersection(*({e.measure for e in found} for found in members.values()))
            for measure in sorted(shared):
                out.append(
                    _aggregate([next(e for e in found if e.measure == measure) for found in members.values()], name)
                )
    return out


def pair_effects(records: Sequence[RunRecord], profile: str, a: str, b: str) -> list[Effect]:
    """A minus B between the newest records of each in ``profile``: their final stages, and in the
    paper profile every stage both scored; ``a == b``: each retriever stage minus the one before."""
    latest = latest_by_method(records, profile)
    if a not in latest or b not in latest:
        return []
    ra, rb = latest[a], latest[b]
    sa, fa = scores_by_stage(ra)
    sb, fb = scores_by_stage(rb)
    if a == b:
        stages = [s for s in sa if s.startswith("retriever")]
        pairs = list(zip(stages[1:], stages[:-1]))
    else:
        pairs = [(fa, fb)]
        if profile == PAPER_PROFILE:
            pairs += [(s, s) for s in sa if s in sb and (s, s) != (fa, fb)]
    out = []
    for xa, xb in pairs:
        out += _stage_pair_effects(profile, a, b, ra, rb, xa, xb, (xa, xb) == (fa, fb) and a != b, sa[xa], sb[xb])
    return out


def _stage_key(a_stage: str | None, b_stage: str | None) -> tuple[str, str]:
    return (a_stage or "", b_stage or "")


def method_effects(
    records: Sequence[RunRecord], profile: str, pairs: Sequence[tuple[str, str]] | None = None
) -> list[Effect]:
    """A minus B on every benchmark and measure both runs scored, for every pair present, each
    graded against the claims the papers printed for it: a claim naming stages on the effect of
    those stages, one naming none on the final stages' effect. ``pairs`` (A, B) default to
    ``claims.claim_pairs`` in the paper profile (every pair a paper prints a difference of) and to
    the specs' ``compare_with`` elsewhere (``harness.spec.method.comparisons``)."""
    if pairs is None:
        pairs = claim_pairs() if profile == PAPER_PROFILE else comparisons()
    pairs = list(dict.fromkeys(pairs))
    latest = latest_by_method(records, profile)
    index: dict[tuple, list[Claim]] = {}
    for c in claims_for(pairs):
        # the runs that grade the two rows: each method's own, or the declared variant whose setting the row states
        index.setdefault(
            (c.a_graded_by, c.b_graded_by, _stage_key(c.a_stage, c.b_stage), c.benchmark, canonical_measure(c.measure)),
            [],
        ).append(c)
    pairs = list(dict.fromkeys([*pairs, *(key[:2] for key in index)]))  # a variant pair's effects too
    out, pairings, owners = [], [], []
    for a, b in pairs:
        for e in pair_effects(records, profile, a, b):
            out.append(e)
            keys = [_stage_key(e.a_stage, e.b_stage)] + ([("", "")] if e.final and (e.a_stage or e.b_stage) else [])
            for stages in keys:
                for claim in index.get((a, b, stages, e.dataset, canonical_measure(e.measure)), []):
                    pairings.append(
                        Pairing(
                            claim,
                            _conditions(latest[a], e.a_stage),
                            _conditions(latest[b], e.b_stage),
                            e.a_value,
                            e.b_value,
                        )
                    )
                    owners.append(e)
    for e, check in zip(owners, grade(pairings)):  # one grading: the claims of a table are one family
        e.claims.append(check.to_dict())
    for e in out:
        e.claim_status = overall_of(e.claims)
    return out


def overall_of(checks: Sequence[Mapping[str, Any]]) -> str:
    """The worst status among an effect's claim checks ("" without one)."""
    return rule.worst(c["status"] for c in checks)


def count_checks(effects: Sequence[Effect], pairs: Sequence[tuple[str, str]] | None = None) -> list[CountCheck]:
    """The count claims of ``pairs`` (default ``claims.claim_pairs``) graded from the effects' checks."""
    checks = {c["key"]: c for e in effects for c in e.claims}
    return [check_count(claim, checks) for claim in count_claims_for(pairs or claim_pairs())]


# ----------------------------------------------------------------------------- within one run


def stage_effects(record: RunRecord, base: str = "start") -> list[Effect]:
    """Each fine-tuning stage minus ``base`` (the zero-shot start) within one run."""
    by_stage = record.per_query_by_stage or {}
    if base not in by_stage:
        return []
    out = []
    for stage, datasets in by_stage.items():
        if stage == base:
            continue
        for dataset, measures in datasets.items():
            measure = primary_measure(dataset)
            pq_a, pq_b = measures.get(measure), by_stage[base].get(dataset, {}).get(measure)
            if pq_a and pq_b:
                e = _effect(
                    record.profile,
                    f"{record.method} {stage}",
                    f"{record.method} {base}",
                    record.run_id,
                    record.run_id,
                    dataset,
                    measure,
                    pq_a,
                    pq_b,
                )
                if record.profile in SEED_SPREAD_PROFILES:  # the start is untrained: one side's seed only
                    widen_by_seeds(e, *seed_spread(dataset, measure), trained_sides=1)
                out.append(e)
    return out


LEARNING_CHECK = "learning check, not the papers' effect"  # an effect of a profile other than paper


def format_effects(effects: Sequence[Effect]) -> str:
    """The effects as a table; the papers' printed differences only beside paper-profile runs (a
    mini effect is a learning check, never set beside a paper's claim: one line says so instead of a
    column repeating it), with the state of the claims' cells (``Effect.cells_state``)."""
    paper = any(e.profile == PAPER_PROFILE for e in effects)
    headers = ["effect", "dataset", "measure", "A", "B", "A-B", "95% CI", "p", "queries", "CI over", "CI excludes 0"]
    if paper:
        headers += ["paper claims", "vs claim", "papers' cells"]
    rows = []
    for e in effects:
        row: list[Any] = [
            e.label if paper or len({x.profile for x in effects}) == 1 else f"{e.label} [{e.profile}]",
            e.dataset,
            e.measure,
            f"{e.a_value:.2f}",
            f"{e.b_value:.2f}",
            f"{e.delta:+.2f}",
            f"[{e.ci_low:+.2f}, {e.ci_high:+.2f}]",
            p_text(e.p_value),
            e.queries,
            "queries" if e.seed_sd is None else f"+ seeds (sd {e.seed_sd:.2f})",
            "yes" if e.significant else "no",
        ]
        if paper:
            mine = e.profile == PAPER_PROFILE
            row += [claimed_text(e) if mine else "-", (e.claim_status or "-") if mine else LEARNING_CHECK]
            row.append(e.cells_state or "-")
        rows.append(row)
    table = format_table(
        headers,
        rows,
        wrap={0: 34, len(headers) - 3: 22, len(headers) - 2: 30, len(headers) - 1: 16} if paper else {0: 34},
    )
    return table if paper else f"{table}\nNumbers in points; {LEARNING_CHECK} (profile not 'paper')."


def claimed_text(effect: Effect) -> str:
    """The distinct printed differences, each with its first source, e.g. '+0.60 (qc-v2 Table 1)'."""
    seen: dict[float, str] = {}
    for c in effect.claims:
        seen.setdefault(c["claimed"], c["source"].split(" ", 1)[-1])
    return "; ".join(f"{v:+.2f} ({src})" for v, src in seen.items()) or "-"
