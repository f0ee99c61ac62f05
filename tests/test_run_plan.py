"""One `run` builds its plan once and chooses its profile once (harness/run/run_plan.py): the dry-run prints
the plan it built, a real run executes the plan it built, and neither plans the pipeline again."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from harness.cli import main
from harness.commands import run as run_command
from harness.core.paths import BASELINES_DIR
from harness.data.catalog import get_benchmark
from harness.data.formats import write_trec_run
from harness.run import runner
from harness.run.run_plan import RunPlan


def counted(monkeypatch: pytest.MonkeyPatch, name: str, *modules: Any) -> list[Any]:
    """Every call of ``runner.<name>`` (and of the same function where ``modules`` import it by name)."""
    calls: list[Any] = []
    real = getattr(runner, name)

    def counting(*args: Any, **kwargs: Any) -> Any:
        out = real(*args, **kwargs)
        calls.append(out)
        return out

    for module in (runner, *modules):
        monkeypatch.setattr(module, name, counting)
    return calls


@pytest.fixture
def plans(monkeypatch) -> list[RunPlan]:
    return counted(monkeypatch, "build_plan")


@pytest.fixture
def choices(monkeypatch) -> list[Any]:
    return counted(monkeypatch, "choose_profile", run_command)


@pytest.fixture
def pipeline_plans(monkeypatch) -> list[Any]:
    """Every time a pipeline is planned (run in plan mode), whatever asks for it."""
    return counted(monkeypatch, "plan_method")


@pytest.mark.parametrize("profile", [["--profile", "tiny"], []], ids=["tiny", "default"])
def test_a_dry_run_builds_one_plan_and_chooses_one_profile(profile, plans, choices, pipeline_plans, capsys):
    assert main(["run", "--method", "cotmae_qc", *profile, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert len(choices) == 1 and len(plans) == 1 and len(pipeline_plans) == 1, (choices, len(plans))
    plan = plans[0]
    assert plan.choice == choices[0] and plan.spec.profile == choices[0].profile
    assert out.count(f"plan for cotmae_qc [{plan.spec.profile}]") == 1
    # what the plan holds is what it prints: each planned stage with its key, in the run's order
    assert plan.stages and all(e.get("key") for e in plan.stages if e["stage"] != "evaluate")
    assert f"{len(plan.stages)}. " in out


def test_the_dry_run_prints_the_projection_its_plan_holds(plans, monkeypatch, capsys):
    """Issue 60 item 1: the projection is part of the one plan: computed once (when the plan is described),
    held by it, and what the dry-run prints, stage by stage."""
    from harness.run import projection, run_plan

    calls: list[int] = []
    real = projection.stage_costs

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(run_plan, "stage_costs", counting)
    monkeypatch.setattr(projection, "stage_costs", counting)
    assert main(["run", "--method", "cotmae_qc", "--profile", "paper", "--dry-run"]) == 0
    out = capsys.readouterr().out
    [plan] = plans
    assert len(calls) == 1 and plan.costs and "  projection (per stage" in out
    assert all(f"    {c.stage}" in out for c in plan.costs)
    assert plan.costs is plan.costs and len(calls) == 1  # held, not computed again


def ranked(bench_name: str) -> dict[str, dict[str, float]]:
    """A fixed ranking: each judged query's relevant documents first, then a few others."""
    qrels = get_benchmark(bench_name).qrels()
    rng = random.Random(bench_name)
    pool = sorted({d for rel in qrels.values() for d in rel})
    return {
        q: {d: rng.random() + (2.0 if d in rel else 0.0) for d in [*rel, *rng.sample(pool, 20)]}
        for q, rel in qrels.items()
    }


