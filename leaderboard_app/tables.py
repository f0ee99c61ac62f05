"""Tables of the leaderboard as pandas DataFrames (plain functions; app.py only displays them).

Conventions: reproduced numbers, deltas and tolerances are in points (100 x fraction);
reported cells keep the string the paper printed in the Table 1 view, and are converted to
points in the BEIR view (the papers print BEIR as 0.441 or as 44.1).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pandas as pd

from harness.core import benchmarks as declared
from harness.core.statuses import SUPERSEDED
from harness.data.catalog import AGGREGATES, REPORTED, get_benchmark
from harness.evaluation.bootstrap import bootstrap_ci
from harness.evaluation.compare import verdict_note
from harness.evaluation.verdict import NOT_COMPARABLE, worst
from harness.gate.cell_state import cell_states, row_state
from harness.gate.labels import source_label, system_axes
from harness.gate.run import row_numbers
from harness.papers.citation import table_citation
from harness.papers.registry import paper_key
from harness.records.mlflow_keys import flatten
from harness.records.run_precision import NO_TRAINING, precision_label
from harness.records.store import RunRecord
from harness.spec.paper_profiles import paper_deviations as all_deviations
from leaderboard_app.display import (
    MISSING,
    P_DIGITS,
    cell_decimals,
    clock,
    column_decimals,
    details_text,
    duration,
    md_code,
    md_text,
    missing,
    number,
    path_text,
    text_frame,
)

# The shape of the papers' Table 1 (LexMAE prints R@100 where the QC papers print R@50).
# Each declared benchmark's ``columns`` (harness/core/benchmarks.yaml), in the papers' order.
MAIN_COLUMNS: list[tuple[str, str, str]] = [
    (name, measure, label) for name in declared.reported() for measure, label in declared.get(name).columns.items()
]
# The benchmarks the papers report (the catalog's, in their order): MS MARCO and TREC DL here, BEIR in its view.
MAIN_BENCHMARKS = tuple(name for name in REPORTED if get_benchmark(name).kind != "beir")
BEIR_DATASETS = tuple(name for name in REPORTED if get_benchmark(name).kind == "beir")
# The BEIR averages the papers print (catalog.AGGREGATES): computed here where a column has every member.
COMPUTED = {a.name: f"average ({a.label}, computed)" for a in AGGREGATES.values()}
PRINTED = {a.name: f"average ({len(a.members)}, printed)" for a in AGGREGATES.values()}
AVG14, AVG12 = COMPUTED["beir-avg14"], COMPUTED["beir-avg12"]


# Marks a reproduced row that sits under the reported row it is compared with. Words, not an arrow
# glyph: the page shows no symbol a browser's fonts may lack (issue 28).
UNDER = "vs row above: "


def badge(status: str | None) -> str:
    """A verdict shown as its own word (harness/core/statuses.py): no emoji, which render as
    empty boxes where no emoji font is installed (Debian's Chromium)."""
    return status or NOT_COMPARABLE


def source_of(rec: RunRecord) -> str:
    """Where a record's numbers come from: a run of a spec, or a released checkpoint scored as is."""
    return "released checkpoint" if rec.profile == "checkpoint" else "reproduced"


def run_label(rec: RunRecord) -> str:
    if rec.profile == "checkpoint":
        return f"released checkpoint {(rec.checkpoint or {}).get('name', '?')} ({rec.run_id})"
    return f"reproduced {rec.run_id}"


def profile_status(rec: RunRecord) -> str:
    """A run's own row's status: its profile and the precision it trained in ("profile mini, bf16"; a run
    that trained nothing, BM25, just its profile), so an fp32 reference and a bf16 run are told apart."""
    precision = precision_label(rec.stages)
    return f"profile {rec.profile}" + (f", {precision}" if precision != NO_TRAINING else "")


def _keep(values: Sequence[str] | None, value: str) -> bool:
    """A filter: None or empty keeps everything."""
    return not values or value in values


def filter_cells(cells: Iterable[Mapping[str, Any]], papers: Sequence[str] | None = None) -> list[Mapping[str, Any]]:
    return [c for c in cells if _keep(papers, paper_key(c))]


def filter_records(
    records: Iterable[RunRecord], profiles: Sequence[str] | None = None, methods: Sequence[str] | None = None
) -> list[RunRecord]:
    return [r for r in records if _keep(profiles, r.profile) and _keep(methods, r.method)]


def _row_groups(cells: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str, str, str], list[Mapping[str, Any]]]:
    """Cells grouped by printed row (paper, version, table, row), in registry order."""
    groups: dict[tuple[str, str, str, str], list[Mapping[str, Any]]] = {}
    for c in cells:
        key = (paper_key(c), str(c.get("version") or ""), str(c.get("table") or ""), str(c.get("row") or ""))
        groups.setdefault(key, []).append(c)
    return groups


