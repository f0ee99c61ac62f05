"""One state per papers' cell on every surface (issue 53): ``gate.cell_state`` gives each registry cell
its state, and `check`, `grade`, `run`'s last line, the dry-run's graded cells, the glance tab, the
report (the glance's rows), the leaderboard's Table 1 and BEIR views and `effects` show exactly that, for the committed
records and for synthetic paper records of every method (no training: records built from the cells)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from harness.commands.effects import attach_cell_states
from harness.core.paths import PROJECT_ROOT
from harness.core.points import reported_text
from harness.core.statuses import NOT_COMPARABLE, NOT_YET_RUN, REPRODUCED
from harness.evaluation.effects import Effect, method_effects
from harness.evaluation.verdict import worst
from harness.gate import cell_state
from harness.gate.grading import paper_comparisons, paper_rows
from harness.gate.own_numbers import grade
from harness.gate.run import run_gate
from harness.papers.registry import load_reported_cells
from harness.papers.schema import KNOWN_METHODS
from harness.present import overview
from harness.records.integrity import seal
from harness.records.store import RunRecord, load_records
from harness.run.plan import graded_cells
from harness.run.runner import summary_line
from harness.spec.method import load_method
from leaderboard_app import tables

RECORDS = PROJECT_ROOT / "runs" / "records"


@pytest.fixture(scope="module")
def cells() -> list[dict]:
    found, error = load_reported_cells(None)
    assert error is None and found
    return found


@pytest.fixture(scope="module")
def committed() -> tuple[Any, dict[str, cell_state.CellState]]:
    gate = run_gate(RECORDS)
    return gate, gate.cells


def _synthetic(cells: list[dict]) -> list[RunRecord]:
    """One paper record per method with a paper spec, scoring every benchmark and measure its cells
    print at the first cell's printed number (at every retriever it evaluates)."""
    out = []
    for method in KNOWN_METHODS:
        spec = cell_state.paper_spec(method)
        if spec is None:
            continue
        metrics: dict[str, dict[str, float]] = {}
        for c in cells:
            if c.get("method") == method and c.get("benchmark") and c.get("score") is not None:
                metrics.setdefault(c["benchmark"], {}).setdefault(str(c["measure"]), float(c["score"]))
        final = spec.stages[-1].get("finetune_stage")
        data: dict[str, Any] = {
            "run_id": f"{method}__paper__synthetic",
            "method": method,
            "profile": "paper",
            "spec": load_method(method, "paper").config,
            "metrics": metrics,
        }
        # per-query scores all at the metric (two queries), so `effects` can pair two records
        per_query = {b: {m: {"q1": v, "q2": v} for m, v in t.items()} for b, t in metrics.items()}
        data["per_query"] = per_query
        if final:
            data["finetune_stage"] = final
            data["metrics_by_stage"] = {s["finetune_stage"]: metrics for s in spec.stages}
            data["per_query_by_stage"] = {s["finetune_stage"]: per_query for s in spec.stages}
        out.append(RunRecord.from_json(seal(data), Path(f"{method}__paper__synthetic.json")))
    return out


def _gate_states(records: list[RunRecord], cells: list[dict]) -> dict[str, str]:
    """Cell id -> the worst verdict `check` prints for it over the records (graded rows only)."""
    found: dict[str, list[str]] = {}
    for rec in records:
        for row in paper_rows(rec, cells):
            if row.cell_id:
                found.setdefault(row.cell_id, []).append(row.status)
    return {k: worst(s for s in v if s in cell_state.GRADED) for k, v in found.items()}


