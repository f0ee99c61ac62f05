"""The one rule that says whether a paper's number was reproduced, and whether a claimed effect held.

Sources: Schuirmann (1987) and Lakens (2017): two one-sided tests (TOST), equivalence is shown when
the (1 - 2 alpha) CI of a difference lies inside +-Delta, a margin fixed in advance; Berger (1982):
a table is equivalent when every cell is (intersection-union: no multiplicity penalty); Holm (1979):
step-down correction of the tests that say "different" across the cells of one table; Breuer,
Ferro, Fuhr, Maistro, Sakai et al., "How to Measure the Reproducibility of System-oriented IR
Experiments", SIGIR 2020 (``repro_eval``): Effect Ratio and Delta-RI for the size of an effect.

Two declared quantities per benchmark and measure (``harness.evaluation.margins``, each with its
source): ``sigma_rep``, the seed SD of one run's mean at paper scale (how far honest re-runs of one
recipe land apart), and ``Delta``, the practical margin: the difference the field treats as real,
chosen in advance and never derived from a standard error. For ``d = run - paper`` from ``n`` runs
against a number printed as the mean of ``k`` runs, ``se = sigma_rep * sqrt(1/n + 1/k)``, sigma_rep
estimated on ``df`` degrees of freedom: every test reads Student's t on those df (Student 1908; the
t-based TOST of Schuirmann 1987), so P(false DIFFERENT) and P(false REPRODUCED) stay <= alpha
whatever the df, not only given the sigma drawn (a z-test on an upper bound gives ~0.054 at 2 df).

A cell, alpha = 0.05:

* REPRODUCED: the 90% CI of d lies inside +-Delta (both one-sided tests reject |d| >= Delta), cell
  by cell; a table is reproduced when every cell is;
* DIFFERENT-BELOW / -ABOVE: the two-sided test of d = 0 rejects after Holm over the table's
  comparable cells, and |d| > Delta (a significant difference smaller than the margin is not one
  that matters);
* INCONCLUSIVE: neither; :func:`within` says the smallest margin the CI lies inside, and
  :func:`seeds_to_resolve` how many runs would settle it at the same d (or that none can);
* NOT-COMPARABLE: the run does not share the cell's setting (``compare.comparability``).

An effect (a paper's "A improves on B": printed ``c = A - B``, reproduced ``e`` from two runs):

* REPRODUCED: the direction holds, the one-sided test of ``sign(c) * e > 0`` rejects at alpha; its
  size is reported as Effect Ratio ``e / c`` with a CI, and Delta-RI;
* DIFFERENT-BELOW / -ABOVE: ``e - c = 0`` is rejected (Holm over the table's claims; ``se`` holds the
  paper's seed noise too) and the effect is reversed or misses ``c`` by more than Delta;
* INCONCLUSIVE otherwise. A printed tie (``c = 0``) is graded like a cell: equivalence of ``e`` and 0.

Deterministic systems (training-free BM25, released checkpoints: the same weights on the same
queries, only numerics differ) have no seed: Anserini-style, REPRODUCED when |d| <= a fixed
tolerance (``tolerances.yaml``), else DIFFERENT-BELOW / -ABOVE.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from scipy import stats

# The rule's outcomes: their words, meanings and order are declared in harness.core.statuses.
from harness.core.statuses import (
    DIFFERENT_ABOVE,
    DIFFERENT_BELOW,
    INCONCLUSIVE,
    NOT_COMPARABLE,
    REPRODUCED,
    STATUSES,
    VERDICTS,
)

DIFFERENT = (DIFFERENT_BELOW, DIFFERENT_ABOVE)
WORST_FIRST = (DIFFERENT_BELOW, DIFFERENT_ABOVE, INCONCLUSIVE, REPRODUCED, NOT_COMPARABLE)  # what a group shows
# One line each, for every legend (leaderboard, report, check's footer).
LEGEND = {v: STATUSES[v].meaning for v in VERDICTS}

ALPHA = 0.05
MAX_SEEDS = 20  # fewest_runs looks no further: beyond it a re-run campaign is not a plan


def phi(x: float) -> float:
    """Standard normal CDF."""
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


def z(q: float) -> float:
    """Inverse of the standard normal CDF (bisection: exact enough, no scipy)."""
    lo, hi = -10.0, 10.0
    for _ in range(100):
        mid = (lo + hi) / 2
        if phi(mid) < q:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


Z_CI = z(1.0 - ALPHA)  # 1.645: the 90% CI that TOST reads (sigma known: df infinite)
KNOWN = math.inf  # df of a spread taken as known


def cdf(x: float, df: float = KNOWN) -> float:
    """Student t CDF on ``df`` degrees of freedom (the normal's when df is infinite)."""
    return phi(x) if math.isinf(df) else float(stats.t.cdf(x, df))


def quantile(q: float, df: float = KNOWN) -> float:
    """Student t quantile on ``df`` degrees of freedom (the normal's when df is infinite)."""
    return z(q) if math.isinf(df) else float(stats.t.ppf(q, df))


def p_equivalent(d: float, se: float, delta: float, df: float = KNOWN) -> float:
    """TOST p-value for H0 |true d| >= delta (the larger of the two one-sided p-values; Schuirmann 1987,
    t on the df of se's sigma)."""
    if se <= 0:
        return 0.0 if abs(d) < delta else 1.0
    return max(cdf((d - delta) / se, df), 1.0 - cdf((d + delta) / se, df))


def p_zero(d: float, se: float, df: float = KNOWN) -> float:
    """Two-sided p-value for H0 true d = 0 (Student's t on the df of se's sigma)."""
    if se <= 0:
        return 0.0 if d else 1.0
    return 2.0 * (1.0 - cdf(abs(d) / se, df))


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (same order as given)."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    adjusted = [1.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted


# A pre-training spread no run on file has measured (every seed study shares one pre-training) is taken
# as large as the fine-tuning spread: the case issue 61 simulated (five seeds of one pre-training against a
# printed run: false DIFFERENT 0.135 at sigma 0.5 without it). Fine-tune-only evidence is a lower bound.
PRETRAIN_STANDIN = 1.0  # sigma_pt / sigma_ft where sigma_pt is not measured


def se_of(sigma: float, runs: int = 1, printed_runs: int = 1, pretrain: float = 0.0) -> float:
    """Standard error of ``mean of runs - printed mean of printed_runs`` from seed noise: ``sigma`` the
    fine-tuning spread of one run, ``pretrain`` the pre-training spread when the runs share one
    pre-training and the printed ones another (averaging seeds leaves both pre-trainings in d):
    ``se**2 = sigma**2 (1/n + 1/k) + 2 pretrain**2``."""
    return math.sqrt(sigma**2 * (1.0 / max(1, runs) + 1.0 / max(1, printed_runs)) + 2.0 * pretrain**2)


def satterthwaite(parts: Sequence[tuple[float, float]]) -> float:
    """Welch-Satterthwaite df of a sum of variance parts, each (variance, its df): ``(sum v)^2 / sum v^2 / df``;
    a part of 0 adds nothing, a known part (``KNOWN`` df) adds to the sum only."""
    total = sum(v for v, _ in parts)
    spread = sum(v**2 / df for v, df in parts if v > 0 and df < KNOWN)
    return total**2 / spread if spread > 0 else KNOWN


def pretrain_df(ft_variance: float, ft_df: float, pt_sigma: float, pt_df: float, sides: float = 2.0) -> float:
    """The df of ``se**2 = ft_variance + sides * pt_sigma**2`` when the pre-training part is measured
    (``noise.pretrain_spread``, on ``pt_df``): Satterthwaite on both parts; a part clipped to 0 keeps the df
    at most its own (a clip never raises the df: the part may be large, only not measured so)."""
    df = satterthwaite([(ft_variance, ft_df), (sides * pt_sigma**2, pt_df)])
    return min(df, pt_df) if pt_sigma <= 0 else df


@dataclass(frozen=True)
class Test:
    """One comparable quantity: the observed difference, its seed standard error, the margin."""

    d: float  # run - paper (points)
    se: float  # standard error of d from seed noise (points), from sigma_rep's estimate
    delta: float  # Delta, the practical margin (points)
    df: float = KNOWN  # degrees of freedom of that estimate

    def ci(self, alpha: float = ALPHA) -> tuple[float, float]:
        """The (1 - 2 alpha) CI of d: the interval TOST reads."""
        half = quantile(1.0 - alpha, self.df) * self.se
        return self.d - half, self.d + half


def within(low: float, high: float) -> float:
    """The smallest margin the CI [low, high] lies inside ("consistent within +-m"): the margin at
    which this cell would have been REPRODUCED (TOST's CI inclusion read backwards)."""
    return max(abs(low), abs(high))


def verdicts(tests: Sequence[Test], alpha: float = ALPHA) -> list[tuple[str, float, float]]:
    """(verdict, TOST p-value, Holm-adjusted p-value of d = 0) per test; the tests are one family
    (the comparable cells of one table): Holm applies to "different" only."""
    p_diff = holm([p_zero(t.d, t.se, t.df) for t in tests])
    out = []
    for t, pd in zip(tests, p_diff):
        pe = p_equivalent(t.d, t.se, t.delta, t.df)
        if pe < alpha:
            verdict = REPRODUCED
        elif pd < alpha and abs(t.d) > t.delta:
            verdict = DIFFERENT_ABOVE if t.d > 0 else DIFFERENT_BELOW
        else:
            verdict = INCONCLUSIVE
        out.append((verdict, pe, pd))
    return out


def fewest_runs(settles: Callable[[int], bool], most: int = MAX_SEEDS) -> int | None:
    """The fewest runs ``n`` (1 to ``most``) with ``settles(n)``; None when none does. The one search
    behind every seed count: ``seeds_to_resolve``, ``claims.seeds_to_settle``, ``power.fewest_seeds``."""
    return next((n for n in range(1, most + 1) if settles(n)), None)


def seeds_to_resolve(
    d: float,
    sigma: float,
    delta: float,
    printed_runs: int = 1,
    family: int = 1,
    alpha: float = ALPHA,
    max_seeds: int = MAX_SEEDS,
    df: float = KNOWN,
    pretrain: float = 0.0,
) -> int | None:
    """The fewest runs (averaged) that would settle a cell at the same observed ``d``, at this sigma_rep:
    REPRODUCED if |d| < Delta, DIFFERENT if |d| > Delta (passing the whole ``family`` of cells at once,
    Bonferroni: the most demanding step of Holm's, so never fewer runs than Holm would need); None when
    no number up to ``max_seeds`` does (the paper's own seed noise stays in se). The ``n`` runs are seed
    evidence too: their spread, at this sigma_rep, adds ``n - 1`` df to the ``df`` already there."""

    def settles(n: int) -> bool:
        se, df_n = se_of(sigma, n, printed_runs, pretrain), df + n - 1
        return (abs(d) < delta and p_equivalent(d, se, delta, df_n) < alpha) or (
            abs(d) > delta and p_zero(d, se, df_n) * family < alpha
        )

    return fewest_runs(settles, max_seeds)


def sigma_no_runs_can(
    d: float,
    delta: float,
    printed_runs: int = 1,
    family: int = 1,
    alpha: float = ALPHA,
    df: float = KNOWN,
    pretrain_ratio: float = 0.0,
) -> float:
    """The sigma_rep at and above which no number of runs settles a cell at ``d``: with infinitely many
    runs se is still ``sigma sqrt(1 / printed_runs + 2 pretrain_ratio**2)`` (the paper's own seeds, both
    pre-trainings) and, the runs being seed evidence too, the df unbounded (the normal's quantiles; ``df``
    is kept for a caller that holds them fixed). REPRODUCED needs ``|d| + z se < Delta``; DIFFERENT
    ``|d| > z_{1 - alpha / (2 family)} se``."""
    k = math.sqrt(1.0 / max(1, printed_runs) + 2.0 * pretrain_ratio**2)
    if abs(d) < delta:
        return (delta - abs(d)) / k / quantile(1.0 - alpha, df)
    return abs(d) / k / quantile(1.0 - alpha / (2 * family), df)


@dataclass(frozen=True)
class EffectTest:
    """A printed effect ``claimed = A - B`` against a reproduced one (points)."""

    effect: float  # run A - run B
    se_effect: float  # seed se of the run effect (two independent runs)
    claimed: float  # as printed
    se_diff: float  # seed se of effect - claimed (the paper's two runs add theirs)
    delta: float  # Delta of the measure
    df: float = KNOWN  # degrees of freedom of sigma_rep's estimate

    def ci(self, alpha: float = ALPHA) -> tuple[float, float]:
        """The (1 - 2 alpha) CI of the run effect."""
        half = quantile(1.0 - alpha, self.df) * self.se_effect
        return self.effect - half, self.effect + half

    def ratio_ci(self, alpha: float = ALPHA) -> tuple[float, float] | None:
        """Effect Ratio's CI (the run effect's CI over the printed effect); None for a printed tie."""
        if not self.claimed:
            return None
        low, high = (x / self.claimed for x in self.ci(alpha))
        return min(low, high), max(low, high)


def effect_verdicts(tests: Sequence[EffectTest], alpha: float = ALPHA) -> list[tuple[str, float, float]]:
    """(verdict, p-value of the direction (a tie: TOST), Holm-adjusted p-value of effect = claimed)
    per claim; the tests are one family (the claims of one table)."""
    p_diff = holm([p_zero(t.effect - t.claimed, t.se_diff, t.df) for t in tests])
    out = []
    for t, pd in zip(tests, p_diff):
        gap = t.effect - t.claimed
        if t.claimed == 0:
            p_dir = p_equivalent(t.effect, t.se_effect, t.delta, t.df)
            holds, off = p_dir < alpha, abs(t.effect) > t.delta
        else:
            sign = 1.0 if t.claimed > 0 else -1.0
            p_dir = 1.0 - cdf(sign * t.effect / t.se_effect, t.df) if t.se_effect > 0 else float(sign * t.effect <= 0)
            holds, off = p_dir < alpha, sign * t.effect < 0 or abs(gap) > t.delta
        if pd < alpha and off:
            verdict = DIFFERENT_ABOVE if gap > 0 else DIFFERENT_BELOW
        elif holds:
            verdict = REPRODUCED
        else:
            verdict = INCONCLUSIVE
        out.append((verdict, p_dir, pd))
    return out


def worst(statuses: Iterable[str]) -> str:
    """The worst verdict among ``statuses`` (``WORST_FIRST``): what a group of cells or claims
    shows as one; "" when none is a verdict."""
    present = set(statuses)
    return next((v for v in WORST_FIRST if v in present), "")


def exact_verdict(d: float, tolerance: float) -> str:
    """Deterministic systems: REPRODUCED within the tolerance, else DIFFERENT in d's direction."""
    d, tolerance = round(d, 6), round(tolerance, 6)  # 38.7 - 38.2 must be 0.5, not 0.50000001
    if abs(d) <= tolerance:
        return REPRODUCED
    return DIFFERENT_ABOVE if d > 0 else DIFFERENT_BELOW


def effect_ratio(run_a: float, run_b: float, paper_a: float, paper_b: float) -> float | None:
    """Breuer et al. (2020) Effect Ratio: the reproduced improvement over the original one (1 =
    the whole improvement reproduced, 0 = none, < 0 = reversed); None when the paper shows none."""
    paper = paper_a - paper_b
    return None if paper == 0 else (run_a - run_b) / paper


def delta_ri(run_a: float, run_b: float, paper_a: float, paper_b: float) -> float | None:
    """Breuer et al. (2020) Delta Relative Improvement: RI(paper) - RI(run), RI = (A - B) / B
    (0 = the relative improvement reproduced exactly; > 0 = the run improves less)."""
    if paper_b == 0 or run_b == 0:
        return None
    return (paper_a - paper_b) / paper_b - (run_a - run_b) / run_b