def reported_points(cell: Mapping[str, Any]) -> str:
    """A reported cell in points with the printed precision (0.187 -> "18.7"); '-' and text as printed."""
    value, score = cell.get("value"), cell.get("score")
    if value is None:
        return ""
    if score is None or str(cell.get("unit")) != "fraction":
        return str(value)
    decimals = len(str(value).split(".")[1]) if "." in str(value) else 0
    return f"{100.0 * float(score):.{max(decimals - 2, 0)}f}"


def _column_for(benchmark: Any, measure: Any) -> str | None:
    for bench, meas, label in MAIN_COLUMNS:
        if bench == benchmark and meas == measure:
            return label
    return None


# ----------------------------------------------------------------------------- where and when runs ran

RUN_COLUMNS = ["run_id", "method", "profile", "precision", "date", "hardware", "git commit", "role", "scores"]
APART_COLUMNS = [
    "run_id",
    "method",
    "profile",
    "precision",
    "date",
    "hardware",
    "git commit",
    "status",
    "why",
    "scores",
]


def hardware_summary(rec: RunRecord) -> str:
    """The machine a run had, as its record detected it: '8 × NVIDIA A100-SXM4-80GB · <CPU model> (64 cpus)'
    (a contributed run is told apart from the references by this and its date)."""
    detected = (rec.hardware or {}).get("detected") or {}
    counts: dict[str, int] = {}
    for device in detected.get("cuda_devices") or []:
        counts[str(device)] = counts.get(str(device), 0) + 1
    parts = [", ".join(f"{n} × {name}" for name, n in counts.items())] if counts else []
    cpu, cpus = detected.get("cpu_model"), detected.get("cpus")
    if cpu or cpus:
        parts.append(f"{cpu or detected.get('machine') or 'CPU'}" + (f" ({cpus} cpus)" if cpus else ""))
    return " · ".join(parts) or "not recorded"


def run_date(rec: RunRecord) -> str:
    """'2026-11-25 11:11 UTC' from the record's ``created`` (its own stamp, whoever made it)."""
    created = rec.created
    return f"{created[:10]} {created[11:16]} UTC" if len(created) >= 16 and created[10] == "T" else created


def _scores(rec: RunRecord) -> str:
    return "; ".join(
        f"{b} {m} {number(100.0 * v)}" for b, values in rec.metrics.items() for m, v in list(values.items())[:1]
    )


def _commit(rec: RunRecord) -> str:
    git = rec.git or {}
    commit = str(git.get("commit") or "")[:10] if isinstance(git, dict) else ""
    return f"{commit} (dirty)" if commit and git.get("dirty") else commit


YOURS = "your run"  # the role of a record in runs/local/ (a user's own run, not gated)