def _agree(cells: list[dict], records: list[RunRecord], states: dict[str, cell_state.CellState]) -> list[Effect]:
    paper = [r for r in records if r.profile in ("paper", "checkpoint")]
    # every registry cell has one state; a cell no run can grade offers no command and says why
    assert set(states) == {c["cell_id"] for c in cells}
    for s in states.values():
        if s.state == NOT_COMPARABLE and not s.command:
            assert s.reason.startswith("no paper-profile run can grade it: "), s
        if s.state == NOT_YET_RUN:
            assert s.command and s.reason, s
    # check: its rows' worst verdict per cell is the cell's state
    for cell_id, shown in _gate_states(paper, cells).items():
        if shown:
            assert states[cell_id].state == shown, (cell_id, shown, states[cell_id])
        else:
            assert states[cell_id].state in (NOT_COMPARABLE, NOT_YET_RUN), (cell_id, states[cell_id])
    # the glance tab and the report (the glance's rows): state, reason and command
    comparisons = {r.run_id: paper_comparisons(r, cells) for r in paper}
    for row in overview.headline_rows(cells, records, comparisons):
        want = states[row.cell_id]
        assert (row.state, row.reason) == (want.state, want.reason), row
        if row.state in (NOT_YET_RUN, NOT_COMPARABLE):
            assert row.command == want.command, row
    # the leaderboard's Table 1 view: each printed row's status is its cells' states
    frame = tables.main_table(cells, records, comparisons, main_only=False)
    by_row: dict[tuple, list[cell_state.CellState]] = {}
    for c in cells:
        if tables._column_for(c.get("benchmark"), c.get("measure")):
            key = (c["cell_id"].split("/", 1)[0], c.get("version") or "", c["table"], c["row"])
            by_row.setdefault(key, []).append(states[c["cell_id"]])
    reported = frame[frame["source"] == "reported"]
    assert len(reported)
    for _, line in reported.iterrows():
        key = (line["paper"], line["version"], line["table"], line["row"])
        assert line["status"] == cell_state.row_state(by_row[key]), key
    # the BEIR view: each printed column's status row is its cells' states
    beir = tables.beir_table(cells, records, comparisons=comparisons).set_index("dataset")
    for name, group in tables.beir_columns(cells).items():
        want_state = cell_state.row_state([states[c["cell_id"]] for c in group])
        assert beir.loc[tables.STATUS_ROW, name] == want_state, name
    # `effects`: each effect's claims' cells have their state, and a claim none of whose cells a
    # paper-profile run can grade is no graded claim
    effects = method_effects(records, "paper")
    attach_cell_states(effects, records)
    for e in effects:
        assert e.cells == {k: states[k].state for k in e.cell_ids}, e.label
        assert e.cells_state == (cell_state.row_state([states[k] for k in e.cell_ids]) if e.cell_ids else "")
        for claim in e.claims:
            never = [states[claim[s]] for s in ("a_cell", "b_cell") if not states[claim[s]].command]
            if any(s.state == NOT_COMPARABLE for s in never):
                assert claim["status"] == NOT_COMPARABLE, claim
    return effects


def test_committed_records_every_surface_agrees(cells, committed) -> None:
    gate, states = committed
    assert gate.passed
    records = [r for r in _committed_records() if r.profile in ("paper", "checkpoint")]
    _agree(cells, records, states)
    lexmae = {k: s.state for k, s in states.items() if k.startswith("lexmae/Table 3/") and k.endswith("/BM25")}
    assert lexmae["lexmae/Table 3/SciFact/BM25"] == REPRODUCED


def _committed_records() -> list[RunRecord]:
    return load_records(RECORDS)[0]


def test_synthetic_paper_records_every_surface_agrees(cells) -> None:
    records = _synthetic(cells)
    assert {r.method for r in records} >= {"bm25", "cpdae", "cotmae_qc"}
    states = cell_state.cell_states(cells, records)
    assert any(s.state == REPRODUCED for s in states.values())
    effects = _agree(cells, records, states)
    assert sum(bool(e.cells) for e in effects) > 10  # effects with claims, so with cells to agree on


def test_cells_no_paper_run_can_grade_say_so_everywhere(cells) -> None:
    """CPDAE's spec declares a deviation (its variant cpdae_pairwise grades those cells) and the QC/LexMAE BM25
    rows are cited: NOT-COMPARABLE with the reason on every surface, no command offered, and the dry-run's
    graded cells of cpdae itself say why there are none."""
    states = cell_state.cell_states(cells, [])
    cpdae = [
        states[c["cell_id"]]
        for c in cells
        if c.get("method") == "cpdae" and c.get("benchmark") and c.get("score") is not None
    ]
    cited = [s for k, s in states.items() if k.startswith(("qc-v1/Table 1/BM25", "lexmae/Table 1/BM25"))]
    assert cpdae and cited
    for s in cpdae:  # cpdae_pairwise (its paper's own fine-tuning) grades what the deviation leaves ungradable
        if s.state == NOT_COMPARABLE:
            assert not s.command and s.reason, s
        else:  # Table 3's low-resource columns: cpdae_pairwise's query-count variants (cpdae_q100, ...)
            method = "cpdae_q" if "/Table 3/" in s.cell_id else "cpdae_pairwise "
            assert s.state == "NOT-YET-RUN" and f"--method {method}" in s.command, s
    assert any(s.state == "NOT-YET-RUN" for s in cpdae)
    for s in cited:
        assert s.state == NOT_COMPARABLE and not s.command and "copies this number" in s.reason
    spec = load_method("cpdae", "paper")
    lines = graded_cells(spec, ["msmarco-dev", "dl19"], [])
    assert lines[0].startswith("  graded cells: 0") and "declared deviation" in lines[0]


