"""The two declared quantities every seed-graded verdict reads: sigma_rep and the practical margin Delta.

* ``Delta`` (:func:`practical_margin`): the difference the field treats as real, per benchmark and
  measure, chosen in advance with its reason (``margins.yaml``).
* ``sigma_rep`` (:func:`sigma_rep`): the seed SD of one run's mean at paper scale, i.e. how far two
  honest runs of one recipe land apart (their difference has SD ``sigma_rep * sqrt(2)``). Pooled from
  the evidence, each piece shown with its source:

  - published multi-seed studies of one recipe (``seed_studies.yaml``, ``recipe: same``): ``seeds - 1``
    degrees of freedom each;
  - a user's own per-seed lists (``grade --metrics``, passed as ``extra``): ``seeds - 1`` each;
  - the harness's own paper-profile runs under several seeds (``run --profile paper --seed N``,
    records in ``runs/seeds/`` beside the reference): ``seeds - 1`` degrees of freedom per method,
    the evidence that makes the rule sharper as paper runs accumulate;
  - beside the evidence, never in its place: the harness's modelled floor (``noise.query_floor``, the
    per-query seed SD over the benchmark's queries); a model, not a bound (NFCorpus's own seeds sit
    6x below theirs), so a user's own paper-scale seeds are the evidence whatever it says (issue 61).

  Never pooled into sigma_rep: re-runs by another team that changed the recipe (the registry's
  repeated reports of one system, ``harness.papers.replication``: the QC authors' coCondenser re-run
  pre-trains 120K steps on titled passages; ``recipe: changed`` studies such as Tevatron issue #81, a
  one-GPU stage-1 run). How far such re-runs land apart is recipe drift, which comparability must
  catch, not seed noise: :func:`recipe_drift` lists them beside the verdict (``noise --margins``).

  One pair (or set) of runs is one piece of evidence whatever the number of measures and benchmarks
  it prints (``Evidence.runs``): a scope wider than one benchmark and measure keeps, per set of runs,
  its widest variance only, so R@50 and R@1000 of the same two runs, or their DL19 and DL20, do not
  count twice (pseudo-replication).

  The narrowest scope with at least :data:`MIN_DF` degrees of freedom is used: the benchmark and
  measure itself, else the family's (MS MARCO, TREC DL, BEIR) for that measure, else the family's
  for every measure of the same kind (rank: nDCG, RR; recall: R); with none at all, the harness's
  own mini spread transferred (``noise.parts``, on Satterthwaite's df), said so. The verdict tests with the
  pooled estimate and Student's t on its degrees of freedom (``verdict.Test.df``: exact whatever the
  df); the declared value shown (``SigmaRep.points``) is its one-sided upper confidence bound
  (``upper_confidence`` in ``margins.yaml``; chi-square on the pooled df), what the power table reads.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from harness.core import benchmarks as declared
from harness.core import yamlsafe
from harness.core.errors import DataFormatError, UnknownNameError
from harness.core.paths import runs_dir
from harness.core.seeds import DEFAULT_SEED
from harness.evaluation import noise, transfer_rule
from harness.evaluation import verdict as rule
from harness.evaluation.tolerances import canonical_measure
from harness.papers.replication import replication_pairs
from harness.records.store import load_records
from harness.spec.hashing import settings_hash

PAPER_PROFILE = "paper"

MARGINS_FILE = Path(__file__).with_name("margins.yaml")
STUDIES_FILE = Path(__file__).with_name("seed_studies.yaml")
MIN_DF = 2  # one pair alone (1 df) can print a difference of 0.0: a scope needs at least two


def family(benchmark: str) -> str:
    """msmarco | trec-dl | beir: the group whose evidence stands in where a benchmark has none, as its
    declaration says (``margin_family``, else its kind); an undeclared benchmark raises UnknownNameError."""
    return declared.margin_family(benchmark)


def _evidence_family(benchmark: str) -> str | None:
    """The family a piece of evidence speaks for; None for a name nothing declares (it stands in for none)."""
    try:
        return family(benchmark)
    except UnknownNameError:
        return None


@dataclass(frozen=True)
class Margin:
    points: float
    why: str


@dataclass(frozen=True)
class Evidence:
    """One estimate of a run's seed variance: from a pair of printed runs or a multi-seed study."""

    benchmark: str
    measure: str
    variance: float  # points^2, of one run's mean
    df: int
    source: str
    runs: str = ""  # the set of runs it comes from: one df per set, whatever it prints ("": its source)

    @property
    def group(self) -> str:
        return self.runs or self.source


