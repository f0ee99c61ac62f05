"""The papers' claimed effects, derived from the registry, and reproduced effects graded against them.

A paper's claim is a difference between two of its own rows in one table: e.g. qc-v2 Table 1,
coCondenser w/ query-as-context (120K) minus coCondenser (120K), retriever 2, MS MARCO dev
MRR@10 = 39.4 - 38.8 = +0.6. A with-QC and a without-QC run can each reproduce their cells with
the effect reversed, so the effect itself is graded, by the effect rule of
``harness.evaluation.verdict`` (``EffectTest``, ``effect_verdicts``): the claim's direction
(one-sided test of the run effect), DIFFERENT when the run effect misses the printed one (reversed,
or off by more than the practical margin Delta) after Holm over the claims of one table, with
``se`` from ``sigma_rep`` (``harness.evaluation.margins``) and the number of runs on each side;
NOT-COMPARABLE when either run does not share the setting of its row (``compare.comparability``)
or a cell carries an extraction doubt; NOT-YET-RUN when a run lacks the benchmark or measure.
Each graded check carries the size of the effect as Breuer et al.'s Effect Ratio with its CI, and
Delta-RI.

Which claims: every pair of the paper's own rows (never a cited number or an ablation) in one table,
on one benchmark and measure, for the pairs of :func:`claim_pairs`:

* the specs' ``compare_with`` (a method vs the no-pre-training control, QC vs non-QC): two rows
  form a claim when they share every condition except those that name the method's variant (query
  number, mixed context, the authors'-reproduction mark);
* cross-method: two methods that both have own rows in one table (CoT-MAE vs coCondenser in QC's
  tables, LexMAE vs coCondenser and BM25 in LexMAE's), neither a variant of another (a row naming a
  query number or mixed context is QC's variant); the method listed later in the table (a paper lists
  its baselines first) is A;
* stage over stage: ``(m, m)``, a method's retriever 2 minus its retriever 1 (3 minus 2) in one
  table, every other condition equal.

Count claims ("better on 9 of 14 datasets") are in ``harness.evaluation.count_claims``.
"""

from __future__ import annotations

import functools
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from harness.core.statuses import NOT_YET_RUN
from harness.evaluation import pretrain_part
from harness.evaluation import verdict as rule
from harness.evaluation.compare import TRAINING_FREE_FAMILIES, comparability, settle_note
from harness.evaluation.margins import practical_margin, sigma_rep, source_words
from harness.evaluation.pretrain_part import PretrainSpreads
from harness.evaluation.tolerances import canonical_measure
from harness.evaluation.verdict import NOT_COMPARABLE
from harness.papers.registry import load_registry
from harness.spec.conditions import run_conditions
from harness.spec.files import list_methods
from harness.spec.method import comparisons, load_method, variants_of
from harness.stages.graph import FINETUNE_STAGES

_VARIANT_ONLY = frozenset({"query_number", "mixed", "reproduction_by_authors", "runs_averaged"})
_VARIANT_MARKS = frozenset({"query_number", "mixed"})  # a row naming these is a variant of its method (QC)
# One method's own recipe: two different methods differ in them by nature (CoT-MAE 50K steps vs
# coCondenser 120K), so they do not keep two rows apart; each side is still graded on them.
_METHOD_OWN = frozenset({"pretrain_steps", "pretrain_corpus", "checkpoint", "init"})
_NOT_OWN = frozenset({"cited", "ablation"})
_STAGE_OWN = frozenset({"finetune_stage", "reranker_teacher"})  # a stage and what defines it (stage 3's teacher)


