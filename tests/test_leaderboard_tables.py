"""Data shaping of the leaderboard (tables.py, plots.py, data.py) on the fixture records and cells."""

from __future__ import annotations

import importlib
import json
import re
import sys
from pathlib import Path

import pandas as pd
import pytest

# leaderboard_app sits at the project root, outside the installed `harness` package.
if str(Path(__file__).resolve().parents[1]) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from leaderboard_app import data as lb_data
from leaderboard_app import plots, tables

FIXTURES = Path(__file__).parent / "fixtures" / "records"
RUNS = FIXTURES / "runs"
CELLS_JSON = FIXTURES / "reported_cells.json"
BM25 = "bm25__paper__20261121T203000"
MRR, R50, R1K, DL19 = "MS MARCO dev MRR@10", "MS MARCO dev R@50", "MS MARCO dev R@1k", "DL19 nDCG@10"


@pytest.fixture(scope="module")
def lb():
    return lb_data.load(RUNS, CELLS_JSON, with_gate=False)


def _row(frame: pd.DataFrame, **match) -> pd.Series:
    hits = frame
    for k, v in match.items():
        hits = hits[hits[k] == v]
    assert len(hits) == 1, f"{match}: {len(hits)} rows"
    return hits.iloc[0]


def test_load_compares_paper_records_with_the_cells(lb):
    assert len(lb.records) == 3 and len(lb.skipped) == 3 and lb.cells_error is None
    assert lb.profiles == ["paper", "tiny"] and lb.methods == ["bm25", "cotmae"]
    assert lb.papers == ["qc-v1", "qc-v2", "lexmae", "cpdae"]
    assert (
        lb.paper_label("qc-v1") == "Wu et al. 2022 (QC v1)" and lb.paper_label("lexmae") == "Shen et al. 2023 (LexMAE)"
    )
    statuses = {c["status"] for c in lb.comparisons[BM25]}
    assert statuses == {"REPRODUCED", "NOT-COMPARABLE"}  # the rows the papers cite are never graded


def test_main_table_has_table1_shape_with_reproduced_rows_under_reported_ones(lb):
    t = tables.main_table(lb.cells, lb.records, lb.comparisons)
    assert list(t.columns) == [
        "source",
        "paper",
        "version",
        "table",
        "row",
        "method",
        MRR,
        R50,
        "MS MARCO dev R@100",
        R1K,
        DL19,
        "DL20 nDCG@10",
        "status",
    ]
    cited = _row(t, paper="qc-v1", row="BM25")  # copied from Qu et al.: no reproduced row under it
    assert (cited[MRR], cited[R50], cited[R1K], cited[DL19]) == ("18.7", "59.2", "85.7", "51.2")
    assert not t.iloc[t.index.get_loc(cited.name) + 1]["row"].startswith(tables.UNDER)
    bm25 = _row(t, paper="cpdae", row="BM25")  # CPDAE's own BM25 run
    below = t.iloc[t.index.get_loc(bm25.name) + 1]
    assert below["row"] == f"{tables.UNDER}reproduced {BM25}" and below["source"] == "reproduced"
    # at CPDAE's printed precision: 0.187 and 0.501 are 18.7 and 50.1 points, one decimal
    assert below[MRR] == "18.4 (-0.3 REPRODUCED)" and below[DL19] == "50.6 (+0.5 REPRODUCED)"
    assert below["status"] == "REPRODUCED"
    ance = _row(t, paper="qc-v1", row="ANCE (Xiong et al., 2020)")
    assert ance[R50] == "-" and ance["method"] == ""
    # every run also appears on its own, with its own numbers only
    alone = _row(t, source="reproduced", row=BM25)
    assert alone[MRR] == "18.4" and alone["status"] == "profile paper"  # the papers print MRR@10 at 1 decimal
    assert not (t["row"] == "cotmae__tiny__20261120T100000").any()  # no MS MARCO / DL numbers: no row


