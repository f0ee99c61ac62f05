"""Points: a retrieval score as the papers print it (0-100), from the fraction the evaluators return.

Run records keep fractions (ir-measures and trec_eval report 0-1); everything a person reads, MLflow's
metrics included, shows points, so one helper does the conversion and nobody multiplies twice.
"""

from __future__ import annotations

from collections.abc import Mapping


def to_points(fraction: float) -> float:
    """``0.3105`` -> ``31.05``."""
    return 100.0 * float(fraction)


def metrics_in_points(metrics: Mapping[str, Mapping[str, float]]) -> dict[str, dict[str, float]]:
    """A record's ``{benchmark: {measure: fraction}}`` in points, keys unchanged."""
    return {bench: {measure: to_points(value) for measure, value in values.items()}
            for bench, values in metrics.items()}
