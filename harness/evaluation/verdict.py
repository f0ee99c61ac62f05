"""The one rule that says whether a paper's number was reproduced: equivalence testing.

Sources: Breuer, Ferro, Fuhr, Maistro, Sakai et al., "How to Measure the Reproducibility of
System-oriented IR Experiments", SIGIR 2020 (arXiv 2010.13447; code irgroup/repro_eval): Effect
Ratio and Delta-RI for "the improvement over the baseline holds"; Schuirmann (1987) and Lakens
(2017): two one-sided tests (TOST), i.e. equivalence is shown when the (1 - 2 alpha) CI of the
difference lies inside +-delta; Holm (1979): step-down correction across the cells of one table.

What separates a re-run from a paper's number. The paper and the run score the same queries, so
query sampling does not separate them; the seed does (the paper's run was one draw of its recipe,
the re-run is another). ``sigma`` is the seed-to-seed standard deviation of one run's benchmark
mean, in points (``harness.evaluation.noise``: measured where the project can run several seeds,
transferred elsewhere, each with its source). For ``d = run - paper`` from ``n`` runs against a
number printed as the mean of ``k`` runs, ``se = sigma * sqrt(1/n + 1/k)``.

The margin. ``delta = 1.96 * sqrt(2) * sigma`` (:func:`margin`): the difference that two honest
runs of one recipe stay within 95% of the time. Differences inside it are what re-running does;
it is never below the measured ``sigma``. For an effect (A - B, each a run) the same rule on the
effect's own spread gives ``delta_effect = 1.96 * sqrt(2) * sqrt(2) * sigma``.

The verdict of one comparable cell, alpha = 0.05, p-values Holm-adjusted across a table's cells:

* REPRODUCED: both one-sided tests reject |true d| >= delta (the 90% CI of d lies inside +-delta);
* DIFFERENT-BELOW / DIFFERENT-ABOVE: the test of |true d| <= delta rejects (the 90% CI lies
  wholly below -delta / above +delta). A number far above the paper is not a reproduction either;
  it is shown apart from one below;
* INCONCLUSIVE: neither: the run cannot tell (one seed on 43 TREC DL queries rarely can);
* NOT-COMPARABLE: the run does not share the cell's setting (``compare.comparability``).

Deterministic systems (training-free BM25, released checkpoints: the same weights on the same
queries, only numerics differ) have no seed: Anserini-style, REPRODUCED when |d| <= a fixed
tolerance (``tolerances.yaml``), else DIFFERENT-BELOW / -ABOVE.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

# The rule's outcomes: their words, meanings and order are declared in harness.core.statuses.
from harness.core.statuses import (DIFFERENT_ABOVE, DIFFERENT_BELOW, INCONCLUSIVE, NOT_COMPARABLE, REPRODUCED,
                               STATUSES, VERDICTS)
DIFFERENT = (DIFFERENT_BELOW, DIFFERENT_ABOVE)
WORST_FIRST = (DIFFERENT_BELOW, DIFFERENT_ABOVE, INCONCLUSIVE, REPRODUCED, NOT_COMPARABLE)  # what a group shows
# One line each, for every legend (leaderboard, report, check's footer).
LEGEND = {v: STATUSES[v].meaning for v in VERDICTS}

ALPHA = 0.05
Z_RANGE = 1.959963984540054  # two-sided 95%: the margin is the 95% range of an honest difference


def margin(sigma: float, replicates: int = 1) -> float:
    """delta: the 95% range of the difference between two honest replicates of a quantity whose
    one-replicate seed SD is ``sigma * sqrt(replicates)`` (1: one run's mean; 2: an effect A - B)."""
    return Z_RANGE * math.sqrt(2.0) * sigma * math.sqrt(replicates)


def _phi(x: float) -> float:
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


def p_equivalent(d: float, se: float, delta: float) -> float:
    """TOST p-value for H0 |true d| >= delta (the larger of the two one-sided p-values)."""
    if se <= 0:
        return 0.0 if abs(d) < delta else 1.0
    return max(_phi((d - delta) / se), 1.0 - _phi((d + delta) / se))


def p_different(d: float, se: float, delta: float) -> float:
    """p-value for H0 |true d| <= delta against |true d| > delta (worst case at the boundary)."""
    if se <= 0:
        return 0.0 if abs(d) > delta else 1.0
    return 1.0 - _phi((abs(d) - delta) / se)


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


@dataclass(frozen=True)
class Test:
    """One comparable quantity: the observed difference and what separates honest re-runs."""

    d: float        # run - paper (points)
    se: float       # standard error of d from seed noise (points)
    delta: float    # equivalence margin (points)

    def ci(self, alpha: float = ALPHA) -> tuple[float, float]:
        """The (1 - 2 alpha) CI of d: the interval TOST reads."""
        half = _z(1.0 - alpha) * self.se
        return self.d - half, self.d + half


def _z(q: float) -> float:
    """Inverse of the standard normal CDF (bisection: exact enough, no scipy)."""
    lo, hi = -10.0, 10.0
    for _ in range(100):
        mid = (lo + hi) / 2
        if _phi(mid) < q:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def verdicts(tests: Sequence[Test], alpha: float = ALPHA) -> list[tuple[str, float, float]]:
    """(verdict, Holm-adjusted p_equivalent, Holm-adjusted p_different) per test; the tests are
    one family (the comparable cells of one table)."""
    p_eq = holm([p_equivalent(t.d, t.se, t.delta) for t in tests])
    p_diff = holm([p_different(t.d, t.se, t.delta) for t in tests])
    out = []
    for t, pe, pd in zip(tests, p_eq, p_diff):
        if pe < alpha:
            verdict = REPRODUCED
        elif pd < alpha:
            verdict = DIFFERENT_ABOVE if t.d > 0 else DIFFERENT_BELOW
        else:
            verdict = INCONCLUSIVE
        out.append((verdict, pe, pd))
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