@dataclass(frozen=True)
class Claim:
    """A minus B as printed in one table (points). A stage claim has ``a == b`` and rows that differ
    in their fine-tuning stage only."""

    a: str
    b: str
    benchmark: str
    measure: str
    source: str  # "qc-pretraining-v2.txt v2 Table 1"
    a_row: str
    b_row: str
    a_value: float
    b_value: float
    a_conditions: tuple[tuple[str, Any], ...]
    b_conditions: tuple[tuple[str, Any], ...]
    doubt: str = ""  # an extraction doubt of either cell: shown, never graded
    a_printed_runs: int = 1  # each printed number is the mean of this many runs (``runs_averaged``)
    b_printed_runs: int = 1
    a_cell: str = ""  # the registry cells of the two rows (their ``cell_id``)
    b_cell: str = ""
    # the spec whose paper runs grade each row ("": the method's own; else a declared variant of it,
    # e.g. cotmae_qc_beir for QC v2 Table 2's sbert hard-negative cells: :func:`grading_spec`)
    a_spec: str = ""
    b_spec: str = ""

    @property
    def a_graded_by(self) -> str:
        return self.a_spec or self.a

    @property
    def b_graded_by(self) -> str:
        return self.b_spec or self.b

    @property
    def delta(self) -> float:
        return round(self.a_value - self.b_value, 6)

    @property
    def a_stage(self) -> str | None:
        return dict(self.a_conditions).get("finetune_stage")

    @property
    def b_stage(self) -> str | None:
        return dict(self.b_conditions).get("finetune_stage")

    @property
    def key(self) -> str:
        """One claim's identity (two columns of one benchmark and measure differ in conditions, or only in
        their methods: QC v2 Table 2's rows are datasets, its columns the four models)."""
        return " | ".join(
            (
                self.source,
                f"{self.a} - {self.b}",
                self.a_row,
                self.b_row,
                self.benchmark,
                self.measure,
                repr(self.a_conditions),
                repr(self.b_conditions),
            )
        )


@dataclass
class ClaimCheck:
    """One claim against one reproduced effect (points)."""

    source: str
    a_row: str
    b_row: str
    claimed: float
    status: str
    reason: str = ""
    key: str = ""  # Claim.key
    a: str = ""
    b: str = ""
    benchmark: str = ""
    measure: str = ""
    effect: float | None = None  # run A - run B
    margin: float | None = None  # Delta of the measure (points)
    sigma: float | None = None  # sigma_rep's estimate the t-test read: seed SD of one run's mean (points)
    sigma_df: float | None = None  # its degrees of freedom
    sigma_source: str = ""  # which evidence set it
    se: float | None = None  # seed se of the run effect
    ci_low: float | None = None  # 90% CI of the run effect (what the direction test reads)
    ci_high: float | None = None
    p_direction: float | None = None  # one-sided p of "the effect has the printed sign" (a tie: TOST)
    p_different: float | None = None  # Holm-adjusted p of "run effect = printed effect"
    p_zero: float | None = None  # its own two-sided p (before Holm)
    se_diff: float | None = None  # seed se of run effect - printed effect (the paper's runs add theirs)
    effect_ratio: float | None = None  # Breuer et al. 2020: reproduced / claimed improvement
    ratio_low: float | None = None  # its 90% CI (the run effect's CI over the printed effect)
    ratio_high: float | None = None
    delta_ri: float | None = None  # Breuer et al. 2020: RI(paper) - RI(run)
    a_runs: int = 1  # seeds averaged on each side of the run effect
    b_runs: int = 1
    seeds_needed: int | None = None  # INCONCLUSIVE: runs per side that would settle it at this effect
    a_cell: str = ""  # Claim.a_cell, Claim.b_cell
    b_cell: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# ----------------------------------------------------------------------------- which claims


def own_row(cell: Any) -> bool:
    """A number of a harness method that the paper itself ran (not cited, not an ablation)."""
    return (
        cell.score is not None
        and bool(cell.method)
        and bool(cell.benchmark)
        and bool(cell.measure)
        and not _NOT_OWN & set(cell.conditions or {})
    )


def _stage_rank(cell: Any) -> int | None:
    stage = (cell.conditions or {}).get("finetune_stage")
    return FINETUNE_STAGES.index(stage) if stage in FINETUNE_STAGES else None


def claim_from(ca: Any, cb: Any) -> Claim:
    """Cell A minus cell B (registry cells of one table, benchmark and measure)."""
    doubts = "; ".join(dict.fromkeys(str(c.doubt) for c in (ca, cb) if c.doubt))
    return Claim(
        ca.method,
        cb.method,
        ca.benchmark,
        ca.measure,
        f"{ca.paper_file} {ca.version} {ca.table}",
        ca.row,
        cb.row,
        round(100 * ca.score, 6),
        round(100 * cb.score, 6),
        tuple(sorted(ca.conditions.items())),
        tuple(sorted(cb.conditions.items())),
        doubts,
        int(ca.conditions.get("runs_averaged") or 1),
        int(cb.conditions.get("runs_averaged") or 1),
        str(ca.cell_id),
        str(cb.cell_id),
        grading_spec(ca.method, ca.conditions),
        grading_spec(cb.method, cb.conditions),
    )


