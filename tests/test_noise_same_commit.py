"""The control's seed spread is measured from one commit's seeds when a commit ran two or more of them
(harness/evaluation/noise.py ``_records_for_spread``): seeds from several commits mix code drift into it."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace

from harness.evaluation import noise
from harness.core.paths import PROJECT_ROOT

RUNS = PROJECT_ROOT / "runs"


def _runs_with(tmp_path: Path, seed_files: list[Path]) -> Path:
    runs = tmp_path / "runs"
    (runs / "records").mkdir(parents=True)
    (runs / "seeds").mkdir()
    refs = RUNS / "records" / "references.json"
    shutil.copy(refs, runs / "records" / refs.name)
    for record in (RUNS / "records").glob("nopretrain__mini__*.json"):
        shutil.copy(record, runs / "records" / record.name)
    for record in seed_files:
        shutil.copy(record, runs / "seeds" / record.name)
    return runs


def _control_seeds() -> list[Path]:
    return sorted((RUNS / "seeds").glob("nopretrain__mini__*.json"))


def test_the_committed_spread_rests_on_five_seeds_of_one_commit(tmp_path: Path) -> None:
    block = noise.measured_block(_runs_with(tmp_path, _control_seeds()))
    assert [r["seed"] for r in block["runs"]] == [42, 43, 44, 45, 46]
    assert len(block["commit"]) == 40 and "several" not in block["commit"]
    # the seed-42 record of that commit, not the older reference, stands for seed 42
    assert block["runs"][0]["run_id"] != "nopretrain__mini__20261123T093814-5fe783"
    assert block == noise.load()  # what noise.yaml holds (tests/test_verdict.py regenerates it whole)


def test_without_a_commit_of_two_seeds_the_reference_and_the_newest_other_seeds_are_used(tmp_path: Path) -> None:
    older = [p for p in _control_seeds() if "20261125" in p.name]  # seeds 43 and 44, each at its own commit
    block = noise.measured_block(_runs_with(tmp_path, older))
    assert [r["seed"] for r in block["runs"]] == [42, 43, 44]
    assert block["runs"][0]["run_id"] == "nopretrain__mini__20261123T093814-5fe783"
    assert block["commit"] == "several (code drift included)"


def test_a_dirty_tree_is_its_own_code() -> None:
    clean = SimpleNamespace(git={"commit": "a" * 40, "dirty": False}, run_id="x")
    dirty = SimpleNamespace(git={"commit": "a" * 40, "dirty": True}, run_id="y")
    unknown = SimpleNamespace(git={}, run_id="z")
    assert noise._code_of(clean) == "a" * 40
    assert len({noise._code_of(r) for r in (clean, dirty, unknown)}) == 3