def test_main_table_filters(lb):
    qc1 = tables.main_table(lb.cells, lb.records, lb.comparisons, papers=["qc-v1"])
    assert set(qc1.loc[qc1["paper"] != "", "paper"]) == {"qc-v1"}
    assert (qc1.loc[qc1["source"] == "reported", "MS MARCO dev R@100"] == "-").all()  # never blank, never "None"
    qc1_tiny = tables.main_table(lb.cells, lb.records, lb.comparisons, papers=["qc-v1"], profiles=["tiny"])
    assert "MS MARCO dev R@100" not in qc1_tiny.columns  # only LexMAE and the BM25 run have R@100
    tiny = tables.main_table(lb.cells, lb.records, lb.comparisons, profiles=["tiny"])
    assert not tiny["row"].str.startswith(tables.UNDER).any() and not (tiny["source"] == "reproduced").any()
    dl19 = tables.main_table(lb.cells, lb.records, lb.comparisons, benchmarks=["dl19"])
    assert [c for c in dl19.columns if "nDCG" in c or "MARCO" in c] == [DL19]
    all_tables = tables.main_table(lb.cells, lb.records, lb.comparisons, main_only=False)
    assert ((all_tables["table"] == "Table 4") & (all_tables["row"] == "BM25")).any()
    assert not (tables.main_table(lb.cells, lb.records, lb.comparisons)["table"] == "Table 4").any()


def test_comparison_frame_is_numeric_in_points(lb):
    f = tables.comparison_frame(lb.records, lb.comparisons)
    row = _row(f, paper="cpdae", benchmark="msmarco-dev", measure="RR@10")
    assert row["reported"] == pytest.approx(18.7) and row["reproduced"] == pytest.approx(18.4)
    assert row["delta"] == pytest.approx(-0.3) and row["status"] == "REPRODUCED" and row["tolerance"] == 0.5
    assert pd.isna(row["ci_low"])  # BM25 is deterministic: an exact tolerance, no seed-noise interval
    assert set(tables.comparison_frame(lb.records, lb.comparisons, benchmarks=["scifact"])["benchmark"]) == {"scifact"}
    assert tables.comparison_frame(lb.records, lb.comparisons, profiles=["tiny"]).empty


def test_beir_table_has_14_datasets_and_both_averages(lb):
    b = tables.beir_table(lb.cells, lb.records).set_index("dataset")
    assert list(b.index[:14]) == list(tables.BEIR_DATASETS)
    # text at the printed precision (qc-v2 prints 0.632: 63.2 points), "-" where a column has no number
    qc = b["Wu et al. 2023 (QC v2), Table 2 · coCondenser w/o"]
    assert qc["trec-covid"] == "63.2" and qc["cqadupstack"] == "31.0"
    assert qc[tables.AVG14] == "44.1" and qc["average (14, printed)"] == "44.1"
    lex = b["Shen et al. 2023 (LexMAE), Table 3 · BM25"]
    assert lex["quora"] == "-" and lex[tables.AVG14] == "-"  # LexMAE has 12 datasets only
    assert lex[tables.AVG12] == "41.1" and lex["average (12, printed)"] == "41.1"
    run = b[f"reproduced {BM25}"]  # 66.47 points, at the one decimal the papers print SciFact at
    assert run["scifact"] == "66.5" and run[tables.AVG14] == "-" and run[tables.AVG12] == "-"
    assert not b.isna().any().any() and not b.isin(["None", "nan", ""]).any().any()
    only = tables.beir_table(lb.cells, lb.records, papers=["lexmae"], profiles=["tiny"], benchmarks=["scifact"])
    assert list(only.columns) == [
        "dataset",
        "Shen et al. 2023 (LexMAE), Table 3 · BM25",
        "Shen et al. 2023 (LexMAE), Table 3 · LexMAE",
        "reproduced cotmae__tiny__20261120T100000",
        "reproduced cotmae__tiny__20261121T110000",
    ]
    assert only["dataset"].iloc[0] == "scifact"


