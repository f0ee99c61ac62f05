"""The control's seed spread is measured from one commit's seeds when a commit ran two or more of them
(harness/evaluation/noise.py ``_records_for_spread``): seeds from several commits mix code drift into it."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace

from harness.core.paths import PROJECT_ROOT
from harness.evaluation import noise

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


def test_noise_prints_the_pre_training_part_of_the_committed_mini_study(capsys) -> None:
    """The 2 pre-training x 3 fine-tuning seeds of cotmae mini (one commit): `noise` prints sigma_pt per
    benchmark, computed here again by hand (one-way random effects: (MSB - MSW) / n0, clipped at 0)."""
    from harness.cli import main
    from harness.evaluation import pretrain_part

    records, spreads = pretrain_part.same_commit_study(RUNS)
    assert {r.pretrain_seed for r in records} == {42, 43} and {r.seed for r in records} == {42, 43, 44}
    assert len(records) == 6 and len({r.git["commit"] for r in records}) == 1
    values: dict[int, list[float]] = {}
    for r in records:
        values.setdefault(r.pretrain_seed, []).append(100 * r.metrics["scifact"]["nDCG@10"])
    groups = [sorted(v) for v in values.values()]
    grand = sum(map(sum, groups)) / 6
    msb = sum(3 * (sum(g) / 3 - grand) ** 2 for g in groups)  # k - 1 = 1
    msw = sum((x - sum(g) / 3) ** 2 for g in groups for x in g) / 4  # n - k = 4
    expected = max(0.0, (msb - msw) / 3) ** 0.5  # n0 = 3, balanced
    assert abs(spreads[("scifact", "nDCG@10")].sigma_pt - expected) < 1e-9
    assert abs(spreads[("scifact", "nDCG@10")].sigma_ft - msw**0.5) < 1e-9
    assert main(["noise", "--runs", str(RUNS)]) == 0
    out = capsys.readouterr().out
    assert "Pre-training part of cotmae [mini] from 6 runs" in out and f"{expected:.2f}" in out
    assert "enters no verdict" in out