@dataclass(frozen=True)
class SigmaRep:
    points: float  # declared: the upper confidence bound of the estimate (or the floor)
    estimate: float | None  # pooled point estimate, what the test reads (None: no evidence)
    df: float  # its degrees of freedom: the test's Student t (Satterthwaite's need not be whole)
    scope: str  # "benchmark" | "family" | "family, all measures of its kind" | "none"
    evidence: tuple[Evidence, ...]
    why: str
    parts: noise.Parts | None = None  # the fallback's measured parts (sd, tau, N), each with its df

    @property
    def tested(self) -> float:
        """The SD the verdict's t-test reads: the estimate (the fallback's own, transferred)."""
        return self.estimate if self.estimate is not None else self.points

    @property
    def label(self) -> str:
        """Which evidence set sigma_rep, in words (:func:`source_words`)."""
        return source_words(self)


PRETRAIN_UNMEASURED = (
    "pre-training part not measured: the fine-tune-only evidence is a lower bound, so se counts a pre-training "
    f"spread of {rule.PRETRAIN_STANDIN:g} x sigma_rep on each side"
)


def pretrain_words(measured: noise.PretrainSpread) -> str:
    """A measured pre-training part in words, as :func:`source_words` prints it beside sigma_rep."""
    return (
        f"pre-training part measured: sigma_pt {measured.sigma_pt:.2f} from {measured.groups} pre-training seeds "
        f"({measured.runs} runs, {noise.format_df(measured.df)} df), counted on each side"
    )


def source_words(spread: SigmaRep, pretrains: bool = False, measured: noise.PretrainSpread | None = None) -> str:
    """The one wording of a sigma's source that every verdict surface prints (run's table, check, grade,
    the report, the leaderboard, ``noise --margins``): the evidence sets and their df, or the mini seeds
    "MiniLM mini seeds (5, 640 queries) on scifact nDCG@10, transferred to msmarco-dev (x2, df capped at 4):
    2.9 df" with the declared transfer rule (``transfer.yaml``); ``pretrains``: the graded run pre-trained,
    so the pre-training part is named too: ``measured`` (``noise.pretrain_spread_of``), or not measured."""
    df = noise.format_df(spread.df)
    if spread.evidence:
        words = f"{'; '.join(sorted({e.group for e in spread.evidence}))} ({spread.scope}, {df} df)"
    elif spread.parts:
        p, tr = spread.parts, transfer_rule.load()
        seeds = f"{tr.model} {noise.PROFILE} seeds ({p.seeds}, {tr.train_queries} queries) on {p.measured}"
        same = p.measured.split()[0] == p.target
        if p.transferred:
            where = "paper scale" if same else p.target
            words = f"{seeds}, transferred to {where} ({tr.words(p.seeds)}): {df} df"
        else:
            words = f"{seeds}, measured on {p.target}: {df} df"
    else:
        words = f"no evidence ({df} df)"
    if not pretrains:
        return words
    return f"{words}; {pretrain_words(measured) if measured else PRETRAIN_UNMEASURED}"


# ---------------------------------------------------------------------------- the margin