def test_method_page_frames(lb):
    rec = next(r for r in lb.records if r.run_id == BM25)
    st = tables.stages_frame(rec)
    assert list(st["stage"]) == ["index", "retrieve", "evaluate"] * 2 and st["cached"].sum() == 1
    hp = tables.hyperparameters_frame(rec).set_index("parameter")["value"]
    assert hp["retrieval.k1"] == "0.9" and hp["datasets"] == "scifact, nfcorpus"
    hw = tables.hardware_frame(rec).set_index("")
    # GPUs declared vs present, CPUs apart (a CPU run's "devices 1" is not 2 of anything); time as h:mm:ss
    assert hw.loc["device", "declared"] == "cpu" and hw.loc["CPUs", "actual"] == "2"
    assert hw.loc["GPUs", "declared"] == "0" and hw.loc["GPUs", "actual"] == "0"
    assert re.fullmatch(r"\d+:\d\d:\d\d", hw.loc["wall time (h:mm:ss)", "actual"])
    # a run under a minute still reads h:mm:ss in that column (issue 63: it showed "40.90 s")
    short = tables.hardware_frame(rec.replace(seconds=40.9)).set_index("")
    assert short.loc["wall time (h:mm:ss)", "actual"] == "0:00:41"
    assert not st["details"].str.contains(r"[{}'\"]").any() and "time" in st and "seconds" not in st
    ci = tables.metric_ci_frame(rec)
    sci = _row(ci, benchmark="scifact", measure="nDCG@10")
    assert sci["queries"] == 300 and sci["ci_low"] < sci["value"] < sci["ci_high"]
    assert not pd.isna(_row(ci, benchmark="msmarco-dev", measure="RR@10")["ci_low"])
    bare = rec.replace(per_query={k: v for k, v in rec.per_query.items() if k != "msmarco-dev"})
    assert pd.isna(_row(tables.metric_ci_frame(bare), benchmark="msmarco-dev", measure="RR@10")["ci_low"])  # none kept
    pq = tables.per_query_frame(rec, "dl19", "nDCG@10")
    assert len(pq) == 43 and pq["score"].mean() == pytest.approx(0.5058, abs=1e-3)
    cells = tables.cell_ci_frame(lb.comparisons[BM25])
    assert len(cells) == 5 and set(cells["status"]) == {"REPRODUCED"}  # the graded cells only


def test_efficiency_points_pair_size_and_speed_with_mrr(lb):
    eff = plots.efficiency_frame(lb.cells, lb.records)
    lex_bm25 = _row(eff, label="lexmae · BM25")
    assert lex_bm25["index_gb"] == pytest.approx(4.3) and lex_bm25["effectiveness"] == pytest.approx(18.5)
    run = _row(eff, label=BM25, benchmark="msmarco-dev")
    assert run["qps"] == 142.0 and run["index_gb"] == pytest.approx(2.3) and run["effectiveness"] == pytest.approx(18.4)
    assert _row(eff, label="cotmae__tiny__20261120T100000")["measure"] == "nDCG@10"
    spec = plots.efficiency_chart(eff, "index_gb").to_dict()
    assert spec["encoding"]["x"]["scale"]["type"] == "log"


def test_the_efficiency_plot_opens_on_the_axis_with_the_most_points():
    """Issue 63 item 6: on the committed records and the registry, MS MARCO dev has one qps point and many
    index sizes; the plot opened on qps (one point). It opens on the axis with the most points, qps on a tie."""
    from harness.core import benchmarks as declared

    committed = lb_data.load(with_gate=False)
    eff = plots.efficiency_frame(committed.cells, committed.records)
    shown = eff[eff["benchmark"] == declared.headline()[0]]
    assert shown["index_gb"].notna().sum() > shown["qps"].notna().sum()  # the defect's data
    assert plots.default_axis(shown) == "index_gb"
    tie = pd.DataFrame({"qps": [1.0, None], "index_gb": [None, 2.0]})
    assert plots.default_axis(tie) == "qps" and plots.default_axis(tie.iloc[:0]) == "qps"


