"""The CI regression gate: passes on good records, fails on doctored ones, never crashes on broken ones."""

from __future__ import annotations

import argparse
import importlib
import json
import shutil
from pathlib import Path

import pytest

from harness.commands import check
from harness.core.errors import HarnessError
from harness.core.paths import PROJECT_ROOT
from harness.gate.grading import CROSS_MACHINE_TOLERANCE, TINY_TOLERANCE, reference_rows
from harness.gate.labels import system_label
from harness.gate.references import accept_reference
from harness.gate.run import format_gate, run_gate
from harness.papers.registry import load_reported_cells
from harness.records.integrity import seal
from harness.records.store import load_records, load_references

FIXTURES = Path(__file__).parent / "fixtures" / "records"
RUNS = FIXTURES / "runs"
CELLS_JSON = FIXTURES / "reported_cells.json"
BM25 = "bm25__paper__20261121T203000.json"
REF = "cotmae__tiny__20261120T100000.json"
TINY = "cotmae__tiny__20261121T110000.json"
# The fixture folder's three broken files (make_fixtures.py): truncated JSON, a newer schema, a partial record.
BROKEN = {
    "corrupt__tiny__20261121T120000.json": "not valid JSON",
    "cotmae__tiny__20991231T000000.json": "schema_version 2 is newer",
    "bm25__paper__20261121T190000.json": "missing required key 'metrics'",
}


@pytest.fixture(scope="module")
def cells():
    loaded, error = load_reported_cells(CELLS_JSON)
    assert error is None
    return loaded


def _copy(tmp_path: Path, *names: str, references: bool | None = None) -> Path:
    """A records folder with ``names``; references.json comes along when asked (default: with REF)."""
    out = tmp_path / "records"
    out.mkdir()
    for name in names:
        shutil.copy(RUNS / name, out / name)
    if references or (references is None and REF in names):
        shutil.copy(RUNS / "references.json", out / "references.json")
    return out


def _edit(path: Path, change, reseal: bool = False) -> None:
    """Change a record; ``reseal`` makes it look as written by a run (else it is a doctored file)."""
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(seal(data) if reseal else data))


def _shift(data: dict, dataset: str, measure: str, delta: float) -> None:
    """What a run with other numbers writes: every per-query score and the aggregate move together."""
    scores = data["per_query"][dataset][measure]
    for qid in scores:
        scores[qid] += delta
    data["metrics"][dataset][measure] = sum(scores.values()) / len(scores)


def _cli(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness")
    check.add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["check", *argv])
    return args.func(args)


def test_committed_style_fixtures_pass(cells, tmp_path):
    result = run_gate(_copy(tmp_path, BM25, REF, TINY), cells=cells)
    counts = result.counts()
    assert result.exit_code == 0 and result.passed
    assert "FAIL" not in counts and counts["REPRODUCED"] == 5 and counts["REFERENCE"] == 1
    assert not result.skipped and result.n_records == 3
    tiny = [r for r in result.rows if r.run_id == TINY[:-5]]
    assert {r.status for r in tiny} == {"PASS"} and len(tiny) == 4
    assert all(abs(r.delta - 0.2) < 1e-6 and r.tolerance == TINY_TOLERANCE for r in tiny)
    assert not [r for r in result.rows if r.status == "CORRUPT"]
    assert "gate PASSED" in format_gate(result)


def test_fixture_folder_with_its_broken_files_fails_one_row_each(cells):
    """The same good records beside a truncated, a future-version and a partial file: plain
    `check` (what CI runs) fails, one UNREADABLE row per file naming it and why."""
    result = run_gate(RUNS, cells=cells)
    unreadable = {r.note.split(":")[0]: r.note for r in result.rows if r.status == "UNREADABLE"}
    assert result.exit_code == 1 and set(unreadable) == set(BROKEN)
    assert all(why in unreadable[name] for name, why in BROKEN.items())
    assert len(result.skipped) == 3 and result.n_records == 3 and result.counts()["REPRODUCED"] == 5
    text = format_gate(result)
    assert "gate FAILED (3 failing row(s))" in text and "SKIPPED" not in text
    assert sum(name in line for line in text.splitlines() for name in BROKEN) == 3  # one line each


def test_strict_fails_on_records_without_a_reference_and_unfinished_writes(cells, tmp_path):
    assert run_gate(RUNS, cells=cells, strict=True).exit_code == 1
    only_bm25 = _copy(tmp_path, BM25, references=False)
    result = run_gate(only_bm25, cells=cells, strict=True)
    assert result.exit_code == 0 and not result.failures()  # its paper cells reproduce: nothing to fail on
    clean = tmp_path / "clean"
    clean.mkdir()
    for name in (REF, TINY, "references.json"):
        shutil.copy(RUNS / name, clean / name)
    assert run_gate(clean, strict=True).exit_code == 0
    (clean / "x.json.tmp").write_text("{")
    assert run_gate(clean).exit_code == 0 and run_gate(clean, strict=True).exit_code == 1
    (clean / "broken.json").write_text("{")  # not a temp file: fails without --strict too
    assert run_gate(clean).exit_code == 1