def runs_frame(
    records: Sequence[RunRecord],
    references: Iterable[str] = (),
    role: str | None = None,
    superseded: Iterable[str] = (),
) -> pd.DataFrame:
    """One row per run: where (hardware) and when (date) it ran, its commit, and whether it is the
    accepted reference of its method and profile, older than it (``superseded``, when the page shows
    those) or a run gated against it (contributed or not); ``role`` names every row's role instead
    (``YOURS`` for the user's own runs)."""
    refs, old = set(references), set(superseded)
    rows = [
        {
            "run_id": r.run_id,
            "method": r.method,
            "profile": r.profile,
            "precision": precision_label(r.stages),
            "date": run_date(r),
            "hardware": hardware_summary(r),
            "git commit": _commit(r),
            "role": role or ("reference" if r.run_id in refs else SUPERSEDED if r.run_id in old else "run"),
            "scores": _scores(r),
        }
        for r in sorted(records, key=lambda r: (r.created, r.run_id), reverse=True)
    ]
    return pd.DataFrame(rows, columns=RUN_COLUMNS)


def apart_frame(apart: Sequence[Any]) -> pd.DataFrame:
    """Records of an unknown or changed spec (``leaderboard_app.data.Apart``), on their own: never rows
    beside the papers' or a reference's, since what they ran is not the spec those rows ran."""
    rows = [
        {
            "run_id": a.record.run_id,
            "method": a.record.method,
            "profile": a.record.profile,
            "precision": precision_label(a.record.stages),
            "date": run_date(a.record),
            "hardware": hardware_summary(a.record),
            "git commit": _commit(a.record),
            "status": a.status,
            "why": a.reason,
            "scores": _scores(a.record),
        }
        for a in apart
    ]
    return pd.DataFrame(rows, columns=APART_COLUMNS)


# ----------------------------------------------------------------------------- released checkpoints


def checkpoint_frame(
    records: Sequence[RunRecord], comparisons: Mapping[str, Sequence[Mapping[str, Any]]]
) -> pd.DataFrame:
    """One row per (released-checkpoint record, cell): graded cells first, then the NOT-COMPARABLE ones
    (without a delta); numbers as text at the cell's printed precision."""
    rows = []
    for rec in records:
        if rec.profile != "checkpoint":
            continue
        name = (rec.checkpoint or {}).get("name", "?")
        for x in sorted(comparisons.get(rec.run_id, []), key=lambda c: c.get("status") == NOT_COMPARABLE):
            d, graded = cell_decimals(x), x.get("status") != NOT_COMPARABLE
            rows.append(
                {
                    "checkpoint": name,
                    "benchmark": x.get("benchmark"),
                    "measure": x.get("measure"),
                    "reproduced": number(x.get("reproduced"), d),
                    "reported": number(x.get("reported"), d),
                    "delta": number(x.get("delta"), d, True) if graded else MISSING,
                    "status": badge(x.get("status")),
                    "against": f"{table_citation(paper_key(x), str(x.get('table')))} · {x.get('row')}",
                    "why not graded": x.get("reason") if x.get("status") == NOT_COMPARABLE else "",
                    "run_id": rec.run_id,
                }
            )
    return pd.DataFrame(
        rows,
        columns=[
            "checkpoint",
            "benchmark",
            "measure",
            "reproduced",
            "reported",
            "delta",
            "status",
            "against",
            "why not graded",
            "run_id",
        ],
    )


def checkpoint_summaries(
    records: Sequence[RunRecord], comparisons: Mapping[str, Sequence[Mapping[str, Any]]]
) -> list[str]:
    """One line per released-checkpoint record: what it scored, its grades, why other cells are not graded."""
    lines = []
    for rec in records:
        if rec.profile != "checkpoint":
            continue
        comps = comparisons.get(rec.run_id, [])
        counts: dict[str, int] = {}
        for x in comps:
            if x.get("status") != NOT_COMPARABLE:
                counts[str(x.get("status"))] = counts.get(str(x.get("status")), 0) + 1
        reasons = sorted(
            {
                str(x.get("reason")).split(": ", 1)[-1]
                for x in comps
                if x.get("status") == NOT_COMPARABLE and x.get("reason")
            }
        )
        graded = ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "no comparable cell"
        scored = "; ".join(f"{b} {number(100.0 * next(iter(m.values())))}" for b, m in rec.metrics.items() if m)
        name = (rec.checkpoint or {}).get("name", "?")
        # markdown for st.markdown: the record's texts escaped (display.md_text), the run id a code span
        lines.append(
            f"released checkpoint {md_text(name)} ({md_code(rec.run_id)}): {md_text(scored)} · graded "
            f"{md_text(graded)}" + (f" · not graded: {md_text('; '.join(reasons))}" if reasons else "")
        )
    return lines


