"""What the rule can tell: the probability of each verdict for one cell, given the declared sigma_rep
and Delta (``harness.evaluation.margins``), and the seeds it takes to reach a target.

For ``n`` runs averaged against a number printed from ``k`` runs, ``d = run - paper`` is normal with
mean ``t`` (the true difference) and ``se = sigma * sqrt(1/n + 1/k)``; the rule
(``harness.evaluation.verdict``) reads an estimate ``s`` of sigma on ``df`` degrees of freedom
(``s**2 ~ sigma**2 chi2_df / df``, independent of d) and says REPRODUCED when
``|d| < Delta - t90 s c`` and DIFFERENT when ``|d| > max(Delta, t_{1-alpha/(2m)} s c)`` for a cell alone
in its table (``m = 1``: Holm's first step), ``c = sqrt(1/n + 1/k)``. Each probability below is over
both d and s (unconditional: what the user meets before the evidence is drawn), by quadrature over
the chi-square quantiles of s; the table takes the true sigma to be sigma_rep's estimate.
The targets of issue 37: P(REPRODUCED | t = 0) >= 0.8, P(DIFFERENT | t = 0) <= 0.05 and
P(DIFFERENT | t = 2 Delta) >= 0.8. ``tests/test_power_table.py`` checks these formulas against a
simulation of the rule itself and that docs/comparing-with-papers.md shows this table.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from scipy import stats

from harness.core import benchmarks as declared
from harness.evaluation import verdict as rule
from harness.evaluation.margins import practical_margin, sigma_rep
from harness.evaluation.noise import format_df

TARGET_REPRODUCED = 0.8  # P(REPRODUCED | same recipe)
TARGET_FALSE = 0.05  # P(DIFFERENT | same recipe), at most
TARGET_POWER = 0.8  # P(DIFFERENT | true gap of twice the margin)
# The benchmark/measure pairs the papers print, as declared (``printed``, else the primary measure; BEIR:
# the 14 datasets' nDCG@10).
BEIR = declared.beir()
PRINTED = tuple(
    (name, measure)
    for name in declared.reported()
    for measure in declared.get(name).printed or (declared.family(declared.get(name).kind).primary,)
)


QUADRATURE = 400  # chi-square quantile midpoints: the s draws the probabilities average over


@lru_cache(maxsize=64)
def _ratios(df: float) -> tuple[float, ...]:
    """s / sigma at the midpoints of ``QUADRATURE`` equal-probability slices of chi-square(df); 1 when
    sigma is known (df infinite)."""
    if math.isinf(df):
        return (1.0,)
    return tuple(math.sqrt(float(stats.chi2.ppf((i + 0.5) / QUADRATURE, df)) / df) for i in range(QUADRATURE))


def _average(df: float, prob: Callable[[float], float]) -> float:
    ratios = _ratios(df)
    return sum(prob(r) for r in ratios) / len(ratios)


def p_reproduced(t: float, se: float, delta: float, df: float = rule.KNOWN) -> float:
    """P(REPRODUCED) when the true difference is ``t`` and ``se`` the true standard error of d."""
    q = rule.quantile(1.0 - rule.ALPHA, df)

    def given(ratio: float) -> float:
        half = delta - q * ratio * se
        if half <= 0:
            return 0.0
        if se <= 0:
            return float(abs(t) < half)
        return max(0.0, rule.phi((half - t) / se) - rule.phi((-half - t) / se))

    return _average(df, given)


def p_different(t: float, se: float, delta: float, family: int = 1, df: float = rule.KNOWN) -> float:
    """P(DIFFERENT, either direction) when the true difference is ``t`` (Holm's first step over ``family``)."""
    q = rule.quantile(1.0 - rule.ALPHA / (2 * family), df)

    def given(ratio: float) -> float:
        cut = max(delta, q * ratio * se)
        if se <= 0:
            return float(abs(t) > cut)
        return 1.0 - rule.phi((cut - t) / se) + rule.phi((-cut - t) / se)

    return _average(df, given)


def fewest_seeds(target: float, prob, sigma: float, printed_runs: int = 1, most: int = rule.MAX_SEEDS) -> int | None:
    """The fewest runs averaged with ``prob(se) >= target`` (None: none up to ``most``)."""
    return rule.fewest_runs(lambda n: prob(rule.se_of(sigma, n, printed_runs)) >= target, most)


@dataclass(frozen=True)
class PowerRow:
    benchmark: str
    measure: str
    sigma_rep: float  # the estimate the test reads, taken as the true sigma
    df: float  # its degrees of freedom
    delta: float
    reproduced: float  # P(REPRODUCED | t = 0), one run vs one printed run
    false_different: float  # P(DIFFERENT | t = 0)
    power: float  # P(DIFFERENT | t = 2 Delta)
    seeds_reproduced: int | None  # runs for P(REPRODUCED | 0) >= TARGET_REPRODUCED
    seeds_power: int | None  # runs for P(DIFFERENT | 2 Delta) >= TARGET_POWER
    sigma_needed: float  # the largest sigma_rep at which one run reaches TARGET_REPRODUCED

    @property
    def meets(self) -> bool:
        return (
            self.reproduced >= TARGET_REPRODUCED and self.false_different <= TARGET_FALSE and self.power >= TARGET_POWER
        )


def power_row(benchmark: str, measure: str, extra: tuple = ()) -> PowerRow:
    """One row at the real evidence (``extra``: same-recipe evidence beside it, e.g. a seed study)."""
    spread = sigma_rep(benchmark, measure, extra)
    sigma, df, delta = spread.tested, spread.df, practical_margin(benchmark, measure).points
    se = rule.se_of(sigma)
    return PowerRow(
        benchmark,
        measure,
        sigma,
        df,
        delta,
        p_reproduced(0.0, se, delta, df),
        p_different(0.0, se, delta, df=df),
        p_different(2 * delta, se, delta, df=df),
        fewest_seeds(TARGET_REPRODUCED, lambda s: p_reproduced(0.0, s, delta, df), sigma),
        fewest_seeds(TARGET_POWER, lambda s: p_different(2 * delta, s, delta, df=df), sigma),
        sigma_needed(delta, df=df),
    )


def sigma_needed(delta: float, target: float = TARGET_REPRODUCED, df: float = rule.KNOWN) -> float:
    """The largest true sigma_rep with P(REPRODUCED | same recipe) >= ``target`` for one run vs one
    printed run, the test reading an estimate on ``df`` degrees of freedom."""
    lo, hi = 0.0, delta
    for _ in range(40):
        mid = (lo + hi) / 2
        if p_reproduced(0.0, rule.se_of(mid), delta, df) >= target:
            lo = mid
        else:
            hi = mid
    return lo


def power_table() -> list[PowerRow]:
    return [power_row(b, m) for b, m in PRINTED]


def markdown(rows: list[PowerRow]) -> str:
    """The docs' table (docs/comparing-with-papers.md, between its power-table markers)."""

    def seeds(n: int | None) -> str:
        return "none up to 20" if n is None else str(n)

    lines = [
        "| benchmark | measure | sigma_rep | df | Delta | P(REPRODUCED \\| same) | P(DIFFERENT \\| same) | "
        "P(DIFFERENT \\| 2 Delta off) | seeds for REPRODUCED >= 0.8 | seeds for DIFFERENT >= 0.8 | "
        "sigma_rep one run needs |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r.benchmark} | {r.measure} | {r.sigma_rep:.2f} | {format_df(r.df)} | {r.delta:.1f} | {r.reproduced:.2f} | "
            f"{r.false_different:.3f} | {r.power:.2f} | {seeds(r.seeds_reproduced)} | "
            f"{seeds(r.seeds_power)} | {r.sigma_needed:.2f} |"
        )
    return "\n".join(lines)