@lru_cache(maxsize=1)
def load_margins() -> dict[str, Any]:
    data = yamlsafe.load(MARGINS_FILE.read_text(encoding="utf-8"))
    level = data.get("upper_confidence") if isinstance(data, dict) else None
    if not isinstance(level, (int, float)) or not 0.5 <= level < 1:
        raise DataFormatError(
            MARGINS_FILE, None, "upper_confidence must be a number in [0.5, 1)", "e.g. upper_confidence: 0.8"
        )
    for where, table in [
        *((f"families.{f}", t) for f, t in (data.get("families") or {}).items()),
        *((f"benchmarks.{b}", t) for b, t in (data.get("benchmarks") or {}).items()),
    ]:
        for measure, entry in table.items():
            if (
                not isinstance(entry, dict)
                or not isinstance(entry.get("delta"), (int, float))
                or entry["delta"] <= 0
                or not str(entry.get("why") or "").strip()
            ):
                raise DataFormatError(
                    MARGINS_FILE,
                    None,
                    f"{where}.{measure} needs delta > 0 and a why",
                    "write {delta: <points>, why: <what the field treats as real>}",
                )
    return data


def practical_margin(benchmark: str, measure: str) -> Margin:
    """Delta for ``benchmark`` / ``measure`` (points), with why it is the size that matters."""
    data, measure = load_margins(), canonical_measure(measure)
    tables = [
        (data.get("benchmarks") or {}).get(noise.base_benchmark(benchmark), {}),
        (data.get("families") or {}).get(family(benchmark), {}),
    ]
    for table in tables:
        entry = table.get(measure)
        if entry:
            return Margin(float(entry["delta"]), entry["why"])
    for table in tables:
        if "default" in table:
            return Margin(float(table["default"]["delta"]), table["default"]["why"])
    raise DataFormatError(
        MARGINS_FILE, None, f"no margin for {benchmark} {measure}", f"add families.{family(benchmark)}.default"
    )


# ---------------------------------------------------------------------------- the evidence


def load_studies() -> tuple[Evidence, ...]:
    """The published multi-seed studies of one recipe (``seed_studies.yaml``, ``recipe: same``)."""
    return tuple(e for e, same in _studies() if same)


