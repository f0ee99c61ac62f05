"""Grade a researcher's own numbers (from the official code, another cluster, a paper draft) by the
same rule a record is graded by: ``python -m harness grade --metrics FILE``.

FILE (JSON)::

    {"runs": [{"method": "cotmae_qc", "profile": "paper", "stage": "retriever2", "seeds": [42, 43],
               "metrics": {"msmarco-dev": {"MRR@10": [40.1, 40.3], "R@1000": 98.9}}}]}

Values are points; a list holds one value per seed (its mean is graded, ``runs`` = its length, and
its spread enters sigma_rep as same-recipe evidence with ``seeds - 1`` degrees of freedom for that
method, profile, stage and benchmark: ``margins.user_seeds``; each graded row names the evidence that
set its sigma_rep); a single value is the mean of ``seeds`` (one run when ``seeds`` is absent). What the file cannot mean
is refused, one line naming the entry: a run whose every value is at most 1 (fractions, not
points), a benchmark or measure the papers do not print (with did-you-mean), a seed listed twice,
an unknown key, a value that is not a finite number. The run's conditions
come from the method's spec and profile, exactly as for a record (``harness.spec.conditions``), with
``stage`` as its fine-tuning stage (default: the method's final one). Every cell of the method's
rows is graded (``harness.evaluation.compare``); with two or more runs, the papers' printed effects
between their methods are graded too (``harness.evaluation.claims``).
"""

from __future__ import annotations

import functools
import json
import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.core import jsonsafe
from harness.core.errors import DataFormatError, HarnessError, UnknownNameError
from harness.core.fsutil import file_problem
from harness.evaluation.claims import Pairing, claim_pairs, claims_for
from harness.evaluation.claims import grade as grade_claims
from harness.evaluation.compare import Comparison, compare, printed_in, verdict_note
from harness.evaluation.margins import Evidence, user_seeds
from harness.evaluation.tolerances import canonical_measure
from harness.gate.grading import TRAINING_FREE_FAMILIES
from harness.papers.citation import table_citation
from harness.papers.registry import cells_for
from harness.papers.schema import BENCHMARKS
from harness.spec.conditions import run_conditions
from harness.spec.kinds import SEED_MAX
from harness.spec.method import load_method
from harness.stages.graph import FINETUNE_STAGES, GRAPH

RUN_KEYS = {"method", "profile", "stage", "seeds", "metrics"}
FILE_KEYS = {"runs"}


@dataclass
class OwnRun:
    """One entry of FILE: a method's numbers at one stage, averaged over ``runs`` seeds."""

    index: int
    method: str
    profile: str
    stage: str | None
    runs: int
    metrics: dict[str, dict[str, float]]  # benchmark -> canonical measure -> points (the seeds' mean)
    conditions: dict[str, Any]
    exact: bool  # a deterministic system: the fixed tolerance, no seeds
    per_seed: dict[tuple[str, str], list[float]] = field(default_factory=dict)  # (benchmark, measure) -> seeds

    def evidence(self) -> tuple[Evidence, ...]:
        """The run's per-seed lists as same-recipe seed evidence (``seeds - 1`` df each); none for a
        deterministic system (no seed)."""
        if self.exact:
            return ()
        return tuple(
            user_seeds(self.label, bench, measure, values)
            for (bench, measure), values in sorted(self.per_seed.items())
            if len(values) > 1
        )

    @property
    def label(self) -> str:
        return f"{self.method} [{self.profile}{', ' + self.stage if self.stage else ''}]"


def trained_retrievers(stages: list[str]) -> list[str]:
    """The retrievers a spec's ``stages`` outline trains, in order (the declared stage graph says
    which outline step trains which retriever); empty for a training-free method."""
    return [s.name for s in GRAPH if s.name in FINETUNE_STAGES and s.step in stages]


@functools.cache
def printed_measures() -> dict[str, tuple[str, ...]]:
    """Benchmark -> the measures (canonical ir-measures names) the papers print on it: a number of
    any other measure has no cell to be graded against."""
    found: dict[str, set[str]] = {}
    for c in cells_for():
        if c.benchmark and c.measure:
            found.setdefault(c.benchmark, set()).add(canonical_measure(c.measure))
    return {b: tuple(sorted(m)) for b, m in found.items()}