def test_text_only_qps_pairs_with_the_methods_mrr():
    cells = [
        {
            "paper": "lexmae",
            "table": "Table 1",
            "row": "LexMAE",
            "column": "M@10",
            "method": "lexmae",
            "benchmark": "msmarco-dev",
            "measure": "RR@10",
            "score": 0.426,
            "value": "42.6",
            "unit": "points",
        },
        {
            "paper": "lexmae",
            "table": "text: abstract",
            "row": "qps",
            "column": "45.83 QPS",
            "method": "lexmae",
            "benchmark": "msmarco-dev",
            "measure": None,
            "score": None,
            "value": "45.83",
            "unit": "QPS",
        },
    ]
    eff = plots.efficiency_frame(cells, [])
    assert len(eff) == 1 and eff.iloc[0]["qps"] == pytest.approx(45.83) and eff.iloc[0]["effectiveness"] == 42.6


def test_retriever_pairs(lb):
    r = plots.retriever_frame(lb.cells, lb.records)
    co = _row(r, label="qc-v2 · cocondenser (120K)", benchmark="msmarco-dev", measure="RR@10")
    assert (co["retriever1"], co["retriever2"]) == (37.0, 38.8) and co["gain"] == pytest.approx(1.8)
    assert not (r["source"] != "reported").any()  # fixtures hold only retriever-2 runs
    assert "layer" in plots.retriever_chart(r).to_dict()


def test_delta_frame_keeps_comparable_rows(lb):
    d = plots.delta_frame(tables.comparison_frame(lb.records, lb.comparisons))
    assert set(d["status"]) == {"REPRODUCED"} and len(d) == 5
    spec = plots.delta_chart(d).to_dict()
    bars, margin = spec["layer"]
    assert bars["mark"]["type"] == "bar" and margin["mark"]["type"] == "tick"  # the margin drawn on each row
    # labels in full, ticks no finer than the labels print (else "-0.03 -0.03 ... 0.01")
    assert bars["encoding"]["y"]["axis"]["labelLimit"] == 0
    assert bars["encoding"]["x"]["axis"]["tickMinStep"] == 0.01
    # issue 63 item 6: a fixed scale in points, never auto-scaled to +-0.05 around BM25's +0.04 / -0.03
    assert (
        bars["encoding"]["x"]["scale"]["domain"] == plots.delta_domain(d) == margin["encoding"]["x"]["scale"]["domain"]
    )
    small = pd.DataFrame({"delta": [0.04, -0.03], "tolerance": [0.1, 0.1]})
    assert plots.delta_domain(small) == [-1.5, 1.5]
    assert plots.delta_domain(pd.DataFrame({"delta": [-2.3], "tolerance": [1.0]})) == [-3.0, 3.0]


def test_effects_chart_stacks_its_panels_with_labels_in_full(lb):
    frame = plots.effects_frame(lb.records, lb.profiles)
    spec = plots.effects_chart(frame).to_dict()
    assert "row" in spec["facet"] and "column" not in spec["facet"]  # side by side, the last panel was cut
    assert all(layer["encoding"]["y"]["axis"]["labelLimit"] == 0 for layer in spec["spec"]["layer"][:2])
    # issue 63 item 6: profiles never mixed without a legend: each one's colour is named, on its own line
    for layer in spec["spec"]["layer"][:2]:
        assert layer["encoding"]["color"]["field"] == "profile" and layer["encoding"]["color"]["title"] == "profile"
        assert layer["encoding"]["yOffset"]["field"] == "profile"


def test_every_retriever_point_names_its_legend_entry(lb):
    r = plots.retriever_frame([{**c, "method": None, "row": "a printed row"} for c in lb.cells], lb.records)
    assert len(r) and (r["method"].str.strip() != "").all()


def test_csv_download_round_trips(lb):
    t = tables.main_table(lb.cells, lb.records, lb.comparisons)
    back = pd.read_csv(pd.io.common.BytesIO(tables.to_csv(t)), dtype=str, keep_default_na=False)
    assert list(back.columns) == list(t.columns) and back.iloc[13][MRR] == "18.4 (-0.3 REPRODUCED)"