# ----------------------------------------------------------------------------- Table 1 view


def main_table(
    cells: Sequence[Mapping[str, Any]],
    records: Sequence[RunRecord],
    comparisons: Mapping[str, Sequence[Mapping[str, Any]]],
    *,
    papers: Sequence[str] | None = None,
    profiles: Sequence[str] | None = None,
    benchmarks: Sequence[str] | None = None,
    main_only: bool = True,
) -> pd.DataFrame:
    """The papers' Table 1 shape: every reported row (in points at the printed precision), then under it
    each reproduced run compared with it ("value (delta badge)", at the cell's precision; one row per
    retriever stage a run was compared at), then every reproduced run on its own (one row per stage
    when it has several). A NOT-COMPARABLE comparison is no row: its delta would mean nothing.
    Missing numbers are "-"; the stage column is there only when some run has a stage.

    ``main_only`` keeps each paper's Table 1; otherwise every table with these columns.
    """
    columns = [label for bench, _, label in MAIN_COLUMNS if _keep(benchmarks, bench)]
    recs = filter_records(records, profiles)
    rows: list[dict[str, Any]] = []
    mine = [
        c
        for c in cells
        if _column_for(c.get("benchmark"), c.get("measure")) in columns
        and _keep(papers, paper_key(c))
        and (not main_only or str(c.get("table")) == "Table 1")
    ]
    states = cell_states(mine, records, comparisons)  # the state every surface shows (gate.cell_state)
    for (paper, version, table, row), group in _row_groups(mine).items():
        line: dict[str, Any] = {
            "source": "reported",
            "paper": paper,
            "version": version,
            "table": table,
            "row": row,
            "method": group[0].get("method") or "",
        }
        for c in group:
            line[_column_for(c["benchmark"], c["measure"])] = reported_points(c) or MISSING
        line["status"] = row_state([states[str(c.get("cell_id"))] for c in group])
        rows.append(line)
        for rec in recs:
            rows += _compared_rows(rec, comparisons.get(rec.run_id, []), (paper, version, table, row), columns)
    rows += _own_rows(recs, cells, columns)
    frame = pd.DataFrame(
        rows, columns=["source", "paper", "version", "table", "row", "method", "stage", *columns, "status"]
    )
    empty = [c for c in [*columns, "stage"] if frame[c].isna().all() or (frame[c].fillna("") == "").all()]
    frame = frame.drop(columns=empty)
    numbers = [c for c in columns if c in frame.columns]
    frame[numbers] = frame[numbers].fillna(MISSING)
    return frame.fillna("")


def _compared_rows(
    rec: RunRecord,
    comparisons: Sequence[Mapping[str, Any]],
    reported_row: tuple[str, str, str, str],
    columns: Sequence[str],
) -> list[dict[str, Any]]:
    """The rows of one run under a reported (paper, version, table, row): one per retriever stage it was
    compared at there, each cell "value (delta badge)"; a NOT-COMPARABLE comparison is left out."""
    paper, version, table, row = reported_row
    comps = [
        x
        for x in comparisons
        if paper_key(x) == paper
        and str(x.get("table")) == table
        and str(x.get("row")) == row
        and x.get("status") not in (None, NOT_COMPARABLE)
    ]
    by_stage: dict[str, list[Mapping[str, Any]]] = {}
    for x in comps:
        by_stage.setdefault(str(x.get("finetune_stage") or ""), []).append(x)
    rows = []
    for stage, group_at in by_stage.items():
        vs: dict[str, Any] = {
            "source": source_of(rec),
            "paper": paper,
            "version": version,
            "table": table,
            "row": f"{UNDER}{run_label(rec)}",
            "method": rec.method,
            "stage": stage,
        }
        for x in group_at:
            col = _column_for(x.get("benchmark"), x.get("measure"))
            if col in columns:
                d = cell_decimals(x)
                vs[col] = (
                    f"{number(x.get('reproduced'), d)} ({number(x.get('delta'), d, True)} {badge(x.get('status'))})"
                )
        vs["status"] = badge(worst(x["status"] for x in group_at))
        rows.append(vs)
    return rows


