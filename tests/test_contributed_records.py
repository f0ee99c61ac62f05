"""A run contributed from another machine (docs/contributing-runs.md): its sealed record passes
`check` against the committed reference and the leaderboard shows its hardware and date; a tampered
one is CORRUPT naming the part, one run on other data DATA-MISMATCH naming the dataset and file,
and one of an unknown or changed spec is set apart, never compared."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from harness.cli import main
from harness.core.errors import HarnessError
from harness.core.statuses import CORRUPT, DATA_MISMATCH, PASS, SPEC_CHANGED, UNKNOWN_METHOD
from harness.data import checksums
from harness.gate.references import accept_reference
from harness.gate.run import run_gate
from harness.present import overview
from harness.records.integrity import seal
from harness.records.store import REFERENCES_FILE, read_references
from leaderboard_app import data as lb_data
from leaderboard_app import tables

ROOT = Path(__file__).resolve().parent.parent
COMMITTED = ROOT / "runs" / "records"
CELLS_JSON = Path(__file__).parent / "fixtures" / "records" / "reported_cells.json"
GPUS = ["NVIDIA A100-SXM4-80GB"] * 8
CPU = "AMD EPYC 7763 64-Core Processor (25/1/1)"
CREATED, STAMP = "2026-11-27T09:30:00Z", "20261127T093000-c0ffee"


def _smallest_reference() -> tuple[str, dict[str, Any]]:
    """The smallest committed reference of a profile gated against its reference (not the papers):
    the record a contributor re-runs, and its manifest entry (found, not named, so a new reference
    accepted later keeps the test valid)."""
    entries = {
        key: e
        for key, e in read_references(COMMITTED)["references"].items()
        if not key.endswith("/paper") and e["run_id"].rsplit("__", 1)[-1] < STAMP
    }  # older than the contributor's run (a newer reference would make it SUPERSEDED)
    key = min(entries, key=lambda k: (COMMITTED / f"{entries[k]['run_id']}.json").stat().st_size)
    return key, entries[key]


def _contributed(reference: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """The reference's record as a contributor's machine writes it: same spec, data and numbers (a
    method re-run with the same seed and code), another run id, date, commit, packages and machine;
    sealed by the harness's own sealing, as `run` seals every record it writes."""
    rec = json.loads(json.dumps(reference))
    rec.pop("integrity")
    method, profile = rec["method"], rec["profile"]
    rec.update(
        run_id=f"{method}__{profile}__{STAMP}",
        created=CREATED,
        command=f"python -m harness run --method {method} --profile {profile}",
        git={"commit": "c0ffee0123456789abcdef0123456789abcdef01", "dirty": False},
    )
    rec["packages"] = {**(rec.get("packages") or {}), "torch": "2.5.1+cu124"}
    rec["hardware"] = {
        "declared": (rec.get("hardware") or {}).get("declared"),
        "detected": {
            "platform": "Linux-5.15.0-122-generic-x86_64-with-glibc2.35",
            "machine": "x86_64",
            "cpus": 64,
            "memory_gib": 1007.7,
            "cpu_model": CPU,
            "cpu_features": ["avx2"],
            "cuda_devices": GPUS,
            "torch_threads": 64,
            "torch_cpu_capability": "AVX2",
        },
    }
    rec.update(changes)
    return seal(rec)


