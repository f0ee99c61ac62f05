"""The at-a-glance view (issue 28): which published claims hold, which differ, which have not been
tried, and what trying one would cost. Pure data: the leaderboard's first tab shows it.

Three lists, every number in points (100 x fraction; the paper's printed string kept beside it):

* :class:`HeadlineRow`: each cell of each paper's main tables (Table 1: MS MARCO dev MRR@10 and
  TREC DL nDCG@10; the BEIR table: nDCG@10 per dataset and the printed averages), on the
  benchmark's primary measure (``conventions.primary_measure``), with a state: the verdict of the
  paper-graded records (``paper``, ``checkpoint``) graded exactly as ``python -m harness check``
  grades them (``gate.grading.paper_comparisons``, the one rule of ``evaluation.verdict``; several records
  of one cell show the worst, as the gate fails on any), NOT-COMPARABLE when such a record exists
  but does not share the cell's setting (the reason kept), or NOT-YET-RUN, with the command that
  would run it and its projected cost on the spec's declared hardware (``harness.run.projection``).
* :class:`ClaimRow`: each difference a paper printed between two of its rows (from the registry, as
  ``check`` takes them, even with a ``--reported`` snapshot; ``evaluation.claims``: QC vs non-QC,
  method vs method, stage vs stage, every measure) and each count claim
  (``evaluation.count_claims``), graded from the paper-profile records' effects
  (``evaluation.effects``), the same rows ``check`` prints; NOT-COMPARABLE with the condition when no
  run of the committed specs could grade it; NOT-YET-RUN, naming the missing run, stage, benchmark
  or measure, while no paper record has its numbers.
* :class:`LearnedRow`: the newest record of each method in every other profile (mini, rehearsal,
  tiny): each benchmark's primary measure with its bootstrap 95% CI, and the effect against the
  control (``nopretrain``). These runs are smaller than the papers' and never compared with them.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness.core import benchmarks as declared
from harness.core.errors import HarnessError
from harness.core.statuses import NOT_YET_RUN, STATUSES
from harness.data.catalog import AGGREGATES, REPORTED, get_benchmark
from harness.data.sampled import base_name
from harness.evaluation.bootstrap import bootstrap_ci
from harness.evaluation.claims import claim_pairs, claims_for, spec_reason
from harness.evaluation.conventions import primary_measure
from harness.evaluation.effects import count_checks, latest_by_method, method_effects, scores_by_stage
from harness.evaluation.tolerances import canonical_measure
from harness.evaluation.verdict import INCONCLUSIVE, NOT_COMPARABLE, VERDICTS
from harness.gate.admission import data_mismatches, set_apart
from harness.gate.cell_state import cell_states, paper_run
from harness.gate.grading import PAPER_GRADED, paper_comparisons
from harness.gate.labels import source_label, system_axes
from harness.gate.references import folder_references
from harness.papers.registry import load_reported_cells, paper_key
from harness.records.store import RunRecord, load_records, records_dir
from harness.run import projection
from harness.run.runner import plan_method
from harness.spec.method import load_method
from harness.training.precision import resolve_precision

CONTROL = "nopretrain"  # the learned runs' effects are against it (every spec's first compare_with)
MAIN_TABLE = "Table 1"  # each paper's MS MARCO / TREC DL headline table
# The states a glance row can have, in the legend's order: the grading rule's verdicts, then "not tried".
STATES = (*VERDICTS, NOT_YET_RUN)
GRADED = tuple(v for v in VERDICTS if v != NOT_COMPARABLE)
NOT_COMPARABLE_WITH_PAPERS = (
    "not comparable with the papers: smaller data, models and step counts than the "
    "papers' (the profile's spec), so no paper's number is a reference for them"
)


def legend() -> dict[str, tuple[str, str]]:
    """State -> (meaning, badge colour), for every legend of the glance page."""
    return {s: (STATUSES[s].meaning, STATUSES[s].colour) for s in STATES}


def points(fraction: float | None) -> float | None:
    return None if fraction is None else 100.0 * float(fraction)


@dataclass
class HeadlineRow:
    """One paper headline cell and what the records say about it (numbers in points)."""

    paper: str
    version: str
    table: str
    row: str
    column: str
    method: str
    benchmark: str
    measure: str
    printed: str  # as the paper printed it (0.319 or 31.9)
    reported: float  # points
    source: str  # as `check` names it in its "against" column
    cited: bool  # the paper cites another paper's number in this row
    state: str
    runs: list[str] = field(default_factory=list)  # the records that gave the state
    reproduced: float | None = None
    delta: float | None = None
    ci_low: float | None = None  # 90% CI of the delta from seed noise (what the rule reads)
    ci_high: float | None = None
    reason: str = ""
    command: str = ""  # how to reproduce (or re-run) it
    cost: str = ""  # projected on the declared hardware, NOT-YET-RUN rows only
    cell_id: str = ""  # the registry cell (gate.cell_state gives its state)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class ClaimRow:
    """One printed difference (A minus B, points), or one count claim, and its state."""

    source: str
    a: str
    b: str
    a_row: str
    b_row: str
    benchmark: str
    measure: str
    claimed: float  # points; a count claim: the number of datasets the paper counts
    state: str
    kind: str = "difference"  # "difference" | "count" ("better on 9 of 14 datasets")
    effect: float | None = None  # the paper runs' A - B
    ci_low: float | None = None  # 90% CI of the run effect, seed noise (what the direction test reads)
    ci_high: float | None = None
    effect_ratio: float | None = None  # run effect / printed effect, with its 90% CI
    ratio_low: float | None = None
    ratio_high: float | None = None
    runs: list[str] = field(default_factory=list)
    reason: str = ""
    command: str = ""
    cost: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class LearnedRow:
    """One benchmark of the newest run of a method in a profile that is not compared with the papers."""

    profile: str
    method: str
    benchmark: str
    measure: str
    value: float  # points
    ci_low: float | None  # bootstrap 95% CI over the run's queries
    ci_high: float | None
    queries: int
    run_id: str
    effect: float | None = None  # minus the control's run on the same queries (points)
    effect_low: float | None = None
    effect_high: float | None = None
    effect_p: float | None = None
    command: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Glance:
    headline: list[HeadlineRow]
    claims: list[ClaimRow]
    learned: list[LearnedRow]

    def counts(self, rows: Sequence[HeadlineRow | ClaimRow]) -> dict[str, int]:
        """State -> number of rows, in the legend's order."""
        found = [r.state for r in rows]
        return {s: found.count(s) for s in STATES if s in found}


