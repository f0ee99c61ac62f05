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

Transfer to a benchmark the project cannot run (MS MARCO dev, TREC DL, the rest of BEIR): one run's
mean has ``sigma(N) = sqrt(shared**2 + tau**2 / N)`` for its ``N`` judged queries, with the largest
``tau`` and ``shared`` measured for the measure's kind (rank-sensitive measures: nDCG, RR; recall
measures: R, Success). On a measured benchmark ``sigma`` is never below the measured ``sd``.
Assumption, stated with every number: the spread of a MiniLM-sized encoder fine-tuned on 640
queries stands in for a BERT-base encoder fine-tuned on MS MARCO; the smaller training set likely
makes it wider, so grading errs towards INCONCLUSIVE, not towards DIFFERENT.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from harness.core import benchmarks as declared
from harness.core import yamlsafe
from harness.core.errors import HarnessError
from harness.core.paths import runs_dir
from harness.records.store import load_records, load_references
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


def measure(records: list[Any]) -> dict[str, Any]:
    """The measurement block of noise.yaml from records of one spec under different seeds."""
    if len({r.get("seed") for r in records}) < 2:
        raise HarnessError(
            "a seed spread needs records of at least 2 different seeds: "
            f"run --method {CONTROL} --profile {PROFILE} --seed 43"
        )
    benchmarks: dict[str, dict[str, Any]] = {}
    for dataset in sorted(set.intersection(*(set(r.per_query) for r in records))):
        for name in sorted(set.intersection(*(set(r.per_query[dataset]) for r in records))):
            runs = [r.per_query[dataset][name] for r in records]
            queries = sorted(set.intersection(*(set(pq) for pq in runs)))
            means = [100.0 * statistics.fmean(pq[q] for q in queries) for pq in runs]
            tau = math.sqrt(statistics.fmean(statistics.variance([100.0 * pq[q] for pq in runs]) for q in queries))
            sd = statistics.stdev(means)
            shared = math.sqrt(max(0.0, sd**2 - tau**2 / len(queries)))
            benchmarks.setdefault(dataset, {})[name] = {
                "means": [round(m, 4) for m in means],
                "sd": round(sd, 4),
                "tau": round(tau, 4),
                "shared": round(shared, 4),
                "queries": len(queries),
            }

    hashes = {settings_hash(r.spec) for r in records}
    if len(hashes) != 1:
        raise HarnessError(f"the seed records ran different settings ({', '.join(sorted(hashes))}): one spec only")
    return {
        "method": records[0].method,
        "profile": records[0].profile,
        "settings_hash": hashes.pop(),
        "runs": [{"run_id": r.run_id, "seed": r.get("seed")} for r in records],
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


def sigma(benchmark: str, measure: str, data: dict[str, Any] | None = None) -> Sigma:
    """Seed SD of one run's mean on ``benchmark`` / ``measure`` (points), with its source."""
    data = data or load()
    table = data["benchmarks"]
    kind = measure_kind(measure)
    tau, shared = _kind_max(table, kind, "tau"), _kind_max(table, kind, "shared")
    base = base_benchmark(benchmark)
    n = judged_queries(base)
    modelled = math.sqrt(shared**2 + tau**2 / n)
    source = f"{data['method']} [{data['profile']}] x {len(data['runs'])} seeds"
    measured = table.get(base, {}).get(measure)
    if measured and round(measured["sd"], 2) >= round(modelled, 2):  # equal as printed: the measurement
        return Sigma(measured["sd"], f"measured: {source} on {base}")
    if measured:  # the query-sampling model is wider than this benchmark's measured SD: the model is used
        return Sigma(
            modelled,
            f"modelled: sqrt({shared:.2f}^2 + {tau:.1f}^2/{n}) ({kind} measures), above the SD "
            f"{measured['sd']:.2f} measured by {source} on {base}",
        )
    return Sigma(modelled, f"transferred from {source}: sqrt({shared:.2f}^2 + {tau:.1f}^2/{n}) ({kind} measures)")


@dataclass(frozen=True)
class Parts:
    """sigma_rep's named parts on a benchmark the control did not run: ``sigma**2 = shared**2 + tau**2 / N``.

    ``shared`` (what no number of queries averages away) is read from the seeds' benchmark means:
    ``seeds - 1`` degrees of freedom; ``tau`` (the per-query seed SD) from the per-query scores of the
    same runs: ``queries * (seeds - 1)``. The sum's degrees of freedom are Welch-Satterthwaite's,
    rounded down (never fewer than the smaller part's): where ``shared`` dominates, as on MS MARCO's
    6,980 queries, that stays about the seeds' own; where ``tau**2 / N`` does (43 TREC DL queries), it
    grows towards the per-query df."""

    shared: float
    shared_df: int
    tau: float
    tau_df: int
    queries: int  # N: the benchmark's judged queries
    source: str

    @property
    def sigma(self) -> float:
        return math.sqrt(self.shared**2 + self.tau**2 / self.queries)

    @property
    def df(self) -> int:
        a, b = self.shared**2, self.tau**2 / self.queries
        if a + b == 0:
            return self.shared_df
        welch = (a + b) ** 2 / (a**2 / self.shared_df + b**2 / self.tau_df)
        return max(min(self.shared_df, self.tau_df), math.floor(welch + 1e-9))

    def describe(self) -> str:
        return (
            f"sqrt(shared {self.shared:.2f}^2 [{self.shared_df} df] + tau {self.tau:.1f}^2 [{self.tau_df} df] "
            f"/ {self.queries} queries) = {self.sigma:.2f} on {self.df} df (Welch-Satterthwaite)"
        )


def parts(benchmark: str, measure: str, data: dict[str, Any] | None = None) -> Parts | None:
    """The named parts of the transferred spread (:class:`Parts`), the largest ``tau`` and ``shared``
    measured for the measure's kind, each with the df of the benchmark it was measured on; None where
    the control ran on the benchmark itself (its measured SD is the spread, on ``seeds - 1`` df)."""
    data = data or load()
    table, kind, base = data["benchmarks"], measure_kind(measure), base_benchmark(benchmark)
    if table.get(base, {}).get(measure):
        return None
    seeds = len(data["runs"])
    found = [v for by in table.values() for m, v in by.items() if measure_kind(m) == kind]
    tau = max(found, key=lambda v: v["tau"])
    shared = max(found, key=lambda v: v["shared"])
    return Parts(
        shared["shared"],
        seeds - 1,
        tau["tau"],
        tau["queries"] * (seeds - 1),
        judged_queries(base),
        f"{data['method']} [{data['profile']}] x {seeds} seeds, {kind} measures",
    )


def query_floor(benchmark: str, measure: str, data: dict[str, Any] | None = None) -> Sigma:
    """The part of one run's seed spread that averaging over the benchmark's queries leaves at the
    least: ``tau / sqrt(N)`` from the largest per-query seed SD measured for the measure's kind, or
    the measured SD of the mean where the control ran on that benchmark (a floor for sigma_rep)."""
    data = data or load()
    table, kind = data["benchmarks"], measure_kind(measure)
    base = base_benchmark(benchmark)
    source = f"{data['method']} [{data['profile']}] x {len(data['runs'])} seeds"
    measured = table.get(base, {}).get(measure)
    if measured:
        return Sigma(measured["sd"], f"the harness's own seeds: {source} on {base}, SD {measured['sd']:.2f}")
    tau, n = _kind_max(table, kind, "tau"), judged_queries(base)
    return Sigma(tau / math.sqrt(n), f"per-query seed SD {tau:.1f} ({source}, {kind} measures) over {n} queries")


def _records_for_spread(records_dir: Path, seeds_dir: Path) -> list[Any]:
    refs = load_references(records_dir)
    ref_id = (refs.get((CONTROL, PROFILE)) or {}).get("run_id")
    ref = next((r for r in load_records(records_dir)[0] if r.run_id == ref_id), None)
    if ref is None:
        raise HarnessError(
            f"no reference record of {CONTROL} [{PROFILE}] in {records_dir}: "
            f"run --method {CONTROL} --profile {PROFILE}, then check --accept RUN_ID"
        )
    others = [
        r
        for r in load_records(seeds_dir)[0]
        if (r.method, r.profile) == (CONTROL, PROFILE) and not r.integrity_problems
    ]
    latest: dict[Any, Any] = {}
    for r in sorted(others, key=lambda r: r.run_id):
        latest[r.get("seed")] = r
    return [ref, *(latest[s] for s in sorted(latest) if s != ref.get("seed"))]


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
