"""The papers' claimed effects, derived from the registry, and a reproduced effect graded against them.

A paper's claim is a difference between two of its own rows in one table: e.g. qc-v2 Table 1,
coCondenser w/ query-as-context (120K) minus coCondenser (120K), retriever 2, MS MARCO dev
MRR@10 = 39.4 - 38.8 = +0.6. A with-QC and a without-QC run can each reproduce their cells with
the effect reversed, so the effect itself is graded, by the same rule as a cell
(``harness.evaluation.verdict``): ``d = run effect - claimed effect``, whose seed noise is that of
four runs (``se = 2 sigma``), against the margin of an effect (``margin(sigma, replicates=2)``):
REPRODUCED, DIFFERENT-BELOW / -ABOVE, INCONCLUSIVE, or NOT-COMPARABLE when either run does not
share the setting of its row (``compare.comparability``), with the reason. Each check also carries
Breuer et al.'s Effect Ratio and Delta-RI ("is the improvement over the baseline reproduced?").

Claims come only from a paper's own rows: cited numbers and ablations are not the paper's
comparison and are skipped; two rows form a claim when they share table, benchmark, measure
and every condition except those that name the method's own variant (query number, mixed
context, the authors'-reproduction mark).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from harness.evaluation import verdict as rule
from harness.evaluation.compare import comparability
from harness.evaluation.verdict import NOT_COMPARABLE
from harness.papers.registry import load_registry

_VARIANT_ONLY = frozenset({"query_number", "mixed", "reproduction_by_authors", "runs_averaged"})
_NOT_OWN = frozenset({"cited", "ablation"})


@dataclass(frozen=True)
class Claim:
    """A minus B as printed in one table (points)."""

    a: str
    b: str
    benchmark: str
    measure: str
    source: str             # "qc-pretraining-v2.txt v2 Table 1"
    a_row: str
    b_row: str
    a_value: float
    b_value: float
    a_conditions: tuple[tuple[str, Any], ...]
    b_conditions: tuple[tuple[str, Any], ...]

    @property
    def delta(self) -> float:
        return round(self.a_value - self.b_value, 6)


@dataclass
class ClaimCheck:
    """One claim against one reproduced effect."""

    source: str
    a_row: str
    b_row: str
    claimed: float
    status: str
    reason: str = ""
    margin: float | None = None        # +-delta of an effect (points)
    ci_low: float | None = None        # 90% CI of (run effect - claimed), seed noise
    ci_high: float | None = None
    effect_ratio: float | None = None  # Breuer et al. 2020: reproduced / claimed improvement
    delta_ri: float | None = None      # Breuer et al. 2020: RI(paper) - RI(run)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def claims_for(pairs: Sequence[tuple[str, str]], cells: Sequence[Any] | None = None) -> list[Claim]:
    """Every claimed A-minus-B difference of ``pairs`` in the registry (or in ``cells``)."""
    if cells is None:

        cells = load_registry()
    wanted = {m for pair in pairs for m in pair}
    groups: dict[tuple, list[Any]] = defaultdict(list)
    for c in cells:
        conditions = dict(c.conditions or {})
        if c.score is None or c.method not in wanted or not c.benchmark or not c.measure or _NOT_OWN & set(conditions):
            continue
        setting = tuple(sorted((k, str(v)) for k, v in conditions.items() if k not in _VARIANT_ONLY))
        groups[(c.paper_file, c.version, c.table, c.benchmark, c.measure, setting)].append(c)
    out = []
    for (paper_file, version, table, benchmark, measure, _), group in groups.items():
        for a, b in pairs:
            for ca in (c for c in group if c.method == a):
                for cb in (c for c in group if c.method == b):
                    out.append(Claim(a, b, benchmark, measure, f"{paper_file} {version} {table}", ca.row, cb.row,
                                     round(100 * ca.score, 6), round(100 * cb.score, 6),
                                     tuple(sorted(ca.conditions.items())), tuple(sorted(cb.conditions.items()))))
    return out


def check_claims(claims: Sequence[Claim], a_conditions: Mapping[str, Any], b_conditions: Mapping[str, Any],
                 a_value: float, b_value: float, sigma: float) -> list[ClaimCheck]:
    """Grade one reproduced effect (run A minus run B, points) against every claim for its pair and
    dataset; ``sigma`` is the seed SD of one run's mean on that dataset and measure."""
    out, tests = [], []
    delta = a_value - b_value
    for claim in claims:
        reason = (comparability(claim.a, dict(claim.a_conditions), a_conditions)[0]
                  or comparability(claim.b, dict(claim.b_conditions), b_conditions)[0])
        check = ClaimCheck(claim.source, claim.a_row, claim.b_row, claim.delta, NOT_COMPARABLE, reason,
                           effect_ratio=rule.effect_ratio(a_value, b_value, claim.a_value, claim.b_value),
                           delta_ri=rule.delta_ri(a_value, b_value, claim.a_value, claim.b_value))
        out.append(check)
        if not reason:
            check.margin = rule.margin(sigma, replicates=2)
            tests.append((check, rule.Test(delta - claim.delta, 2.0 * sigma, check.margin)))
    for (check, test), (status, _, _) in zip(tests, rule.verdicts([t for _, t in tests])):
        check.status = status
        check.ci_low, check.ci_high = test.ci()
    return out


def overall(checks: Sequence[ClaimCheck]) -> str:
    """The worst status among the claims (empty when there is no claim)."""
    return rule.worst(c.status for c in checks)