def test_a_run_builds_one_plan_chooses_one_profile_and_executes_that_plan(
    tmp_path, monkeypatch, plans, choices, pipeline_plans, capsys
):
    """The runner's path with its pipeline stubbed (the stages are the slow test's): one plan, one choice, and
    the run starts from the plan's stage count; --json holds the typed result's summary."""
    executed: list[RunPlan] = []
    real_execute = runner.execute

    def execute(plan: RunPlan, *args: Any, **kwargs: Any) -> Any:
        executed.append(plan)
        return real_execute(plan, *args, **kwargs)

    def pipeline(ctx, datasets):
        path = tmp_path / "runfiles" / "scifact.trec"
        write_trec_run(ranked("scifact"), path, tag="stub")
        return {"retriever1": {name: path for name in datasets}}

    monkeypatch.setattr(runner, "execute", execute)
    monkeypatch.setattr(runner, "pipeline_for", lambda spec: pipeline)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:9")  # unreachable: tracking off at once
    summary = tmp_path / "summary.json"
    argv = ["run", "--method", "cotmae_qc", "--profile", "tiny", "--dataset", "scifact", "--json", str(summary)]
    assert main(argv) == 0
    assert len(choices) == 1 and len(plans) == 1 and len(pipeline_plans) == 1
    assert executed == plans
    written = json.loads(summary.read_text())
    record = json.loads(Path(written["run_record"]).read_text())
    assert written["metrics"] == record["metrics"] and written["stages"] == record["stages"]
    assert written["run_id"] == record["run_id"] and record["profile"] == "tiny"
    assert "cotmae_qc [tiny] retriever1: scifact" in capsys.readouterr().out


# cotmae tiny at a quarter of its pre-training steps: the seed test reads no committed reference, and the 400
# steps were most of its 350 s at one thread on the AVX2-only AMD EPYC.
SEEDED_SPEC = """
name: seeded
extends: cotmae
profiles:
  tiny:
    pretrain: {steps: 100}
"""


@pytest.mark.slow
def test_a_tiny_run_under_seed_43_builds_one_plan_chooses_one_profile_and_records_seed_43(
    plans, choices, pipeline_plans, monkeypatch, tmp_path
):
    """A whole tiny run, every stage built, under `--seed 43` (issue 60 items 1 and 3): one plan, one profile
    choice; the record states seed 43 and lies in runs/seeds/; and run_method(seed=43) in the same cache finds
    every stage built, with the same keys and metrics, none of them seed 42's. CoT-MAE (SEEDED_SPEC) on
    NFCorpus: the seed reaches the tokenizer, pre-training, mining and fine-tuning as in every pre-trained
    method (query generation's seeded keys are pinned by tests/test_seed_argument.py's dry-runs)."""
    specs = tmp_path / "specs"
    specs.mkdir()
    for base in ("cotmae", "nopretrain"):
        (specs / f"{base}.yaml").write_text((BASELINES_DIR / f"{base}.yaml").read_text(encoding="utf-8"))
    (specs / "seeded.yaml").write_text(SEEDED_SPEC)
    monkeypatch.setenv("HARNESS_SPECS_DIR", str(specs))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:9")
    summary = tmp_path / "cli.json"
    argv = ["run", "--method", "seeded", "--profile", "tiny", "--dataset", "nfcorpus", "--seed", "43"]
    assert main([*argv, "--json", str(summary)]) == 0
    assert len(choices) == 1 and len(plans) == 1 and len(pipeline_plans) == 1
    assert plans[0].stage_log().total == len(plans[0].stages) and plans[0].seed == 43
    cli = json.loads(summary.read_text(encoding="utf-8"))
    record = json.loads(Path(cli["run_record"]).read_text(encoding="utf-8"))
    assert record["seed"] == 43 and "/seeds/" in cli["run_record"] and "__seed43__" in record["run_id"]

    def keys(stages: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
        return [(e["stage"], e["dataset"], e.get("key")) for e in stages]

    api = runner.run_method("seeded", "tiny", datasets=["nfcorpus"], seed=43)
    assert api.record is not None and api.record.seed == 43
    assert all(e["cached"] for e in api.stages if e["stage"] != "evaluate")
    assert keys(api.stages) == keys(record["stages"]) and api.metrics == record["metrics"]
    assert api.comparison == record["comparison"] and api.record.chance == record["chance"]
    seed42 = keys(runner.run_method("seeded", "tiny", datasets=["nfcorpus"], dry_run=True).stages)
    assert all(a[2] != b[2] for a, b in zip(keys(record["stages"]), seed42) if a[2] is not None)
