"""Numbers as a person reads them: points (100 x fraction), at the precision the paper printed.

Papers print a measure either as a fraction ("0.340") or in points ("38.2"); the harness computes
fractions and compares in points. Every table a person reads (the run's closing table, its last
line, `check`) shows points, and where the paper printed a fraction the printed value beside it
("34.0 (printed 0.340)"), so neither a fraction beside a point nor "1.0" read as a perfect score
can mislead. A missing number is "-".

Run records keep fractions (ir-measures and trec_eval report 0-1); MLflow's metrics show points too,
converted in one place (harness.records.parent_run.in_points) for live runs and loaded records alike.
"""

from __future__ import annotations

import math
import re

_NUMBER = re.compile(r"[-+]?(\d+(?:\.(\d*))?|\.(\d+))")


def _parse(printed: str | None) -> tuple[float, int] | None:
    """(value, decimals) of the first number in a printed cell ("0.340" -> (0.34, 3)); None if none."""
    match = _NUMBER.search(printed or "")
    if match is None:
        return None
    decimals = match.group(2) if match.group(2) is not None else (match.group(3) or "")
    return float(match.group(0)), len(decimals)


def printed_as_fraction(printed: str | None, reported: float | None) -> bool:
    """Whether the paper printed this cell as a fraction: its printed number, x 100, is ``reported``
    (points) and differs from it (a cell printed in points equals ``reported``)."""
    parsed = _parse(printed)
    if parsed is None or reported is None:
        return False
    value = parsed[0]
    return not math.isclose(value, reported, abs_tol=1e-9) and math.isclose(100.0 * value, reported, abs_tol=1e-6)


def points_decimals(printed: str | None, reported: float | None, default: int = 2) -> int:
    """Decimals of the cell in points: "0.340" -> 1, "38.2" -> 1, "66.47" -> 2; ``default`` when unknown."""
    parsed = _parse(printed)
    if parsed is None or reported is None:
        return default
    return max(parsed[1] - 2, 0) if printed_as_fraction(printed, reported) else parsed[1]


def fmt(value: float | None, digits: int = 2, signed: bool = False) -> str:
    """A number in points at ``digits`` decimals; "-" when missing (None or NaN)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    value = round(value, digits) + 0.0  # no "-0.0": a difference that rounds to nothing has no sign
    return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


def reported_text(reported: float | None, printed: str | None) -> str:
    """The paper's cell in points at its printed precision, with the printed value beside it when the
    paper printed a fraction: "34.0 (printed 0.340)", "38.2"; the printed text when it is not a number."""
    if reported is None:
        return (printed or "-").strip() or "-"
    digits = points_decimals(printed, reported)
    text = fmt(reported, digits)
    return f"{text} (printed {printed.strip()})" if printed and printed_as_fraction(printed, reported) else text


def p_text(p: float | None) -> str:
    """A p-value as printed: three decimals, "< 0.001" below that (never "0.000"); "-" when missing."""
    if p is None or (isinstance(p, float) and math.isnan(p)):
        return "-"
    return "< 0.001" if p < 0.001 else f"{p:.3f}"


def p_phrase(p: float | None) -> str:
    """A p-value in a sentence: "p < 0.001", "p = 0.042"."""
    text = p_text(p)
    return f"p {text}" if text.startswith("<") else f"p = {text}"