# ----------------------------------------------------------------------------- commands and costs


def run_command(method: str, profile: str = "paper", datasets: Sequence[str] = ()) -> str:
    return " ".join(
        [
            "python -m harness run --method",
            method,
            "--profile",
            profile,
            *([f"--dataset {','.join(datasets)}"] if datasets else []),
        ]
    )


def _datasets_of(benchmark: str) -> tuple[str, ...]:
    aggregate = AGGREGATES.get(benchmark)
    return tuple(aggregate.members) if aggregate else (benchmark,)


@functools.cache
def _spec_datasets(method: str) -> tuple[str, ...] | None:
    try:
        return tuple(load_method(method, "paper").get("datasets") or ())
    except Exception:  # noqa: BLE001 - a method without a paper profile: no command to offer
        return None


def paper_command(method: str, benchmark: str) -> tuple[str, tuple[str, ...]]:
    """The command that runs ``benchmark`` in the paper profile, and the datasets it names (none:
    the spec's own datasets, the paper's, already include it)."""
    wanted = _datasets_of(benchmark)
    own = _spec_datasets(method) or ()
    extra = () if set(wanted) <= set(own) else wanted
    return run_command(method, "paper", extra), extra


@functools.cache
def projected_cost(method: str, datasets: tuple[str, ...] = ()) -> str:
    """What ``run --method M --profile paper [--dataset ...] --dry-run`` projects on the spec's
    declared hardware, as one line; computed once per process (planning imports torch)."""

    try:
        spec = resolve_precision(load_method(method, "paper"), say=lambda line: None)  # a GPU profile: no measuring
        names = list(datasets) or list(spec.get("datasets") or [])
        # every stage as if nothing were cached: the cost of the run on a fresh machine
        entries = [dict(e, plan="to run") for e in plan_method(spec, names).stages.entries]
        return projection.declared_cost_line(spec, entries)
    except Exception as exc:  # noqa: BLE001 - a cost that cannot be projected is said, not guessed
        return f"not projected ({type(exc).__name__}: {exc})"


# ----------------------------------------------------------------------------- 1a: headline cells


def _main_tables(cells: Sequence[Mapping[str, Any]]) -> set[tuple[str, str]]:
    """(paper, table) of each paper's headline tables: its Table 1 and every table with a BEIR dataset."""
    out = set()
    for c in cells:
        bench = str(c.get("benchmark") or "")
        beir = bench in AGGREGATES or (bench in REPORTED and get_benchmark(bench).kind == "beir")
        if str(c.get("table")) == MAIN_TABLE or (beir and c.get("method")):
            out.add((paper_key(c), str(c.get("table"))))
    return out