def test_dry_run_graded_cells_are_the_gradeable_cells(cells) -> None:
    """Each method's dry-run lists exactly the cells `paper_run` says a paper-profile run grades."""
    for method in KNOWN_METHODS:
        spec_run = cell_state.paper_spec(method)
        if spec_run is None:
            continue
        spec = load_method(method, "paper")
        graded = spec.graded_method  # a declared variant lists its parent's cells of its own setting
        benches = sorted({str(c["benchmark"]) for c in cells if c.get("method") == graded and c.get("benchmark")})
        variants = [s.get("finetune_stage") or "final" for s in spec_run.stages]
        stages = [{"stage": "evaluate", "dataset": f"{v}/{b}"} for v in variants for b in benches]
        listed = graded_cells(spec, benches, stages)[1:]
        heads = [line.split("): ", 1) for line in listed]  # "    P T row / column (bench measure, stage", value
        shown = Counter(head.rsplit(" (", 1)[0] + rest.split(";", 1)[0] for head, rest in heads)
        want: Counter[str] = Counter()
        for c in cells:
            if c.get("method") == graded and f" run --method {method} " in cell_state.paper_run(c).command:
                want[f"    {c['paper']} {c['table']} {c['row']} / {c['column']}{c['value']}"] += 1
        assert shown == want, method


def test_run_summary_line_reads_the_table(cells) -> None:
    """`run --method bm25` ends with the verdict its table shows (it once said 'no reported cell')."""
    bm25 = [r for r in _committed_records() if r.method == "bm25" and r.profile == "paper"][-1]
    record = bm25.replace(comparison=paper_comparisons(bm25, cells), mlflow={})
    for c in record.comparison:
        c["finetune_stage"] = "bm25"  # as the runner names its only variant
    line = summary_line(record, Path("x.json"))
    assert "scifact nDCG@10 66.5 points (REPRODUCED)" in line and "no reported cell" not in line, line


def test_grade_grades_each_printed_number_once(tmp_path, cells) -> None:
    """QC's 'w/ query-as-context' MRR@10 is printed in v1 Table 1, v1 Table 2 and v2 Table 1: one row,
    also printed in the others; the value at the paper's printed precision; a DIFFERENT row says why."""
    f = tmp_path / "mine.json"
    # five seeds (4 df of the user's own evidence): two would leave ~1 df, too thin for any verdict
    seeds = [30.0, 30.2, 30.1, 29.9, 30.3]
    f.write_text(json.dumps({"runs": [{"method": "cotmae_qc", "metrics": {"msmarco-dev": {"MRR@10": seeds}}}]}))
    rows = [r for r in grade(f) if r["kind"] == "cell"]
    mrr = [r for r in rows if r["measure"] == "RR@10" and r["printed"] == "40.2"]
    assert len(mrr) == 1 and {"Wu et al. 2022 (QC v1), Table 2", "Wu et al. 2023 (QC v2), Table 1"} <= set(
        mrr[0]["also_printed_in"]
    ), mrr
    assert mrr[0]["status"].startswith("DIFFERENT") and "points below the paper's number" in mrr[0]["reason"]
    assert reported_text(mrr[0]["reported"], mrr[0]["printed"]) == "40.2"
    # every cell of the method is in exactly one row, its own or as a repeat
    named = {r["cell_id"] for r in rows}
    assert len(named) == len(rows)


def test_grade_agrees_with_the_cell_state_of_the_same_numbers(tmp_path, cells) -> None:
    """`grade` of a method's numbers gives each cell the state `cell_states` gives a record of them."""
    records = {r.method: r for r in _synthetic(cells)}
    rec = records["cotmae_qc"]
    f = tmp_path / "same.json"
    points = {b: {m: 100 * v for m, v in t.items()} for b, t in rec.metrics.items()}
    f.write_text(json.dumps({"runs": [{"method": "cotmae_qc", "metrics": points}]}))
    states = cell_state.cell_states([c for c in cells if c.get("method") == "cotmae_qc"], [rec])
    for row in grade(f):
        if row["kind"] == "cell" and row["status"] != NOT_COMPARABLE:
            assert states[row["cell_id"]].state == row["status"], row


def test_grade_stage_error_names_the_first_run_and_the_valid_stages(tmp_path) -> None:
    f = tmp_path / "bad.json"
    f.write_text(json.dumps({"runs": [{"method": "cotmae_qc", "stage": "retriever9", "metrics": {}}]}))
    with pytest.raises(Exception) as err:
        grade(f)
    text = str(err.value)
    assert "runs[0]" in text and "retriever1" in text and "(none" not in text
    f.write_text(json.dumps({"runs": [{"method": "bm25", "stage": "retriever2", "metrics": {}}]}))
    with pytest.raises(Exception) as err:
        grade(f)
    assert "runs[0]" in str(err.value) and 'remove "stage"' in str(err.value)