@pytest.fixture
def folder(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    """A records folder as the pull request leaves it: the committed reference, its manifest entry and
    the contributed record. Returns (folder, the contributed record)."""
    key, entry = _smallest_reference()
    out = tmp_path / "records"
    out.mkdir()
    shutil.copy(COMMITTED / f"{entry['run_id']}.json", out)
    (out / REFERENCES_FILE).write_text(json.dumps({"references": {key: entry}}))
    reference = json.loads((COMMITTED / f"{entry['run_id']}.json").read_text())
    contributed = _contributed(reference)
    _write(out, contributed)
    return out, contributed


def _write(out: Path, record: dict[str, Any]) -> Path:
    path = out / f"{record['run_id']}.json"
    path.write_text(json.dumps(record, indent=1))
    return path


def _rows(result: Any, run_id: str) -> list[Any]:
    return [r for r in result.rows if r.run_id == run_id]


def test_a_record_made_on_another_machine_passes_check_and_shows_its_hardware(folder, tmp_path, capsys):
    out, rec = folder
    report = tmp_path / "gate.json"
    assert main(["check", "--records", str(out), "--json", str(report)]) == 0, capsys.readouterr().out
    gate = json.loads(report.read_text())
    mine = [r for r in gate["rows"] if r["run_id"] == rec["run_id"]]
    assert mine and {r["status"] for r in mine} == {PASS}  # every metric and loss against the reference
    assert run_gate(out, strict=True).passed  # nothing ungated either

    lb = lb_data.load(out, CELLS_JSON, with_gate=False)
    assert rec["run_id"] in {r.run_id for r in lb.records} and not lb.apart and not lb.skipped
    runs = tables.runs_frame(lb.records, lb.references).set_index("run_id")
    row = runs.loc[rec["run_id"]]
    assert row["hardware"] == f"8 × NVIDIA A100-SXM4-80GB · {CPU} (64 cpus)"
    assert row["date"] == "2026-11-27 09:30 UTC" and row["git commit"] == "c0ffee0123" and row["role"] == "run"
    assert runs.loc[next(iter(lb.references)), "role"] == "reference"


def test_a_tampered_record_is_corrupt_naming_the_part(folder):
    out, rec = folder
    dataset, values = next(iter(rec["metrics"].items()))
    measure = next(iter(values))
    values[measure] += 0.05  # an edited number, the seal left as it was
    _write(out, rec)
    result = run_gate(out)
    corrupt = [r for r in _rows(result, rec["run_id"]) if r.status == CORRUPT]
    assert not result.passed and corrupt and {r.status for r in _rows(result, rec["run_id"])} == {CORRUPT}
    assert any(f"metrics/{dataset}/{measure} was edited" in r.note for r in corrupt)
    lb = lb_data.load(out, CELLS_JSON, with_gate=False)
    assert rec["run_id"] not in {r.run_id for r in lb.records}
    assert any(f"metrics/{dataset}/{measure}" in s.reason for s in lb.skipped)


def test_a_record_run_on_other_data_is_rejected_naming_the_dataset_and_file(folder):
    out, rec = folder
    dataset, file = next(
        (d, f) for d, files in rec["datasets"].items() for f in files if f.startswith(checksums.EMBEDDED_PREFIX)
    )
    rec["datasets"][dataset][file] = "0" * 64
    _write(out, seal(rec))  # re-sealed: the seal passes, the catalog does not
    result = run_gate(out)
    rows = _rows(result, rec["run_id"])
    assert not result.passed and [r.status for r in rows] == [DATA_MISMATCH]
    assert rows[0].benchmark == dataset and f"dataset '{dataset}', file {file}" in rows[0].note
    assert not [r for r in rows if r.status == CORRUPT]
    lb = lb_data.load(out, CELLS_JSON, with_gate=False)
    assert rec["run_id"] not in {r.run_id for r in lb.records} and any(file in s.reason for s in lb.skipped)
    assert rec["run_id"] not in {r.run_id for r in overview.from_folder(out, CELLS_JSON).learned}
    with pytest.raises(HarnessError, match=f"{rec['run_id']}.json: its data checksums are not the catalog's"):
        accept_reference(rec["run_id"], out)  # never a reference either


def _edit_a_setting(spec: dict[str, Any]) -> str:
    """Double the first number among the spec's settings (a contributor's edited spec); returns its path."""
    for key, value in spec.items():
        if key in ("notes", "description", "deviations", "assumptions"):
            continue
        if isinstance(value, dict):
            inner = _edit_a_setting(value)
            if inner:
                return f"{key}.{inner}"
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and value:
            spec[key] = value * 2
            return key
    return ""


def test_a_record_of_a_changed_spec_is_kept_apart(folder):
    out, rec = folder
    assert _edit_a_setting(rec["spec"])
    _write(out, seal(rec))
    result = run_gate(out)
    rows = _rows(result, rec["run_id"])
    assert [r.status for r in rows] == [SPEC_CHANGED] and "not the current" in rows[0].note
    assert result.passed and not run_gate(out, strict=True).passed  # said, not failing; fails --strict

    lb = lb_data.load(out, CELLS_JSON, with_gate=False)
    assert rec["run_id"] not in {r.run_id for r in lb.records}  # never beside a reference or the papers
    assert [(a.record.run_id, a.status) for a in lb.apart] == [(rec["run_id"], SPEC_CHANGED)]
    assert rec["run_id"] not in set(tables.runs_frame(lb.records, lb.references)["run_id"])
    assert not tables.main_table(lb.cells, lb.records, lb.comparisons)["row"].str.contains(rec["run_id"]).any()
    apart = tables.apart_frame(lb.apart).set_index("run_id").loc[rec["run_id"]]
    assert apart["status"] == SPEC_CHANGED and apart["hardware"].startswith("8 × NVIDIA A100")
    # the glance (leaderboard tab and `report --html`) leaves it out as well: no learned row comes from it
    assert rec["run_id"] not in {r.run_id for r in overview.from_folder(out, CELLS_JSON).learned}


def test_a_record_of_an_unknown_method_is_kept_apart(folder):
    out, rec = folder
    (out / f"{rec['run_id']}.json").unlink()
    # as the harness writes it: its stored spec names the method too (else the record contradicts itself)
    rec = seal(
        {
            **rec,
            "method": "mymethod",
            "run_id": f"mymethod__{rec['profile']}__{STAMP}",
            "spec": {**rec["spec"], "name": "mymethod"},
        }
    )
    _write(out, rec)
    rows = _rows(run_gate(out), rec["run_id"])
    assert [r.status for r in rows] == [UNKNOWN_METHOD]
    lb = lb_data.load(out, CELLS_JSON, with_gate=False)
    assert [(a.record.run_id, a.status) for a in lb.apart] == [(rec["run_id"], UNKNOWN_METHOD)]


def test_catalog_checksums_check_files_and_leave_labels_alone():
    embedded_file = next(iter(checksums.embedded.manifest()))
    good = checksums.embedded.manifest()[embedded_file]["sha256"]
    datasets = {
        "scifact": {
            f"embedded/{embedded_file}": good,
            "msmarco_passages": "titled",
            "forum": "android",
            "downloads/fiqa.zip": "md5:17918ed23cd04fb15047f73e6c3bd9d9",
        }
    }
    assert checksums.mismatches(datasets) == []
    datasets["scifact"]["downloads/fiqa.zip"] = "md5:" + "0" * 32
    datasets["scifact"]["embedded/beir/nowhere.jsonl.gz"] = "1" * 64
    found = {m.file: m.expected for m in checksums.mismatches(datasets)}
    assert found.keys() == {"downloads/fiqa.zip", "embedded/beir/nowhere.jsonl.gz"}
    assert found["downloads/fiqa.zip"].startswith("pins md5:17918ed2")  # the BEIR README's md5
    assert found["embedded/beir/nowhere.jsonl.gz"] == "has no such file"


# A re-sealed edit passes the seal (anyone can recompute a sha256): these fields must still agree.


def _resealed_is_corrupt(out: Path, rec: dict[str, Any], name: str | None = None) -> list[Any]:
    """``rec`` re-sealed and written as ``name`` (default ``<run_id>.json``): `check` fails with only
    CORRUPT rows for it; returns them."""
    path = _write(out, seal(rec))
    if name is not None:
        path = path.rename(out / name)
    result = run_gate(out)
    rows = [r for r in result.rows if r.run_id == rec["run_id"]]
    assert not result.passed and rows and {r.status for r in rows} == {CORRUPT}
    return rows


def test_a_record_whose_run_id_is_not_its_file_name_is_corrupt(folder):
    out, rec = folder
    (out / f"{rec['run_id']}.json").unlink()
    rows = _resealed_is_corrupt(out, rec, name=f"{rec['method']}__{rec['profile']}__20261127T093001-beef00.json")
    assert any("is not its file's name" in r.note for r in rows)


def test_a_record_created_in_the_future_is_corrupt(folder):
    out, rec = folder
    rec.pop("integrity")
    rec["created"] = "2099-12-31T00:00:00Z"
    rows = _resealed_is_corrupt(out, rec)
    assert any("created 2099-12-31T00:00:00Z is in the future" in r.note for r in rows)


def test_a_record_whose_method_or_profile_contradicts_its_spec_or_run_id_is_corrupt(folder):
    out, rec = folder
    rec.pop("integrity")
    rec["spec"] = {**rec["spec"], "profile": "paper"}  # a tiny run's numbers passed off under the paper plan
    rows = _resealed_is_corrupt(out, rec)
    assert any(f"profile '{rec['profile']}' differs from its stored spec's profile 'paper'" in r.note for r in rows)
    other = {k: v for k, v in rec.items() if k != "spec"}
    other["run_id"] = f"bm25__paper__{STAMP}"
    (out / f"{rec['run_id']}.json").unlink()
    rows = _resealed_is_corrupt(out, other)
    assert any("does not start with its method and profile" in r.note for r in rows)


def test_identity_allows_a_day_of_clock_skew():
    from datetime import UTC, datetime

    from harness.records.integrity import identity_problems

    now = datetime(2026, 11, 27, 12, tzinfo=UTC)
    rec = {"run_id": "m__tiny__x", "method": "m", "profile": "tiny", "spec": {"name": "m", "profile": "tiny"}}
    assert identity_problems({**rec, "created": "2026-11-28T06:00:00Z"}, "m__tiny__x", now) == []
    assert identity_problems({**rec, "created": "2026-11-29T00:00:00Z"}, "m__tiny__x", now)