def headline_cells(cells: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The cells the glance grades: a method's number on a benchmark's primary measure in a main table."""
    tables = _main_tables(cells)
    out = []
    for c in cells:
        bench, method = str(c.get("benchmark") or ""), c.get("method")
        if not method or not bench or c.get("score") is None or (paper_key(c), str(c.get("table"))) not in tables:
            continue
        measure = "nDCG@10" if bench in AGGREGATES else primary_measure(bench)
        if c.get("measure") == measure:
            out.append(c)
    return out


def headline_rows(
    cells: Sequence[Mapping[str, Any]],
    records: Sequence[RunRecord],
    comparisons: Mapping[str, Sequence[Mapping[str, Any]]],
) -> list[HeadlineRow]:
    """One row per headline cell (``comparisons``: run id -> ``gate.grading.paper_comparisons`` dicts)."""
    heads = headline_cells(cells)
    states = cell_states(heads, records, comparisons)  # the one state every surface shows
    axes = system_axes(cells)
    rows = []
    for c in heads:
        conditions = c.get("conditions") or {}
        got = states[str(c.get("cell_id"))]
        row = HeadlineRow(
            paper_key(c),
            str(c.get("version") or ""),
            str(c.get("table")),
            str(c.get("row")),
            str(c.get("column")),
            str(c.get("method")),
            str(c.get("benchmark")),
            str(c.get("measure")),
            str(c.get("value")),
            float(points(c["score"])),
            source_label(c, axes),
            "cited" in conditions,
            got.state,
            runs=list(got.runs),
            reason=got.reason,
            command=got.command,
            cell_id=got.cell_id,
        )
        if got.state in GRADED:
            x = got.comparison
            row.reproduced, row.delta = x.get("reproduced"), x.get("delta")
            row.ci_low, row.ci_high = x.get("ci_low"), x.get("ci_high")
            if got.profile == "checkpoint":  # released weights: re-scored by `reproduce`, not run
                rec = next(r for r in records if r.run_id in got.runs and r.profile == "checkpoint")
                name = (rec.checkpoint or {}).get("name", "")
                row.command = (
                    f"python -m harness reproduce --checkpoint {name} "
                    f"--benchmark {','.join(_datasets_of(row.benchmark))}"
                )
        elif got.state == NOT_YET_RUN and got.command:
            can = paper_run(c)
            row.cost = (
                "released weights: encoding and retrieval only, not projected"
                if can.via
                else projected_cost(row.method, can.datasets)
            )
        rows.append(row)
    return rows


# ----------------------------------------------------------------------------- 1a: one line per method

# the papers' headline benchmarks (those reported that are not BEIR's), then BEIR's datasets as one
MATRIX_COLUMNS = (*(n for n in declared.reported() if declared.get(n).kind != "beir"), "BEIR")


@dataclass
class MethodLine:
    """A method's headline cells at a glance: how many are in each state, per benchmark column, and
    the paper-profile run that would grade the untried ones with its projected cost."""

    method: str
    states: dict[str, dict[str, int]]  # column -> state -> cells, in the legend's order
    command: str = ""
    cost: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def matrix_column(benchmark: str) -> str:
    return benchmark if benchmark in MATRIX_COLUMNS else "BEIR"


def method_lines(rows: Sequence[HeadlineRow]) -> list[MethodLine]:
    """The headline rows folded to one line per method (BM25 first, the reference): the first table a
    researcher reads, each cell the states of every paper's number for that method and benchmark."""
    lines: dict[str, MethodLine] = {}
    for r in sorted(rows, key=lambda r: (r.method != "bm25", r.method)):
        line = lines.setdefault(r.method, MethodLine(r.method, {c: {} for c in MATRIX_COLUMNS}))
        found = line.states[matrix_column(r.benchmark)]
        found[r.state] = found.get(r.state, 0) + 1
    for line in lines.values():
        line.states = {c: {s: found[s] for s in STATES if s in found} for c, found in line.states.items()}
        # the cells a paper-profile run would grade (a released checkpoint's rows are `reproduce`'s)
        untried = [r for r in rows if r.method == line.method and r.state == NOT_YET_RUN and " run " in r.command]
        if untried and _spec_datasets(line.method) is not None:
            # the datasets the paper spec lacks (BM25's covers SciFact and NFCorpus only): named, so one
            # command covers every untried cell
            extra = tuple(dict.fromkeys(d for r in untried for d in paper_command(r.method, r.benchmark)[1]))
            if extra:  # --dataset replaces the spec's datasets: keep them
                extra = tuple(dict.fromkeys([*(_spec_datasets(line.method) or ()), *extra]))
            line.command, line.cost = run_command(line.method, "paper", extra), projected_cost(line.method, extra)
    return list(lines.values())


# ----------------------------------------------------------------------------- 1a: printed effects


def claim_rows(
    records: Sequence[RunRecord], claims: Sequence[Any] | None = None, pairs: Sequence[tuple[str, str]] | None = None
) -> list[ClaimRow]:
    """Every printed difference of ``pairs`` (default ``claims.claim_pairs``: the specs' pairs, the
    methods sharing a table, a method's stages), graded from the paper records' effects as ``check``
    grades them (``gate.grading.effect_rows``: the same effects and checks), then the count claims.
    A claim no paper run of the committed specs can grade is NOT-COMPARABLE with that reason; one
    whose numbers no record has yet is NOT-YET-RUN, naming exactly what is missing."""
    if pairs is None:
        pairs = claim_pairs()
    if claims is None:
        claims = claims_for(pairs)
    effects = method_effects(records, "paper", pairs)
    checks = {check["key"]: (effect, check) for effect in effects for check in effect.claims}
    latest = latest_by_method(records, "paper")
    rows = []
    for claim in claims:
        row = ClaimRow(
            claim.source,
            claim.a,
            claim.b,
            claim.a_row,
            claim.b_row,
            claim.benchmark,
            claim.measure,
            claim.delta,
            NOT_YET_RUN,
        )
        hit = checks.get(claim.key)
        why = "" if hit else spec_reason(claim)
        specs = dict.fromkeys((claim.a_graded_by, claim.b_graded_by))  # the runs that grade it (a variant's)
        if hit is not None:
            effect, check = hit
            row.state, row.effect, row.reason = check["status"], check.get("effect"), check.get("reason") or ""
            row.ci_low, row.ci_high = check.get("ci_low"), check.get("ci_high")
            row.effect_ratio, row.ratio_low, row.ratio_high = (
                check.get("effect_ratio"),
                check.get("ratio_low"),
                check.get("ratio_high"),
            )
            if row.state == INCONCLUSIVE and not row.reason:
                n = check.get("seeds_needed")
                row.reason = (
                    f"{n} run(s) per side would settle it at this effect"
                    if n
                    else "no number of runs up to 20 per side settles it at this effect"
                )
            row.runs = list(dict.fromkeys([effect.a_run, effect.b_run]))
            row.command = " && ".join(run_command(m) for m in specs)
        elif why:
            row.state, row.reason = NOT_COMPARABLE, why
        else:
            row.reason = _missing(claim, latest)
            todo = [m for m in specs if m not in latest] or list(specs)
            row.command = " && ".join(paper_command(m, claim.benchmark)[0] for m in todo)
            row.cost = "; ".join(f"{m}: {projected_cost(m, paper_command(m, claim.benchmark)[1])}" for m in todo)
        rows.append(row)
    for count in count_checks(effects, pairs):
        rows.append(
            ClaimRow(
                count.source,
                count.a,
                count.b,
                "",
                "",
                f"{count.datasets} datasets",
                count.measure,
                float(count.stated),
                count.status,
                kind="count",
                effect=None if count.at_least is None else float(count.at_least),
                reason=f"{count.text!r}: {count.reason}",
                runs=[latest[m].run_id for m in count.graded_by if m in latest],
            )
        )
        if count.status == NOT_YET_RUN:
            _count_command(rows[-1], count.graded_by, latest)
    return rows


def _count_command(row: ClaimRow, specs: Sequence[str], latest: Mapping[str, RunRecord]) -> None:
    """A count claim not yet run: the paper runs of the specs grading it that have none, and their cost."""
    todo = [m for m in dict.fromkeys(specs) if m not in latest]
    row.command = " && ".join(run_command(m) for m in todo)
    row.cost = "; ".join(f"{m}: {projected_cost(m, ())}" for m in todo)


def _missing(claim: Any, latest: Mapping[str, RunRecord]) -> str:
    """What the paper records lack for ``claim``: a run of a method, a stage, a benchmark or a measure."""
    absent = [m for m in dict.fromkeys((claim.a_graded_by, claim.b_graded_by)) if m not in latest]
    if absent:
        return f"no paper-profile run of {', '.join(absent)}"
    found = []
    for method, stage in ((claim.a_graded_by, claim.a_stage), (claim.b_graded_by, claim.b_stage)):
        rec = latest[method]
        by_stage, final = scores_by_stage(rec)
        want = stage or final
        where = f"the paper run {rec.run_id}"
        scores = by_stage.get(want)
        datasets = _datasets_of(claim.benchmark)
        if scores is None:
            found.append(f"{where} kept no {want} scores (it has {', '.join(s for s in by_stage if s) or 'none'})")
            continue
        at = f" at {want}" if want else ""
        unscored = [d for d in datasets if d not in scores]
        if unscored:
            found.append(f"{where} did not score {', '.join(unscored)}{at}")
            continue
        lacking = [
            d for d in datasets if canonical_measure(claim.measure) not in {canonical_measure(m) for m in scores[d]}
        ]
        if lacking:
            found.append(f"{where} scored {', '.join(lacking)} but not {claim.measure}{at}")
    return "; ".join(dict.fromkeys(found)) or "the paper runs' effect was not computed"


# ----------------------------------------------------------------------------- 1b: learned runs


def learned_rows(records: Sequence[RunRecord], control: str = CONTROL) -> list[LearnedRow]:
    """The newest run of each method in every profile not graded against the papers, each benchmark's
    primary measure with its bootstrap CI and the effect against the control's newest run."""

    rows = []
    for profile in sorted({r.profile for r in records if r.profile not in PAPER_GRADED}):
        latest = latest_by_method(records, profile)
        # the effects `python -m harness effects --profile P` prints, against the control only
        effects = {(e.a, e.dataset, e.measure): e for e in method_effects(records, profile) if e.b == control}
        for method in sorted(latest, key=lambda m: (m != control, m)):
            rec = latest[method]
            for dataset, values in rec.metrics.items():
                measure = primary_measure(base_name(dataset))
                if measure not in values:  # an unnamed subset: the effects' measure
                    measure = primary_measure(dataset)
                if measure not in values:
                    continue
                scores = rec.per_query.get(dataset, {}).get(measure) or {}
                row = LearnedRow(
                    profile,
                    method,
                    dataset,
                    measure,
                    float(points(values[measure])),
                    None,
                    None,
                    len(scores),
                    rec.run_id,
                    command=run_command(method, profile),
                )
                if scores:
                    ci = bootstrap_ci(scores)
                    row.ci_low, row.ci_high = points(ci.low), points(ci.high)
                effect = effects.get((method, dataset, measure))
                if effect is not None:
                    row.effect, row.effect_low, row.effect_high = effect.delta, effect.ci_low, effect.ci_high
                    row.effect_p = effect.p_value
                rows.append(row)
    return rows


# ----------------------------------------------------------------------------- all of it


def build(
    cells: Sequence[Mapping[str, Any]],
    records: Sequence[RunRecord],
    comparisons: Mapping[str, Sequence[Mapping[str, Any]]],
    claims: Sequence[Any] | None = None,
) -> Glance:
    """The glance over loaded inputs (records without integrity problems; ``comparisons`` of the
    paper-graded ones from ``gate.grading.paper_comparisons``, as the leaderboard's loader makes them)."""
    return Glance(headline_rows(cells, records, comparisons), claim_rows(records, claims), learned_rows(records))


def from_folder(records: str | Path | None = None, reported: str | Path | None = None) -> Glance:
    """The glance over a records folder and the papers' cells (a ``--reported`` snapshot, or the
    registry), graded as ``check`` grades them. Raises HarnessError when the cells cannot be loaded."""

    recs, _ = load_records(records)
    folder = Path(records) if records is not None else records_dir()
    try:  # each record against the reference the gate grades it against (the one of its own precision)
        reference_of = folder_references(folder, recs).for_record
    except HarnessError:  # an unreadable manifest: only unknown methods are set apart (as on the leaderboard)
        reference_of = None
    # what the leaderboard shows as results: never an edited record (CORRUPT), one run on other data than
    # the catalog's (DATA-MISMATCH), or one of an unknown or changed spec (set apart)
    usable = [
        r for r in recs if not r.integrity_problems and not data_mismatches(r) and set_apart(r, reference_of) is None
    ]
    cells, error = load_reported_cells(reported)
    if error or cells is None:
        raise HarnessError(
            f"{reported or 'baselines/reported/'}: the papers' cells cannot be loaded ({error}); "
            "fix the registry file it names, or pass a snapshot written by "
            "`python -m harness reported --json PATH`"
        )
    comparisons = {r.run_id: paper_comparisons(r, cells) for r in usable if r.profile in PAPER_GRADED}
    return build(cells, usable, comparisons)
