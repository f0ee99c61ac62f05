"""Seed-to-seed spread: what separates two honest runs of one recipe on the same queries.

``noise.yaml`` (next to this module) holds the measurement; :func:`sigma` reads it. It is written
from run records by ``python -m harness noise --write`` and a test fails when the
file no longer matches the records, so no number in it is typed by hand.

The measurement: one spec (the control, ``nopretrain`` at the ``mini`` profile) run under several
seeds (``run --seed N``; records in ``runs/seeds/`` beside the seed-42 reference). Per benchmark
and measure it gives

* ``sd``: the standard deviation of the benchmark mean across the seeds (few degrees of freedom);
* ``tau``: the per-query seed standard deviation (pooled over the queries: many degrees of freedom);
* ``shared``: the part of the mean's variance that no number of queries averages away
  (``sd**2 - tau**2 / queries``, at least 0).

Transfer to a benchmark of ``N`` judged queries (MS MARCO dev, TREC DL, the rest of BEIR; the measured
ones too): ``sigma(N)**2 = sd**2 + tau**2 (1/N - 1/queries)`` from the widest benchmark and measure of the
measure's kind (rank-sensitive measures: nDCG, RR; recall measures: R, Success), on Satterthwaite's
degrees of freedom for the two quantities actually estimated (``sd**2`` on ``seeds - 1``, ``tau**2`` on
its effective df): about one df on MS MARCO's 6,980 queries from three seeds, where the mean's SD
carries it all (:func:`transfer`; a shared part clipped to 0 never raises the df). Carried to another
benchmark or to paper scale, the declared transfer rule (``transfer.yaml``) applies on top: df at most
``seeds - 1``. :func:`pretrain_spread` estimates the pre-training part from runs of different
pre-training seeds.
Assumption, stated with every number: the spread of a MiniLM-sized encoder fine-tuned on 640
queries stands in for a BERT-base encoder fine-tuned on MS MARCO; the smaller training set likely
makes it wider, so grading errs towards INCONCLUSIVE, not towards DIFFERENT. Fine-tuning only: the
control does not pre-train, so no pre-training spread is in it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from numpy.typing import ArrayLike

from harness.core import benchmarks as declared
from harness.core import yamlsafe
from harness.core.errors import HarnessError
from harness.core.paths import runs_dir
from harness.core.seeds import DEFAULT_SEED
from harness.evaluation import transfer_rule
from harness.records.run_precision import precision_label
from harness.records.store import load_precision_references, load_records, load_references
from harness.spec.hashing import settings_hash

NOISE_FILE = Path(__file__).with_name("noise.yaml")
CONTROL, PROFILE = "nopretrain", "mini"
# Judged test queries per benchmark (the qrels the harness scores; BEIR: Thakur et al. 2021, Table 1), as
# harness/core/benchmarks.yaml declares them.
QUERIES = {name: d.queries for name, d in declared.declarations(include_user=False).items() if d.queries}


def base_benchmark(benchmark: str) -> str:
    """The benchmark a spread is looked up under: a rehearsal sample is its full benchmark, a
    cqadupstack forum is cqadupstack."""
    return declared.base_name(benchmark)


def measure_kind(measure: str) -> str:
    """'recall' for R / Success measures, 'rank' for the rest (nDCG, RR)."""
    name = measure.split("(")[0].split("@")[0]
    return "recall" if name in ("R", "Success") else "rank"


@dataclass(frozen=True)
class Sigma:
    points: float  # seed SD of one run's mean (points)
    why: str  # where it comes from


def spread_of(scores: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(sd, tau, tau_df)`` of per-query scores shaped ``(..., seeds, queries)`` (points): the SD of the
    benchmark mean across the seeds (on ``seeds - 1`` df), the per-query seed SD pooled over the queries,
    and the effective df of ``tau**2`` (Satterthwaite on the mean of the per-query variances, each on
    ``seeds - 1`` df: ``(seeds - 1) (sum v)^2 / sum v^2``). Queries every seed scores alike add nothing
    to those df, so where most queries have no seed variance the df are far below
    ``queries * (seeds - 1)``. Vectorised over the leading axes: the simulation test runs this very code."""
    seeds = scores.shape[-2]
    sd = scores.mean(axis=-1).std(axis=-1, ddof=1)
    per_query = scores.var(axis=-2, ddof=1)
    total, squares = per_query.sum(axis=-1), (per_query**2).sum(axis=-1)
    tau = np.sqrt(per_query.mean(axis=-1))
    with np.errstate(divide="ignore", invalid="ignore"):
        tau_df = np.where(squares > 0, (seeds - 1) * total**2 / np.where(squares > 0, squares, 1.0), seeds - 1)
    return sd, tau, tau_df


