"""The CI regression gate: passes on good records, fails on doctored ones, never crashes on broken ones."""

from __future__ import annotations

import argparse
import importlib
import json
import shutil
from pathlib import Path

import pytest

from harness.commands import check
from harness.gate import (TINY_TOLERANCE, choose_reference, format_gate, git_tracked, load_reported_cells,
                          reference_rows, run_gate, system_label)
from harness.paths import PROJECT_ROOT
from harness.records import load_records

FIXTURES = Path(__file__).parent / "fixtures" / "records"
RUNS = FIXTURES / "runs"
CELLS_JSON = FIXTURES / "reported_cells.json"
BM25 = "bm25__paper__20261121T203000.json"
REF = "cotmae__tiny__20261120T100000.json"
TINY = "cotmae__tiny__20261121T110000.json"


@pytest.fixture(scope="module")
def cells():
    loaded, error = load_reported_cells(CELLS_JSON)
    assert error is None
    return loaded


def _copy(tmp_path: Path, *names: str) -> Path:
    out = tmp_path / "records"
    out.mkdir()
    for name in names:
        shutil.copy(RUNS / name, out / name)
    return out


def _edit(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def _cli(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness")
    check.add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["check", *argv])
    return args.func(args)


def test_committed_style_fixtures_pass(cells):
    result = run_gate(RUNS, cells=cells, tracked=set())
    counts = result.counts()
    assert result.exit_code == 0 and result.passed
    assert "FAIL" not in counts and counts["NEAR"] == 2 and counts["REFERENCE"] == 1
    assert len(result.skipped) == 3 and result.n_records == 3
    tiny = [r for r in result.rows if r.run_id == TINY[:-5]]
    assert {r.status for r in tiny} == {"PASS"} and len(tiny) == 4
    assert all(abs(r.delta - 0.2) < 1e-6 and r.tolerance == TINY_TOLERANCE for r in tiny)
    text = format_gate(result)
    assert "gate PASSED" in text and "SKIPPED corrupt__tiny__20261121T120000.json" in text


def test_strict_fails_on_near_and_on_skipped_records(cells, tmp_path):
    assert run_gate(RUNS, cells=cells, strict=True, tracked=set()).exit_code == 1
    only_bm25 = _copy(tmp_path, BM25)
    result = run_gate(only_bm25, cells=cells, strict=True)
    assert result.exit_code == 1 and {r.status for r in result.failures()} == {"NEAR"}
    clean = tmp_path / "clean"
    clean.mkdir()
    for name in (REF, TINY):
        shutil.copy(RUNS / name, clean / name)
    assert run_gate(clean, strict=True).exit_code == 0
    (clean / "broken.json").write_text("{")
    assert run_gate(clean, strict=True).exit_code == 1
    assert run_gate(clean).exit_code == 0


def test_doctored_paper_record_fails_even_with_an_edited_comparison(cells, tmp_path):
    folder = _copy(tmp_path, BM25)

    def doctor(d):
        d["metrics"]["msmarco-dev"]["RR@10"] = 0.150  # 15.0 vs the papers' 18.7 / 18.5
        for c in d["comparison"]:
            c["status"] = "PASS"  # a stored verdict must not hide the gap

    _edit(folder / BM25, doctor)
    result = run_gate(folder, cells=cells)
    failed = [r for r in result.rows if r.status == "FAIL"]
    assert result.exit_code == 1
    assert {(r.benchmark, r.measure) for r in failed} == {("msmarco-dev", "RR@10")}
    assert {r.against.split(" ")[0] for r in failed} == {"qc-v1", "qc-v2", "lexmae"}
    assert all(r.delta < -3 for r in failed)


def test_doctored_tiny_record_fails_against_its_reference(tmp_path):
    folder = _copy(tmp_path, REF, TINY)
    _edit(folder / TINY, lambda d: d["metrics"]["scifact"].update({"nDCG@10": d["metrics"]["scifact"]["nDCG@10"] - 0.02}))
    result = run_gate(folder)
    bad = [r for r in result.rows if r.status == "FAIL"]
    assert result.exit_code == 1 and len(bad) == 1
    assert (bad[0].benchmark, bad[0].measure, bad[0].against) == ("scifact", "nDCG@10", "reference " + REF[:-5])
    assert bad[0].delta == pytest.approx(-1.8)


def test_tiny_near_passes_unless_strict(tmp_path):
    folder = _copy(tmp_path, REF, TINY)
    _edit(folder / TINY, lambda d: d["metrics"]["nfcorpus"].update({"R@100": d["metrics"]["nfcorpus"]["R@100"] - 0.0085}))
    assert {r.status for r in run_gate(folder).rows} >= {"NEAR", "PASS", "REFERENCE"}
    assert run_gate(folder).exit_code == 0 and run_gate(folder, strict=True).exit_code == 1


def test_reference_is_marked_else_newest_committed(tmp_path):
    folder = _copy(tmp_path, REF, TINY)
    _edit(folder / REF, lambda d: d.pop("reference"))
    records, _ = load_records(folder)
    assert choose_reference(records, set()) is None
    result = run_gate(folder, tracked=set())
    assert {r.status for r in result.rows} == {"NO-REFERENCE"} and result.exit_code == 0
    # Both committed: the newest committed is the reference and the older one is history.
    both = {p.resolve() for p in folder.iterdir()}
    assert choose_reference(records, both).run_id == TINY[:-5]
    statuses = {r.run_id: r.status for r in run_gate(folder, tracked=both).rows}
    assert statuses == {TINY[:-5]: "REFERENCE", REF[:-5]: "SUPERSEDED"}
    # Only the older one committed: the newer local run is gated against it.
    old = {(folder / REF).resolve()}
    rows = run_gate(folder, tracked=old).rows
    assert {r.status for r in rows if r.run_id == TINY[:-5]} == {"PASS"}


def test_changed_spec_is_not_comparable(tmp_path):
    folder = _copy(tmp_path, REF, TINY)
    _edit(folder / TINY, lambda d: d.update(spec_hash="0123456789abcdef"))
    records, _ = load_records(folder)
    rows = reference_rows(records[1], records[0])
    assert len(rows) == 1 and rows[0].status == "NOT-COMPARABLE" and "spec changed" in rows[0].note


def test_missing_dataset_is_not_comparable(tmp_path):
    folder = _copy(tmp_path, REF, TINY)
    _edit(folder / TINY, lambda d: d["metrics"].pop("nfcorpus"))
    rows = [r for r in run_gate(folder).rows if r.benchmark == "nfcorpus"]
    assert {r.status for r in rows} == {"NOT-COMPARABLE"} and "did not evaluate" in rows[0].note


def test_unloadable_registry_falls_back_to_stored_comparison(tmp_path):
    folder = _copy(tmp_path, BM25)
    bad = tmp_path / "cells.json"
    bad.write_text("{not json")
    result = run_gate(folder, reported=bad)
    assert result.warnings and "stored comparison" in result.warnings[0]
    assert {r.status for r in result.rows} >= {"PASS", "NEAR"} and result.exit_code == 0


def test_paper_record_without_cells_is_reported_not_failed(tmp_path):
    folder = _copy(tmp_path, BM25)
    result = run_gate(folder, cells=[])
    assert [r.status for r in result.rows] == ["NO-CELLS"] and result.exit_code == 0


def test_git_tracked_is_empty_outside_a_repository(tmp_path):
    assert git_tracked(tmp_path) == set()


def test_system_label_names_the_system_not_the_dataset(cells):
    beir = next(c for c in cells if c["table"] == "Table 3" and c["benchmark"] == "webis-touche2020")
    assert system_label(beir) == beir["column"]
    avg = next(c for c in cells if c["benchmark"] == "beir-avg12")
    assert system_label(avg) == avg["column"]
    t1 = next(c for c in cells if c["table"] == "Table 1")
    assert system_label(t1) == t1["row"]


def test_cli_prints_one_table_and_writes_json(tmp_path, capsys):
    out = tmp_path / "gate.json"
    code = _cli("--records", str(RUNS), "--reported", str(CELLS_JSON), "--json", str(out))
    printed = capsys.readouterr().out
    assert code == 0 and printed.count("status  ") == 1 and "gate PASSED" in printed
    payload = json.loads(out.read_text())
    assert payload["passed"] and payload["exit_code"] == 0 and len(payload["skipped"]) == 3
    assert {r["status"] for r in payload["rows"]} >= {"PASS", "NEAR", "REFERENCE"}
    assert _cli("--records", str(RUNS), "--reported", str(CELLS_JSON), "--strict") == 1


def test_cli_fails_on_doctored_record(tmp_path, capsys):
    folder = _copy(tmp_path, REF, TINY)
    _edit(folder / TINY, lambda d: d["metrics"]["scifact"].update({"R@100": 0.1}))
    assert _cli("--records", str(folder)) == 1
    assert "gate FAILED" in capsys.readouterr().out


def test_cli_with_no_records_passes(tmp_path, capsys):
    assert _cli("--records", str(tmp_path / "none")) == 0
    assert "no run records" in capsys.readouterr().out


def test_real_committed_records_pass(capsys):
    """The records committed under runs/records/ must pass the gate (CI runs exactly this)."""
    assert _cli("--records", str(PROJECT_ROOT / "runs" / "records")) == 0, capsys.readouterr().out


def test_a_record_that_cannot_be_compared_is_skipped_not_fatal(cells, tmp_path, monkeypatch):
    compare_mod = importlib.import_module("harness.evaluation.compare")

    def boom(*_a, **_k):
        raise ZeroDivisionError("odd record")

    monkeypatch.setattr(compare_mod, "compare", boom)
    folder = _copy(tmp_path, BM25, REF, TINY)
    result = run_gate(folder, cells=cells)
    assert result.n_records == 2 and [s.path.name for s in result.skipped] == [BM25]
    assert "could not be compared with the papers: ZeroDivisionError" in result.skipped[0].reason
    assert result.exit_code == 0 and run_gate(folder, cells=cells, strict=True).exit_code == 1


def test_system_axes_from_whole_tables(cells):
    from harness.gate import system_axes

    axes = system_axes(cells)
    assert axes[("lexmae", "Table 3")] == "columns" and axes[("qc-v2", "Table 2")] == "columns"
    assert axes[("qc-v1", "Table 1")] == "rows" and axes[("lexmae", "Table 4")] == "rows"
    odd = {"paper": "lexmae", "table": "Table 3", "row": "In-Domain", "column": "BM25", "benchmark": "msmarco-dev"}
    assert system_label(odd, axes) == "BM25" and system_label(odd) == "In-Domain"  # the guess alone is fooled
