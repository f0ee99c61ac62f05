"""The run record is one typed class, both written and read: every committed record re-serialises byte for
byte (its seal is over those bytes), and what the writer writes reads back as the same class and content."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.core.paths import PROJECT_ROOT
from harness.records.run_record import RunRecord
from harness.records.store import load_record
from harness.records.writer import record_text, write_run_record

COMMITTED = sorted(
    p
    for folder in ("records", "seeds")
    for p in (PROJECT_ROOT / "runs" / folder).glob("*.json")
    if p.name != "references.json"
)


def test_there_are_committed_records() -> None:
    assert len(COMMITTED) > 10


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: p.name)
def test_a_committed_record_round_trips_byte_identically(path: Path) -> None:
    rec = load_record(path)
    assert isinstance(rec, RunRecord), rec
    assert record_text(rec.to_json()) == path.read_text(encoding="utf-8")
    assert not rec.integrity_problems


def test_the_writer_and_the_reader_use_one_class(tmp_path: Path) -> None:
    built = RunRecord.from_json(
        {"run_id": "m__tiny__1", "method": "m", "profile": "tiny", "metrics": {}, "something_new": {"x": 1}}
    )
    path = write_run_record(built, tmp_path)
    read = load_record(path)
    assert type(read) is RunRecord and read.path == path
    body = {k: v for k, v in read.to_json().items() if k not in ("schema_version", "integrity")}
    assert body == built.to_json() and read.extras == {"something_new": {"x": 1}}
    assert json.loads(path.read_text())["something_new"] == {"x": 1} and not read.integrity_problems