def test_broken_inputs_never_raise(tmp_path, monkeypatch):
    bad = tmp_path / "cells.json"
    bad.write_text(json.dumps({"cells": "nope"}))
    lb = lb_data.load(tmp_path / "no-records", bad)
    assert lb.records == [] and lb.cells == [] and "expected a list" in lb.cells_error
    assert tables.main_table(lb.cells, lb.records, lb.comparisons).empty
    assert tables.beir_table(lb.cells, lb.records).shape[1] == 1
    assert plots.efficiency_frame([], []).empty and plots.retriever_frame([], []).empty

    import harness.papers.consistency

    def boom(*_a, **_k):
        raise ValueError("registry exploded")

    monkeypatch.setattr(harness.papers.consistency, "check_papers", boom)
    rows, error = lb_data.inconsistency_report()
    assert rows == [] and "registry exploded" in error


def test_signature_changes_when_a_record_changes(tmp_path):
    (tmp_path / "a.json").write_text("{}")
    before = lb_data.signature(tmp_path, None)
    (tmp_path / "b.json").write_text("{}")
    assert lb_data.signature(tmp_path, None) != before


def test_a_record_that_cannot_be_compared_is_listed_as_skipped(monkeypatch):
    grading = importlib.import_module("harness.gate.grading")  # patched where the gate calls it

    monkeypatch.setattr(grading, "compare", lambda *a, **k: 1 / 0)
    lb = lb_data.load(RUNS, CELLS_JSON)
    assert BM25 not in {r.run_id for r in lb.records} and BM25 not in lb.comparisons
    assert any("could not be compared" in s.reason for s in lb.skipped) and len(lb.skipped) == 4
    assert not tables.main_table(lb.cells, lb.records, lb.comparisons)["row"].str.startswith(tables.UNDER).any()


def test_reported_fractions_are_shown_in_points_with_printed_precision():
    frac = {"value": "0.187", "score": 0.187, "unit": "fraction"}
    assert tables.reported_points(frac) == "18.7"
    assert tables.reported_points({"value": "0.3355", "score": 0.3355, "unit": "fraction"}) == "33.55"
    assert tables.reported_points({"value": "38.0", "score": 0.38, "unit": "points"}) == "38.0"
    assert tables.reported_points({"value": "-", "score": None, "unit": "fraction"}) == "-"
    assert tables.reported_points({"value": None, "score": None, "unit": "points"}) == ""


def test_unreadable_references_manifest_leaves_the_gate_out_not_the_page(tmp_path):
    """The gate stops on a references.json it cannot read (harness.records.store.read_references); the
    leaderboard shows the records and the reason instead of failing to load."""
    import shutil

    for name in ("cotmae__tiny__20261120T100000.json", "cotmae__tiny__20261121T110000.json"):
        shutil.copy(RUNS / name, tmp_path / name)
    (tmp_path / "references.json").write_text('{"references": []}')
    data = lb_data.load(tmp_path, CELLS_JSON)
    assert data.gate is None and len(data.records) == 2 and "references.json" in (data.cells_error or "")


# LexMAE Table 4's "Index Size" column as the paper prints it (lexmae-iclr2023.txt, Table 4), in GB; the
# "Repr Byte" column beside it (bytes per embedded passage, "3,072", "Avg 17,203") is no index size.
LEXMAE_TABLE4_INDEX_GB = {
    "ColBERTv2": 150.0,
    "AR2": 27.0,
    "SimLM": 27.0,
    "BM25": 4.3,
    "SPLADE-max": 2.0,
    "SPLADE-mask": 5.4,
    "LexMAE": 3.7,
    "- top-256 sparsify": 3.5,
    "- top-128 sparsify": 2.4,
    "- top-64 sparsify": 1.4,
    "- top-32 sparsify": 0.9,
    "- top-16 sparsify": 0.5,
    "- top-8 sparsify": 0.4,
    "- top-4 sparsify": 0.3,
    "- top-2 sparsify": 0.2,
    "- top-1 sparsify": 0.2,
}
LEXMAE_TABLE4_MRR = {
    "ColBERTv2": 39.7,
    "AR2": 39.5,
    "SimLM": 41.1,
    "BM25": 18.5,
    "- top-32 sparsify": 40.0,
    "- top-1 sparsify": 1.9,
}
LEXMAE_QPS = 45.83  # the abstract: "42.6% MRR@10 with 45.83 QPS on a CPU machine"


