"""The papers' claimed effects, derived from the registry, and a reproduced effect graded against them.

A paper's claim is a difference between two of its own rows in one table: e.g. qc-v2 Table 1,
coCondenser w/ query-as-context (120K) minus coCondenser (120K), retriever 2, MS MARCO dev
MRR@10 = 39.4 - 38.8 = +0.6. Per-number tolerances (+-0.5, +-2.0) are as wide as such gains, so a
with-QC and a without-QC run can both PASS with the effect reversed; the effect itself is
therefore graded:

* PASS: the reproduced difference has the claim's sign and its 95% paired-bootstrap CI covers
  the claimed difference;
* FAIL: the CI excludes the claimed difference;
* INCONCLUSIVE: the CI covers the claim but the point estimate has the other sign (or is 0);
* NOT-COMPARABLE: either run does not share the setting of its row (``compare.comparability``:
  profile, stage, budget, fine-tuning data, ...), with the reason.

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

from harness.evaluation.compare import NOT_COMPARABLE, comparability

PASS, FAIL, INCONCLUSIVE = "PASS", "FAIL", "INCONCLUSIVE"
CLAIM_STATUSES = (FAIL, INCONCLUSIVE, PASS, NOT_COMPARABLE)  # worst first
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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def claims_for(pairs: Sequence[tuple[str, str]], cells: Sequence[Any] | None = None) -> list[Claim]:
    """Every claimed A-minus-B difference of ``pairs`` in the registry (or in ``cells``)."""
    if cells is None:
        from harness.reported import load_registry

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


def claim_status(claimed: float, delta: float, ci_low: float, ci_high: float) -> str:
    """PASS / FAIL / INCONCLUSIVE of a reproduced difference (points) against a claimed one."""
    if not ci_low - 1e-9 <= claimed <= ci_high + 1e-9:
        return FAIL
    if delta != 0 and (delta > 0) == (claimed > 0) and claimed != 0:
        return PASS
    return INCONCLUSIVE


def check_claims(claims: Sequence[Claim], a_conditions: Mapping[str, Any], b_conditions: Mapping[str, Any],
                 delta: float, ci_low: float, ci_high: float) -> list[ClaimCheck]:
    """Grade one reproduced effect (run A minus run B) against every claim for its pair and dataset."""
    out = []
    for claim in claims:
        reason = (comparability(claim.a, dict(claim.a_conditions), a_conditions)[0]
                  or comparability(claim.b, dict(claim.b_conditions), b_conditions)[0])
        status = NOT_COMPARABLE if reason else claim_status(claim.delta, delta, ci_low, ci_high)
        out.append(ClaimCheck(claim.source, claim.a_row, claim.b_row, claim.delta, status, reason))
    return out


def overall(checks: Sequence[ClaimCheck]) -> str:
    """The worst status among the claims (empty when there is no claim)."""
    statuses = {c.status for c in checks}
    return next((s for s in CLAIM_STATUSES if s in statuses), "")