def _groups(cells: Sequence[Any], ignored: frozenset[str]) -> dict[tuple, list[Any]]:
    """The cells of one table, benchmark and measure whose conditions agree except ``ignored``."""
    groups: dict[tuple, list[Any]] = defaultdict(list)
    for c in cells:
        setting = tuple(sorted((k, str(v)) for k, v in (c.conditions or {}).items() if k not in ignored))
        groups[(c.paper_file, c.version, c.table, c.benchmark, c.measure, setting)].append(c)
    return groups


def _variants(cells: Sequence[Any]) -> set[str]:
    """The methods some row of which names a variant (QC's query number or mixed context)."""
    return {c.method for c in cells if c.method and _VARIANT_MARKS & set(c.conditions or {})}


def claims_for(pairs: Sequence[tuple[str, str]], cells: Sequence[Any] | None = None) -> list[Claim]:
    """Every claimed A-minus-B difference of ``pairs`` in the registry (or in ``cells``); a pair
    ``(m, m)`` gives m's stage-over-stage differences (retriever 2 minus 1, 3 minus 2)."""
    cells = load_registry() if cells is None else cells
    pairs = list(dict.fromkeys(pairs))
    wanted = {m for pair in pairs for m in pair}
    own = [c for c in cells if c.method in wanted and own_row(c)]
    variants = _variants(cells)
    out = []
    for across in (False, True):  # a method and its variant (same recipe otherwise), then two methods
        method_pairs = [(a, b) for a, b in pairs if a != b and across != bool({a, b} & variants)]
        for group in _groups(own, _VARIANT_ONLY | (_METHOD_OWN if across else frozenset())).values():
            for a, b in method_pairs:
                out += [claim_from(ca, cb) for ca in group if ca.method == a for cb in group if cb.method == b]
    staged = {a for a, b in pairs if a == b}
    for group in _groups([c for c in own if c.method in staged], _STAGE_OWN).values():
        for ca in group:
            for cb in group:
                ra, rb = _stage_rank(ca), _stage_rank(cb)
                if ca.method == cb.method and ra is not None and rb is not None and ra == rb + 1:
                    out.append(claim_from(ca, cb))
    return out


def claim_pairs(cells: Sequence[Any] | None = None) -> list[tuple[str, str]]:
    """The pairs whose printed differences are graded: the specs' ``compare_with``, then the
    cross-method pairs of the registry's tables, then ``(m, m)`` for each method with two stages in
    one table (see the module docstring)."""
    cells = load_registry() if cells is None else cells
    known = set(list_methods())
    own = [c for c in cells if own_row(c) and c.method in known]
    variants = _variants(cells)
    out = list(dict.fromkeys(comparisons()))
    seen = set(out) | {(b, a) for a, b in out}
    by_table: dict[tuple, list[Any]] = defaultdict(list)
    for c in own:
        by_table[(c.paper_file, c.version, c.table)].append(c)
    for table in by_table.values():
        listed = list(dict.fromkeys(c.method for c in table))  # table order: the baselines come first
        for i, b in enumerate(listed):
            for a in listed[i + 1 :]:
                if a not in variants and b not in variants and (a, b) not in seen:
                    out.append((a, b))
                    seen |= {(a, b), (b, a)}
    staged = {
        c.method
        for table in by_table.values()
        for c in table
        if len({_stage_rank(x) for x in table if x.method == c.method} - {None}) > 1
    }
    return out + [(m, m) for m in sorted(staged)]


# ----------------------------------------------------------------------------- grading


@dataclass(frozen=True)
class Pairing:
    """A claim and the two runs its effect is measured on: their conditions (with the fine-tuning
    stage each side's numbers come from), their values in points (None: not scored) and how many
    seeds each value averages."""

    claim: Claim
    a_conditions: Mapping[str, Any]
    b_conditions: Mapping[str, Any]
    a_value: float | None
    b_value: float | None
    a_runs: int = 1
    b_runs: int = 1


def seed_free(method: str) -> bool:
    """A training-free method (BM25): no seed spread on its side of an effect, printed or run."""
    try:
        return load_method(method, "paper").get("family") in TRAINING_FREE_FAMILIES
    except Exception:  # noqa: BLE001 - no paper spec: treated as trained (the wider se)
        return False


