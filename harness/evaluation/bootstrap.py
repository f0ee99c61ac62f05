"""Bootstrap over queries: a CI for one run's mean, and a paired test between two runs.

Queries are the resampling unit (the papers' numbers are means over a fixed query set,
so query sampling is the main source of noise in a comparison with them). Resampling
uses numpy's PCG64 generator seeded with ``harness.core.seeds.DEFAULT_SEED`` (42) by default: the same
inputs and seed always give the same interval. Percentile intervals.

For a score that is a mean of subset means (cqadupstack), pass ``strata``: queries are
resampled within each stratum and the statistic is the mean of the stratum means.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass

import numpy as np

from harness.core.errors import HarnessError
from harness.core.seeds import DEFAULT_SEED

DEFAULT_RESAMPLES = 1000


@dataclass(frozen=True)
class BootstrapCI:
    mean: float
    low: float
    high: float
    n_queries: int
    n_resamples: int
    confidence: float
    seed: int

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class PairedResult:
    """A minus B on shared queries, in the units of the inputs."""

    mean_diff: float
    low: float
    high: float
    p_value: float
    n_queries: int
    n_resamples: int
    confidence: float
    seed: int

    def to_dict(self) -> dict:
        return asdict(self)


def _check(n_resamples: int, confidence: float) -> None:
    if n_resamples < 1:
        raise HarnessError(f"bootstrap needs at least 1 resample, got {n_resamples}")
    if not 0.0 < confidence < 1.0:
        raise HarnessError(f"confidence must be in (0, 1), got {confidence}")


def _resampled_means(
    values: np.ndarray, groups: list[np.ndarray], n_resamples: int, rng: np.random.Generator
) -> np.ndarray:
    """Bootstrap distribution of the mean (of stratum means when there are several groups)."""
    stats = np.zeros(n_resamples)
    for idx in groups:
        sample = rng.integers(0, len(idx), size=(n_resamples, len(idx)))
        stats += values[idx][sample].mean(axis=1)
    return stats / len(groups)


def _groups(keys: list[str], strata: Callable[[str], str] | None) -> list[np.ndarray]:
    if strata is None:
        return [np.arange(len(keys))]
    by: dict[str, list[int]] = {}
    for i, key in enumerate(keys):
        by.setdefault(strata(key), []).append(i)
    return [np.asarray(v) for _, v in sorted(by.items())]


def _point(values: np.ndarray, groups: list[np.ndarray]) -> float:
    return float(np.mean([values[idx].mean() for idx in groups]))


def bootstrap_ci(
    per_query: Mapping[str, float],
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    confidence: float = 0.95,
    strata: Callable[[str], str] | None = None,
) -> BootstrapCI:
    """Percentile CI for the mean of ``per_query`` (``strata(qid)`` names a query's stratum)."""
    _check(n_resamples, confidence)
    if not per_query:
        raise HarnessError("bootstrap needs at least one per-query score")
    keys = sorted(per_query)  # fixed order: the CI must not depend on dict order
    values = np.asarray([per_query[k] for k in keys], dtype=float)
    groups = _groups(keys, strata)
    stats = _resampled_means(values, groups, n_resamples, np.random.default_rng(seed))
    alpha = (1.0 - confidence) / 2
    low, high = np.quantile(stats, [alpha, 1.0 - alpha])
    return BootstrapCI(_point(values, groups), float(low), float(high), len(keys), n_resamples, confidence, seed)


def paired_bootstrap(
    per_query_a: Mapping[str, float],
    per_query_b: Mapping[str, float],
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    confidence: float = 0.95,
    strata: Callable[[str], str] | None = None,
) -> PairedResult:
    """Paired bootstrap of mean(A - B) over the queries both runs scored.

    The p-value is two-sided, from the bootstrap distribution shifted to the null
    (Efron & Tibshirani 1993, sec. 16.4): the share of resampled mean differences at
    least as far from the observed one as the observed one is from 0, with add-one
    smoothing so that it is never exactly 0.
    """
    _check(n_resamples, confidence)
    shared = sorted(set(per_query_a) & set(per_query_b))
    if not shared:
        raise HarnessError("paired bootstrap: the two runs share no query ids")
    diffs = np.asarray([per_query_a[q] - per_query_b[q] for q in shared], dtype=float)
    groups = _groups(shared, strata)
    observed = _point(diffs, groups)
    stats = _resampled_means(diffs, groups, n_resamples, np.random.default_rng(seed))
    alpha = (1.0 - confidence) / 2
    low, high = np.quantile(stats, [alpha, 1.0 - alpha])
    extreme = np.count_nonzero(np.abs(stats - observed) >= abs(observed) - 1e-15)
    p_value = (extreme + 1) / (n_resamples + 1)
    return PairedResult(
        observed, float(low), float(high), float(min(1.0, p_value)), len(shared), n_resamples, confidence, seed
    )