def test_doctored_paper_record_fails_even_with_an_edited_comparison(cells, tmp_path):
    folder = _copy(tmp_path, BM25)

    def doctor(d):
        _shift(d, "scifact", "nDCG@10", 0.600 - d["metrics"]["scifact"]["nDCG@10"])  # 60.0 vs 66.5
        for c in d["comparison"]:
            c["status"] = "REPRODUCED"  # a stored verdict must not hide the gap

    _edit(folder / BM25, doctor, reseal=True)
    result = run_gate(folder, cells=cells)
    failed = [r for r in result.rows if r.status == "DIFFERENT-BELOW"]
    assert result.exit_code == 1
    assert {(r.benchmark, r.measure) for r in failed} == {("scifact", "nDCG@10")}
    assert {r.against.split(",")[0] for r in failed} == {"Shen et al. 2023 (LexMAE)"}
    assert all(r.delta < -3 for r in failed)


def test_changed_tiny_number_fails_against_its_reference(tmp_path):
    folder = _copy(tmp_path, REF, TINY)
    _edit(folder / TINY, lambda d: _shift(d, "scifact", "nDCG@10", -0.02), reseal=True)
    result = run_gate(folder)
    bad = [r for r in result.rows if r.status == "FAIL"]
    assert result.exit_code == 1 and len(bad) == 1
    assert (bad[0].benchmark, bad[0].measure, bad[0].against) == (
        "scifact",
        "nDCG@10",
        "reference " + REF[:-5] + " (fp32)",
    )
    assert bad[0].delta == pytest.approx(-1.8)


def test_a_failed_row_names_how_the_machines_differ(tmp_path):
    """Training is bit-identical only on one CPU model and thread count: a FAIL says where they differ."""

    def cpu(model: str, threads: int):
        def edit(d):
            d.setdefault("hardware", {}).setdefault("detected", {}).update(
                cpu_model=model, cpu_features=["avx2"], torch_threads=threads, torch_cpu_capability="AVX2"
            )

        return edit

    folder = _copy(tmp_path, REF, TINY)
    _edit(folder / REF, cpu("Xeon A (6/143/8)", 2), reseal=True)
    accept_reference(REF[:-5], folder)  # the reference as recorded on machine A
    # 10 points: beyond even the cross-machine tolerance (a 2-point move across machines passes there)
    _edit(folder / TINY, lambda d: (cpu("Xeon B (6/207/2)", 4)(d), _shift(d, "scifact", "nDCG@10", -0.10)), reseal=True)
    bad = [r for r in run_gate(folder).rows if r.status == "FAIL"]
    assert len(bad) == 1 and "another machine than the reference's" in bad[0].note
    assert "cpu_model 'Xeon A (6/143/8)' -> 'Xeon B (6/207/2)'" in bad[0].note and "torch_threads 2 -> 4" in bad[0].note
    assert bad[0].tolerance == CROSS_MACHINE_TOLERANCE and "cross-machine tolerance" in bad[0].note
    # on the reference's own machine a 2-point move fails at the tighter tolerance
    _edit(folder / TINY, lambda d: (cpu("Xeon A (6/143/8)", 2)(d), _shift(d, "scifact", "nDCG@10", 0.05)), reseal=True)
    rows = [r for r in run_gate(folder).rows if (r.benchmark, r.measure) == ("scifact", "nDCG@10") and r.tolerance]
    assert rows[0].status == "FAIL" and rows[0].tolerance == TINY_TOLERANCE


def test_tiny_near_passes_unless_strict(tmp_path):
    folder = _copy(tmp_path, REF, TINY)
    _edit(folder / TINY, lambda d: _shift(d, "nfcorpus", "R@100", -0.0085), reseal=True)
    assert {r.status for r in run_gate(folder).rows} >= {"NEAR", "PASS", "REFERENCE"}
    assert run_gate(folder).exit_code == 0 and run_gate(folder, strict=True).exit_code == 1


def test_reference_comes_from_the_manifest_only(tmp_path):
    folder = _copy(tmp_path, REF, TINY, references=False)
    result = run_gate(folder)
    assert {r.status for r in result.rows} == {"NO-REFERENCE"} and result.exit_code == 0
    assert run_gate(folder, strict=True).exit_code == 1  # strict: an ungated record fails
    assert "--accept" in result.rows[0].note
    # Accepting the newer run makes it the reference; the older one is history.
    path, entry = accept_reference(TINY[:-5], folder)
    assert load_references(folder)[("cotmae", "tiny")]["run_id"] == TINY[:-5] == entry["run_id"]
    statuses = {r.run_id: r.status for r in run_gate(folder).rows}
    assert statuses == {TINY[:-5]: "REFERENCE", REF[:-5]: "SUPERSEDED"}
    # Accepting the older one gates the newer run against it.
    accept_reference(REF[:-5], folder)
    assert {r.status for r in run_gate(folder).rows if r.run_id == TINY[:-5]} == {"PASS"}


def test_missing_reference_record_fails(tmp_path):
    folder = _copy(tmp_path, TINY, references=True)  # references.json names REF, which is not here
    result = run_gate(folder)
    missing = [r for r in result.rows if r.status == "MISSING"]
    assert result.exit_code == 1 and len(missing) == 1 and missing[0].run_id == REF[:-5]
    assert "cotmae [tiny] reference" in missing[0].note