def _side(conditions: Mapping[str, Any], method: str) -> str:
    stage = conditions.get("finetune_stage")
    return f"{conditions.get('method') or method}" + (f" {stage}" if stage else "")


def _variances(
    claim: Claim, a_runs: int, b_runs: int, pretrain: tuple[float, float] = (0.0, 0.0)
) -> tuple[float, float]:
    """(run effect, run effect - printed effect) variances in units of sigma_rep**2; ``pretrain``: each
    side's pre-training spread over sigma_rep (the seeds of a side share one pre-training, which
    averaging them leaves in; the paper's side had its own: twice in the difference)."""
    pa = 0.0 if seed_free(claim.a) else pretrain[0] ** 2
    pb = 0.0 if seed_free(claim.b) else pretrain[1] ** 2
    va = 0.0 if seed_free(claim.a) else 1.0 / max(1, a_runs)
    vb = 0.0 if seed_free(claim.b) else 1.0 / max(1, b_runs)
    ka = 0.0 if seed_free(claim.a) else 1.0 / max(1, claim.a_printed_runs)
    kb = 0.0 if seed_free(claim.b) else 1.0 / max(1, claim.b_printed_runs)
    return va + vb + pa + pb, va + vb + ka + kb + 2 * (pa + pb)


def _pretrain_ratio(run_conditions: Mapping[str, Any], method: str, sigma: float, measured: Any = None) -> float:
    """A side's pre-training spread over sigma_rep where its run pre-trained: ``measured``'s sigma_pt (a
    ``noise.PretrainSpread``) over ``sigma``, else the stand-in (no seed on file varies the pre-training); 0
    for a side that does not pre-train."""
    if not run_conditions.get("pretrain_corpus") or seed_free(method):
        return 0.0
    return measured.sigma_pt / sigma if measured is not None and sigma > 0 else rule.PRETRAIN_STANDIN


def seeds_to_settle(
    effect: float,
    sigma: float,
    delta: float,
    claim: Claim,
    family: int,
    df: float = rule.KNOWN,
    pretrain: tuple[float, float] = (0.0, 0.0),
) -> int | None:
    """The fewest runs per side (averaged) that would grade the claim REPRODUCED or DIFFERENT at the
    same run effect, DIFFERENT needing to pass the whole family at once (Bonferroni: never fewer runs
    than Holm would need); None when none up to ``verdict.MAX_SEEDS`` does."""

    def settles(n: int) -> bool:
        v_effect, v_diff = _variances(claim, n, n, pretrain)
        test = rule.EffectTest(
            effect, sigma * math.sqrt(v_effect), claim.delta, sigma * math.sqrt(v_diff), delta, df + 2 * (n - 1)
        )  # the n seeds per side are seed evidence too: 2 (n - 1) df more
        status, p_direction, p_different = rule.effect_verdicts([test])[0]
        # DIFFERENT must pass the whole family; the direction (a tie: equivalence) shown is not corrected
        return (status in rule.DIFFERENT and p_different * family < rule.ALPHA) or p_direction < rule.ALPHA

    return rule.fewest_runs(settles)