def _own_rows(
    recs: Sequence[RunRecord], cells: Sequence[Mapping[str, Any]], columns: Sequence[str]
) -> list[dict[str, Any]]:
    """Every run on its own, one row per stage with a number in ``columns`` (at the columns' precision)."""
    decimals = {label: column_decimals(cells, bench, measure) for bench, measure, label in MAIN_COLUMNS}
    rows = []
    for rec in recs:
        for stage, metrics in stage_metrics(rec).items():
            line = {
                "source": source_of(rec),
                "paper": "",
                "version": "",
                "table": "",
                "row": rec.run_id,
                "method": rec.method,
                "stage": stage,
                "status": profile_status(rec),
            }
            has_any = False
            for bench, measure, label in MAIN_COLUMNS:
                value = metrics.get(bench, {}).get(measure)
                if label in columns and value is not None:
                    line[label] = number(100.0 * value, decimals[label])
                    has_any = True
            if has_any:
                rows.append(line)
    return rows


def stage_metrics(rec: RunRecord) -> dict[str, dict[str, dict[str, float]]]:
    """A run's metrics per retriever stage ("" for a run without stages): every stage when the run has
    several (LexMAE's three), else its final metrics."""
    by_stage = rec.metrics_by_stage or {}
    if len(by_stage) > 1:
        return by_stage
    return {str(rec.finetune_stage or ""): rec.metrics}


# ----------------------------------------------------------------------------- comparisons

COMPARISON_COLUMNS = [
    "run_id",
    "method",
    "profile",
    "paper",
    "version",
    "table",
    "row",
    "column",
    "stage",
    "benchmark",
    "measure",
    "printed",
    "reported",
    "reproduced",
    "delta",
    "tolerance",
    "status",
    "ci_low",
    "ci_high",
    "p_equivalent",
    "seeds_needed",
    "reason",
]
# What a NOT-COMPARABLE row leaves out: a difference from a cell of another setting means nothing.
GRADED_ONLY = ("delta", "tolerance", "ci_low", "ci_high", "p_equivalent", "seeds_needed")


def comparison_frame(
    records: Sequence[RunRecord],
    comparisons: Mapping[str, Sequence[Mapping[str, Any]]],
    *,
    papers: Sequence[str] | None = None,
    profiles: Sequence[str] | None = None,
    benchmarks: Sequence[str] | None = None,
    comparable_only: bool = False,
) -> pd.DataFrame:
    """One row per (run, reported cell, retriever stage): numbers in points, the status and the CI of
    the delta; a NOT-COMPARABLE row has no delta, tolerance or interval (None)."""
    rows = []
    for rec in filter_records(records, profiles):
        for x in comparisons.get(rec.run_id, []):
            if not _keep(papers, paper_key(x)) or not _keep(benchmarks, str(x.get("benchmark"))):
                continue
            graded = x.get("status") not in (None, NOT_COMPARABLE)
            if comparable_only and not graded:
                continue
            row = {
                "run_id": rec.run_id,
                "method": rec.method,
                "profile": rec.profile,
                "paper": paper_key(x),
                "version": x.get("version"),
                "table": x.get("table"),
                "row": x.get("row"),
                "column": x.get("column"),
                "stage": x.get("finetune_stage") or "",
                "benchmark": x.get("benchmark"),
                "measure": x.get("measure"),
                "printed": x.get("value"),
                "reported": x.get("reported"),
                "reproduced": x.get("reproduced"),
                "status": x.get("status"),
                "reason": verdict_note(x),  # the note check and the report show, its sigma's source in words
            }
            row.update({k: x.get(k) if graded else None for k in GRADED_ONLY})
            rows.append(row)
    return pd.DataFrame(rows, columns=COMPARISON_COLUMNS)


