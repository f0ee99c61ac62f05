"""Reproduced vs reported, cell by cell, graded by the one rule of ``harness.evaluation.verdict``.

    comparisons = compare(metrics, per_query, cells, run_conditions)
    print(format_comparison_table(comparisons))

* ``metrics``: ``{benchmark: {measure: fraction}}`` (what ``evaluate`` aggregates).
* ``per_query``: ``{benchmark: {measure: {qid: fraction}}}`` (kept for callers; the paper and the
  run score the same queries, so the verdict reads seed noise, not query sampling).
* ``cells``: reported cells (objects or mappings) with ``cell_id, paper_file, version,
  table, row, column, method, benchmark, measure, score`` (fraction or None), ``value``
  (the printed string) and ``conditions`` (a missing key means "not stated").
* ``run_conditions``: what the run states (``harness.spec.conditions.run_conditions``), plus the
  fine-tuning stage compared.

Verdicts (``verdict.VERDICTS``): REPRODUCED, DIFFERENT-BELOW, DIFFERENT-ABOVE, INCONCLUSIVE,
NOT-COMPARABLE. A trained run is graded by equivalence testing within the practical margin Delta,
with se from sigma_rep (``harness.evaluation.margins``), "different" Holm-corrected across the
comparable cells of each table; a deterministic one (``exact=True``: training-free BM25, released
checkpoints) by a fixed tolerance (``tolerances.yaml``). NOT-COMPARABLE when the run's profile is
not "paper", the method differs, a condition the cell states is not stated by the run or differs, a
declared deviation touches it, the cell carries an extraction doubt (shown, never graded), the
reported value is not a number, or the run did not evaluate that benchmark/measure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from harness.core.points import fmt, points_decimals, reported_text
from harness.core.text_table import format_table
from harness.evaluation import pretrain_part
from harness.evaluation import verdict as rule
from harness.evaluation.margins import practical_margin, sigma_rep, source_words
from harness.evaluation.pretrain_part import PretrainSpreads
from harness.evaluation.tolerances import ToleranceTable, canonical_measure, load_tolerances
from harness.evaluation.verdict import NOT_COMPARABLE, VERDICTS
from harness.papers.citation import table_citation
from harness.spec.conditions import UNIDENTIFIED, VARIANT, VARIANT_SPEC

STATUSES = VERDICTS
PAPER_PROFILE = "paper"
# Training-free families (BM25): deterministic, the same run every time, so no seed spread: the exact
# rule grades their cells and their side of an effect adds no seed noise.
TRAINING_FREE_FAMILIES = ("lexical",)
# A run condition: what the run's training changed of its spec (e.g. a global batch its processes could
# not share evenly). Every cell is NOT-COMPARABLE with such a run, the reason naming the stage.
RAN_OTHERWISE = "ran_otherwise"

_CELL_FIELDS = ("cell_id", "paper_file", "version", "table", "row", "column", "method", "benchmark", "measure", "value")


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
    value: str  # as printed in the paper
    conditions: dict[str, Any] = field(default_factory=dict)
    reproduced: float | None = None
    reported: float | None = None
    delta: float | None = None
    tolerance: float | None = None  # +-Delta, the practical margin (exact rule: the tolerance)
    tolerance_why: str = ""
    status: str = NOT_COMPARABLE
    rule: str = ""  # "seed" (equivalence test) | "exact" (deterministic system)
    sigma: float | None = None  # sigma_rep's estimate the t-test read: seed SD of one run's mean (points)
    sigma_df: float | None = None  # its degrees of freedom
    sigma_why: str = ""
    sigma_source: str = ""  # which evidence set it, in a few words
    ci_low: float | None = None  # 90% CI of delta from seed noise (points): what TOST reads
    ci_high: float | None = None
    p_equivalent: float | None = None  # TOST, cell by cell
    p_different: float | None = None  # d = 0, Holm-adjusted within the cell's table
    p_zero: float | None = None  # d = 0, the cell's own two-sided p (before Holm)
    se: float | None = None  # seed standard error of d the tests read (points)
    runs: int = 1  # seeds the reproduced number averages
    seeds_needed: int | None = None  # INCONCLUSIVE: runs that would settle it at the same d (None: none <= 20)
    within: float | None = None  # the smallest margin the 90% CI lies inside
    no_runs_sigma: float | None = None  # seeds_needed None: the sigma_rep at which no number of runs can
    reason: str = ""  # why NOT-COMPARABLE
    notes: str = ""  # conditions the run did not state, etc.
    finetune_stage: str | None = None  # which of the run's retrievers was compared (retriever1/2/3)
    same_as: str = ""  # the cell id of the first cell printing this same number: its verdict, graded once

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Comparison:
        """A record's ``comparison`` entry (:meth:`to_dict`) as the object; keys this version does not know
        (an older or newer record's) are left out."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


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


def touched_by(touch: str, key: str, value: Any) -> bool:
    """A deviation touching ``key`` touches every cell stating it; ``key=value`` only the cells
    stating that value (an option the spec implements differently but the profile does not use)."""
    name, eq, wanted = touch.partition("=")
    return name == key and (not eq or normalise_condition(wanted) == normalise_condition(value))


def comparability(
    cell_method: str | None, cell_conditions: Mapping[str, Any], run_conditions: Mapping[str, Any]
) -> tuple[str, str]:
    """``(reason, notes)``: a non-empty reason makes the cell NOT-COMPARABLE.

    Like with like only: every condition a cell states must be stated by the run with an equal
    value (a cell of a low-resource, sparsified, cited or differently pre-trained setting is never
    graded against a run that does not declare that setting), except the provenance-only ones,
    which become notes. A cell that names no fine-tuning stage is the method's headline number
    and is compared with the run's final stage (``final_stage``) only.
    """
    profile = run_conditions.get("profile")
    touched = run_conditions.get("deviations") or {}
    if profile is None:
        return "run profile not stated (only 'paper' runs are compared with the papers)", ""
    if str(profile) != PAPER_PROFILE:
        return f"run profile is '{profile}', not '{PAPER_PROFILE}'", ""
    if run_conditions.get(RAN_OTHERWISE):
        return f"the run did not train as its spec declares: {run_conditions[RAN_OTHERWISE]}", ""
    run_method = run_conditions.get("method")
    if cell_method and run_method and cell_method != run_method:
        return f"cell is for method '{cell_method}', run is '{run_method}'", ""
    wanted = run_conditions.get(VARIANT)
    if wanted and not any(key in cell_conditions for key in wanted):  # the parent's own setting
        named = ", ".join(map(str, wanted))
        return f"cell states none of {named}, the setting variant {run_conditions.get(VARIANT_SPEC)} changes", ""
    stage, final = run_conditions.get("finetune_stage"), run_conditions.get("final_stage")
    if (
        "finetune_stage" not in cell_conditions
        and stage
        and final
        and normalise_condition(stage) != normalise_condition(final)
    ):
        return f"cell states no fine-tuning stage (the method's final retriever, {final}), run stage is {stage}", ""
    if "recipe" in touched:
        return f"declared deviation: {touched['recipe']}", ""
    notes = []
    for key, want in sorted(cell_conditions.items()):
        hit = next((t for t in touched if touched_by(t, key, want)), None)
        if hit:
            return f"cell reports {key}={want}; declared deviation: {touched[hit]}", ""
        if key == "cited" and "cited" not in run_conditions:
            # one wording for every cited row: only the released weights that are the row can grade it
            return f"the paper copies this number from {want}: not its own run, so no run of its spec grades it", ""
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
        if str(got) == f"{want} ({UNIDENTIFIED})":  # the same name, but nothing says it is the same weights
            return f"cell reports {key}={want}; the run's {key} bears that name only ({UNIDENTIFIED})", ""
        if normalise_condition(want) != normalise_condition(got):
            return f"cell reports {key}={want}, run has {key}={got}", ""
    return "", "; ".join(notes)


# ---------------------------------------------------------------------------- compare


def number_key(cell: Any) -> tuple:
    """What makes two cells one printed number: the method, benchmark, measure, printed value and
    conditions (a number a paper prints in two tables, or two versions print, is one result)."""
    conditions = tuple(sorted((str(k), str(v)) for k, v in dict(_field(cell, "conditions") or {}).items()))
    measure = canonical_measure(str(_field(cell, "measure") or ""))
    return (_field(cell, "method"), _field(cell, "benchmark"), measure, str(_field(cell, "value")), conditions)


def printed_in(cell: Any) -> str:
    """Where a cell is printed, as a reader finds it: 'Wu et al. 2022 (QC v1), Table 2' (its cell id's paper)."""
    cell_id = str(_field(cell, "cell_id") or "")
    paper = cell_id.split("/", 1)[0] if "/" in cell_id else _field(cell, "paper") or _field(cell, "paper_file")
    return table_citation(str(paper), str(_field(cell, "table")))


# What a repeated print of a number takes from its first print: the verdict and everything behind it.
_GRADED_FIELDS = (
    "tolerance", "tolerance_why", "status", "rule", "sigma", "sigma_df", "sigma_why", "sigma_source", "ci_low",
    "ci_high", "p_equivalent", "p_different", "p_zero", "se", "runs", "seeds_needed", "within", "no_runs_sigma", "reason",
)  # fmt: skip


def _canonical_table(table: Mapping[str, Any]) -> dict[str, Any]:
    return {canonical_measure(m): v for m, v in table.items()}


def _paired(cell: Any, metrics: Mapping[str, Mapping[str, float]]) -> tuple[Comparison, str]:
    """The cell's comparison, not yet graded: its reported and reproduced numbers in points and their
    delta where both exist; and the canonical measure name."""
    conditions = dict(_field(cell, "conditions") or {})
    texts: dict[str, Any] = {f: "" if _field(cell, f) is None else str(_field(cell, f)) for f in _CELL_FIELDS}
    comp = Comparison(**texts, conditions=conditions)
    measure = canonical_measure(comp.measure)
    score = _field(cell, "score")
    if score is not None:
        comp.reported = round(100.0 * float(score), 6)
    reproduced = metrics.get(comp.benchmark, {}).get(measure)
    if reproduced is not None:
        comp.reproduced = 100.0 * float(reproduced)
    if comp.reported is not None and comp.reproduced is not None:
        comp.delta = comp.reproduced - comp.reported
    return comp, measure


def _grade_by_table(tests: Sequence[tuple[Comparison, rule.Test, int, float]]) -> None:
    """Grade the seed-rule comparisons in place, Holm-corrected across the comparable cells of one table;
    an INCONCLUSIVE one is told how many seeds would resolve it (each test's last item: its pre-training
    spread in points, measured or the stand-in, which enters those seed counts)."""
    by_table: dict[tuple[str, str, str], list[tuple[Comparison, rule.Test, int, float]]] = {}
    for item in tests:
        comp = item[0]
        by_table.setdefault((comp.paper_file, comp.version, comp.table), []).append(item)
    for family in by_table.values():
        for (comp, test, k, pretrain), (status, p_eq, p_diff) in zip(
            family, rule.verdicts([t for _, t, _, _ in family])
        ):
            comp.status, comp.p_equivalent, comp.p_different = status, p_eq, p_diff
            comp.se, comp.p_zero = test.se, rule.p_zero(test.d, test.se, test.df)
            comp.ci_low, comp.ci_high = test.ci()
            comp.within = rule.within(comp.ci_low, comp.ci_high)
            if status == rule.INCONCLUSIVE and comp.sigma is not None:
                ratio = pretrain / comp.sigma if comp.sigma > 0 else 0.0
                comp.seeds_needed = rule.seeds_to_resolve(
                    test.d, comp.sigma, test.delta, k, len(family), df=test.df, pretrain=pretrain
                )
                if comp.seeds_needed is None:
                    comp.no_runs_sigma = rule.sigma_no_runs_can(
                        test.d, test.delta, k, len(family), pretrain_ratio=ratio
                    )


def pretrain_points(sigma: float, pretrains: bool, measured: Any = None) -> float:
    """The pre-training spread (points) a pre-training run's se counts on each side: ``measured``'s sigma_pt
    (a ``noise.PretrainSpread``), else the stand-in ``verdict.PRETRAIN_STANDIN`` x sigma; 0 without one."""
    if not pretrains:
        return 0.0
    return float(measured.sigma_pt) if measured is not None else rule.PRETRAIN_STANDIN * sigma


def compare(
    metrics: Mapping[str, Mapping[str, float]],
    per_query: Mapping[str, Mapping[str, Mapping[str, float]]] | None,
    cells: Sequence[Any],
    run_conditions: Mapping[str, Any],
    *,
    exact: bool = False,
    tolerances: ToleranceTable | None = None,
    runs: int = 1,
    evidence: tuple[Any, ...] = (),
    pretrain_spreads: PretrainSpreads | None = None,
) -> list[Comparison]:
    """Compare every reported cell with the run and grade it (see the module docstring).

    ``runs``: how many seeds the reproduced numbers average (1 for one run); ``evidence``: same-recipe
    seed evidence beside what is on file (``margins.Evidence``: a user's per-seed lists);
    ``pretrain_spreads``: sigma_pt measured per (benchmark, measure) (default: what runs/seeds/ holds,
    ``pretrain_part.on_file``); where a pre-training run's cell has none, the stand-in counts."""
    measured_pt = pretrain_part.on_file() if pretrain_spreads is None else pretrain_spreads
    tolerances = tolerances or load_tolerances()
    metrics_c = {b: _canonical_table(t) for b, t in metrics.items()}
    # the run pre-trained: its pre-training seed, and the paper's, are noise in d that no seed on file measured
    pretrains = bool(run_conditions.get("pretrain_corpus"))
    out, tests = [], []
    first: dict[tuple, Comparison] = {}  # each printed number graded once (issue 53)
    repeats: list[tuple[Comparison, Comparison]] = []
    for cell in cells:
        comp, measure = _paired(cell, metrics_c)
        conditions = comp.conditions
        key = number_key(cell)
        if key in first:  # the same number printed again: it takes the first print's verdict below
            comp.same_as = first[key].cell_id
            out.append(comp)
            repeats.append((comp, first[key]))
            continue
        first[key] = comp
        reason, comp.notes = comparability(comp.method or None, conditions, run_conditions)
        doubt = _field(cell, "doubt")
        if not reason and doubt:
            reason = f"doubtful cell, not graded: {doubt}"
        if not reason and comp.reported is None:
            reason = f"reported value '{comp.value}' is not a number"
        if not reason and comp.reproduced is None:
            reason = f"run did not evaluate {measure} on {comp.benchmark}"
        out.append(comp)
        if reason:
            comp.status, comp.reason = NOT_COMPARABLE, reason
            continue
        assert comp.delta is not None  # both numbers are present once no reason was found
        if exact:
            tol = tolerances.get(comp.benchmark, measure, comp.method or run_conditions.get("method"))
            comp.rule, comp.tolerance, comp.tolerance_why = "exact", tol.points, tol.why
            comp.status = rule.exact_verdict(comp.delta, tol.points)
            continue
        spread = sigma_rep(comp.benchmark, measure, evidence) if evidence else sigma_rep(comp.benchmark, measure)
        margin = practical_margin(comp.benchmark, measure)
        comp.rule, comp.sigma, comp.sigma_why, comp.runs = "seed", spread.tested, spread.why, runs
        measured = measured_pt.get((comp.benchmark, canonical_measure(measure))) if pretrains else None
        comp.sigma_df, comp.sigma_source = spread.df, source_words(spread, pretrains, measured)
        comp.tolerance, comp.tolerance_why = margin.points, margin.why
        printed_runs = int(conditions.get("runs_averaged") or 1)
        pretrain = pretrain_points(spread.tested, pretrains, measured)
        se = rule.se_of(spread.tested, runs, printed_runs, pretrain)
        df = spread.df
        if measured is not None:  # the se holds the measured sigma_pt too: its df enter the test's
            ft = rule.se_of(spread.tested, runs, printed_runs) ** 2
            df = comp.sigma_df = rule.pretrain_df(ft, spread.df, measured.sigma_pt, measured.df)
        tests.append((comp, rule.Test(comp.delta, se, margin.points, df), printed_runs, pretrain))
    _grade_by_table(tests)
    for comp, shown in repeats:
        for name in _GRADED_FIELDS:
            setattr(comp, name, getattr(shown, name))
        comp.notes = "; ".join(filter(None, [shown.notes, f"graded once, as printed in {printed_in(shown)}"]))
    return out


def settle_note(
    within: float | None,
    seeds: int | None,
    sigma: float | None,
    no_runs_sigma: float | None,
    printed_runs: int = 1,
    per_side: str = "",
) -> str:
    """What an INCONCLUSIVE cell or claim would need, in words: the smallest margin it passes, then the
    runs that would settle it at the same difference, or why no number of runs can."""
    head = f"consistent within +-{within:.2f}; " if within is not None else ""
    if seeds is not None:
        return head + f"{seeds} seeds averaged{per_side} would settle it at this difference and this sigma_rep"
    if no_runs_sigma is not None and sigma is not None and sigma >= no_runs_sigma:
        printed = "one seed" if printed_runs <= 1 else f"{printed_runs} seeds"
        return head + (
            f"no number of runs can at this sigma_rep: the paper printed {printed} and sigma_rep {sigma:.2f} >= "
            f"{no_runs_sigma:.2f}"
        )
    return head + f"no number of seeds up to {rule.MAX_SEEDS} settles it at this difference and this sigma_rep"


def sigma_note(comp: Comparison | Mapping[str, Any]) -> str:
    """ "sigma_rep 1.23: <its source in words>" of a seed-graded row (a Comparison or its ``to_dict``), the
    source as ``margins.source_words`` wrote it; "" on a row no seed spread graded."""
    sigma, source = _field(comp, "sigma"), _field(comp, "sigma_source")
    if _field(comp, "rule") != "seed" or sigma is None or not source:
        return ""
    return f"sigma_rep {sigma:.2f}: {source}"


def inconclusive_note(comp: Comparison | Mapping[str, Any]) -> str:
    """What an INCONCLUSIVE cell needs, in words, and which evidence set its sigma_rep (a Comparison or
    its ``to_dict``)."""
    conditions = _field(comp, "conditions") or {}
    note = settle_note(
        _field(comp, "within"),
        _field(comp, "seeds_needed"),
        _field(comp, "sigma"),
        _field(comp, "no_runs_sigma"),
        int(conditions.get("runs_averaged") or 1),
    )
    source = sigma_note(comp)
    return note + (f" ({source})" if source else "")


def different_note(comp: Comparison | Mapping[str, Any]) -> str:
    """Why a DIFFERENT cell is one, in words (a Comparison or its ``to_dict``): the difference, the
    margin or tolerance it exceeds, and the test that rejected d = 0."""
    d, margin = _field(comp, "delta"), _field(comp, "tolerance")
    if d is None or margin is None:
        return ""
    side = "below" if d < 0 else "above"
    if _field(comp, "rule") == "exact":
        return f"{abs(d):.2f} points {side} the paper's number: beyond the fixed tolerance +-{margin:.2f}"
    p = _field(comp, "p_different")
    test = "" if p is None else f"; d = 0 rejected (Holm p {'< 0.001' if p < 0.001 else f'= {p:.3f}'})"
    return f"{abs(d):.2f} points {side} the paper's number: beyond the practical margin +-{margin:.2f}{test}"


def verdict_note(comp: Comparison | Mapping[str, Any]) -> str:
    """The note a graded or ungraded cell shows beside its verdict: why not comparable, what an
    INCONCLUSIVE one needs, why a DIFFERENT one is, and the notes on its conditions."""
    status = _field(comp, "status")
    if _field(comp, "reason"):
        return str(_field(comp, "reason"))
    why = ""
    if status == rule.INCONCLUSIVE:
        why = inconclusive_note(comp)  # its sigma's source inside
    elif status in (rule.DIFFERENT_BELOW, rule.DIFFERENT_ABOVE):
        why = "; ".join(filter(None, [different_note(comp), sigma_note(comp)]))
    elif status == rule.REPRODUCED:
        why = sigma_note(comp)
    return "; ".join(filter(None, [why, str(_field(comp, "notes") or "")]))


# ---------------------------------------------------------------------------- display


def closing_table(comparisons: Sequence[Comparison]) -> str:
    """The table a run prints after its record is written (``Comparison.from_dict`` rebuilds it from the
    record's ``comparison`` entries)."""
    return format_comparison_table(comparisons) if comparisons else "(no reported cells to compare with)"


def format_comparison_table(comparisons: Sequence[Comparison]) -> str:
    """Plain-text table plus a one-line status count. Every number in points, the reported one at the
    paper's printed precision with the printed value beside it where the paper printed a fraction
    (``harness.core.points``), the reproduced one and the delta at that precision too; which of the
    run's retrievers a row is (stage); no delta on a NOT-COMPARABLE row."""
    headers = [
        "verdict",
        "benchmark",
        "stage",
        "measure",
        "method",
        "source",
        "reported",
        "reproduced",
        "delta",
        "+-Delta",
        "90% CI(delta)",
        "note",
    ]
    rows = []
    for c in comparisons:
        graded = c.status != NOT_COMPARABLE
        ci = "-" if c.ci_low is None or c.ci_high is None or not graded else f"[{c.ci_low:+.2f}, {c.ci_high:+.2f}]"
        source = table_citation(c.paper_file, c.table)
        digits = points_decimals(c.value, c.reported)
        rows.append(
            [
                c.status,
                c.benchmark,
                c.finetune_stage or "-",
                c.measure,
                c.method,
                source,
                reported_text(c.reported, c.value),
                fmt(c.reproduced, digits),
                fmt(c.delta, digits, signed=True) if graded else "-",
                fmt(c.tolerance),
                ci,
                verdict_note(c),
            ]
        )
    counts = {s: sum(c.status == s for c in comparisons) for s in STATUSES}
    summary = ", ".join(f"{s} {n}" for s, n in counts.items() if n) or "no cells"
    # Wider than the output: the note, then the source, on their own lines under the row (--wide: one line)
    table = format_table(headers, rows, below=[11, 5], below_first=True)
    return table + f"\n{len(comparisons)} cells: {summary}"
