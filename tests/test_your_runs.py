"""A user's own runs (runs/local/, git-ignored): `run` writes there, `check` grades them apart and
stays PASSED whatever they hold, the report and the leaderboard list them as "your runs", and
`check --add` / `--accept` move one into runs/records/. A record compared with a reference made on
another machine is held to the cross-machine tolerance, and its rows say so."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from harness.cli import main
from harness.core.paths import PROJECT_ROOT, local_runs_dir
from harness.core.statuses import FAIL, NEAR, PASS
from harness.gate.grading import CROSS_MACHINE_TOLERANCE, TINY_TOLERANCE, reference_rows
from harness.gate.run import YOUR_RUNS
from harness.present.report_html import write_report
from harness.records.store import REFERENCES_FILE, RunRecord, read_references, records_dir
from harness.records.writer import write_run_record
from leaderboard_app import data as lb_data

COMMITTED = PROJECT_ROOT / "runs" / "records"
OTHER_CPU = {
    "cpu_model": "AMD EPYC 7763 64-Core Processor",
    "cpu_features": ["avx2"],
    "torch_threads": 64,
    "torch_cpu_capability": "AVX2",
    "cuda_devices": [],
}


USERS_STAMP = "20261127T100000"  # the users' runs below are stamped then


def _smallest_tiny_reference() -> tuple[str, dict[str, Any]]:
    """The smallest committed reference gated by a tolerance (a trained method, not a paper profile):
    found, not named, so a reference accepted later keeps the test valid."""
    entries = {
        k: e
        for k, e in read_references(COMMITTED)["references"].items()
        if not k.endswith("/paper") and not k.startswith("bm25") and e["run_id"].rsplit("__", 1)[-1] < USERS_STAMP
    }  # a reference older than the users' runs below (a newer one would make them SUPERSEDED)
    key = min(entries, key=lambda k: (COMMITTED / f"{entries[k]['run_id']}.json").stat().st_size)
    return key, entries[key]


def _users_run(reference: dict[str, Any], stamp: str, **changes: Any) -> dict[str, Any]:
    """The reference's record as `run` on another machine would write it (unsealed: the writer seals it)."""
    rec = json.loads(json.dumps(reference))
    for key in ("integrity", "schema_version"):
        rec.pop(key, None)
    rec.update(
        run_id=f"{rec['method']}__{rec['profile']}__{stamp}",
        created="2026-11-27T10:00:00Z",
        hardware={
            "declared": None,
            "detected": {**((reference.get("hardware") or {}).get("detected") or {}), **OTHER_CPU},
        },
    )
    rec.update(changes)
    return rec


@pytest.fixture
def fresh_clone(tmp_path: Path) -> dict[str, Any]:
    """runs/records/ as a fresh clone has it (one committed reference and its manifest entry), and the
    reference's record."""
    key, entry = _smallest_tiny_reference()
    committed = records_dir()  # conftest: <tmp>/runs/records
    committed.mkdir(parents=True)
    shutil.copy(COMMITTED / f"{entry['run_id']}.json", committed)
    (committed / REFERENCES_FILE).write_text(json.dumps({"references": {key: entry}}))
    return json.loads((COMMITTED / f"{entry['run_id']}.json").read_text())


def _far_off(reference: dict[str, Any], stamp: str) -> dict[str, Any]:
    """A run whose every per-query score of one measure is 0 or 1, whichever is further from the
    reference's mean: far outside any tolerance."""
    rec = _users_run(reference, stamp)
    dataset, measure = min(
        ((d, m) for d, values in rec["metrics"].items() for m in values),
        key=lambda dm: abs(rec["metrics"][dm[0]][dm[1]] - 0.5),
    )
    value = 1.0 if rec["metrics"][dataset][measure] < 0.5 else 0.0
    rec["per_query"][dataset][measure] = {q: value for q in rec["per_query"][dataset][measure]}
    rec["metrics"][dataset][measure] = value
    final = rec.get("finetune_stage")
    if final and final in (rec.get("metrics_by_stage") or {}):
        rec["metrics_by_stage"][final][dataset][measure] = value
        pq = (rec.get("per_query_by_stage") or {}).get(final)
        if pq:
            pq[dataset][measure] = dict(rec["per_query"][dataset][measure])
    return rec


def test_a_run_writes_its_record_under_runs_local(tmp_path: Path) -> None:
    path = write_run_record(
        RunRecord.from_json({"run_id": "m__tiny__1", "method": "m", "profile": "tiny", "metrics": {}})
    )
    assert path.parent == local_runs_dir() == tmp_path / "runs" / "local"
    assert not records_dir().exists()  # nothing reaches the gated folder
    ignored = subprocess.run(["git", "check-ignore", "-q", "runs/local/x.json"], cwd=PROJECT_ROOT)
    assert ignored.returncode == 0, "runs/local/ must be git-ignored"


def test_check_stays_passed_with_a_failing_run_of_yours(fresh_clone: dict[str, Any], capsys) -> None:
    write_run_record(RunRecord.from_json(_far_off(fresh_clone, "20261127T100000-0000aa")))
    assert main(["check"]) == 0
    out = capsys.readouterr().out
    gate_part, yours_part = out.split(f"\n{YOUR_RUNS} (", 1)
    assert "gate PASSED" in gate_part and "20261127T100000-0000aa" not in gate_part
    assert f" {FAIL} " in yours_part and "would fail the gate once added (not gated now)" in yours_part