def _value(path: Path, where: str, raw: Any, seeds: list[Any] | None) -> tuple[float, int]:
    values = raw if isinstance(raw, list) else [raw]
    for v in values:
        number = _float(v) if isinstance(v, str) else None
        if number is not None:  # "39.4" or "inf": a number written as text
            problem = "is text, not a number" if math.isfinite(number) else "is not a finite number"
            raise DataFormatError(
                path, None, f"{where}: {v!r} {problem}", "write points as JSON numbers, without quotes, e.g. 39.4"
            )
    if not values or any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in values):
        raise DataFormatError(
            path,
            None,
            f"{where}: {raw!r} is not a number or a list of numbers",
            "write points, e.g. 39.4, or one value per seed, e.g. [39.2, 39.6]",
        )
    if any(not math.isfinite(v) for v in values):  # JSON's Infinity and NaN parse as floats
        raise DataFormatError(
            path,
            None,
            f"{where}: {raw!r} is not a finite number",
            "write the measured points, e.g. 39.4; leave out a measure not measured",
        )
    if any(not 0 <= v <= 100 for v in values):
        raise DataFormatError(
            path, None, f"{where}: {raw!r} is outside 0-100", "values are points (100 x a fraction): 39.4, not 0.394"
        )
    if isinstance(raw, list) and seeds is not None and len(seeds) != len(values):
        raise DataFormatError(
            path,
            None,
            f"{where}: {len(values)} values for {len(seeds)} seeds",
            "give one value per seed, or a single mean",
        )
    runs = len(values) if isinstance(raw, list) else max(1, len(seeds or []))
    return float(statistics.fmean(values)), runs