def grade(
    pairings: Sequence[Pairing], evidence: tuple[Any, ...] = (), pretrain_spreads: PretrainSpreads | None = None
) -> list[ClaimCheck]:
    """Grade every pairing; the claims of one table (``Claim.source``) are one family (Holm).
    ``evidence``: same-recipe seed evidence beside what is on file (a user's per-seed lists);
    ``pretrain_spreads``: sigma_pt measured per (benchmark, measure) (default: ``pretrain_part.on_file``)."""
    measured_pt = pretrain_part.on_file() if pretrain_spreads is None else pretrain_spreads
    out, tests = [], []
    for p in pairings:
        c = p.claim
        check = ClaimCheck(
            c.source,
            c.a_row,
            c.b_row,
            c.delta,
            NOT_COMPARABLE,
            key=c.key,
            a=c.a,
            b=c.b,
            benchmark=c.benchmark,
            measure=c.measure,
            a_runs=p.a_runs,
            b_runs=p.b_runs,
            a_cell=c.a_cell,
            b_cell=c.b_cell,
        )
        out.append(check)
        check.reason = (
            comparability(c.a, dict(c.a_conditions), p.a_conditions)[0]
            or comparability(c.b, dict(c.b_conditions), p.b_conditions)[0]
            or (f"doubtful cell, not graded: {c.doubt}" if c.doubt else "")
        )
        if check.reason:
            continue
        missing = [
            f"run {who} ({_side(cond, m)}) has no {c.benchmark} {c.measure}"
            for who, m, cond, v in (("A", c.a, p.a_conditions, p.a_value), ("B", c.b, p.b_conditions, p.b_value))
            if v is None
        ]
        if missing:
            check.status, check.reason = NOT_YET_RUN, "; ".join(missing)
            continue
        a_value, b_value = float(p.a_value), float(p.b_value)  # type: ignore[arg-type]  # both present: `missing` is empty
        check.effect = a_value - b_value
        check.effect_ratio = rule.effect_ratio(a_value, b_value, c.a_value, c.b_value)
        check.delta_ri = rule.delta_ri(a_value, b_value, c.a_value, c.b_value)
        spread = sigma_rep(c.benchmark, c.measure, evidence) if evidence else sigma_rep(c.benchmark, c.measure)
        check.margin = practical_margin(c.benchmark, c.measure).points
        # a side that pre-trains: its measured pre-training part, else the stand-in (verdict.PRETRAIN_STANDIN)
        measured = measured_pt.get((c.benchmark, canonical_measure(c.measure)))
        sides_of = ((p.a_conditions, c.a), (p.b_conditions, c.b))
        pretrain = (
            _pretrain_ratio(p.a_conditions, c.a, spread.tested, measured),
            _pretrain_ratio(p.b_conditions, c.b, spread.tested, measured),
        )
        check.sigma, check.sigma_df = spread.tested, spread.df
        pretrains = any(cond.get("pretrain_corpus") and not seed_free(m) for cond, m in sides_of)
        check.sigma_source = source_words(spread, pretrains, measured)
        v_effect, v_diff = _variances(c, p.a_runs, p.b_runs, pretrain)
        check.se = check.sigma * math.sqrt(v_effect)
        df = spread.df
        if measured is not None and pretrains:  # the measured sigma_pt's df enter the test's (verdict.pretrain_df)
            sides = 2.0 * sum(1 for cond, m in sides_of if cond.get("pretrain_corpus") and not seed_free(m))
            ft = check.sigma**2 * _variances(c, p.a_runs, p.b_runs)[1]
            df = check.sigma_df = rule.pretrain_df(ft, spread.df, measured.sigma_pt, measured.df, sides)
        tests.append(
            (
                check,
                rule.EffectTest(check.effect, check.se, c.delta, check.sigma * math.sqrt(v_diff), check.margin, df),
                c,
                pretrain,
            )
        )
    _grade_by_table(tests)
    return out


def _grade_by_table(tests: Sequence[tuple[ClaimCheck, rule.EffectTest, Claim, tuple[float, float]]]) -> None:
    """Grade the effect tests in place, Holm-corrected across the claims of one table; an INCONCLUSIVE
    one is told how many seeds would settle it."""
    by_table: dict[str, list[tuple[ClaimCheck, rule.EffectTest, Claim, tuple[float, float]]]] = defaultdict(list)
    for item in tests:
        by_table[item[0].source].append(item)
    for family in by_table.values():
        for (check, test, claim, pretrain), (status, p_dir, p_diff) in zip(
            family, rule.effect_verdicts([t for _, t, _, _ in family])
        ):
            check.status, check.p_direction, check.p_different = status, p_dir, p_diff
            check.se_diff = test.se_diff
            check.p_zero = rule.p_zero(test.effect - test.claimed, test.se_diff, test.df)
            check.ci_low, check.ci_high = test.ci()
            ratio = test.ratio_ci()
            if ratio:
                check.ratio_low, check.ratio_high = ratio
            if status == rule.INCONCLUSIVE:
                check.seeds_needed = seeds_to_settle(
                    test.effect, check.sigma or 0.0, test.delta, claim, len(family), test.df, pretrain
                )
                check.reason = check.reason or effect_note(check)


