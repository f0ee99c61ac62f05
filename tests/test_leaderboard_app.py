"""The leaderboard page driven as a person would, through Streamlit's AppTest (no browser)."""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import pandas as pd
import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

# leaderboard_app sits at the project root, outside the installed `harness` package.
if str(Path(__file__).resolve().parents[1]) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from leaderboard_app import data as lb_data
from leaderboard_app import tables

APP = Path(__file__).resolve().parents[1] / "leaderboard_app" / "app.py"
FIXTURES = Path(__file__).parent / "fixtures" / "records"
RUNS = FIXTURES / "runs"
CELLS_JSON = FIXTURES / "reported_cells.json"
BM25 = "bm25__paper__20261121T203000"
MRR = "MS MARCO dev MRR@10"
FINDINGS = [
    {
        "paper": "qc-v2",
        "table": "Table 3",
        "kind": "bold_not_best",
        "message": "Table 3: 37.4 is bold for coCondenser with 5 queries although 37.7 is higher",
    },
    {"paper": "lexmae", "table": "Table 1", "kind": "column_shift", "message": "BM25 R@100 58.5 looks like R@50"},
]


def _setup(mp: pytest.MonkeyPatch) -> None:
    mp.setenv(lb_data.RECORDS_ENV, str(RUNS))
    mp.setenv(lb_data.REPORTED_ENV, str(CELLS_JSON))
    mp.setattr(lb_data, "inconsistency_report", lambda: (FINDINGS, None))


@pytest.fixture
def app(monkeypatch):
    """A fresh AppTest over the fixture records and cells, for tests that interact with the page."""
    _setup(monkeypatch)
    st.cache_data.clear()
    yield lambda: AppTest.from_file(str(APP), default_timeout=60).run()
    st.cache_data.clear()


@pytest.fixture(scope="module")
def page():
    """One rendered page in its default state, shared by the read-only tests (each AppTest
    instance costs seconds: Streamlit scans every installed package for components)."""
    with pytest.MonkeyPatch.context() as mp:
        _setup(mp)
        st.cache_data.clear()
        at = AppTest.from_file(str(APP), default_timeout=60).run()
        yield at
        st.cache_data.clear()


def _frame(at: AppTest, column: str) -> pd.DataFrame:
    """The first table on the page that has ``column``."""
    for df in at.dataframe:
        if column in df.value.columns:
            return df.value
    raise AssertionError(
        f"no table with column {column!r}; tables: {[list(d.value.columns)[:4] for d in at.dataframe]}"
    )


def _text(at: AppTest) -> str:
    parts = [m.value for m in at.markdown] + [c.value for c in at.caption] + [s.value for s in at.subheader]
    parts += [x.value for kind in (at.warning, at.info, at.success, at.error) for x in kind]
    return "\n".join(str(p) for p in parts)


def test_page_shows_table1_with_reported_and_reproduced_rows(page):
    at = page
    assert not at.exception, [e.value for e in at.exception]
    assert at.title[0].value == "Retrieval pre-training leaderboard"
    assert [t.label for t in at.tabs] == [
        "At a glance",
        "MS MARCO & TREC DL",
        "BEIR",
        "Method",
        "Plots",
        "CI gate",
        "Registry checks",
        "Skipped records",
    ]
    glance = "\n".join(m.value for m in at.tabs[0].markdown)
    # the fixture's BM25 paper run reproduces its cells; text badges with their colours, no symbols
    assert 'class="badge"' in glance and "REPRODUCED" in glance and "NOT-YET-RUN" in glance
    # every printed table with its reachable count and command (issue 62; harness.gate.tables)
    assert "Every printed table: what a run can grade, and its command" in [s.value for s in at.tabs[0].subheader]
    # (as text: a command's options are kept whole in a nowrap span)
    assert "python -m harness table qc-v2 &quot;Table 2&quot; --dry-run" in re.sub(r"<[^>]+>", "", glance)
    t1 = _frame(at, MRR)
    reported = t1[(t1["paper"] == "qc-v2") & (t1["row"] == "BM25")].iloc[0]
    assert reported[MRR] == "18.7" and reported["DL20 nDCG@10"] == "47.7"
    mine = t1[t1["row"] == f"{tables.UNDER}reproduced {BM25}"]
    assert list(mine["paper"]) == ["cpdae"]  # under the one BM25 row a paper ran itself (the others are cited)
    assert set(mine[MRR]) == {"18.4 (-0.3 REPRODUCED)"}  # at CPDAE's printed precision (0.187)
    assert "coCondenser (120K) - retriever 2 †" in set(t1["row"])
    assert "3 run record(s) skipped" in _text(at)


def test_beir_table_and_comparisons(page):
    at = page
    beir = _frame(at, "Shen et al. 2023 (LexMAE), Table 3 · LexMAE").set_index("dataset")
    assert beir.loc["scifact", "Shen et al. 2023 (LexMAE), Table 3 · LexMAE"] == "71.7"
    assert beir.loc["average (12, printed)", "Shen et al. 2023 (LexMAE), Table 3 · LexMAE"] == "48.7"
    assert beir.loc["scifact", f"reproduced {BM25}"] == "66.5"
    assert not any(c.startswith("reproduced cotmae__tiny") for c in beir.columns)  # tiny: behind the switch
    cmp_ = _frame(at, "p_equivalent")
    assert set(cmp_["status"]) == {"REPRODUCED", "NOT-COMPARABLE"} and set(cmp_["profile"]) == {"paper"}
    assert (cmp_.loc[cmp_["status"] == "NOT-COMPARABLE", "delta"] == "-").all()