def test_record_of_an_unknown_method_is_reported_and_fails_strict(tmp_path):
    folder = _copy(tmp_path, REF, TINY)
    shutil.copy(folder / TINY, folder / "foo__tiny__20261121T110000.json")
    _edit(
        folder / "foo__tiny__20261121T110000.json",
        lambda d: d.update(method="foo", run_id="foo__tiny__20261121T110000", spec={**d["spec"], "name": "foo"}),
        reseal=True,
    )
    result = run_gate(folder)
    unknown = [r for r in result.rows if r.status == "UNKNOWN-METHOD"]
    assert len(unknown) == 1 and "no method spec named 'foo'" in unknown[0].note
    assert result.exit_code == 0 and run_gate(folder, strict=True).exit_code == 1


@pytest.mark.parametrize(
    "doctor, part",
    [
        (
            lambda d: d["metrics"]["scifact"].update({"nDCG@10": d["metrics"]["scifact"]["nDCG@10"] + 1e-6}),
            "metrics/scifact/nDCG@10 was edited",
        ),
        (
            lambda d: d["per_query"]["nfcorpus"]["R@100"].update(
                {next(iter(d["per_query"]["nfcorpus"]["R@100"])): 0.5}
            ),
            "per_query/nfcorpus/R@100 was edited",
        ),
        (lambda d: d.update(seconds=1.0), "seconds was edited"),
        (lambda d: d.pop("integrity"), "unsealed"),
        (lambda d: d.update(integrity={**d["integrity"], "sha256": "0" * 64}), "content hash mismatch"),
    ],
)
def test_doctored_record_is_corrupt_naming_what_changed(tmp_path, doctor, part):
    folder = _copy(tmp_path, REF, TINY)
    _edit(folder / TINY, doctor)
    result = run_gate(folder)
    corrupt = [r for r in result.rows if r.status == "CORRUPT"]
    assert result.exit_code == 1 and corrupt and corrupt[0].run_id == TINY[:-5]
    assert any(part in r.note and TINY in r.note for r in corrupt), [r.note for r in corrupt]
    assert not [r for r in result.rows if r.run_id == TINY[:-5] and r.status == "PASS"]  # never used


def test_resealed_aggregate_that_disagrees_with_its_per_query_scores_is_corrupt(tmp_path):
    folder = _copy(tmp_path, REF, TINY)
    _edit(folder / TINY, lambda d: d["metrics"]["scifact"].update({"R@100": 0.9}), reseal=True)
    notes = [r.note for r in run_gate(folder).rows if r.status == "CORRUPT"]
    assert len(notes) == 1 and "metrics/scifact/R@100 = 0.900000 but the mean of its 300 per-query scores" in notes[0]


def test_reference_resealed_after_an_edit_is_corrupt(tmp_path):
    folder = _copy(tmp_path, REF, TINY)
    _edit(folder / REF, lambda d: _shift(d, "scifact", "nDCG@10", 0.01), reseal=True)
    result = run_gate(folder)
    assert result.exit_code == 1
    assert any(r.status == "CORRUPT" and "differs from the record accepted" in r.note for r in result.rows)


def test_fresh_rerun_is_gated_against_the_committed_reference(tmp_path):
    committed = _copy(tmp_path, REF)
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    shutil.copy(RUNS / TINY, fresh / TINY)  # a re-run 0.2 points above the reference
    passing = run_gate(fresh, strict=True, references_from=committed, tiny_tolerance=3.0)
    assert passing.exit_code == 0 and {r.status for r in passing.rows} == {"PASS"}
    assert {r.against for r in passing.rows} == {"reference " + REF[:-5] + " (fp32)"}
    _edit(fresh / TINY, lambda d: _shift(d, "nfcorpus", "nDCG@10", -0.05), reseal=True)
    failing = run_gate(fresh, strict=True, references_from=committed, tiny_tolerance=3.0)
    bad = [r for r in failing.rows if r.status == "FAIL"]
    assert failing.exit_code == 1 and [(r.method, r.benchmark, r.measure) for r in bad] == [
        ("cotmae", "nfcorpus", "nDCG@10")
    ]
    assert not [r for r in failing.rows if r.status == "MISSING"]  # the scratch folder expects no references


def test_accept_refuses_doctored_and_unsealed_records(tmp_path):
    folder = _copy(tmp_path, REF, TINY, references=False)
    _edit(folder / TINY, lambda d: d["metrics"]["scifact"].update({"R@100": 0.9}))
    with pytest.raises(HarnessError, match="cannot be accepted"):
        accept_reference(TINY[:-5], folder)
    # Unsealed but consistent: it used to be sealed on accept; a seal removed cannot be told
    # from one never written, so it is refused and left as it was.
    _edit(folder / REF, lambda d: d.pop("integrity"))
    before = (folder / REF).read_text()
    with pytest.raises(HarnessError, match="not sealed"):
        accept_reference(REF[:-5], folder)
    assert (folder / REF).read_text() == before and not (folder / "references.json").exists()
    with pytest.raises(HarnessError, match="Did you mean"):
        accept_reference(REF[:-6], folder)


