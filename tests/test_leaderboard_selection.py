"""What the leaderboard's paper-comparison grids show (selection.py) and how their numbers read
(display.py): paper-comparable runs only by default, small profiles behind a switch with their
caveat, superseded runs folded, every number rounded, "-" for missing, no delta where nothing is
comparable, a stage column for runs with several retriever stages."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pytest

from harness.records.store import RunRecord

# leaderboard_app sits at the project root, outside the installed `harness` package.
if str(Path(__file__).resolve().parents[1]) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from leaderboard_app import data as lb_data
from leaderboard_app import display, plots, selection, tables

FIXTURES = Path(__file__).parent / "fixtures" / "records"
BM25 = "bm25__paper__20261121T203000"
TINY_OLD, TINY_NEW = "cotmae__tiny__20261120T100000", "cotmae__tiny__20261121T110000"
DL19 = "DL19 nDCG@10"
# More than 2 decimals on a number in points: what a raw float looks like (32.54498643686864).
UNROUNDED = r"\d\.\d{3,}"


@pytest.fixture(scope="module")
def lb():
    return lb_data.load(FIXTURES / "runs", FIXTURES / "reported_cells.json", with_gate=False)


def _record(base: RunRecord, **changes) -> RunRecord:
    return RunRecord.from_json({**base.to_json(), **changes}, base.path)


def test_grids_show_paper_comparable_runs_unless_the_switch_is_on(lb):
    assert selection.PAPER_COMPARABLE == ("paper", "checkpoint")
    assert [r.run_id for r in selection.grid_records(lb.records)] == [BM25]
    both = selection.grid_records(lb.records, small=True)
    assert {r.profile for r in both} == {"paper", "tiny"} and len(both) == 3
    note = selection.hidden_note(lb.records)
    assert note.startswith("Hidden: 2 small-profile run(s)") and "sidebar" in note
    assert selection.hidden_note(lb.records, small=True) == ""


def test_superseded_runs_are_the_ones_older_than_their_reference(lb):
    # the fixture's reference is the older tiny run: the newer one is gated against it, not superseded
    assert lb.references == {TINY_OLD}
    assert selection.superseded_ids(lb.records, lb.references) == set()
    # accept the newer run instead: the older becomes SUPERSEDED, folded unless asked for
    old = selection.superseded_ids(lb.records, {TINY_NEW})
    assert old == {TINY_OLD}
    shown = selection.grid_records(lb.records, small=True, superseded=old)
    assert TINY_OLD not in {r.run_id for r in shown}
    unfolded = selection.grid_records(lb.records, small=True, superseded=old, show_superseded=True)
    assert TINY_OLD in {r.run_id for r in unfolded}
    assert selection.hidden_note(lb.records, small=True, superseded=old) == (
        "Hidden: 1 superseded run(s); the switches in the sidebar show them."
    )
    # a paper run older than the paper reference is folded from the default grid too
    bm25 = next(r for r in lb.records if r.run_id == BM25)
    newer = _record(bm25, run_id="bm25__paper__20261122T000000", created="2026-11-22T00:00:00Z")
    recs = [*lb.records, newer]
    old = selection.superseded_ids(recs, {newer.run_id})
    assert old == {BM25}
    assert [r.run_id for r in selection.grid_records(recs, superseded=old)] == [newer.run_id]
    roles = tables.runs_frame(recs, {newer.run_id}, superseded=old).set_index("run_id")["role"]
    assert (roles[BM25], roles[newer.run_id]) == ("SUPERSEDED", "reference")


def test_small_profiles_shown_carry_their_caveat(lb):
    assert selection.shown_caveats(selection.grid_records(lb.records)) == []
    tiny = selection.shown_caveats(selection.grid_records(lb.records, small=True))
    assert len(tiny) == 1 and tiny[0].startswith("**tiny**") and "near chance" in tiny[0]
    rehearsal = _record(lb.records[0], run_id="cotmae__rehearsal__20261126T000000", profile="rehearsal")
    said = selection.shown_caveats([rehearsal, *lb.records])
    assert said[0].startswith("**rehearsal**") and "shapes, not results" in said[0] and "0.00 [0.00, 0.00]" in said[0]
    assert "not comparable" in selection.caveat("someday")


def test_not_comparable_rows_have_no_delta_and_the_view_is_rounded_text(lb):
    frame = tables.comparison_frame(lb.records, lb.comparisons)
    apart = frame[frame["status"] == "NOT-COMPARABLE"]
    assert len(apart) and apart[list(tables.GRADED_ONLY)].isna().all().all()
    assert apart["reproduced"].notna().all()  # the run's own number stays
    view = tables.comparison_view(frame)
    assert (view.loc[frame["status"] == "NOT-COMPARABLE", "delta"] == "-").all()
    text = view.to_csv(index=False)
    assert "None" not in text and "nan" not in text and not pd.Series([text]).str.contains(UNROUNDED).any()
    row = view[(view["paper"] == "cpdae") & (view["measure"] == "RR@10")].iloc[0]
    assert (row["reported"], row["reproduced"], row["delta"]) == ("18.7", "18.4", "-0.3")  # printed 0.187
    assert "stage" not in view.columns  # BM25 has no retriever stage


def test_runs_with_several_stages_get_a_stage_column(lb):
    bm25 = next(r for r in lb.records if r.run_id == BM25)
    by_stage = {"retriever1": {"dl19": {"nDCG@10": 0.4}}, "retriever2": {"dl19": {"nDCG@10": 0.45}}}
    staged = _record(
        bm25,
        run_id="cotmae__paper__20261122T000000",
        method="cotmae",
        finetune_stage="retriever2",
        metrics={"dl19": {"nDCG@10": 0.45}},
        metrics_by_stage=by_stage,
    )
    comps = {
        staged.run_id: [
            {
                "paper": "cpdae",
                "table": "Table 1",
                "row": "BM25",
                "benchmark": "dl19",
                "measure": "nDCG@10",
                "value": "0.501",
                "reported": 50.1,
                "reproduced": 100 * v,
                "delta": 100 * v - 50.1,
                "status": "INCONCLUSIVE",
                "finetune_stage": stage,
            }
            for stage, v in (("retriever1", 0.4), ("retriever2", 0.45))
        ]
    }
    t = tables.main_table(lb.cells, [staged], comps, papers=["cpdae"])
    under = t[t["row"].str.startswith(tables.UNDER)]
    assert list(under["stage"]) == ["retriever1", "retriever2"]
    assert list(under[DL19]) == ["40.0 (-10.1 INCONCLUSIVE)", "45.0 (-5.1 INCONCLUSIVE)"]
    alone = t[t["row"] == staged.run_id]
    assert list(alone["stage"]) == ["retriever1", "retriever2"] and list(alone[DL19]) == ["40.0", "45.0"]
    view = tables.comparison_view(tables.comparison_frame([staged], comps))
    assert list(view["stage"]) == ["retriever1", "retriever2"]
    beir = tables.beir_table(lb.cells, [_record(staged, metrics={"scifact": {"nDCG@10": 0.1234}})])
    assert f"reproduced {staged.run_id} · retriever2" in beir.columns


def test_numbers_as_text():
    assert display.number(None) == "-" and display.number(float("nan")) == "-" and display.number("") == "-"
    assert display.number(32.54498643686864, 1) == "32.5" and display.number(-0.04, 1, True) == "+0.0"
    assert display.cell_decimals({"value": "0.340", "reported": 34.0}) == 1
    assert display.cell_decimals({"value": "66.47", "score": 0.6647}) == 2
    assert (
        display.column_decimals(
            [
                {"benchmark": "dl19", "measure": "nDCG@10", "value": "0.501", "score": 0.501},
                {"benchmark": "dl19", "measure": "nDCG@10", "value": "51.2", "score": 0.512},
            ],
            "dl19",
            "nDCG@10",
        )
        == 1
    )
    assert display.column_decimals([], "dl19", "nDCG@10") == 2
    assert [display.size_text(x) for x in (150.0, 27.0, 0.9, 0.00186, None)] == [
        "150 GB",
        "27 GB",
        "0.9 GB",
        "1.86 MB",
        "-",
    ]
    frame = pd.DataFrame(
        {"v": [1.23456, None], "n": [300, None], "p": [0.0040251, 0.5], "ok": [True, False], "d": [0.5, -1.0]}
    )
    text = display.text_frame(frame, {"n": 0, "p": 3}, signed=("d",))
    assert text.to_dict("list") == {
        "v": ["1.23", "-"],
        "n": ["300", "-"],
        "p": ["0.004", "0.500"],
        "ok": ["yes", "no"],
        "d": ["+0.50", "-1.00"],
    }


def test_efficiency_table_shows_sizes_with_units(lb):
    eff = plots.efficiency_frame(lb.cells, lb.records)
    view = plots.efficiency_view(eff)
    lex = view[view["label"] == "lexmae · BM25"].iloc[0]
    assert lex["index size"] == "4.3 GB" and lex["effectiveness"] == "18.50"
    run = view[(view["label"] == BM25) & (view["benchmark"] == "msmarco-dev")].iloc[0]
    assert run["qps"] == "142.00" and run["index size"] == "2.3 GB"
    assert not view.isin(["None", "nan", ""]).any().any()
