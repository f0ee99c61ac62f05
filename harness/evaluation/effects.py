"""Effects: what pre-training (or QC, or fine-tuning) changes, measured on the same queries.

The papers' claims are differences (method vs no pre-training, with vs without QC), so the
harness reports them as such: for two runs of the same profile, the paired bootstrap of the
per-query difference of the dataset's primary measure (``conventions.primary_measure``; the
bootstrap: ``harness.evaluation.bootstrap``): mean difference, 95% CI and two-sided p-value, in
points. ``stage_effects`` does the same inside one run, between its fine-tuning stages and the
zero-shot start (``start``), which is the check that fine-tuning itself works. Where a paper
printed the same difference, the effect is graded against that claim by the one rule of
``harness.evaluation.verdict`` (through ``harness.evaluation.claims``): REPRODUCED, DIFFERENT-BELOW
/ -ABOVE, INCONCLUSIVE, or NOT-COMPARABLE when the runs do not share the claim's setting (every
profile but ``paper``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

from harness.core.text_table import format_table
from harness.evaluation.bootstrap import paired_bootstrap
from harness.evaluation.claims import check_claims, claims_for, overall
from harness.evaluation.conventions import primary_measure
from harness.evaluation.noise import sigma
from harness.records.store import RunRecord
from harness.spec.method import comparisons


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
    ci_low: float
    ci_high: float
    p_value: float
    queries: int
    claims: list[dict] = field(default_factory=list)  # ClaimCheck dicts: the papers' printed differences
    claim_status: str = ""                            # worst over the comparable claims; "" without one

    @property
    def significant(self) -> bool:
        return self.ci_low > 0 or self.ci_high < 0

    def to_dict(self) -> dict:
        return asdict(self)


def _effect(profile: str, a: str, b: str, a_run: str, b_run: str, dataset: str, measure: str,
            pq_a: dict[str, float], pq_b: dict[str, float]) -> Effect:

    res = paired_bootstrap(pq_a, pq_b)
    mean = lambda pq: 100.0 * sum(pq.values()) / len(pq)  # noqa: E731
    return Effect(profile, a, b, a_run, b_run, dataset, measure, mean(pq_a), mean(pq_b), 100.0 * res.mean_diff,
                  100.0 * res.low, 100.0 * res.high, res.p_value, res.n_queries)


def latest_by_method(records: Sequence[RunRecord], profile: str) -> dict[str, RunRecord]:
    """The newest usable record of each method in ``profile``."""
    out: dict[str, RunRecord] = {}
    for rec in sorted(records, key=lambda r: (r.created, r.run_id)):
        if rec.profile == profile and not rec.integrity_problems:
            out[rec.method] = rec
    return out


def method_effects(records: Sequence[RunRecord], profile: str,
                   pairs: Sequence[tuple[str, str]] | None = None) -> list[Effect]:
    """A minus B on each dataset both final retrievers were evaluated on, for every pair present;
    ``pairs`` (A, B) default to the specs' ``compare_with`` (``harness.spec.method.comparisons``)."""

    if pairs is None:

        pairs = comparisons()
    latest = latest_by_method(records, profile)
    claims = claims_for(pairs)
    out = []
    for a, b in pairs:
        if a not in latest or b not in latest:
            continue
        ra, rb = latest[a], latest[b]
        for dataset in ra.metrics:
            measure = primary_measure(dataset)
            pq_a = ra.per_query.get(dataset, {}).get(measure)
            pq_b = rb.per_query.get(dataset, {}).get(measure)
            if pq_a and pq_b:
                e = _effect(profile, a, b, ra.run_id, rb.run_id, dataset, measure, pq_a, pq_b)
                mine = [c for c in claims if (c.a, c.b, c.benchmark, c.measure) == (a, b, dataset, measure)]

                checks = check_claims(mine, ra.conditions(), rb.conditions(), e.a_value, e.b_value,
                                      sigma(dataset, measure).points)
                e.claims, e.claim_status = [c.to_dict() for c in checks], overall(checks)
                out.append(e)
    return out


def stage_effects(record: RunRecord, base: str = "start") -> list[Effect]:
    """Each fine-tuning stage minus ``base`` (the zero-shot start) within one run."""
    by_stage = record.get("per_query_by_stage") or {}
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
                out.append(_effect(record.profile, f"{record.method} {stage}", f"{record.method} {base}",
                                   record.run_id, record.run_id, dataset, measure, pq_a, pq_b))
    return out


def format_effects(effects: Sequence[Effect]) -> str:
    rows = [[e.profile, f"{e.a} - {e.b}", e.dataset, e.measure, f"{e.a_value:.2f}", f"{e.b_value:.2f}",
             f"{e.delta:+.2f}", f"[{e.ci_low:+.2f}, {e.ci_high:+.2f}]", f"{e.p_value:.3f}", e.queries,
             "yes" if e.significant else "no", claimed_text(e), e.claim_status or "-"] for e in effects]
    return format_table(["profile", "effect", "dataset", "measure", "A", "B", "A-B", "95% CI", "p", "queries",
                         "CI excludes 0", "paper claims", "vs claim"], rows)


def claimed_text(effect: Effect) -> str:
    """The distinct printed differences, each with its first source, e.g. '+0.60 (qc-v2 Table 1)'."""
    seen: dict[float, str] = {}
    for c in effect.claims:
        seen.setdefault(c["claimed"], c["source"].split(" ", 1)[-1])
    return "; ".join(f"{v:+.2f} ({src})" for v, src in seen.items()) or "-"
