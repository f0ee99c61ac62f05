"""A pre-registered seed study (issue 52): `run --seeds 42-46` parses its seeds, shares the stages
before fine-tuning (seed 42's), prints its GPU-hours in a dry-run, and its records feed sigma_rep."""

from __future__ import annotations

import copy
import json
import math
import re

import pytest

from harness.cli import main
from harness.core.errors import HarnessError
from harness.core.paths import PROJECT_ROOT
from harness.evaluation import margins, power
from harness.evaluation import verdict as rule
from harness.records import writer
from harness.records.run_record import RunRecord
from harness.records.store import load_records
from harness.run import seed_study
from harness.stages import artifacts

DOC = PROJECT_ROOT / "docs" / "comparing-with-papers.md"
TEMPLATE = PROJECT_ROOT / "runs" / "records" / "cotmae_qc__rehearsal__20261126T034735-68e96f.json"


@pytest.mark.parametrize(
    "text, seeds",
    [("42-46", [42, 43, 44, 45, 46]), ("42,43,50", [42, 43, 50]), ("43-44, 42", [43, 44, 42])],
)
def test_seeds_parse(text, seeds):
    assert seed_study.parse_seeds(text) == seeds
    assert seed_study.ordered(seeds)[0] == (42 if 42 in seeds else seeds[0])


@pytest.mark.parametrize(
    "text, says",
    [
        ("46-42", "backwards"),
        ("42", "at least 2"),
        ("42,42", "more than once"),
        ("4x", "not a seed"),
        ("1-100", "at most"),
    ],
)
def test_bad_seeds_are_refused_with_a_reason(text, says, capsys):
    with pytest.raises(ValueError, match=says):
        seed_study.parse_seeds(text)
    with pytest.raises(SystemExit) as exit_:
        main(["run", "--method", "cotmae", "--seeds", text])
    assert exit_.value.code == 2 and says in capsys.readouterr().err


def test_without_seeds_keeps_the_rest_of_the_command():
    argv = ["run", "--method", "cotmae", "--seeds", "42-46", "--profile", "paper", "--seeds=1,2"]
    assert seed_study.without_seeds(argv) == ["run", "--method", "cotmae", "--profile", "paper"]


def test_the_dry_run_prints_the_studys_gpu_hours(capsys):
    assert main(["run", "--method", "cotmae_qc", "--profile", "paper", "--seeds", "42-46", "--dry-run"]) == 0
    out = capsys.readouterr().out
    study = out[out.index("seed study: cotmae_qc [paper] under 5 seeds") :]
    assert "per seed: bm25_negatives, retriever1" in study and "pretrain" not in study.splitlines()[0].split(";")[1]
    assert " GPU-hours" in study and "16 x V100-32GB" in study and "4 degrees of freedom" in study
    hours = re.search(r"the study: (\S+ \S+) wall, (\d+) GPU-hours", study)
    assert hours, study
    # the docs state the plan with what this dry-run prints
    assert f"{hours.group(2)} GPU-hours per method" in DOC.read_text(encoding="utf-8")


def test_the_docs_thresholds_are_the_rules():
    """The plan's table: at 8 df (two five-seed methods), the sigma_rep under which a lone run 3 points
    below is DIFFERENT alone (t 0.975) and first in Holm's order over 5 cells (t 0.995), and the one a
    single run needs for REPRODUCED with power 0.8."""
    doc = DOC.read_text(encoding="utf-8")
    alone = 3 / (rule.quantile(0.975, 8) * math.sqrt(2))
    holm = 3 / (rule.quantile(1 - 0.05 / 10, 8) * math.sqrt(2))
    needed = power.power_row("msmarco-dev", "RR@10", (margins.Evidence("msmarco-dev", "RR@10", 0.04, 8, "s", "s"),))
    assert needed.df == 8
    for row in (
        f"| <= {needed.sigma_needed:.2f} |",
        f"| {needed.sigma_needed:.2f}-{holm:.2f} |",
        f"| {holm:.2f}-{alone:.2f} |",
    ):
        assert row in doc, row


def test_a_study_shares_the_stages_before_fine_tuning_and_seeds_the_rest(monkeypatch, tmp_path):
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path))
    seed42 = {s: artifacts.StageCache(s, {"x": 1}, {}).key for s in ("pretrain", "retriever1")}
    alone = {s: artifacts.StageCache(s, {"x": 1}, {}, seed=43).key for s in ("pretrain", "retriever1")}
    assert alone["pretrain"] != seed42["pretrain"]  # `run --seed 43` alone: every stage its own
    study = {s: artifacts.StageCache(s, {"x": 1}, {}, seed=43, seed_study=True).key for s in ("pretrain", "retriever1")}
    assert study["pretrain"] == seed42["pretrain"] and study["retriever1"] == alone["retriever1"]
    # a shared stage never builds under another seed (it would sit under seed 42's key)
    with pytest.raises(HarnessError, match="put 42 first in --seeds"):
        with artifacts.StageCache("pretrain", {"x": 1}, {}, seed=43, seed_study=True).building():
            pass


def test_the_studys_records_go_to_runs_seeds_and_feed_sigma_rep(monkeypatch, tmp_path):
    monkeypatch.setenv("HARNESS_RUNS_DIR", str(tmp_path))
    template = json.loads(TEMPLATE.read_text(encoding="utf-8"))
    values = [0.386, 0.388, 0.384, 0.387, 0.385]
    for i, (seed, value) in enumerate(zip(range(42, 47), values)):
        record = copy.deepcopy({k: v for k, v in template.items() if k not in ("schema_version", "integrity")})
        record.update(run_id=f"cotmae_qc__paper__seed{seed}__20261128T00000{i}-abcdef", profile="paper", seed=seed)
        record["spec"]["profile"] = "paper"
        record["metrics"] = {"msmarco-dev": {"RR@10": value}}
        record["per_query"] = {"msmarco-dev": {"RR@10": {"q1": value, "q2": value}}}
        record["metrics_by_stage"] = record["per_query_by_stage"] = {}
        writer.write_run_record(
            RunRecord.from_json(record), seed_study=True
        )  # seed 42 of a study too: runs/seeds/, not runs/local/
    assert len(list((tmp_path / "seeds").glob("*.json"))) == 5 and not (tmp_path / "local").exists()
    problems = [p for r in load_records(tmp_path / "seeds")[0] for p in r.integrity_problems]
    assert not problems, problems
    (found,) = [e for e in margins.own_paper_seeds(tmp_path) if e.measure == "RR@10"]
    assert (found.benchmark, found.df) == ("msmarco-dev", 4)
    assert found.variance == pytest.approx(0.025, abs=1e-9)  # SD 0.158 in points