def test_another_cpu_is_gated_at_the_cross_machine_tolerance(fresh_clone: dict[str, Any], capsys) -> None:
    write_run_record(RunRecord.from_json(_users_run(fresh_clone, "20261127T100000-0000bb")))
    assert main(["check", "--json", str(local_runs_dir().parent / "gate.json")]) == 0
    yours = json.loads((local_runs_dir().parent / "gate.json").read_text())["your_runs"]
    graded = [r for r in yours["rows"] if r["tolerance"] is not None and "(loss)" not in r["benchmark"]]
    assert graded and all(r["tolerance"] == CROSS_MACHINE_TOLERANCE for r in graded)
    assert all("cross-machine tolerance" in r["note"] and "cpu_model" in r["note"] for r in graded)


def test_cross_machine_tolerance_decides_the_status(fresh_clone: dict[str, Any]) -> None:
    """2.5 points off (the largest spread measured between machines): PASS across machines, FAIL on
    the reference's own machine."""
    ref = RunRecord.from_json(fresh_clone, Path("ref.json"))
    dataset = next(iter(fresh_clone["metrics"]))
    measure = next(iter(fresh_clone["metrics"][dataset]))
    moved = json.loads(json.dumps(fresh_clone))
    moved["metrics"][dataset][measure] += 0.025
    same = RunRecord.from_json({**moved, "run_id": "same"}, Path("same.json"))
    other = RunRecord.from_json(_users_run(moved, "x"), Path("other.json"))

    def status(rec: RunRecord) -> str:
        rows = reference_rows(rec, ref, TINY_TOLERANCE, CROSS_MACHINE_TOLERANCE)
        return next(r.status for r in rows if (r.benchmark, r.measure) == (dataset, measure))

    assert status(other) == PASS
    assert status(same) in (NEAR, FAIL)


def test_report_and_leaderboard_list_your_runs(fresh_clone: dict[str, Any], tmp_path: Path) -> None:
    write_run_record(RunRecord.from_json(_far_off(fresh_clone, "20261127T100000-0000cc")))
    index, summary = write_report(tmp_path / "report")
    page = (index.parent / "gate.html").read_text()  # the user's runs sit under the gate's rows, on its page
    assert "gate PASSED" in summary and f"1 of {YOUR_RUNS}" in summary
    assert 'id="yours"' in page and "20261127T100000-0000cc" in page.split('id="yours"', 1)[1]
    data = lb_data.load()
    assert data.gate is not None and data.gate.passed
    assert [r.run_id for r in data.your_records] == [
        f"{fresh_clone['method']}__{fresh_clone['profile']}__20261127T100000-0000cc"
    ]
    assert all(r.run_id != data.your_records[0].run_id for r in data.records)
    assert data.yours is not None and not data.yours.passed


def test_add_moves_a_record_into_the_gated_folder(fresh_clone: dict[str, Any], capsys) -> None:
    path = write_run_record(RunRecord.from_json(_users_run(fresh_clone, "20261127T100000-0000dd")))
    run_id = path.stem
    assert main(["check", "--add", run_id]) == 0
    assert not path.exists() and (records_dir() / path.name).exists()
    capsys.readouterr()
    assert main(["check", "--all"]) == 0  # a passing row is listed with --all
    assert run_id in capsys.readouterr().out.split(f"\n{YOUR_RUNS} (")[0]


def test_add_refuses_an_edited_record(fresh_clone: dict[str, Any]) -> None:
    path = write_run_record(RunRecord.from_json(_users_run(fresh_clone, "20261127T100000-0000ee")))
    data = json.loads(path.read_text())
    data["command"] = "edited"
    path.write_text(json.dumps(data))
    assert main(["check", "--add", path.stem]) == 2
    assert path.exists() and not (records_dir() / path.name).exists()


def test_accept_takes_a_run_of_yours_into_the_records(fresh_clone: dict[str, Any]) -> None:
    path = write_run_record(RunRecord.from_json(_users_run(fresh_clone, "20261127T100000-0000ff")))
    assert main(["check", "--accept", path.stem]) == 0
    assert (records_dir() / path.name).exists() and not path.exists()
    entry = read_references(records_dir())["references"][f"{fresh_clone['method']}/{fresh_clone['profile']}"]
    assert entry["run_id"] == path.stem


def test_one_word_and_one_count_for_a_record_set_apart(fresh_clone: dict[str, Any], tmp_path: Path) -> None:
    """A record older than its reference and of another spec: `check` says SUPERSEDED, and so do the
    leaderboard (set apart) and the report; all three count it."""
    from harness.core.statuses import SUPERSEDED
    from harness.gate.run import run_gate
    from harness.records.integrity import seal

    old = _users_run(fresh_clone, "20200101T000000-0000ab", created="2020-01-01T00:00:00Z")
    old["spec"] = {**old["spec"], "test_only_setting": 1}  # a setting the current spec does not have
    (records_dir() / f"{old['run_id']}.json").write_text(json.dumps(seal({"schema_version": 1, **old})))
    gate = run_gate(records_dir())
    assert {r.status for r in gate.rows if r.run_id == old["run_id"]} == {SUPERSEDED}
    data = lb_data.load()
    assert [(a.record.run_id, a.status) for a in data.apart] == [(old["run_id"], SUPERSEDED)]
    assert "older than the reference" in data.apart[0].reason and "spec settings" in data.apart[0].reason
    assert data.n_records == gate.n_records == 2
    _, summary = write_report(tmp_path / "report")
    assert "over 2 record(s)" in summary