def test_every_table_can_be_downloaded(page):
    at = page
    labels = [b.label for b in at.get("download_button")]
    assert "Download Table 1 (CSV)" in labels and "Download BEIR table (CSV)" in labels
    glance = [label for label in labels if label.startswith("Download the glance's")]
    assert len(glance) == 4  # its tables are HTML (badges): one CSV per list, and the printed tables' counts
    assert len(labels) - len(glance) == len(at.dataframe)


def test_profile_filter_removes_paper_runs(app):
    at = app()
    at.sidebar.multiselect(key="f_profiles").set_value(["tiny"]).run()
    assert not at.exception
    t1 = _frame(at, MRR)
    assert not t1["row"].str.contains("reproduced").any()
    beir = _frame(at, "Shen et al. 2023 (LexMAE), Table 3 · LexMAE")
    assert not [c for c in beir.columns if c.startswith("reproduced")]  # tiny stays behind its switch
    assert any("2 small-profile run(s)" in c.value for c in at.caption)
    at.sidebar.toggle(key="f_small").set_value(True).run()
    beir = _frame(at, "Shen et al. 2023 (LexMAE), Table 3 · LexMAE")
    assert f"reproduced {BM25}" not in beir.columns and "reproduced cotmae__tiny__20261121T110000" in beir.columns
    # shown, the small profile says what it is on the same screen (each grid tab)
    said = [w.value for w in at.warning if "NOT comparable with the papers" in w.value]
    assert len(said) == 3 and all("**tiny**" in w for w in said)


def test_paper_version_and_benchmark_filters(app):
    at = app()
    at.sidebar.multiselect(key="f_papers").set_value(["qc-v1"])
    at.sidebar.multiselect(key="f_benchmarks").set_value(["msmarco-dev"]).run()
    t1 = _frame(at, MRR)
    assert set(t1.loc[t1["paper"] != "-", "paper"]) == {"qc-v1"}
    assert "DL19 nDCG@10" not in t1.columns
    at.sidebar.checkbox(key="f_main_only").uncheck().run()
    assert not at.exception


def test_method_page_shows_stages_hardware_and_per_query_scores(app):
    at = app()
    at.selectbox(key="m_method").set_value("cotmae").run()
    assert at.selectbox(key="m_run").value == "cotmae__tiny__20261121T110000"  # newest first
    stages = _frame(at, "stage")
    assert list(stages["stage"]) == ["pretrain", "finetune", "index", "retrieve"]
    hw = _frame(at, "declared").set_index("")
    assert hw.loc["device", "actual"] == "cpu" and hw.loc["GPUs", "actual"] == "0"
    params = _frame(at, "parameter").set_index("parameter")["value"]
    assert params["pretrain.objective"] == "cotmae"
    ci = _frame(at, "queries")
    assert set(ci["benchmark"]) == {"nfcorpus", "scifact"}
    assert (ci["ci_low"].astype(float) < ci["ci_high"].astype(float)).all()  # shown as text, 2 decimals
    assert any("Not comparable with the papers: tiny" in w.value for w in at.warning)
    at.selectbox(key="m_dataset").set_value("scifact").run()
    assert "300 queries" in _text(at)
    assert any("papers leave unstated" in m.value and "1 layer" in m.value for m in at.markdown)


def test_gate_checks_and_skipped_tabs(page):
    at = page
    # The fixture folder holds three broken files: the gate fails on them (one UNREADABLE row each).
    assert any("gate FAILED" in s.value and "UNREADABLE 3" in s.value for s in at.error)
    gate = _frame(at, "expected")
    assert {"REFERENCE", "UNREADABLE"} <= set(gate["status"])
    findings = _frame(at, "kind")
    assert list(findings["kind"]) == ["bold_not_best", "column_shift"]
    skipped = _frame(at, "path").set_index("file")["reason"]
    assert "schema_version 2 is newer" in skipped["cotmae__tiny__20991231T000000.json"]
    assert skipped["corrupt__tiny__20261121T120000.json"].startswith("not valid JSON")


def test_empty_folder_and_broken_registry_do_not_crash(app, monkeypatch, tmp_path):
    (tmp_path / "records").mkdir()
    monkeypatch.setenv(lb_data.RECORDS_ENV, str(tmp_path / "records"))
    bad = tmp_path / "cells.json"
    bad.write_text("[1, 2]")
    monkeypatch.setenv(lb_data.REPORTED_ENV, str(bad))
    at = app()
    assert not at.exception
    text = _text(at)
    assert "No run records" in text and "Reported cells unavailable" in text
    assert "Every run record was read." in text


def test_only_broken_records_are_listed_not_fatal(app, monkeypatch, tmp_path):
    for name in ("corrupt__tiny__20261121T120000.json", "cotmae__tiny__20991231T000000.json"):
        shutil.copy(RUNS / name, tmp_path / name)
    monkeypatch.setenv(lb_data.RECORDS_ENV, str(tmp_path))
    at = app()
    assert not at.exception
    assert len(_frame(at, "path")) == 2 and "No run records" in _text(at)


def test_plots_tab_draws_the_four_charts(page):
    at = page
    assert at.selectbox(key="p_bench").value == "msmarco-dev"
    specs = [json.loads(c.proto.spec) for c in at.get("vega_lite_chart")]
    titles = {json.dumps(s["encoding"]["x"].get("title")) for s in specs if "encoding" in s}
    titles |= {json.dumps(layer["encoding"]["x"].get("title")) for s in specs for layer in s.get("layer", [])}
    assert len(specs) == 4
    assert {
        '"index size, GB (log)"',  # the axis with the most points on msmarco-dev (qps has one)
        '"reproduced - reported (points)"',
        '"retriever 1 (BM25 negatives), points"',
        '"per-query nDCG@10 (points)"',  # the histogram in points, as its caption
    } <= titles
    eff = _frame(at, "qps")
    assert set(eff["label"]) >= {"lexmae · BM25", BM25}