@lru_cache(maxsize=1)
def _studies() -> tuple[tuple[Evidence, bool], ...]:
    """Every study of ``seed_studies.yaml`` with whether its runs share one recipe (``recipe: same``)."""
    if not STUDIES_FILE.exists():
        return ()
    raw = yamlsafe.load(STUDIES_FILE.read_text(encoding="utf-8")) or []
    entries = raw.get("studies", []) if isinstance(raw, dict) else raw
    out = []
    for i, e in enumerate(entries):
        try:
            seeds, sd, recipe = int(e["seeds"]), float(e["sd"]), str(e["recipe"])
            source = f"{e['citation']} ({e['where']}): {e['system']}, {seeds} seeds, SD {sd:.2f}"
            if recipe not in ("same", "changed"):
                raise ValueError(f"recipe is {recipe!r}, not same or changed")
            out.append(
                (
                    Evidence(
                        str(e["benchmark"]),
                        canonical_measure(str(e["measure"])),
                        sd**2,
                        seeds - 1,
                        source,
                        f"{e['citation']}: {e['system']}",
                    ),
                    recipe == "same",
                )
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise DataFormatError(
                STUDIES_FILE,
                None,
                f"entry {i + 1}: {exc!r}",
                "each entry needs citation, where, system, benchmark, measure, seeds, sd, "
                "recipe (same: one recipe's seeds; changed: another team's re-run)",
            ) from None
        if seeds < 2:
            raise DataFormatError(STUDIES_FILE, None, f"entry {i + 1}: a seed SD needs at least 2 seeds", "")
    return tuple(out)


def own_paper_seeds(runs: Path | None = None) -> tuple[Evidence, ...]:
    """The harness's own paper-profile runs of one method and settings under several seeds."""
    runs = runs or runs_dir()
    records = [
        r
        for d in ("records", "seeds")
        for r in load_records(runs / d)[0]
        if r.profile == PAPER_PROFILE and not r.integrity_problems
    ]
    # one set per pre-training: a `--pretrain-seeds` study's seeds of one pre-training spread by fine-tuning
    # alone (pooled, the within-pre-training SD); their pre-training part is noise.pretrain_spread_of's
    groups: dict[tuple[str, str, int], dict[Any, Any]] = {}
    for r in sorted(records, key=lambda r: r.run_id):  # the newest record of each seed
        pretraining = DEFAULT_SEED if r.pretrain_seed is None else r.pretrain_seed
        groups.setdefault((r.method, settings_hash(r.spec or {}), pretraining), {})[r.seed] = r
    out = []
    for (method, _, pretraining), by_seed in sorted(groups.items()):
        of = "" if pretraining == DEFAULT_SEED else f" of pre-training seed {pretraining}"
        if len(by_seed) < 2:
            continue
        for bench in sorted(set.intersection(*(set(r.metrics) for r in by_seed.values()))):
            for measure in sorted(set.intersection(*(set(r.metrics[bench]) for r in by_seed.values()))):
                values = [100.0 * r.metrics[bench][measure] for r in by_seed.values()]
                out.append(
                    Evidence(
                        bench,
                        canonical_measure(measure),
                        statistics.variance(values),
                        len(values) - 1,
                        f"harness: {method} [paper] under seeds {sorted(by_seed)}{of}: "
                        f"{', '.join(f'{v:.2f}' for v in values)}",
                        f"harness: {method} [paper] seeds {sorted(by_seed)}{of}",
                    )
                )
    return tuple(out)


@lru_cache(maxsize=1)
def all_evidence() -> tuple[Evidence, ...]:
    """The same-recipe seed evidence on file: what sigma_rep pools (never a recipe-changing re-run)."""
    return load_studies() + own_paper_seeds()


@lru_cache(maxsize=1)
def recipe_drift() -> tuple[Evidence, ...]:
    """Re-runs by another team that changed the recipe: the registry's replication pairs (two origins:
    a cited original against another paper's re-run) and ``recipe: changed`` studies. Shown beside the
    verdict as how far recipes drift; never pooled into sigma_rep."""
    pairs = tuple(
        Evidence(
            p.benchmark,
            canonical_measure(p.measure),
            p.diff**2 / (1 / p.runs_a + 1 / p.runs_b),
            1,
            f"{p.method}: {p.a:.1f} ({p.source_a}) vs {p.b:.1f} ({p.source_b})"
            + (f"; stated on one side only: {', '.join(p.unmatched)}" if p.unmatched else ""),
            f"{p.method}: {p.source_a.split(' row ')[0]} vs {p.source_b}",
        )
        for p in replication_pairs()
    )
    return pairs + tuple(e for e, same in _studies() if not same)


def user_seeds(label: str, benchmark: str, measure: str, values: list[float]) -> Evidence:
    """A user's per-seed list (points) of one method, profile and benchmark: same-recipe evidence with
    ``seeds - 1`` degrees of freedom (``grade --metrics``)."""
    return Evidence(
        benchmark,
        canonical_measure(measure),
        statistics.variance(values),
        len(values) - 1,
        f"your seeds: {label} {', '.join(f'{v:.2f}' for v in values)}",
        f"your seeds of {label}",
    )


def chi2_quantile(q: float, df: float) -> float:
    """The q-quantile of chi-square with ``df`` degrees of freedom (bisection on its CDF)."""
    lo, hi = 0.0, max(10.0, 10.0 * df)
    for _ in range(200):
        mid = (lo + hi) / 2
        if _lower_gamma_regularized(df / 2.0, mid / 2.0) < q:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def _lower_gamma_regularized(a: float, x: float) -> float:
    if x <= 0:
        return 0.0
    term = total = 1.0 / a
    n = 0
    while abs(term) > 1e-15 * abs(total) and n < 10000:
        n += 1
        term *= x / (a + n)
        total += term
    return min(1.0, total * math.exp(-x + a * math.log(x) - math.lgamma(a)))


UNBOUNDED = 1e3  # an upper bound this many times its estimate says nothing: the df are near zero


def upper_bound(estimate: float, df: float, level: float) -> float:
    """One-sided ``level`` upper confidence bound of an SD estimated on ``df`` degrees of freedom; ``inf``
    where the df are too few to bound it (0.008 df gave ~1e27): printed "unbounded" (:func:`bound_text`),
    ``null`` in JSON (``SigmaRep.points`` is never serialised as a number it is not)."""
    quantile = chi2_quantile(1.0 - level, df)
    if quantile <= 0:
        return math.inf
    bound = estimate * math.sqrt(df / quantile)
    return math.inf if not math.isfinite(bound) or bound > UNBOUNDED * max(estimate, 1e-12) else bound


def bound_text(bound: float) -> str:
    """An upper bound as printed: two decimals, or "unbounded"."""
    return f"{bound:.2f}" if math.isfinite(bound) else "unbounded"


def _pool(evidence: list[Evidence]) -> tuple[float, int]:
    df = sum(e.df for e in evidence)
    return math.sqrt(sum(e.variance * e.df for e in evidence) / df), df


def one_per_runs(evidence: list[Evidence]) -> list[Evidence]:
    """One piece per set of runs (``Evidence.group``), its widest variance: the measures and benchmarks
    one pair of runs prints are not independent replicates of its seed spread (pseudo-replication)."""
    widest: dict[str, Evidence] = {}
    for e in evidence:
        if e.group not in widest or e.variance > widest[e.group].variance:
            widest[e.group] = e
    return list(widest.values())


def sigma_rep(benchmark: str, measure: str, extra: tuple[Evidence, ...] = ()) -> SigmaRep:
    """The declared seed SD of one run's mean on ``benchmark`` / ``measure`` at paper scale; ``extra``:
    same-recipe evidence beside what is on file (a user's seeds)."""
    measure = canonical_measure(measure)
    base, fam, kind = noise.base_benchmark(benchmark), family(benchmark), noise.measure_kind(measure)
    evidence = all_evidence() + tuple(extra)
    scopes = [
        ("benchmark", [e for e in evidence if noise.base_benchmark(e.benchmark) == base and e.measure == measure]),
        ("family", [e for e in evidence if _evidence_family(e.benchmark) == fam and e.measure == measure]),
        (
            f"family, {kind} measures",
            [e for e in evidence if _evidence_family(e.benchmark) == fam and noise.measure_kind(e.measure) == kind],
        ),
    ]
    level = float(load_margins()["upper_confidence"])
    floor = noise.query_floor(base, measure)
    for scope, found in scopes:
        found = one_per_runs(found)
        if sum(e.df for e in found) >= MIN_DF:
            estimate, df = _pool(found)
            bound = upper_bound(estimate, df, level)
            why = (
                f"same-recipe seeds pooled over {len(found)} set(s) of runs ({scope}: {df} df): "
                f"{estimate:.2f}, {level:.0%} upper bound {bound_text(bound)}"
            )
            # the query floor is a model of the spread, not a bound of it (NFCorpus's seeds sit 6x below
            # theirs): printed beside the evidence, never in its place
            why = f"{why}; beside it, not used: the harness's modelled floor {floor.points:.2f} ({floor.why})"
            return SigmaRep(bound, estimate, df, scope, tuple(found), why)
    split = noise.parts(base, measure, paper_scale=True)
    bound = upper_bound(split.sigma, split.df, level)
    return SigmaRep(
        bound,
        split.sigma,
        split.df,
        "none",
        (),
        f"no same-recipe evidence at paper scale: {split.source}, {split.describe()}, {level:.0%} upper bound "
        f"{bound_text(bound)} (why the transfer rule: transfer.yaml)",
        split,
    )