def test_plots_read_lexmae_table4_index_sizes_and_query_rate_as_printed():
    from harness.papers.registry import load_reported_cells

    cells, error = load_reported_cells()
    assert error is None
    eff = plots.efficiency_frame(cells, [])
    lex = eff[eff["label"].str.startswith("lexmae · ")]
    sized = lex.dropna(subset=["index_gb"])
    sizes = {label.split(" · ", 1)[1]: gb for label, gb in zip(sized["label"], sized["index_gb"])}
    assert sizes == pytest.approx(LEXMAE_TABLE4_INDEX_GB)
    mrr = {label.split(" · ", 1)[1]: e for label, e in zip(sized["label"], sized["effectiveness"])}
    assert {k: mrr[k] for k in LEXMAE_TABLE4_MRR} == pytest.approx(LEXMAE_TABLE4_MRR)
    rated = lex.dropna(subset=["qps"])
    assert list(rated["qps"]) == [pytest.approx(LEXMAE_QPS)] and list(rated["effectiveness"]) == [42.6]


def test_number_parser_reads_units_and_thousands_separators():
    assert plots._number("3,072") == 3072.0 and plots._number("Avg 17,203") == 17203.0
    assert plots._number("Upto 768") == 768.0 and plots._number("42,600.5 QPS") == 42600.5
    assert plots._number("-") is None and plots._number("") is None and plots._number("1,2") is None
    assert plots._size_gb("27G", "GB") == 27.0 and plots._size_gb("27 GB", "") == 27.0
    assert plots._size_gb("350MB", "GB") == pytest.approx(0.35) and plots._size_gb("1.5", "TB") == 1500.0
    assert plots._size_gb("3,072", "") is None  # no unit anywhere: no size
    assert plots._kind({"column": "Repr Byte", "unit": "bytes"}) is None
    assert plots._kind({"column": "Index Size", "unit": "GB"}) == "index_gb"
    assert plots._kind({"column": "45.83 QPS", "unit": "QPS"}) == "qps"


def test_a_single_query_rate_gets_a_decade_wide_log_axis():
    one = pd.DataFrame(
        [
            {
                "label": "lexmae",
                "source": "reported",
                "benchmark": "msmarco-dev",
                "measure": "RR@10",
                "effectiveness": 42.6,
                "qps": 45.83,
                "index_gb": None,
            }
        ]
    )
    x = plots.efficiency_chart(one, "qps").to_dict()["encoding"]["x"]
    lo, hi = x["scale"]["domain"]
    assert x["scale"]["type"] == "log" and lo < 45.83 < hi and hi / lo == pytest.approx(10)
    assert x["axis"]["format"] == ",~g"


def test_log_axes_tick_at_1_2_5_inside_their_domain():
    """Index sizes of 0.4-3.7 GB: Vega's own ticks over one decade repeated a label at ',~g'; the axis gets
    1-2-5 values, distinct and inside the domain (the browser test reads the drawn labels)."""
    sizes = pd.Series([0.4, 1.4, 3.7])
    ticks = plots.log_ticks(sizes)
    lo, hi = plots.log_domain(sizes)
    assert ticks == [0.5, 1.0, 2.0] and all(lo <= t <= hi for t in ticks)
    assert plots.log_ticks(pd.Series([45.83])) == [20.0, 50.0, 100.0]
    assert plots.log_ticks(pd.Series([1.0, 5000.0])) == [
        1.0,
        2.0,
        5.0,
        10.0,
        20.0,
        50.0,
        100.0,
        200.0,
        500.0,
        1000.0,
        2000.0,
        5000.0,
    ]
    assert plots.log_ticks(pd.Series([], dtype=float)) == []
