"""`harness table` (issue 62): every printed table as its runs, the per-table counts, and the registry walk
that pins the states of the harness's own cells (the integrator updates the pins when a variant lands)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from harness.cli import main
from harness.core.errors import HarnessError
from harness.core.statuses import NOT_COMPARABLE, NOT_YET_RUN, REPRODUCED
from harness.gate.answer import is_claim
from harness.gate.cell_state import CellState
from harness.gate.run import run_gate
from harness.gate.tables import (
    REPRODUCE,
    TableRun,
    own_cell,
    own_counts,
    resolve_paper,
    resolve_table,
    table_counts,
    table_runs,
    tables_of,
)
from harness.papers.registry import load_papers, load_reported_cells

ROOT = Path(__file__).resolve().parent.parent
RECORDS = ROOT / "runs" / "records"  # the committed records, whatever HARNESS_RUNS_DIR says


@pytest.fixture(scope="module")
def cells() -> list[dict]:
    found, error = load_reported_cells()
    assert found is not None, error
    return found


@pytest.fixture(scope="module")
def states() -> dict[str, CellState]:
    return run_gate(RECORDS).cells


def _table(cells: list[dict], paper: str, table: str) -> list[dict]:
    return tables_of(cells)[(paper, table)]


# ----------------------------------------------------------------------------- the registry walk


def test_the_registry_walk_pins_the_states_of_the_harness_own_cells(cells, states) -> None:
    """Every registry cell walked; the issue's exclusions counted apart; the own cells by state. A count
    that changes (a variant that makes cells gradable, a cell added to the registry) fails here: update the
    pins in the same change, with the reason in its message."""
    assert len(cells) == 862 and set(states) == {c["cell_id"] for c in cells}
    left_out = Counter()
    for c in cells:
        if not c.get("method"):
            left_out["row of a system the harness does not run"] += 1
        elif not c.get("benchmark"):
            left_out["column that is no benchmark"] += 1
        elif c.get("score") is None:
            left_out["empty"] += 1
        elif "cited" in (c.get("conditions") or {}):
            left_out["copied from another paper"] += 1
        elif c.get("doubt"):
            left_out["doubtful"] += 1
        else:
            assert own_cell(c) and is_claim(c)
    assert dict(left_out) == {
        "row of a system the harness does not run": 516,
        "column that is no benchmark": 47,
        "empty": 9,
        "copied from another paper": 40,
        "doubtful": 30,
    }
    assert own_counts(cells, states) == {
        "cells": 220,
        "reachable": 196,
        REPRODUCED: 2,
        NOT_YET_RUN: 194,
        NOT_COMPARABLE: 24,
    }
    # issue 62 done-when 1: each cell that stays NOT-COMPARABLE names the external dependency, the teacher
    never = [
        states[c["cell_id"]].reason
        for c in cells
        if own_cell(c) and is_claim(c) and states[c["cell_id"]].state == NOT_COMPARABLE
    ]
    assert len(never) == 24 and all("zhou2022b-ranker" in r and "weights unidentified" in r for r in never), never


def test_a_count_follows_the_states_it_is_given() -> None:
    """own_counts counts what it is handed (the pin above can fail): one cell graded, one offered, one not."""
    cells = [
        {"cell_id": i, "method": "cpdae", "benchmark": "nfcorpus", "score": 0.3, "paper": "cpdae", "table": "Table 1"}
        for i in "abc"
    ]
    states = {
        "a": CellState("a", REPRODUCED, command="python -m harness run --method cpdae --profile paper"),
        "b": CellState("b", NOT_YET_RUN, command="python -m harness run --method cpdae --profile paper"),
        "c": CellState("c", NOT_COMPARABLE, reason="no paper-profile run can grade it: declared deviation: loss: x"),
    }
    assert own_counts(cells, states) == {"cells": 3, "reachable": 2, REPRODUCED: 1, NOT_YET_RUN: 1, NOT_COMPARABLE: 1}
    (count,) = table_counts(cells, states)
    assert (count.cells, count.reachable, count.unreachable) == (3, 2, (("declared deviation: loss", 1),))
    assert count.command == 'python -m harness table cpdae "Table 1" --dry-run'


def test_every_table_of_the_five_papers_is_counted(cells, states) -> None:
    counts = table_counts(cells, states)
    assert {c.paper for c in counts} == {p.paper for p in load_papers()}
    assert sum(c.cells for c in counts) == len(cells)
    for c in counts:
        assert c.reachable + sum(n for _, n in c.unreachable) == c.cells, c.name
        assert sum(n for _, n in c.states) == c.cells, c.name


# ----------------------------------------------------------------------------- the runs of a table


def test_a_table_needs_one_run_per_spec_and_each_cell_is_graded_by_one(cells) -> None:
    mine = _table(cells, "qc-v1", "Table 2")
    runs = table_runs(mine)
    assert [r.target for r in runs] == ["cocondenser_qc_q1", "cocondenser_qc", "cotmae_qc_q1", "cotmae_qc"]
    graded = [i for r in runs for i in r.cells]
    assert len(graded) == len(set(graded)) == 20
    assert runs[0].command == "python -m harness run --method cocondenser_qc_q1 --profile paper"


def test_a_run_serving_several_columns_names_their_datasets_once(cells) -> None:
    runs = {r.target: r for r in table_runs(_table(cells, "lexmae", "Table 3"))}
    bm25 = runs["bm25"]
    assert len(bm25.datasets) == len(set(bm25.datasets)) and {"trec-covid", "fever", "nq"} <= set(bm25.datasets)
    assert bm25.command.startswith("python -m harness run --method bm25 --profile paper --dataset scifact,")
    reproduce = table_runs(_table(cells, "qc-v1", "Table 1"))
    checkpoints = [r for r in reproduce if r.kind == REPRODUCE]
    assert checkpoints and all(r.command.startswith("python -m harness reproduce --checkpoint ") for r in checkpoints)


def test_papers_and_tables_are_named_by_key_short_name_or_number() -> None:
    papers = load_papers()
    for name in ("qc-v2", "QC v2", "qc v2", "Wu et al. 2023 (QC v2)", "qc-pretraining-v2.txt"):
        assert resolve_paper(name, papers) == "qc-v2"
    with pytest.raises(HarnessError, match=r"unknown paper 'qc-v9'.*lexmae \(LexMAE\).*qc-v1 \(QC v1\)"):
        resolve_paper("qc-v9", papers)
    assert resolve_table("qc-v2", "2", ["Table 1", "Table 2"]) == "Table 2"
    with pytest.raises(HarnessError, match="Known: Table 1, Table 2"):
        resolve_table("qc-v2", "Table 9", ["Table 1", "Table 2"])


def test_a_stage_key_an_earlier_run_plans_is_shared_and_counted_once() -> None:
    from harness.run.table_plan import plan_runs

    def planner(spec, datasets):  # two specs sharing their passages, each with its own pre-training
        own = "k-" + spec.name
        return [
            {"stage": "passages", "dataset": None, "key": "shared-passages"},
            {"stage": "pretrain", "dataset": None, "key": own},
        ]

    runs = [TableRun("run", m, (), (m,)) for m in ("cotmae_qc", "cotmae_qc_q1")]
    first, second = plan_runs(runs, planner)
    assert first.shared == () and second.shared == (("passages", "shared-passages", 1),)
    assert [e["key"] for e in second.stages] == ["shared-passages", "k-cotmae_qc_q1"]
    note = plan_runs([TableRun(REPRODUCE, "co-condenser-marco-retriever", ("dl19",), ("x",))], planner)[0]
    assert note.cost.startswith("a released checkpoint: no training")


# ----------------------------------------------------------------------------- the command


def test_list_covers_every_table_with_counts_reasons_and_commands(capsys, tmp_path) -> None:
    assert main(["table", "--list", "--json", str(tmp_path / "t.json")]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("22 tables, 862 cells; a run the harness offers can grade ")
    assert "Wu et al. 2023 (QC v2), Table 2: 60 cells, " in out
    assert 'python -m harness table qc-v2 "Table 2" --dry-run' in out
    assert "the row is no method the harness runs: " in out
    tables = json.loads((tmp_path / "t.json").read_text())["tables"]
    assert len(tables) == 22 and sum(t["cells"] for t in tables) == 862


def test_commands_print_the_runs_one_a_line(capsys) -> None:
    assert main(["table", "QC v1", "Table 2", "--commands"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "python -m harness run --method cocondenser_qc_q1 --profile paper",
        "python -m harness run --method cocondenser_qc --profile paper",
        "python -m harness run --method cotmae_qc_q1 --profile paper",
        "python -m harness run --method cotmae_qc --profile paper",
    ]


def test_the_qc_v2_beir_table_dry_run_lists_the_sbert_negative_variants(capsys) -> None:
    """QC v2 Table 2 (BEIR, fine-tuned on sbert's MS MARCO hard negatives): one run per *_beir variant grades it."""
    assert main(["table", "qc-v2", "Table 2", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Wu et al. 2023 (QC v2), Table 2: 60 cells, 60 a run can grade (NOT-YET-RUN 60); 4 run(s)")
    for method in ("cocondenser_beir", "cocondenser_qc_beir", "cotmae_beir", "cotmae_qc_beir"):
        assert f"--method {method} --profile paper" in out


def test_a_dry_run_lists_each_run_with_its_cost_and_cells(capsys, tmp_path) -> None:
    assert main(["table", "cpdae", "Table 2", "--dry-run", "--json", str(tmp_path / "d.json")]) == 0
    out = capsys.readouterr().out
    assert "run 1 of 1: python -m harness run --method cpdae_pairwise --profile paper" in out
    assert "  projected: " in out and "grades 2 cell(s):" in out
    (run,) = json.loads((tmp_path / "d.json").read_text())["runs"]
    assert run["target"] == "cpdae_pairwise" and len(run["cells"]) == 2
    assert run["stages"] and all(s["key"] for s in run["stages"] if s["stage"] != "evaluate")


def test_running_a_table_without_gpus_refuses_with_the_run_own_line(capsys, monkeypatch) -> None:
    from harness.run import device_check

    monkeypatch.setattr(device_check, "cards", lambda: [])  # no usable GPU, whatever machine runs the test
    assert main(["run", "--method", "cpdae_pairwise", "--profile", "paper"]) == 2
    alone = capsys.readouterr().err.strip().splitlines()
    assert main(["table", "cpdae", "Table 2"]) == 2
    captured = capsys.readouterr()
    assert "run 1 of 1: python -m harness run --method cpdae_pairwise --profile paper" in captured.out
    assert captured.err.strip().splitlines() == alone and len(alone) == 1
    assert "torch sees no usable GPU" in alone[0]


def test_an_unknown_paper_or_table_names_the_valid_ones(capsys) -> None:
    assert main(["table", "qc-v9", "1"]) == 2
    assert "give one of cpdae (CPDAE)" in capsys.readouterr().err
    assert main(["table", "lexmae", "Table 11"]) == 2
    assert "Known: Table 1, Table 2, Table 3" in capsys.readouterr().err
    assert main(["table", "qc-v2"]) == 2
    assert "give PAPER TABLE" in capsys.readouterr().err