def effect_note(check: ClaimCheck | Mapping[str, Any]) -> str:
    """An INCONCLUSIVE claim in words (a ClaimCheck or its ``to_dict``): the smallest margin around the
    printed effect its CI lies inside, the runs per side that would settle it, which evidence set
    sigma_rep."""

    def get(name: str) -> Any:
        return check.get(name) if isinstance(check, Mapping) else getattr(check, name)

    low, high, claimed, sigma = get("ci_low"), get("ci_high"), get("claimed"), get("sigma")
    within = None if low is None or high is None else max(abs(low - claimed), abs(high - claimed))
    note = settle_note(within, get("seeds_needed"), None, None, per_side=" per side")
    return note + (f" (sigma_rep {sigma:.2f}: {get('sigma_source')})" if sigma is not None else "")


def _by_measure(values: Mapping[tuple[str, str], float]) -> dict[tuple[str, str], float]:
    return {(benchmark, canonical_measure(measure)): v for (benchmark, measure), v in values.items()}


def check_claims(
    claims: Sequence[Claim],
    a_conditions: Mapping[str, Any],
    b_conditions: Mapping[str, Any],
    a_values: Mapping[tuple[str, str], float],
    b_values: Mapping[tuple[str, str], float],
    *,
    a_runs: int = 1,
    b_runs: int = 1,
) -> list[ClaimCheck]:
    """Grade run A minus run B against ``claims`` (one check each, in order).

    ``a_values`` / ``b_values``: ``{(benchmark, measure): points}``, every measure a run has (the
    measure's spelling is canonicalised: MRR@10 = RR@10); ``a_runs`` / ``b_runs``: how many seeds
    each value averages. The conditions say which stage each side's numbers come from
    (``finetune_stage``), so a stage claim takes the run at retriever 2 as A and at retriever 1 as B.
    A claim whose benchmark or measure a side lacks is NOT-YET-RUN, naming what is missing."""
    av, bv = _by_measure(a_values), _by_measure(b_values)
    return grade(
        [
            Pairing(
                c,
                a_conditions,
                b_conditions,
                av.get((c.benchmark, canonical_measure(c.measure))),
                bv.get((c.benchmark, canonical_measure(c.measure))),
                a_runs,
                b_runs,
            )
            for c in claims
        ]
    )


# ----------------------------------------------------------------------------- without a run


def spec_conditions(method: str, stage: str | None) -> dict[str, Any] | None:
    """What a paper-profile run of ``method``'s committed spec would state at ``stage`` (None: no
    paper spec)."""
    stated = _spec_conditions(method)
    return None if stated is None else {**stated, **({"finetune_stage": stage} if stage else {})}


@functools.cache
def _spec_conditions(method: str) -> dict[str, Any] | None:
    """(cached: every claim of the registry asks, per row; callers get a copy)"""
    try:
        spec = load_method(method, "paper")
    except Exception:  # noqa: BLE001 - a method without a paper profile cannot be run for the papers
        return None
    return run_conditions(spec.config, method, "paper")


@functools.cache
def _declared_variants(method: str) -> tuple[str, ...]:
    return tuple(variants_of(method))


def grading_spec(method: str | None, cell_conditions: Mapping[str, Any] | None) -> str:
    """The spec whose paper runs can grade a row of ``method`` stating ``cell_conditions``: the method's own
    when its paper spec can, else the first declared variant that can (``variant_of``: its runs state the
    parent's method, spec.conditions), else "" (the method's own, whose reason says why none can). As
    gate.cell_state finds a cell's command, so a claim pairs the two runs that grade its two cells."""
    if not method:
        return ""
    conditions = dict(cell_conditions or {})
    stage = conditions.get("finetune_stage")
    for spec in (method, *_declared_variants(method)):
        stated = spec_conditions(spec, stage)
        if stated is not None and not comparability(method, conditions, stated)[0]:
            return "" if spec == method else spec
    return ""


def spec_reason(claim: Claim) -> str:
    """Why no paper run of the committed specs can ever grade ``claim`` ("" when one can): a
    condition of either row that the spec does not share, a declared deviation, an extraction doubt."""
    for method, spec, cell, stage in (
        (claim.a, claim.a_graded_by, claim.a_conditions, claim.a_stage),
        (claim.b, claim.b_graded_by, claim.b_conditions, claim.b_stage),
    ):
        conditions = spec_conditions(spec, stage)
        if conditions is None:
            return f"no paper profile of {method} in the specs: it cannot be run for the papers"
        reason = comparability(method, dict(cell), conditions)[0]
        if reason:
            return f"{method}'s paper spec: {reason}"
    return f"doubtful cell, not graded: {claim.doubt}" if claim.doubt else ""