def comparison_view(frame: pd.DataFrame) -> pd.DataFrame:
    """A comparison_frame as the page shows it: each row's numbers at the precision its paper printed the
    cell (in points), p-values at 3 decimals, "-" where there is no number; the stage column only
    when some run has a stage."""
    out = text_frame(frame.astype(object), {"p_equivalent": P_DIGITS, "seeds_needed": 0})
    for i, (_, row) in enumerate(frame.iterrows()):
        d = cell_decimals({"value": row["printed"], "reported": row["reported"]})
        for column in ("reported", "reproduced", "tolerance", "ci_low", "ci_high"):
            out.at[i, column] = number(row[column], d)
        out.at[i, "delta"] = number(row["delta"], d, True)
    if (out["stage"] == MISSING).all():
        out = out.drop(columns=["stage"])
    return out


# ----------------------------------------------------------------------------- BEIR view


STATUS_ROW = "status"  # the BEIR view's last row: each printed column's state (gate.cell_state)


def beir_columns(
    cells: Sequence[Mapping[str, Any]], papers: Sequence[str] | None = None
) -> dict[str, list[Mapping[str, Any]]]:
    """The BEIR view's printed columns: "Shen et al. 2023 (LexMAE), Table 3 · system" -> its nDCG@10 cells (datasets and averages)."""
    axes = system_axes(cells)
    out: dict[str, list[Mapping[str, Any]]] = {}
    for c in cells:
        bench, score = c.get("benchmark"), c.get("score")
        if c.get("measure") != "nDCG@10" or score is None or not _keep(papers, paper_key(c)):
            continue
        if bench in BEIR_DATASETS or bench in PRINTED:
            out.setdefault(source_label(c, axes), []).append(c)
    return out


def beir_table(
    cells: Sequence[Mapping[str, Any]],
    records: Sequence[RunRecord],
    *,
    papers: Sequence[str] | None = None,
    profiles: Sequence[str] | None = None,
    benchmarks: Sequence[str] | None = None,
    comparisons: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
) -> pd.DataFrame:
    """nDCG@10 (points) per BEIR dataset: one column per reported system and per reproduced run (a run
    with several retriever stages: its final one, named in the column), plus the computed 14-dataset
    and LexMAE 12-dataset averages and the printed averages. Text: a reported cell at its printed
    precision, a run's number and a computed average at the precision the papers print that row, "-"
    where a column has no number. The last row is each column's status: a printed column's cells'
    states (as in the Table 1 view, one state every surface shows), a run's profile.

    A computed average is shown only when the column has every dataset it averages.
    """
    datasets = [d for d in BEIR_DATASETS if _keep(benchmarks, d)]
    printed_columns = beir_columns(cells, papers)
    states = cell_states([c for group in printed_columns.values() for c in group], records, comparisons)
    columns: dict[str, dict[str, float]] = {}
    printed: dict[str, dict[str, int]] = {}  # column -> row -> the cell's decimals in points
    status: dict[str, str] = {}
    for name, group in printed_columns.items():
        for c in group:
            row = PRINTED.get(str(c.get("benchmark")), str(c.get("benchmark")))
            columns.setdefault(name, {})[row] = 100.0 * float(c["score"])
            printed.setdefault(name, {})[row] = cell_decimals(c)
        status[name] = row_state([states[str(c.get("cell_id"))] for c in group])
    for rec in filter_records(records, profiles):
        values = {d: 100.0 * v["nDCG@10"] for d, v in rec.metrics.items() if d in BEIR_DATASETS and "nDCG@10" in v}
        if values:
            several = len(rec.metrics_by_stage or {}) > 1
            name = run_label(rec) + (f" · {rec.finetune_stage}" if several and rec.finetune_stage else "")
            columns[name], status[name] = values, profile_status(rec)
    for values in columns.values():
        for name, aggregate in AGGREGATES.items():
            if all(d in values for d in aggregate.members):
                values[COMPUTED[name]] = sum(values[d] for d in aggregate.members) / len(aggregate.members)
    row_decimals = {d: column_decimals(cells, d, "nDCG@10") for d in BEIR_DATASETS}
    for name in AGGREGATES:
        row_decimals[COMPUTED[name]] = row_decimals[PRINTED[name]] = column_decimals(cells, name, "nDCG@10")
    index = [*datasets, *(label for name in AGGREGATES for label in (COMPUTED[name], PRINTED[name]))]
    frame = pd.DataFrame(
        {
            name: [number(vals.get(i), printed.get(name, {}).get(i, row_decimals[i])) for i in index] + [status[name]]
            for name, vals in columns.items()
        },
        index=[*index, STATUS_ROW],
        dtype=object,
    )
    frame.index.name = "dataset"
    return frame.reset_index()