def _float(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _seeds(path: Path, where: str, seeds: Any) -> list[int] | None:
    """``seeds``: distinct integers (a seed listed twice would count one run twice and narrow its
    uncertainty), or None when absent."""
    if seeds is None:
        return None
    if not isinstance(seeds, list) or any(isinstance(s, bool) or not isinstance(s, int) for s in seeds):
        raise DataFormatError(
            path, None, f"{where}.seeds must be a list of integers, got {seeds!r}", "e.g. [42, 43, 44]"
        )
    outside = [s for s in seeds if not 0 <= s <= SEED_MAX]  # run's rule (--seed, spec seeds)
    if outside:
        raise DataFormatError(
            path,
            None,
            f"{where}.seeds: {', '.join(map(str, outside))} outside [0, {SEED_MAX}], which `run` refuses",
            "give the seeds the runs used, e.g. [42, 43, 44]",
        )
    twice = sorted({s for s in seeds if seeds.count(s) > 1})
    if twice:
        raise DataFormatError(
            path,
            None,
            f"{where}.seeds: {', '.join(map(str, twice))} given more than once ({seeds})",
            "list each seed once: one per run whose numbers are given",
        )
    return seeds


def _unknown_keys(path: Path, where: str | None, given: Any, known: set[str]) -> None:
    extra = sorted(str(k) for k in set(given) - known)
    if extra:  # named as such: it once read "needs method and metrics" with both there
        unknown = UnknownNameError("key", extra[0], sorted(known))
        raise DataFormatError(
            path,
            None,
            f"{where}: {unknown}" if where else str(unknown),
            f"remove '{extra[0]}' or spell it as one of the known keys",
        )


def _measure_name(path: Path, where: str, bench: str, measure: str) -> str:
    """``measure``'s canonical name, when the papers print it on ``bench`` (else refused, with the
    measures they print there): an unknown one would leave every cell NOT-COMPARABLE without a word."""
    printed = printed_measures().get(bench, ())
    name = canonical_measure(measure)
    if name not in printed:
        unknown = UnknownNameError(f"measure on {bench}", measure, list(printed))
        raise DataFormatError(
            path,
            None,
            f"{where}: {unknown}",
            "use a measure the papers print there (ir-measures names: MRR@10 is RR@10), or leave this one out",
        )
    return name


def _points_not_fractions(path: Path, where: str, values: dict[tuple[str, str], float]) -> None:
    """Every value of a run at most 1 is fractions written where points belong (0.382 for 38.2): graded
    as points they would be DIFFERENT-BELOW everywhere."""
    if values and max(values.values()) <= 1:
        (bench, measure), v = max(values.items(), key=lambda item: item[1])
        raise DataFormatError(
            path,
            None,
            f"{where}: every value is at most 1 (the largest: {bench} {measure} {v:g}): fractions, not points",
            f"give points: multiply each value by 100 ({v:g} -> {100 * v:g})",
        )


def load_own_numbers(path: str | Path) -> list[OwnRun]:
    """Read and validate FILE; every problem names the file and the entry."""
    path = Path(path)
    entries = _read_entries(path)
    out = []
    for i, entry in enumerate(entries):  # runs[0] is the first, as JSON indexes it
        where = f"runs[{i}]"
        if isinstance(entry, dict):
            _unknown_keys(path, where, entry, RUN_KEYS)
        if not isinstance(entry, dict) or not {"method", "metrics"} <= set(entry):
            raise DataFormatError(
                path,
                None,
                f"{where}: needs method and metrics (may have profile, stage, "
                f"seeds); got {sorted(entry) if isinstance(entry, dict) else entry!r}",
                f"keys: {', '.join(sorted(RUN_KEYS))}",
            )
        method, profile = str(entry["method"]), str(entry.get("profile") or "paper")
        try:
            spec = load_method(method, profile)
        except HarnessError as exc:  # unknown method or profile: the registry's did-you-mean, named by file
            raise DataFormatError(path, None, f"{where}: {exc}", "use a method and profile of `ls`") from None
        trained = trained_retrievers(list(spec.config.get("stages") or []))
        last = trained[-1] if trained else None
        stage = _entry_stage(path, where, method, entry.get("stage") or last, trained)
        seeds = _seeds(path, where, entry.get("seeds"))
        metrics, per_seed, runs = _entry_metrics(path, where, entry["metrics"], seeds)
        conditions = run_conditions(spec.config, method, profile)
        if stage:
            conditions.update(finetune_stage=stage, final_stage=last)
        # several seed counts in one entry: the fewest, so that se is never narrower than the data allow
        out.append(
            OwnRun(
                i,
                method,
                profile,
                stage,
                min(runs),
                metrics,
                conditions,
                spec.config.get("family") in TRAINING_FREE_FAMILIES,
                per_seed,
            )
        )
    return out


def _read_entries(path: Path) -> list[Any]:
    """The file's ``runs`` list, refused (naming the file) when it cannot be read, is not JSON, has no runs
    or has keys the format does not know."""
    problem = file_problem(path)  # a pipe would block the read forever, a folder is no file of numbers
    if problem:
        raise DataFormatError(path, None, problem, "give the JSON file of your numbers (--metrics FILE)")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise DataFormatError(path, None, f"cannot read it ({why})", "check the path") from None
    try:
        data = jsonsafe.loads(text)  # depth and size bounded
    except json.JSONDecodeError as exc:
        raise DataFormatError(path, exc.lineno, f"not JSON ({exc.msg})", "fix the JSON syntax") from None
    entries = data.get("runs") if isinstance(data, dict) else None
    if not isinstance(entries, list) or not entries:
        raise DataFormatError(path, None, "no 'runs' list", 'write {"runs": [{"method": ..., "metrics": ...}]}')
    _unknown_keys(path, None, data, FILE_KEYS)
    return entries


def _entry_stage(path: Path, where: str, method: str, stage: Any, trained: list[str]) -> Any:
    """``stage`` (the entry's, default the method's last trained retriever), refused unless the method trains it."""
    if stage is not None and stage not in trained:
        raise DataFormatError(
            path,
            None,
            f"{where}: stage {stage!r} is not one {method} trains"
            + (f" (its stages: {', '.join(trained)})" if trained else " (it trains no retriever)"),
            f"use one of {', '.join(trained)}"
            if trained
            else f'remove "stage": {method} is training-free, its one result is graded without a stage',
        )
    return stage


def _entry_metrics(
    path: Path, where: str, given: Any, seeds: list[int] | None
) -> tuple[dict[str, dict[str, float]], dict[tuple[str, str], list[float]], set[int]]:
    """An entry's ``metrics`` validated: the value per benchmark and measure (canonical names), the per-seed
    values where a list was given, and the seed counts seen; fractions instead of points are refused."""
    metrics: dict[str, dict[str, float]] = {}
    largest: dict[tuple[str, str], float] = {}
    per_seed: dict[tuple[str, str], list[float]] = {}
    runs = set()
    if not isinstance(given, dict) or not given:
        raise DataFormatError(
            path, None, f"{where}.metrics must map benchmarks to measures", '{"msmarco-dev": {"MRR@10": 39.4}}'
        )
    for bench, measures in given.items():
        if bench not in BENCHMARKS:  # a misspelt one graded nothing: "0 cells: nothing to grade"
            unknown = UnknownNameError("benchmark", bench, list(BENCHMARKS))
            raise DataFormatError(
                path,
                None,
                f"{where}.metrics: {unknown}",
                "name it as the papers' tables do (`python -m harness reported` lists them)",
            )
        if not isinstance(measures, dict):
            raise DataFormatError(
                path, None, f"{where}.metrics.{bench} must map measures to values", '{"MRR@10": 39.4}'
            )
        for measure, raw in measures.items():
            at = f"{where}.metrics.{bench}.{measure}"
            name = _measure_name(path, at, bench, measure)
            value, n = _value(path, at, raw, seeds)
            metrics.setdefault(bench, {})[name] = value
            if isinstance(raw, list):
                per_seed[(bench, name)] = [float(v) for v in raw]
            largest[(bench, measure)] = max(raw) if isinstance(raw, list) else raw
            runs.add(n)
    _points_not_fractions(path, where, largest)
    return metrics, per_seed, runs


def _cell_row(c: Comparison, run: OwnRun) -> dict[str, Any]:
    return {
        "kind": "cell",
        "run": run.label,
        "paper": c.paper_file,
        "version": c.version,
        "table": c.table,
        "row": c.row,
        "benchmark": c.benchmark,
        "measure": c.measure,
        "reported": c.reported,
        "value": c.reproduced,
        "status": c.status,
        "d": c.delta,
        "margin": c.tolerance,
        "sigma_rep": c.sigma,
        "ci_low": c.ci_low,
        "ci_high": c.ci_high,
        "runs": run.runs,
        "seeds_needed": c.seeds_needed,
        "within": c.within,
        "sigma_df": c.sigma_df,
        "sigma_source": c.sigma_source,
        # the tests behind the verdict, to audit it (issue 61): se and df of d, TOST p, d = 0 p and Holm's
        "se": c.se,
        "df": c.sigma_df,
        "p_equivalent": c.p_equivalent,
        "p_different": c.p_zero,
        "p_different_holm": c.p_different,
        "sigma_why": c.sigma_why,
        "cell_id": c.cell_id,
        "printed": c.value,  # as the paper printed it: `reported` is it in points
        "also_printed_in": [],  # other tables or versions printing the same number (graded once)
        "reason": verdict_note(c),
    }


def grade_cells(run: OwnRun, evidence: tuple[Evidence, ...] | None = None) -> list[dict[str, Any]]:
    """Every cell of the run's method, graded against its numbers; ``evidence``: the same-recipe seed
    evidence of the whole file (default: this run's own per-seed lists)."""
    fractions = {b: {m: v / 100.0 for m, v in t.items()} for b, t in run.metrics.items()}
    cells = [c for c in cells_for(method=run.method) if c.benchmark in fractions]
    evidence = run.evidence() if evidence is None else evidence
    comps = compare(fractions, None, cells, run.conditions, exact=run.exact, runs=run.runs, evidence=evidence)
    rows = {c.cell_id: _cell_row(c, run) for c in comps if not c.same_as}
    for c in comps:  # a number printed again (another table or version) is one row: graded once
        if c.same_as:
            rows[c.same_as]["also_printed_in"].append(printed_in(c))
    for row in rows.values():
        if row["also_printed_in"]:
            row["also_printed_in"] = list(dict.fromkeys(row["also_printed_in"]))
            also = f"also printed in {', '.join(row['also_printed_in'])}"
            row["reason"] = "; ".join(filter(None, [row["reason"], also]))
    return list(rows.values())


def _stage_fits(claim_stage: str | None, run: OwnRun) -> bool:
    """A claim naming a stage takes the run at that stage; a headline claim (none) its final one."""
    final = run.conditions.get("final_stage")
    return (claim_stage or final) == run.stage


def grade_effects(runs: list[OwnRun], evidence: tuple[Evidence, ...] | None = None) -> list[dict[str, Any]]:
    """Every printed effect between two runs (A minus B: two methods, or one method's two stages),
    graded together so that the claims of one table are one Holm family."""
    pairings, oriented = [], set(claim_pairs())  # each printed difference once, in its paper's direction
    printed: dict[tuple, list[str]] = {}  # a difference -> the other sources printing it
    also: list[list[str]] = []  # per pairing
    for a in runs:
        for b in runs:
            if a is b or (a.method == b.method and a.stage == b.stage) or (a.method, b.method) not in oriented:
                continue
            a_values = {(bench, m): v for bench, t in a.metrics.items() for m, v in t.items()}
            b_values = {(bench, m): v for bench, t in b.metrics.items() for m, v in t.items()}
            for claim in claims_for([(a.method, b.method)]):
                if not (_stage_fits(claim.a_stage, a) and _stage_fits(claim.b_stage, b)):
                    continue
                key = (claim.benchmark, canonical_measure(claim.measure))
                same = (a.index, b.index, *key, claim.a_value, claim.b_value, claim.a_conditions, claim.b_conditions)
                if same in printed:  # the same difference printed in another table or version: graded once
                    printed[same].append(claim.source)
                    continue
                printed[same] = []
                also.append(printed[same])
                pairings.append(
                    (
                        a,
                        b,
                        Pairing(
                            claim, a.conditions, b.conditions, a_values.get(key), b_values.get(key), a.runs, b.runs
                        ),
                    )
                )
    out = []
    evidence = tuple(e for r in runs for e in r.evidence()) if evidence is None else evidence
    for (a, b, p), check, others in zip(pairings, grade_claims([p for _, _, p in pairings], evidence), also):
        claim = p.claim
        paper_file, version, table = claim.source.split(" ", 2)  # "<paper file> <version> <table>"
        out.append(
            {
                "kind": "effect",
                "run": f"{a.label} - {b.label}",
                "paper": paper_file,
                "version": version,
                "table": table,
                "row": effect_rows(claim.a_row, claim.b_row, claim.a_cell, claim.b_cell),
                "benchmark": claim.benchmark,
                "measure": claim.measure,
                "reported": claim.delta,
                "value": check.effect,
                "status": check.status,
                "ci_low": check.ci_low,
                "ci_high": check.ci_high,
                "effect_ratio": check.effect_ratio,
                "ratio_low": check.ratio_low,
                "ratio_high": check.ratio_high,
                "delta_ri": check.delta_ri,
                "margin": check.margin,
                "sigma_rep": check.sigma,
                "seeds_needed": check.seeds_needed,
                "sigma_df": check.sigma_df,
                "sigma_source": check.sigma_source,
                "se": check.se,  # of the run effect; se_diff: of run effect - printed effect
                "se_diff": check.se_diff,
                "df": check.sigma_df,
                "p_equivalent": check.p_direction,  # the direction holds (a printed tie: TOST)
                "p_different": check.p_zero,
                "p_different_holm": check.p_different,
                "also_printed_in": [_source_label(s) for s in others],
                "reason": "; ".join(
                    filter(
                        None,
                        [check.reason, f"also printed in {', '.join(map(_source_label, others))}" if others else ""],
                    )
                ),
            }
        )
    return out


@functools.cache
def _cell_columns() -> dict[str, str]:
    return {str(c.cell_id): c.column for c in cells_for()}


def effect_rows(a_row: str, b_row: str, a_cell: str, b_cell: str) -> str:
    """The two printed systems of an effect: its rows, or its columns where both sides share a row (a
    BEIR table lists datasets down, so "nfcorpus - nfcorpus" named the dataset twice, not the systems)."""
    if a_row != b_row:
        return f"{a_row} - {b_row}"
    columns = _cell_columns()
    a_col, b_col = columns.get(a_cell, ""), columns.get(b_cell, "")
    return f"{a_col} - {b_col} ({a_row})" if a_col and b_col and a_col != b_col else f"{a_row} - {b_row}"


def _source_label(source: str) -> str:
    """A claim's source ('qc-pretraining-v2.txt v2 Table 1') as a cell's is named: 'Wu et al. 2023 (QC v2),
    Table 1'."""
    paper_file, _, rest = source.partition(" ")
    table = rest.split(" ", 1)[1] if " " in rest else rest
    return table_citation(paper_file, table)


def grade(path: str | Path) -> list[dict[str, Any]]:
    """The rows of ``harness grade``: every cell of each run, then the effects between runs. Every
    run's per-seed lists are same-recipe seed evidence for the whole file (pooled per benchmark and
    measure with what is on file, one df per seed beyond the first)."""
    runs = load_own_numbers(path)
    evidence = tuple(e for run in runs for e in run.evidence())
    rows = [row for run in runs for row in grade_cells(run, evidence)]
    return rows + (grade_effects(runs, evidence) if len(runs) > 1 else [])


def summarise(rows: list[Mapping[str, Any]]) -> str:
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    cells = sum(r["kind"] == "cell" for r in rows)
    return f"{cells} cells, {len(rows) - cells} effects: " + (
        ", ".join(f"{s} {n}" for s, n in sorted(counts.items())) or "nothing to grade"
    )