def transfer(
    sd: ArrayLike, seeds: int, tau: ArrayLike, tau_df: ArrayLike, measured_queries: int, queries: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(sigma, df, clipped)`` of one run's mean over ``queries`` from a measurement on
    ``measured_queries``: ``sigma**2 = sd**2 + tau**2 (1/queries - 1/measured_queries)`` (the shared part
    ``sd**2 - tau**2 / measured_queries`` plus ``tau**2 / queries``), on Satterthwaite's df for that linear
    combination of the two quantities actually estimated (``sd**2`` on ``seeds - 1`` df, ``tau**2`` on
    ``tau_df``). Where the shared part comes out negative it is clipped to 0 (``sigma = tau / sqrt(queries)``)
    and the df stay Satterthwaite's of the estimate, at most ``seeds - 1``: the clip says the seeds could
    not see the shared part, not that it is known to be 0, so it never raises the df (a near-zero estimate
    on few seeds gives near-zero df: INCONCLUSIVE, not a sharp verdict)."""
    sd2, tau2 = np.asarray(sd, dtype=float) ** 2, np.asarray(tau, dtype=float) ** 2
    c = 1.0 / queries - 1.0 / measured_queries
    linear = sd2 + c * tau2
    floor = tau2 / queries
    clipped = linear < floor
    variance = np.maximum(linear, floor)
    spread = sd2**2 / (seeds - 1) + (c * tau2) ** 2 / np.maximum(np.asarray(tau_df, dtype=float), 1e-12)
    with np.errstate(divide="ignore", invalid="ignore"):
        df = np.where(spread > 0, variance**2 / np.where(spread > 0, spread, 1.0), seeds - 1)
    df = np.where(clipped, np.minimum(df, seeds - 1), df)
    return np.sqrt(variance), df, clipped


def measure(records: list[Any]) -> dict[str, Any]:
    """The measurement block of noise.yaml from records of one spec under different seeds."""
    if len({r.seed for r in records}) < 2:
        raise HarnessError(
            "a seed spread needs records of at least 2 different seeds: "
            f"run --method {CONTROL} --profile {PROFILE} --seed 43"
        )
    benchmarks: dict[str, dict[str, Any]] = {}
    for dataset in sorted(set.intersection(*(set(r.per_query) for r in records))):
        for name in sorted(set.intersection(*(set(r.per_query[dataset]) for r in records))):
            runs = [r.per_query[dataset][name] for r in records]
            queries = sorted(set.intersection(*(set(pq) for pq in runs)))
            scores = np.array([[100.0 * pq[q] for q in queries] for pq in runs])
            sd, tau, tau_df = (float(x) for x in spread_of(scores))
            shared = math.sqrt(max(0.0, sd**2 - tau**2 / len(queries)))
            benchmarks.setdefault(dataset, {})[name] = {
                "means": [round(float(m), 4) for m in scores.mean(axis=1)],
                "sd": round(sd, 4),
                "tau": round(tau, 4),
                "tau_df": round(tau_df, 2),
                "shared": round(shared, 4),
                "queries": len(queries),
            }

    hashes, codes = {settings_hash(r.spec or {}) for r in records}, {_code_of(r) for r in records}
    if len(hashes) != 1:
        raise HarnessError(f"the seed records ran different settings ({', '.join(sorted(hashes))}): one spec only")
    return {
        "method": records[0].method,
        "profile": records[0].profile,
        "settings_hash": hashes.pop(),
        "commit": codes.pop() if len(codes) == 1 else "several (code drift included)",
        "runs": [{"run_id": r.run_id, "seed": r.seed} for r in records],
        "benchmarks": benchmarks,
    }


@lru_cache(maxsize=1)
def load() -> dict[str, Any]:
    return yamlsafe.load(NOISE_FILE.read_text(encoding="utf-8"))


def judged_queries(base: str) -> int:
    """The judged queries a benchmark declares (one of the user's folder too); an undeclared size: the
    smallest of the package's, i.e. the widest spread."""
    decl = declared.find(base)
    return QUERIES.get(base) or (decl.queries if decl and decl.queries else None) or min(QUERIES.values())


def _kind_max(table: dict[str, Any], kind: str, key: str) -> float:
    return max(v[key] for by in table.values() for m, v in by.items() if measure_kind(m) == kind)


@dataclass(frozen=True)
class Parts:
    """One run's seed spread on a benchmark of ``queries`` judged queries, from the control's seeds measured
    on ``measured`` (``measured_queries`` queries): ``sigma**2 = sd**2 + tau**2 (1/queries - 1/measured_queries)``,
    i.e. ``shared**2 + tau**2 / queries``. Its df are Satterthwaite's on what was estimated (:func:`transfer`):
    on MS MARCO's 6,980 queries the mean's ``sd**2`` on ``seeds - 1`` df carries nearly all of it (about one df
    from three seeds, less than the seeds' own: a part of ``sd**2`` is subtracted); on 43 TREC DL queries
    ``tau**2`` does, on its effective df."""

    measured: str  # benchmark and measure the control's seeds were scored on
    sd: float  # SD of their benchmark mean
    seeds: int
    tau: float  # per-query seed SD
    tau_df: float  # effective df of tau**2
    measured_queries: int
    queries: int  # N: the judged queries of the benchmark the spread is for
    source: str  # the runs, in words
    target: str = ""  # the benchmark the spread is for
    transferred: bool = False  # to another model, scale or benchmark: the declared rule applies (transfer.yaml)

    def _transferred(self) -> tuple[float, float, bool]:
        sigma, df, clipped = transfer(self.sd, self.seeds, self.tau, self.tau_df, self.measured_queries, self.queries)
        if self.transferred:
            sigma, df = transfer_rule.load().apply(sigma, df, self.seeds)
        return float(sigma), float(df), bool(clipped)

    @property
    def shared(self) -> float:
        """What no number of queries averages away, as measured (``sd**2 - tau**2 / measured_queries``, at least 0)."""
        return math.sqrt(max(0.0, self.sd**2 - self.tau**2 / self.measured_queries))

    @property
    def sigma(self) -> float:
        return self._transferred()[0]

    @property
    def df(self) -> float:
        return self._transferred()[1]

    @property
    def clipped(self) -> bool:
        """The seeds' means agree more closely than their per-query spread allows: shared clipped to 0."""
        return self._transferred()[2]

    def describe(self) -> str:
        clip = "; shared clipped to 0: the seeds cannot see it" if self.clipped else ""
        rule = f"; transfer rule: {transfer_rule.load().words(self.seeds)}" if self.transferred else ""
        factor = transfer_rule.load().inflation if self.transferred else 1.0
        return (
            f"{f'{factor:g} x ' if factor != 1.0 else ''}sqrt(sd {self.sd:.2f}^2 [{self.seeds - 1} df] + tau {self.tau:.1f}^2 [{self.tau_df:.0f} df] "
            f"x (1/{self.queries} - 1/{self.measured_queries})) = {self.sigma:.2f} on {format_df(self.df)} df "
            f"(Satterthwaite{rule}; shared {self.shared:.2f}{clip})"
        )


def format_df(df: float) -> str:
    """Degrees of freedom as printed: whole where whole, else to 2 significant digits (0.0081, 1.0, 15);
    "inf" for a spread taken as known."""
    if not math.isfinite(df):
        return "inf"
    if df >= 10 or float(df).is_integer():
        return f"{math.floor(df + 1e-9):d}"
    return f"{df:.2g}"


def parts(benchmark: str, measure: str, data: dict[str, Any] | None = None, paper_scale: bool = False) -> Parts:
    """The widest spread the control's seeds give for one run's mean on ``benchmark`` (:class:`Parts`):
    each benchmark and measure of the measure's kind they were scored on, carried to the benchmark's
    judged queries, the widest kept (the benchmark's own measurement among them where the control ran
    on it, so a measured benchmark is never graded narrower than its own seeds). Carried to another
    benchmark, or to ``paper_scale`` (another model and training set), the declared transfer rule applies
    (``transfer.yaml``)."""
    data = data or load()
    table, kind, base = data["benchmarks"], measure_kind(measure), base_benchmark(benchmark)
    seeds, n = len(data["runs"]), judged_queries(base)
    words = f"harness mini seeds ({data['method']} [{data['profile']}], {seeds} seeds"
    found = [
        Parts(
            f"{bench} {name}",
            v["sd"],
            seeds,
            v["tau"],
            float(v.get("tau_df", seeds - 1)),  # unknown: the fewest it can be
            v["queries"],
            n,
            f"{words}, {bench} {name}, {v['queries']} queries)",
            base,
            paper_scale or bench != base,
        )
        for bench, by in sorted(table.items())
        for name, v in sorted(by.items())
        if measure_kind(name) == kind
    ]
    own = [p for p in found if p.measured == f"{base} {measure}"]
    return max(found, key=lambda p: (p.sigma, p in own))


def sigma(benchmark: str, measure: str, data: dict[str, Any] | None = None) -> Sigma:
    """Seed SD of one run's mean on ``benchmark`` / ``measure`` (points), with its source."""
    p = parts(benchmark, measure, data)
    base = base_benchmark(benchmark)
    if p.measured == f"{base} {measure}":
        return Sigma(p.sigma, f"measured: {p.source} on {format_df(p.df)} df")
    return Sigma(p.sigma, f"transferred from {p.source} to {base}: {p.describe()}")


def query_floor(benchmark: str, measure: str, data: dict[str, Any] | None = None) -> Sigma:
    """``tau / sqrt(N)``: the part of one run's seed spread that averaging over the benchmark's queries
    leaves if nothing is shared, from the largest per-query seed SD measured for the measure's kind (the
    measured SD of the mean where the control ran on that benchmark). A model, not a bound (NFCorpus's
    own seeds agree 6x more closely): shown beside sigma_rep, never in its place."""
    data = data or load()
    table, kind = data["benchmarks"], measure_kind(measure)
    base = base_benchmark(benchmark)
    source = f"{data['method']} [{data['profile']}] x {len(data['runs'])} seeds"
    measured = table.get(base, {}).get(measure)
    if measured:
        return Sigma(measured["sd"], f"the harness's own seeds: {source} on {base}, SD {measured['sd']:.2f}")
    tau, n = _kind_max(table, kind, "tau"), judged_queries(base)
    return Sigma(tau / math.sqrt(n), f"per-query seed SD {tau:.1f} ({source}, {kind} measures) over {n} queries")


def _code_of(record: Any) -> str:
    """The code a record ran: its commit, or a key of its own when the tree was dirty (never grouped)."""
    git = record.git or {}
    commit = str(git.get("commit") or "")
    return f"{commit}+dirty:{record.run_id}" if git.get("dirty") or not commit else commit


def _age(record: Any) -> tuple[str, str]:
    return (str(record.created or ""), record.run_id)


def _records_for_spread(records_dir: Path, seeds_dir: Path) -> list[Any]:
    """The control's records the spread is measured from, all of one precision (a spread over fp32 and bf16
    runs would mix the precision's effect into the seeds'): where the seed runs share a precision, the
    reference of that precision (``<method>/<profile>/<precision>``, as the gate picks it), else the
    (method, profile)'s reference; seed runs of another precision than the reference's are left out. Of
    those, the seeds of the one commit that ran the most of them (a spread across commits holds code drift
    as well as seed noise), when some commit ran at least two; otherwise the reference and the newest record
    of every other seed. The latest per seed either way."""
    others = [
        r
        for r in load_records(seeds_dir)[0]
        if (r.method, r.profile) == (CONTROL, PROFILE) and not r.integrity_problems
    ]
    precisions = {precision_label(r.stages) for r in others}
    only = next(iter(precisions)) if len(precisions) == 1 else ""  # seed runs of one precision
    second = load_precision_references(records_dir).get((CONTROL, PROFILE, only))
    ref_id = (second or load_references(records_dir).get((CONTROL, PROFILE)) or {}).get("run_id")
    ref = next((r for r in load_records(records_dir)[0] if r.run_id == ref_id), None)
    if ref is None:
        raise HarnessError(
            f"no reference record of {CONTROL} [{PROFILE}] in {records_dir}: "
            f"run --method {CONTROL} --profile {PROFILE}, then check --accept RUN_ID"
        )
    others = [r for r in others if precision_label(r.stages) == precision_label(ref.stages)]
    by_code: dict[str, dict[Any, Any]] = {}
    for r in sorted([ref, *others], key=_age):
        by_code.setdefault(_code_of(r), {})[r.seed] = r
    # most seeds first; on a tie the commit of the newest record
    best = max(by_code.values(), key=lambda seeds: (len(seeds), max(_age(r) for r in seeds.values())))
    if len(best) >= 2:
        return [best[s] for s in sorted(best)]
    latest: dict[Any, Any] = {}
    for r in sorted(others, key=lambda r: r.run_id):
        latest[r.seed] = r
    return [ref, *(latest[s] for s in sorted(latest) if s != ref.seed)]


def render(block: dict[str, Any]) -> str:
    head = (
        "# Seed-to-seed spread, written by `python -m harness noise --write` from the records it\n"
        "# names (tests/test_verdict.py fails when it no longer matches them). Points. See noise.py.\n"
    )
    return head + yaml.safe_dump(block, sort_keys=False, width=110)


def measured_block(runs: Path | None = None) -> dict[str, Any]:
    """The noise.yaml block measured from the records under ``runs`` (default: runs/, HARNESS_RUNS_DIR)."""
    runs = runs or runs_dir()
    return measure(_records_for_spread(runs / "records", runs / "seeds"))


def report(runs: Path | None = None, write: bool = False) -> str:
    """noise.yaml as measured from the records under ``runs`` (default: runs/, HARNESS_RUNS_DIR);
    ``write`` replaces the committed file with it (``python -m harness noise [--write]``)."""

    text = render(measured_block(runs))
    if write:
        NOISE_FILE.write_text(text, encoding="utf-8")
    return text


@dataclass(frozen=True)
class PretrainSpread:
    """The pre-training part of one run's seed spread, from runs grouped by their pre-training seed (a seed
    study under ``--pretrain-seeds``): one-way random effects, ``sigma_pt**2 = (MSB - MSW) / n0`` at least 0,
    on Satterthwaite's df for that difference (``MSB`` on ``groups - 1``, ``MSW`` on ``runs - groups``); a
    part clipped to 0 keeps the df at most ``groups - 1`` (the clip never raises them)."""

    sigma_pt: float  # points
    df: float
    sigma_ft: float  # the within-pre-training (fine-tuning) SD, points
    groups: int  # pre-training seeds
    runs: int


def pretrain_spread(values: dict[int, list[float]]) -> PretrainSpread:
    """``values``: one benchmark mean (points) per fine-tuning run, keyed by its pre-training seed; at least
    two pre-training seeds, and at least one with two or more runs (otherwise MSW is not measured)."""
    groups = [np.asarray(v, dtype=float) for _, v in sorted(values.items()) if len(v)]
    k, n = len(groups), sum(len(g) for g in groups)
    if k < 2 or n - k < 1:
        raise HarnessError(
            f"a pre-training spread needs >= 2 pre-training seeds and a repeated fine-tuning seed ({k} and {n - k})"
        )
    grand = np.concatenate(groups).mean()
    msb = sum(len(g) * (g.mean() - grand) ** 2 for g in groups) / (k - 1)
    msw = sum(((g - g.mean()) ** 2).sum() for g in groups) / (n - k)
    n0 = (n - sum(len(g) ** 2 for g in groups) / n) / (k - 1)
    estimate = (msb - msw) / n0
    spread = (msb**2 / (k - 1) + msw**2 / (n - k)) / n0**2
    df = estimate**2 / spread if spread > 0 else float(k - 1)
    if estimate <= 0:
        estimate, df = 0.0, min(df, k - 1)
    return PretrainSpread(math.sqrt(estimate), float(df), math.sqrt(msw), k, n)


def pretrain_spread_of(records: list[Any], benchmark: str, measure: str) -> PretrainSpread | None:
    """:func:`pretrain_spread` of records of one spec whose ``pretrain_seed`` differs (records without one
    shared seed 42's pre-training); None where fewer than two pre-training seeds are among them."""
    values: dict[int, list[float]] = {}
    for r in records:
        value = (r.metrics.get(benchmark) or {}).get(measure)
        if value is not None:
            values.setdefault(DEFAULT_SEED if r.pretrain_seed is None else r.pretrain_seed, []).append(
                100.0 * float(value)
            )
    if len(values) < 2 or sum(len(v) for v in values.values()) - len(values) < 1:
        return None
    return pretrain_spread(values)