def test_a_rerun_trained_in_another_precision_is_not_compared(tmp_path):
    """bf16 and fp32 are different conditions: a re-run whose stage fell back to fp32 (no native bf16
    here) is NOT-COMPARABLE with a bf16 reference, naming the stage, never PASS or FAIL."""

    def precision(value: str):
        def edit(d):
            for entry in d["stages"]:
                if entry["stage"] == "pretrain":
                    entry.setdefault("output", {})["precision"] = value

        return edit

    folder = _copy(tmp_path, REF, TINY)
    _edit(folder / REF, precision("bf16"), reseal=True)
    _edit(folder / TINY, lambda d: (precision("fp32")(d), _shift(d, "scifact", "nDCG@10", -0.02)), reseal=True)
    records, _ = load_records(folder)
    rows = reference_rows(records[1], records[0])
    assert [r.status for r in rows] == ["NOT-COMPARABLE"] and "pretrain bf16 -> fp32" in rows[0].note
    _edit(folder / TINY, precision("bf16"), reseal=True)
    records, _ = load_records(folder)
    assert "FAIL" in {r.status for r in reference_rows(records[1], records[0])}  # same precision: compared


def test_changed_spec_makes_the_reference_stale(tmp_path):
    folder = _copy(tmp_path, REF, TINY)
    _edit(folder / TINY, lambda d: d["spec"].update(pretrain={**d["spec"].get("pretrain", {}), "steps": 7}))
    records, _ = load_records(folder)
    rows = reference_rows(records[1], records[0])
    assert len(rows) == 1 and rows[0].status == "STALE-REFERENCE" and "spec settings changed" in rows[0].note
    # a documentation key (notes, deviations) is not a setting: the reference stays valid
    _edit(folder / TINY, lambda d: d["spec"].update(pretrain=records[0].spec.get("pretrain"), notes="edited"))
    records, _ = load_records(folder)
    assert reference_rows(records[1], records[0])[0].status != "STALE-REFERENCE"
    assert "--accept" in rows[0].note


def test_missing_dataset_is_not_comparable(tmp_path):
    folder = _copy(tmp_path, REF, TINY)
    _edit(folder / TINY, lambda d: (d["metrics"].pop("nfcorpus"), d["per_query"].pop("nfcorpus")), reseal=True)
    rows = [r for r in run_gate(folder).rows if r.benchmark == "nfcorpus"]
    assert {r.status for r in rows} == {"NOT-COMPARABLE"} and "did not evaluate" in rows[0].note


@pytest.mark.parametrize("text", ["{not json", '{"cells": "not a list"}'])
def test_an_unloadable_reported_file_fails_the_gate_naming_it(tmp_path, text):
    """Paper records are gated against the papers' cells: without them the gate cannot pass (it still
    shows each record's stored comparison)."""
    folder = _copy(tmp_path, BM25)
    bad = tmp_path / "cells.json"
    bad.write_text(text)
    result = run_gate(folder, reported=bad)
    unreadable = [r for r in result.rows if r.status == "UNREADABLE"]
    assert result.exit_code == 1 and len(unreadable) == 1 and str(bad) in unreadable[0].run_id
    assert {r.status for r in result.rows} >= {"REPRODUCED", "NOT-COMPARABLE"}


def test_paper_record_without_cells_is_reported_not_failed(tmp_path):
    folder = _copy(tmp_path, BM25)
    result = run_gate(folder, cells=[])
    assert [r.status for r in result.rows] == ["NO-CELLS"] and result.exit_code == 0


def test_system_label_names_the_system_not_the_dataset(cells):
    beir = next(c for c in cells if c["table"] == "Table 3" and c["benchmark"] == "webis-touche2020")
    assert system_label(beir) == beir["column"]
    avg = next(c for c in cells if c["benchmark"] == "beir-avg12")
    assert system_label(avg) == avg["column"]
    t1 = next(c for c in cells if c["table"] == "Table 1")
    assert system_label(t1) == t1["row"]


def test_cli_prints_one_table_and_writes_json(tmp_path, capsys):
    out = tmp_path / "gate.json"
    folder = _copy(tmp_path, BM25, REF, TINY)
    code = _cli("--records", str(folder), "--reported", str(CELLS_JSON), "--json", str(out), "--all")
    printed = capsys.readouterr().out
    assert code == 0 and printed.count("status  ") == 1 and "gate PASSED" in printed
    # without --all: the verdict first, and no table when nothing fails
    assert _cli("--records", str(folder), "--reported", str(CELLS_JSON)) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("gate PASSED: ") and "status  " not in printed
    payload = json.loads(out.read_text())
    assert payload["passed"] and payload["exit_code"] == 0 and payload["skipped"] == []
    assert {r["status"] for r in payload["rows"]} >= {"PASS", "REPRODUCED", "REFERENCE"}
    assert _cli("--records", str(folder), "--reported", str(CELLS_JSON), "--strict") == 0
    # The fixture folder with its broken files: failing, and the JSON names each of them.
    assert _cli("--records", str(RUNS), "--reported", str(CELLS_JSON), "--json", str(out)) == 1
    payload = json.loads(out.read_text())
    assert not payload["passed"] and {Path(s["path"]).name for s in payload["skipped"]} == set(BROKEN)
    assert payload["counts"]["UNREADABLE"] == 3


