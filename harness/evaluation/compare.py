"""Reproduced vs reported, cell by cell: tolerance status and a bootstrap CI for the gap.

    comparisons = compare(metrics, per_query, cells, run_conditions)
    print(format_comparison_table(comparisons))

* ``metrics``: ``{benchmark: {measure: fraction}}`` (what ``evaluate`` aggregates).
* ``per_query``: ``{benchmark: {measure: {qid: fraction}}}`` (may be empty: no CI then).
* ``cells``: reported cells (objects or mappings) with ``cell_id, paper_file, version,
  table, row, column, method, benchmark, measure, score`` (fraction or None), ``value``
  (the printed string) and ``conditions`` (``profile``, ``pretrain_steps``,
  ``finetune_stage``, ``query_number``, ``mixed``, ...; a missing key means "not stated").
* ``run_conditions``: the same keys for the run, plus ``method``.

Status, with delta = reproduced - reported in points and tol from ``tolerances.yaml``:
PASS |delta| <= tol; ABOVE delta > tol; NEAR -1.5 tol <= delta < -tol; FAIL below;
NOT-COMPARABLE when the run's profile is not "paper", the method differs, a condition the
cell states is not stated by the run or differs from the run's (see ``comparability``), the
reported value is not a number, or the run did not evaluate that benchmark/measure
(``reason`` says which).

The CI is a percentile bootstrap over the run's per-query scores (seed 42, 1,000
resamples by default), shifted by the reported number: a CI for delta that excludes 0
means the gap is larger than query sampling explains (``significant``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from harness import SEED
from harness.evaluation.bootstrap import DEFAULT_RESAMPLES, bootstrap_ci
from harness.evaluation.conventions import CONVENTIONS
from harness.evaluation.measures import SUBSET_SEP
from harness.evaluation.tolerances import ToleranceTable, canonical_measure, load_tolerances
from harness.text_table import format_table

PASS, ABOVE, NEAR, FAIL, NOT_COMPARABLE = "PASS", "ABOVE", "NEAR", "FAIL", "NOT-COMPARABLE"
STATUSES = (PASS, ABOVE, NEAR, FAIL, NOT_COMPARABLE)
NEAR_FACTOR = 1.5
PAPER_PROFILE = "paper"

_CELL_FIELDS = ("cell_id", "paper_file", "version", "table", "row", "column", "method", "benchmark", "measure",
                "value")


@dataclass
class Comparison:
    """One reported cell against the run. Numbers in points (100 x fraction)."""

    cell_id: str
    paper_file: str
    version: str
    table: str
    row: str
    column: str
    method: str
    benchmark: str
    measure: str
    value: str                       # as printed in the paper
    conditions: dict[str, Any] = field(default_factory=dict)
    reproduced: float | None = None
    reported: float | None = None
    delta: float | None = None
    tolerance: float | None = None
    tolerance_why: str = ""
    status: str = NOT_COMPARABLE
    ci_low: float | None = None      # CI for delta (points)
    ci_high: float | None = None
    significant: bool | None = None  # CI for delta excludes 0
    reason: str = ""                 # why NOT-COMPARABLE
    notes: str = ""                  # conditions the run did not state, etc.
    finetune_stage: str | None = None  # which of the run's retrievers was compared (retriever1/2/3)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def status_for(delta: float, tolerance: float) -> str:
    """PASS / ABOVE / NEAR / FAIL for a delta and tolerance in points (boundaries inclusive)."""
    delta, tolerance = round(delta, 6), round(tolerance, 6)  # 38.7 - 38.2 must be 0.5, not 0.50000001
    if abs(delta) <= tolerance:
        return PASS
    if delta > 0:
        return ABOVE
    if -delta <= round(NEAR_FACTOR * tolerance, 6):
        return NEAR
    return FAIL


# ---------------------------------------------------------------------------- conditions

_NUMBER = re.compile(r"^([0-9]*\.?[0-9]+)\s*([km]?)$")


def normalise_condition(value: Any) -> Any:
    """Comparable form of a condition value: "120k" == 120000, "yes" == True. Fine-tuning stages are
    compared by name: the registry, the pipelines and the records all say retriever1/2/3."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        text = value.strip().lower().replace(",", "").replace("_", "")
        if text in ("true", "yes", "w/", "with"):
            return True
        if text in ("false", "no", "w/o", "without"):
            return False
        number = _NUMBER.match(text)
        if number:
            return float(number.group(1)) * {"": 1.0, "k": 1e3, "m": 1e6}[number.group(2)]
        return text
    return value


def _field(cell: Any, name: str, default: Any = None) -> Any:
    if isinstance(cell, Mapping):
        return cell.get(name, default)
    return getattr(cell, name, default)


# Conditions that say where a number comes from, not what produced it: a single run is still
# compared with a mean over three runs, and with the authors' own reproduction of a baseline.
PROVENANCE_ONLY = frozenset({"reproduction_by_authors", "runs_averaged"})