# ----------------------------------------------------------------------------- method page


def stages_frame(record: RunRecord) -> pd.DataFrame:
    """One row per stage: its time as h:mm:ss and its recorded outputs as "key value" text."""
    rows = []
    for s in record.stages:
        extra = {k: v for k, v in s.items() if k not in ("stage", "dataset", "cached", "seconds")}
        rows.append(
            {
                "stage": s.get("stage"),
                "dataset": s.get("dataset") or "",
                "cached": bool(s.get("cached")),
                "time": duration(s.get("seconds")),
                "details": details_text(extra),
            }
        )
    return pd.DataFrame(rows, columns=["stage", "dataset", "cached", "time", "details"])


def hyperparameters_frame(record: RunRecord) -> pd.DataFrame:
    flat = flatten(record.spec) if record.spec else {}
    rows = [
        {"parameter": k, "value": ", ".join(map(str, v)) if isinstance(v, list) else path_text(str(v))}
        for k, v in flat.items()
        if v is not None
    ]
    return pd.DataFrame(rows, columns=["parameter", "value"])


GPU_TYPES = ("cuda", "gpu")


def hardware_frame(record: RunRecord) -> pd.DataFrame:
    """Declared (the spec's hardware block) next to what the run had: GPUs apart from CPUs (a CPU run
    declares 0 GPUs, whatever accelerator the paper names), the wall time as h:mm:ss."""
    hw = record.hardware or {}
    declared = hw.get("declared") or {}
    detected = hw.get("detected") or {}
    cuda = detected.get("cuda_devices") or []
    on_gpu = declared.get("device_type") in GPU_TYPES
    hours = declared.get("hours")
    rows = [
        ("device", declared.get("device_type"), "cuda" if cuda else "cpu"),
        ("GPUs", (declared.get("devices") or 1) if on_gpu else 0, len(cuda)),
        ("GPU model", declared.get("gpu") if on_gpu else "none", ", ".join(cuda) if cuda else "none"),
        ("GPU model the paper used", declared.get("gpu") if not on_gpu else None, None),
        ("CPUs", declared.get("cpus"), detected.get("cpus")),
        ("memory (GiB)", declared.get("memory_gib"), detected.get("memory_gib")),
        (
            "wall time (h:mm:ss)",
            clock(hours * 3600) if isinstance(hours, (int, float)) else None,
            clock(record.seconds),
        ),
        ("platform", None, detected.get("platform")),
    ]
    return pd.DataFrame(
        [
            {"": k, "declared": MISSING if missing(d) else str(d), "actual": MISSING if missing(a) else str(a)}
            for k, d, a in rows
            if not (missing(d) and missing(a))
        ],
        columns=["", "declared", "actual"],
    )