def test_cli_fails_on_doctored_record(tmp_path, capsys):
    folder = _copy(tmp_path, REF, TINY)
    _edit(folder / TINY, lambda d: d["metrics"]["scifact"].update({"R@100": 0.1}))
    assert _cli("--records", str(folder)) == 1
    assert "gate FAILED" in capsys.readouterr().out


def test_cli_with_an_empty_records_folder_passes_and_a_missing_one_fails(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert _cli("--records", str(tmp_path / "empty")) == 0
    assert "no run records" in capsys.readouterr().out
    with pytest.raises(HarnessError, match="no such folder"):  # a mistyped folder must not pass unchecked
        _cli("--records", str(tmp_path / "none"))


def test_links_that_cannot_be_followed_are_unreadable_and_fail_the_gate(tmp_path, capsys):
    """A symlink loop, a link to nothing and a folder named like a record were skipped without a word
    (``is_file()`` is False for each) and the gate passed; each is now one UNREADABLE row naming it."""
    folder = _copy(tmp_path, REF, TINY)
    assert _cli("--records", str(folder)) == 0
    (folder / "loop.json").symlink_to("loop.json")
    (folder / "gone.json").symlink_to(tmp_path / "nowhere.json")
    (folder / "folder.json").mkdir()
    (folder / "fine.json").symlink_to(folder / TINY)  # a link to a record is read (a duplicate run_id here)
    capsys.readouterr()
    assert _cli("--records", str(folder)) == 1
    out = capsys.readouterr().out
    assert "gate FAILED" in out
    result = run_gate(folder)
    notes = {r.note.split(":")[0]: r.note for r in result.rows if r.status == "UNREADABLE"}
    assert set(notes) == {"loop.json", "gone.json", "folder.json", "fine.json"}, notes
    assert "symbolic link loop" in notes["loop.json"] and "symbolic link to nothing" in notes["gone.json"]
    assert "not a file" in notes["folder.json"] and "duplicate run_id" in notes["fine.json"]


def test_real_committed_records_pass(capsys):
    """The records committed under runs/records/ must pass the gate (CI runs exactly this)."""
    assert _cli("--records", str(PROJECT_ROOT / "runs" / "records")) == 0, capsys.readouterr().out


def test_a_record_that_cannot_be_compared_fails_but_does_not_stop_the_gate(cells, tmp_path, monkeypatch):
    grading = importlib.import_module("harness.gate.grading")  # patched where the gate calls it

    def boom(*_a, **_k):
        raise ZeroDivisionError("odd record")

    monkeypatch.setattr(grading, "compare", boom)
    folder = _copy(tmp_path, BM25, REF, TINY)
    result = run_gate(folder, cells=cells)
    assert result.n_records == 2 and [s.path.name for s in result.skipped] == [BM25]
    assert "could not be compared with the papers: ZeroDivisionError" in result.skipped[0].reason
    errors = [r for r in result.rows if r.status == "ERROR"]
    assert len(errors) == 1 and errors[0].note.startswith(BM25 + ": could not be compared")
    assert result.exit_code == 1  # nothing vouched for it: not a pass
    assert {r.status for r in result.rows if r.run_id == TINY[:-5]} == {"PASS"}  # the others were gated


def test_system_axes_from_whole_tables(cells):
    from harness.gate.labels import system_axes

    axes = system_axes(cells)
    assert axes[("lexmae", "Table 3")] == "columns" and axes[("qc-v2", "Table 2")] == "columns"
    assert axes[("qc-v1", "Table 1")] == "rows" and axes[("lexmae", "Table 4")] == "rows"
    odd = {"paper": "lexmae", "table": "Table 3", "row": "In-Domain", "column": "BM25", "benchmark": "msmarco-dev"}
    assert system_label(odd, axes) == "BM25" and system_label(odd) == "In-Domain"  # the guess alone is fooled


def test_pretraining_loss_of_a_run_is_gated_against_the_reference(tmp_path):
    """Tiny metrics swing with float rounding; the pre-training loss is the stable regression signal."""
    folder = _copy(tmp_path, REF, TINY)

    def with_loss(last):
        return lambda d: d["stages"].append(
            {
                "stage": "pretrain",
                "dataset": None,
                "cached": False,
                "seconds": 1.0,
                "output": {"loss_first10": 17.6, "loss_last10": last},
            }
        )

    _edit(folder / REF, with_loss(8.70), reseal=True)
    accept_reference(REF[:-5], folder)  # the reference changed on purpose: accepted again
    _edit(folder / TINY, with_loss(8.73), reseal=True)  # +0.34%: float noise between machines
    rows = [r for r in run_gate(folder).rows if r.benchmark == "pretrain (loss)"]
    assert {(r.measure, r.status) for r in rows} == {("loss_first10", "PASS"), ("loss_last10", "PASS")}
    _edit(folder / TINY, lambda d: d["stages"][-1]["output"].update(loss_last10=9.2), reseal=True)  # +5.7%
    result = run_gate(folder)
    bad = [r for r in result.rows if r.status == "FAIL"]
    assert result.exit_code == 1 and [(r.method, r.benchmark, r.measure) for r in bad] == [
        ("cotmae", "pretrain (loss)", "loss_last10")
    ]
    assert bad[0].delta == pytest.approx(100 * (9.2 - 8.7) / 8.7)


def test_a_training_stage_that_left_its_weights_where_they_started_fails_the_gate(tmp_path):
    """A stage whose every step took lr 0 (or had no gradient) trained nothing: its record is UNTRAINED,
    whatever its numbers; a record from before the field is not held to it."""
    folder = _copy(tmp_path, REF, TINY)

    def with_stage(stage, moved):
        change = {"relative": moved, "max_abs": moved, "parameters": 1000, "since_step": 0, "steps": 1}
        return lambda d: d["stages"].append(
            {
                "stage": stage,
                "dataset": None,
                "cached": False,
                "seconds": 1.0,
                "output": {"loss_first": 2.0, "weight_change": change},
            }
        )

    assert run_gate(folder).passed  # neither record states a weight change
    _edit(folder / TINY, with_stage("retriever1", 3e-4), reseal=True)
    assert run_gate(folder).passed
    _edit(folder / TINY, with_stage("retriever2", 0.0), reseal=True)
    result = run_gate(folder)
    bad = [r for r in result.rows if r.status == "UNTRAINED"]
    assert result.exit_code == 1 and [(r.run_id, r.benchmark) for r in bad] == [(TINY[:-5], "retriever2")]
    assert "left all 1000 trainable weights where they started" in bad[0].note
    assert "UNTRAINED" in format_gate(result)


def test_one_stage_record_is_verified_against_its_single_per_query_block():
    """The runner's one-stage layout (BM25): metrics_by_stage has one stage and its per-query scores
    live under per_query only; an aggregate that disagrees with them is still caught."""
    from harness.records.integrity import aggregate_problems

    record = json.loads((RUNS / BM25).read_text())
    record["metrics_by_stage"] = {"bm25": json.loads(json.dumps(record["metrics"]))}
    record["per_query_by_stage"] = {}
    record.pop("finetune_stage", None)
    assert aggregate_problems(record) == []
    dataset = next(iter(record["metrics"]))
    measure = next(iter(record["metrics"][dataset]))
    record["metrics_by_stage"]["bm25"][dataset][measure] += 0.01
    assert [p.split(" =")[0] for p in aggregate_problems(record)] == [f"metrics_by_stage/bm25/{dataset}/{measure}"]


def test_bm25_rerun_is_gated_against_the_papers_and_exactly_against_its_reference(cells, tmp_path):
    """A BM25 change the papers' 1-point tolerance would pass (e.g. b 0.4 -> 0.75 moves SciFact
    by +0.81) fails against the accepted BM25 reference, which a training-free method must match
    to float printing (TRAINING_FREE_TOLERANCE)."""
    from harness.gate.grading import TRAINING_FREE_TOLERANCE

    committed = _copy(tmp_path, BM25, references=False)
    accept_reference(BM25[:-5], committed)
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    rerun = "bm25__paper__20261123T080000-abcdef"

    def as_rerun(d: dict) -> None:
        d.update(run_id=rerun, created="2026-11-23T08:00:00Z")

    shutil.copy(RUNS / BM25, fresh / f"{rerun}.json")
    _edit(fresh / f"{rerun}.json", as_rerun, reseal=True)
    same = run_gate(fresh, references_from=committed, cells=cells, tiny_tolerance=3.0)  # fixture has NEAR cells
    against_ref = [r for r in same.rows if r.against.startswith("reference")]
    assert same.exit_code == 0 and against_ref and {r.status for r in against_ref} == {"PASS"}
    assert {r.tolerance for r in against_ref} == {TRAINING_FREE_TOLERANCE}

    _edit(fresh / f"{rerun}.json", lambda d: _shift(d, "scifact", "nDCG@10", 0.008), reseal=True)
    moved = run_gate(fresh, references_from=committed, cells=cells, tiny_tolerance=3.0)
    paper = [
        r
        for r in moved.rows
        if r.benchmark == "scifact" and r.measure == "nDCG@10" and not r.against.startswith("reference")
    ]
    bad = [r for r in moved.rows if r.status == "FAIL"]
    assert paper and paper[0].status == "REPRODUCED"  # within the papers' tolerance ...
    assert moved.exit_code == 1 and [(r.method, r.benchmark, r.measure) for r in bad] == [
        ("bm25", "scifact", "nDCG@10")
    ]  # ... but not the reference's


# ----------------------------------------------------------------------------- issue 25: no silent pass


def _main(*argv: str) -> int:
    """`python -m harness check ...` through the real entry point (exit 2 and one line on HarnessError)."""
    from harness.cli import main

    return main(["check", *argv])


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    return lines[0]


def _good_text() -> str:
    return (RUNS / TINY).read_text()


NEW = "cotmae__tiny__20261122T090000.json"  # a third run of the fixture folder's method and profile


@pytest.mark.parametrize(
    "content, why",
    [
        (lambda: _good_text()[: len(_good_text()) // 2], "not valid JSON"),  # a write cut short
        (lambda: "", "empty file"),
        (lambda: "\x00\x17garbage", "not valid JSON"),
        (lambda: b'\xff\xfe{"run_id": 1}', "cannot be read"),  # not UTF-8
        (
            lambda: json.dumps(
                {k: v for k, v in json.loads(_good_text()).items() if k != "per_query" and k != "metrics"}
            ),
            "missing required key 'metrics'",
        ),  # a partial record
        (lambda: json.dumps({**json.loads(_good_text()), "schema_version": 99}), "schema_version 99 is newer"),
        (lambda: _good_text(), "duplicate run_id"),  # the same run_id as TINY under another name
    ],
    ids=["truncated", "empty", "garbage", "not-utf8", "partial", "future-version", "duplicate"],
)
def test_unreadable_record_fails_plain_check_with_one_row_naming_it(tmp_path, capsys, content, why):
    folder = _copy(tmp_path, REF, TINY)
    text = content()
    (folder / NEW).write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    result = run_gate(folder)
    bad = [r for r in result.rows if r.status == "UNREADABLE"]
    assert result.exit_code == 1 and len(bad) == 1 and result.failures() == bad
    assert bad[0].note.startswith(NEW + ": ") and why in bad[0].note, bad[0].note
    assert {r.status for r in result.rows if r.run_id == TINY[:-5]} == {"PASS"}  # the rest is still gated
    assert _cli("--records", str(folder)) == 1
    out = capsys.readouterr().out
    assert "gate FAILED (1 failing row(s))" in out and sum(NEW in line for line in out.splitlines()) == 1


def test_records_being_written_are_ignored_not_read(tmp_path):
    """atomic_path's temp file (".<name>.<random>.tmp.json") is never read: half a record is not
    UNREADABLE, and a whole one about to be renamed does not shadow the record it becomes."""
    from harness.core.fsutil import atomic_path

    folder = _copy(tmp_path, REF)
    with atomic_path(folder / TINY) as tmp:
        assert tmp.name.startswith(f".{TINY}.") and tmp.name.endswith(".tmp.json")  # what the writer makes
        tmp.write_text(_good_text()[:1000])
        half = run_gate(folder)
        tmp.write_text(_good_text())
        whole = run_gate(folder)
    (folder / "old-writer.json.tmp").write_text("{")
    for result in (half, whole):
        rows = [r for r in result.rows if r.status == "IN-PROGRESS"]
        assert result.exit_code == 0 and len(rows) == 1 and rows[0].note.startswith(tmp.name + ": unfinished write")
        assert not [r for r in result.rows if r.run_id == TINY[:-5]]  # neither read nor gated
    after = run_gate(folder)
    assert {r.status for r in after.rows if r.run_id == TINY[:-5]} == {"PASS"}  # renamed into place: gated
    assert [r.status for r in after.rows if r.note.startswith("old-writer")] == ["IN-PROGRESS"]
    assert after.exit_code == 0 and run_gate(folder, strict=True).exit_code == 1


@pytest.mark.parametrize(
    "key, name, theirs",
    [
        ("cotmae/paper", BM25, "bm25 [paper]"),  # another method
        ("cotmae/mini", REF, "cotmae [tiny]"),  # another profile
    ],
)
def test_reference_entry_naming_a_record_of_another_method_or_profile_fails(tmp_path, key, name, theirs):
    folder = _copy(tmp_path, BM25, REF, TINY)
    manifest = json.loads((folder / "references.json").read_text())
    sha = json.loads((folder / name).read_text())["integrity"]["sha256"]
    manifest["references"][key] = {"run_id": name[:-5], "sha256": sha, "accepted": "2026-11-22T00:00:00Z"}
    (folder / "references.json").write_text(json.dumps(manifest))
    result = run_gate(folder, cells=[])
    wrong = [r for r in result.rows if r.status == "WRONG-REFERENCE"]
    assert result.exit_code == 1 and len(wrong) == 1
    assert wrong[0].run_id == name[:-5] and (wrong[0].method, wrong[0].profile) == tuple(key.split("/"))
    assert f"references.json: '{key}' names {name}, a record of {theirs}" in wrong[0].note
    assert {r.status for r in result.rows if r.run_id == TINY[:-5]} == {"PASS"}  # the right entry still gates


def test_reference_record_edited_to_match_a_wrong_key_is_still_caught(tmp_path):
    """A record whose own method field was changed to agree with the key breaks its seal."""
    folder = _copy(tmp_path, REF, TINY)
    _edit(folder / REF, lambda d: d.update(profile="mini"))
    statuses = {r.status for r in run_gate(folder).rows}
    assert "CORRUPT" in statuses and "MISSING" in statuses and run_gate(folder).exit_code == 1


def test_accept_refuses_a_doctored_record_whose_seal_was_removed(tmp_path, capsys):
    """The attack: edit a per-query score, make the aggregate agree, delete the seal, accept.
    Before, --accept resealed it, the gate passed and the genuine reference became SUPERSEDED."""
    folder = _copy(tmp_path, REF, TINY)

    def doctor(d: dict) -> None:
        scores = d["per_query"]["scifact"]["nDCG@10"]
        scores[next(iter(scores))] = 1.0
        d["metrics"]["scifact"]["nDCG@10"] = sum(scores.values()) / len(scores)
        d.pop("integrity")

    _edit(folder / TINY, doctor)
    record_before, manifest_before = (folder / TINY).read_text(), (folder / "references.json").read_text()
    assert _main("--records", str(folder), "--accept", TINY[:-5]) == 2
    line = _one_error_line(capsys)
    assert str(folder / TINY) in line and "not sealed" in line and "cannot be accepted" in line
    assert (folder / TINY).read_text() == record_before  # not resealed
    assert (folder / "references.json").read_text() == manifest_before
    result = run_gate(folder)
    statuses = {r.run_id: r.status for r in result.rows}
    assert statuses == {REF[:-5]: "REFERENCE", TINY[:-5]: "CORRUPT"} and result.exit_code == 1


@pytest.mark.parametrize(
    "doctor, why",
    [
        (lambda p: _edit(p, lambda d: d["metrics"]["scifact"].update({"R@100": 0.9})), "fails its seal"),
        (lambda p: _edit(p, lambda d: d.update(integrity={**d["integrity"], "sha256": "0" * 64})), "fails its seal"),
        (lambda p: p.write_text(p.read_text()[:500]), "cannot be accepted: not valid JSON"),
    ],
    ids=["aggregate-edited", "seal-hash-edited", "truncated"],
)
def test_accept_refuses_an_edited_or_corrupt_record_in_one_line(tmp_path, capsys, doctor, why):
    folder = _copy(tmp_path, REF, TINY)
    doctor(folder / TINY)
    assert _main("--records", str(folder), "--accept", TINY[:-5]) == 2
    line = _one_error_line(capsys)
    assert TINY in line and why in line


@pytest.mark.parametrize(
    "manifest",
    [
        b'{"references": {"cotmae/tiny": {"run_id": "cotmae__tiny__2026',  # truncated
        b"",
        b"\xff\xfe not utf-8",
        b"[1, 2]",
        b'{"references": []}',  # used to read as "no references": every run NO-REFERENCE, the gate green
        b'{"references": {"cotmae": {"run_id": "x", "sha256": "' + b"0" * 64 + b'"}}}',
        b'{"references": {"cotmae/tiny": {"run_id": 3}}}',
        b'{"references": {"cotmae/tiny": {"run_id": "cotmae__tiny__20261120T100000"}}}',  # no sha256
        b'{"references": {"cotmae/tiny": {"run_id": "a", "sha256": "' + b"0" * 64 + b'"}, '
        b'"cotmae/tiny": {"run_id": "b", "sha256": "' + b"0" * 64 + b'"}}}',  # a key given twice
    ],
    ids=[
        "truncated",
        "empty",
        "not-utf8",
        "a-list",
        "references-a-list",
        "key-without-profile",
        "run-id-not-text",
        "no-sha256",
        "key-twice",
    ],
)
def test_unreadable_references_manifest_is_one_line_exit_2(tmp_path, capsys, manifest):
    folder = _copy(tmp_path, REF, TINY)
    (folder / "references.json").write_bytes(manifest)
    assert _main("--records", str(folder), "--accept", REF[:-5]) == 2
    assert "references.json" in _one_error_line(capsys)
    assert (folder / "references.json").read_bytes() == manifest  # never overwritten: it names other runs
    assert _main("--records", str(folder)) == 2  # plain check stops too, one line
    assert "references.json" in _one_error_line(capsys)


def test_missing_reference_says_when_its_file_is_there_but_unusable(tmp_path):
    folder = _copy(tmp_path, REF, TINY)
    (folder / REF).write_text((RUNS / REF).read_text()[:300])
    result = run_gate(folder)
    missing = [r for r in result.rows if r.status == "MISSING"]
    assert {r.status for r in result.failures()} == {"UNREADABLE", "MISSING"}
    assert len(missing) == 1 and "is here but not usable" in missing[0].note


def test_committed_records_are_all_sealed():
    """--accept no longer seals: every committed record (and reference) must carry its seal."""
    records, skipped = load_records(PROJECT_ROOT / "runs" / "records")
    assert records and not skipped
    assert [r.run_id for r in records if not isinstance(r.integrity, dict)] == []


def test_a_run_file_changed_since_its_stage_wrote_it_makes_the_record_corrupt(tmp_path):
    """A record naming a run file on this machine is checked against the digest its stage took: a run
    file cut after the run no longer gives the record's numbers (issue 54)."""
    from harness.stages.artifacts import DIGESTS, mark_finished, output_digests

    stage = tmp_path / "cache" / "retrieve" / "0123456789abcdef"
    stage.mkdir(parents=True)
    run = stage / "run.trec"
    run.write_text("".join(f"q{i} Q0 d{i} 1 1.0 bm25\n" for i in range(10)))
    mark_finished(stage, {"key": stage.name, DIGESTS: output_digests(stage)})
    folder = _copy(tmp_path, REF, TINY)
    _edit(
        folder / TINY,
        lambda d: d.update(
            run_files={"retriever2": {"scifact": str(run), "nfcorpus": str(tmp_path / "elsewhere.trec")}}
        ),
        reseal=True,
    )
    assert run_gate(folder).exit_code == 0  # untouched; a path not on this machine is not checked
    run.write_text("".join(run.read_text().splitlines(keepends=True)[:5]))
    result = run_gate(folder)
    bad = [r for r in result.rows if r.status == "CORRUPT"]
    assert result.exit_code == 1 and len(bad) == 1 and bad[0].run_id == TINY[:-5]
    assert f"run file {run} changed since its stage wrote it (size" in bad[0].note