def comparability(cell_method: str | None, cell_conditions: Mapping[str, Any],
                  run_conditions: Mapping[str, Any]) -> tuple[str, str]:
    """``(reason, notes)``: a non-empty reason makes the cell NOT-COMPARABLE.

    Like with like only: every condition a cell states must be stated by the run with an equal
    value (a cell of a low-resource, sparsified, cited or differently pre-trained setting is never
    graded against a run that does not declare that setting), except the provenance-only ones,
    which become notes. A cell that names no fine-tuning stage is the method's headline number
    and is compared with the run's final stage (``final_stage``) only.
    """
    profile = run_conditions.get("profile")
    if profile is None:
        return "run profile not stated (only 'paper' runs are compared with the papers)", ""
    if str(profile) != PAPER_PROFILE:
        return f"run profile is '{profile}', not '{PAPER_PROFILE}'", ""
    run_method = run_conditions.get("method")
    if cell_method and run_method and cell_method != run_method:
        return f"cell is for method '{cell_method}', run is '{run_method}'", ""
    stage, final = run_conditions.get("finetune_stage"), run_conditions.get("final_stage")
    if "finetune_stage" not in cell_conditions and stage and final and \
            normalise_condition(stage) != normalise_condition(final):
        return f"cell states no fine-tuning stage (the method's final retriever, {final}), run stage is {stage}", ""
    notes = []
    for key, want in sorted(cell_conditions.items()):
        if key == "profile":
            if str(want) != str(profile):
                return f"cell is for profile '{want}', run is '{profile}'", ""
            continue
        got = run_conditions.get(key)
        if got is None:
            if key in PROVENANCE_ONLY:
                notes.append(f"{key}: {want}")
                continue
            return f"cell reports {key}={want}, run does not state {key}", ""
        if normalise_condition(want) != normalise_condition(got):
            return f"cell reports {key}={want}, run has {key}={got}", ""
    return "", "; ".join(notes)


# ---------------------------------------------------------------------------- compare

def _strata_for(benchmark: str):
    conv = CONVENTIONS.get(benchmark)
    if conv is not None and conv.subsets:
        return lambda qid: qid.split(SUBSET_SEP, 1)[0]
    return None


def _canonical_table(table: Mapping[str, Any]) -> dict[str, Any]:
    return {canonical_measure(m): v for m, v in table.items()}


def compare(metrics: Mapping[str, Mapping[str, float]],
            per_query: Mapping[str, Mapping[str, Mapping[str, float]]] | None,
            cells: Sequence[Any], run_conditions: Mapping[str, Any], *,
            tolerances: ToleranceTable | None = None, n_resamples: int = DEFAULT_RESAMPLES,
            seed: int = SEED, confidence: float = 0.95) -> list[Comparison]:
    """Compare every reported cell with the run (see the module docstring)."""
    tolerances = tolerances or load_tolerances()
    per_query = per_query or {}
    metrics_c = {b: _canonical_table(t) for b, t in metrics.items()}
    per_query_c = {b: _canonical_table(t) for b, t in per_query.items()}
    ci_cache: dict[tuple[str, str], Any] = {}
    out = []
    for cell in cells:
        conditions = dict(_field(cell, "conditions") or {})
        comp = Comparison(**{f: "" if _field(cell, f) is None else str(_field(cell, f)) for f in _CELL_FIELDS},
                          conditions=conditions)
        measure = canonical_measure(comp.measure)
        score = _field(cell, "score")
        if score is not None:
            comp.reported = round(100.0 * float(score), 6)
        reproduced = metrics_c.get(comp.benchmark, {}).get(measure)
        if reproduced is not None:
            comp.reproduced = 100.0 * float(reproduced)
        if comp.reported is not None and comp.reproduced is not None:
            comp.delta = comp.reproduced - comp.reported

        reason, comp.notes = comparability(comp.method or None, conditions, run_conditions)
        if not reason and comp.reported is None:
            reason = f"reported value '{comp.value}' is not a number"
        if not reason and comp.reproduced is None:
            reason = f"run did not evaluate {measure} on {comp.benchmark}"
        if reason:
            comp.status, comp.reason = NOT_COMPARABLE, reason
            out.append(comp)
            continue

        tol = tolerances.get(comp.benchmark, measure, comp.method or run_conditions.get("method"))
        comp.tolerance, comp.tolerance_why = tol.points, tol.why
        comp.status = status_for(comp.delta, tol.points)

        scores = per_query_c.get(comp.benchmark, {}).get(measure)
        if scores:
            key = (comp.benchmark, measure)
            if key not in ci_cache:
                ci_cache[key] = bootstrap_ci(scores, n_resamples=n_resamples, seed=seed, confidence=confidence,
                                             strata=_strata_for(comp.benchmark))
            ci = ci_cache[key]
            comp.ci_low = 100.0 * ci.low - comp.reported
            comp.ci_high = 100.0 * ci.high - comp.reported
            comp.significant = not (comp.ci_low <= 0.0 <= comp.ci_high)
        out.append(comp)
    return out


# ---------------------------------------------------------------------------- display

def _pts(value: float | None, signed: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:+.2f}" if signed else f"{value:.2f}"


def format_comparison_table(comparisons: Sequence[Comparison]) -> str:
    """Plain-text table (points) plus a one-line status count."""
    headers = ["status", "benchmark", "measure", "method", "source", "reported", "reproduced", "delta", "tol",
               "CI(delta)", "note"]
    rows = []
    for c in comparisons:
        ci = "-" if c.ci_low is None else f"[{c.ci_low:+.2f}, {c.ci_high:+.2f}]"
        source = " ".join(x for x in (c.paper_file, c.version, c.table) if x)
        rows.append([c.status, c.benchmark, c.measure, c.method, source, c.value or _pts(c.reported),
                     _pts(c.reproduced), _pts(c.delta, signed=True), _pts(c.tolerance), ci,
                     c.reason or c.notes])
    counts = {s: sum(c.status == s for c in comparisons) for s in STATUSES}
    summary = ", ".join(f"{s} {n}" for s, n in counts.items() if n) or "no cells"
    return format_table(headers, rows) + f"\n{len(comparisons)} cells: {summary}"
