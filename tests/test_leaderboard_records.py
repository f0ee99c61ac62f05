"""harness.records.store: valid records load; corrupt, partial and future-version ones are skipped with a reason."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from harness.records.store import RunRecord, Skipped, load_record, load_records, records_dir, validate_record

FIXTURES = Path(__file__).parent / "fixtures" / "records"
RUNS = FIXTURES / "runs"
VALID = ["bm25__paper__20261121T203000", "cotmae__tiny__20261120T100000", "cotmae__tiny__20261121T110000"]


def _good() -> dict:
    return json.loads((RUNS / "cotmae__tiny__20261121T110000.json").read_text())


def test_fixture_folder_loads_valid_records_and_skips_broken_ones():
    records, skipped = load_records(RUNS)
    assert sorted(r.run_id for r in records) == sorted(VALID)
    reasons = {s.path.name: s.reason for s in skipped}
    assert set(reasons) == {
        "corrupt__tiny__20261121T120000.json",
        "cotmae__tiny__20991231T000000.json",
        "bm25__paper__20261121T190000.json",
    }
    assert reasons["corrupt__tiny__20261121T120000.json"].startswith("not valid JSON")
    assert "schema_version 2 is newer" in reasons["cotmae__tiny__20991231T000000.json"]
    assert "missing required key 'metrics'" in reasons["bm25__paper__20261121T190000.json"]
    path, reason = skipped[0]  # Skipped unpacks as (path, reason)
    assert isinstance(path, Path) and reason


def test_records_come_oldest_first_with_accessors():
    records, _ = load_records(RUNS)
    assert [r.created for r in records] == sorted(r.created for r in records)
    bm25 = next(r for r in records if r.method == "bm25")
    assert bm25.profile == "paper" and bm25.spec_hash and bm25.metrics["scifact"]["nDCG@10"] == pytest.approx(0.6647)
    assert bm25.per_query["scifact"]["nDCG@10"] and bm25.stages[0]["stage"] == "index"
    assert bm25.run_conditions() == {"profile": "paper", "method": "bm25"}
    ref = next(r for r in records if r.run_id == "cotmae__tiny__20261120T100000")
    assert not ref.integrity_problems and ref.finetune_stage == "retriever2"
    assert (
        ref.run_conditions()["finetune_stage"] == "retriever2" and ref.run_conditions()["pretrain_steps"] == 200
    )  # derived from its spec


@pytest.mark.parametrize(
    "text, reason",
    [
        ("", "empty file"),
        ("[1, 2]", "not a JSON object"),
        ('{"schema_version": 1, "run_id": "x"', "not valid JSON"),
        (b"\xff\xfe{}", "cannot be read"),
    ],
)
def test_unreadable_files_are_skipped(tmp_path, text, reason):
    path = tmp_path / "r.json"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    loaded = load_record(path)
    assert isinstance(loaded, Skipped) and reason in loaded.reason


@pytest.mark.parametrize(
    "change, reason",
    [
        (lambda d: d.pop("schema_version"), "missing required key 'schema_version'"),
        (lambda d: d.update(schema_version=True), "is not an integer"),
        (lambda d: d.update(schema_version=0), "not a known record format"),
        (lambda d: d.update(schema_version=3), "newer than this harness reads"),
        (lambda d: d.pop("method"), "missing required key 'method'"),
        (lambda d: d.update(profile=""), "'profile' is empty"),
        (lambda d: d.update(metrics=[1]), "'metrics' must be a dict"),
        (lambda d: d["metrics"].update(scifact={"nDCG@10": "0.5"}), "metrics.scifact.nDCG@10 is not a finite number"),
        (lambda d: d["metrics"].update(scifact=0.5), "metrics.scifact must be an object"),
        (lambda d: d.update(comparison={"a": 1}), "'comparison' must be a list"),
        (lambda d: d.update(per_query={"scifact": [1]}), "per_query.scifact must be an object"),
        (lambda d: d.update(reference="yes"), "'reference' must be a bool"),
        (lambda d: d["per_query"]["scifact"]["nDCG@10"].update({"q1": "high"}), "per_query.scifact.nDCG@10.q1 is not"),
        (lambda d: d.update(comparison=[{"reproduced": "38.2"}]), "comparison[0].reproduced must be a number"),
        (lambda d: d.update(comparison=[3]), "comparison[0] must be an object"),
    ],
)
def test_invalid_records_say_why(change, reason):
    data = _good()
    change(data)
    got = validate_record(data)
    assert got is not None and reason in got


def test_nan_metric_is_rejected(tmp_path):
    path = tmp_path / "r.json"
    path.write_text(json.dumps(_good()).replace("0.1203", "NaN", 1))
    loaded = load_record(path)
    assert isinstance(loaded, Skipped) and "not a finite number" in loaded.reason


def test_unknown_keys_are_kept():
    data = _good()
    data["something_new"] = {"from": "a later issue"}
    assert validate_record(data) is None
    rec = RunRecord.from_json(data, Path("x.json"))
    assert rec.extras["something_new"] == {"from": "a later issue"}


def test_duplicate_run_ids_and_unfinished_writes_are_skipped(tmp_path):
    shutil.copy(RUNS / "cotmae__tiny__20261121T110000.json", tmp_path / "a.json")
    shutil.copy(RUNS / "cotmae__tiny__20261121T110000.json", tmp_path / "b.json")
    (tmp_path / "c.json.tmp").write_text("{")
    # harness.core.fsutil.atomic_path's temp file, whole but not renamed yet: never read, so it
    # cannot make the record it becomes look like a duplicate ('.' sorts before letters).
    shutil.copy(RUNS / "cotmae__tiny__20261121T110000.json", tmp_path / ".a.json.k3j2x9.tmp.json")
    (tmp_path / "notes.txt").write_text("not a record")
    records, skipped = load_records(tmp_path)
    assert [r.path.name for r in records] == ["a.json"]
    reasons = {s.path.name: s.reason for s in skipped}
    assert "duplicate run_id" in reasons["b.json"] and "unfinished write" in reasons["c.json.tmp"]
    assert "unfinished write" in reasons[".a.json.k3j2x9.tmp.json"]
    assert "notes.txt" not in reasons


def test_missing_folder_means_no_records(tmp_path):
    assert load_records(tmp_path / "nope") == ([], [])


def test_default_folder_follows_harness_runs_dir(tmp_path):
    assert records_dir() == tmp_path / "runs" / "records"  # conftest points HARNESS_RUNS_DIR at tmp