def per_query_frame(record: RunRecord, dataset: str, measure: str) -> pd.DataFrame:
    scores = record.per_query.get(dataset, {}).get(measure) or {}
    return pd.DataFrame({"qid": list(scores), "score": [float(v) for v in scores.values()]}, columns=["qid", "score"])


def metric_ci_frame(record: RunRecord) -> pd.DataFrame:
    """Each metric of the run (points) with a bootstrap 95% CI over its per-query scores."""

    rows = []
    for dataset, values in record.metrics.items():
        for measure, value in values.items():
            scores = record.per_query.get(dataset, {}).get(measure)
            low = high = None
            n = len(scores) if scores else None
            if scores:
                ci = bootstrap_ci(scores)
                low, high = 100.0 * ci.low, 100.0 * ci.high
            rows.append(
                {
                    "benchmark": dataset,
                    "measure": measure,
                    "value": 100.0 * value,
                    "ci_low": low,
                    "ci_high": high,
                    "queries": n,
                }
            )
    return pd.DataFrame(rows, columns=["benchmark", "measure", "value", "ci_low", "ci_high", "queries"])


def cell_ci_frame(comparisons: Sequence[Mapping[str, Any]], cells: Sequence[Mapping[str, Any]] = ()) -> pd.DataFrame:
    """Per reported cell: the delta and its bootstrap CI (points); comparable cells only."""
    axes = system_axes(cells)
    rows = [
        {
            "cell": source_label(x, axes),
            "benchmark": x.get("benchmark"),
            "measure": x.get("measure"),
            "reported": x.get("reported"),
            "reproduced": x.get("reproduced"),
            "delta": x.get("delta"),
            "ci_low": x.get("ci_low"),
            "ci_high": x.get("ci_high"),
            "status": badge(x.get("status")),
        }
        for x in comparisons
        if x.get("status") not in (None, NOT_COMPARABLE)
    ]
    return pd.DataFrame(
        rows, columns=["cell", "benchmark", "measure", "reported", "reproduced", "delta", "ci_low", "ci_high", "status"]
    )


# ----------------------------------------------------------------------------- gate, skipped, registry


def gate_frame(gate: Any) -> pd.DataFrame:
    """The gate's rows with their numbers as `check` prints them (``harness.gate.run.row_numbers``)."""
    cols = [
        "status",
        "run_id",
        "benchmark",
        "stage",
        "measure",
        "against",
        "expected",
        "reproduced",
        "delta",
        "tolerance",
        "CI (delta)",
        "note",
    ]
    if gate is None:
        return pd.DataFrame(columns=cols)
    return pd.DataFrame(
        [
            {
                "status": r.status,
                "run_id": r.run_id,
                "benchmark": r.benchmark,
                "stage": r.stage or "-",
                "measure": r.measure,
                "against": r.against,
                **dict(zip(cols[6:11], row_numbers(r))),
                "note": r.note,
            }
            for r in gate.rows
        ],
        columns=cols,
    )


def skipped_frame(skipped: Sequence[Any]) -> pd.DataFrame:
    return pd.DataFrame(
        [{"file": s.path.name, "reason": s.reason, "path": str(s.path)} for s in skipped],
        columns=["file", "reason", "path"],
    )


def inconsistency_frame(rows: Sequence[Mapping[str, Any]], papers: Sequence[str] | None = None) -> pd.DataFrame:
    return pd.DataFrame(
        [dict(r) for r in rows if _keep(papers, str(r.get("paper")))], columns=["paper", "table", "kind", "message"]
    )


def to_csv(frame: pd.DataFrame) -> bytes:
    return frame.to_csv(index=False).encode("utf-8")


def paper_deviations(method: str, key: str = "deviations") -> list[str]:
    """The method's declared deviations of its paper profile from its paper, or with
    ``key="assumptions"`` the values it picks where the papers say nothing (none for unknown specs)."""

    try:
        return all_deviations(key).get(method, [])
    except Exception:  # noqa: BLE001 - a broken spec folder must not take the leaderboard down
        return []
