"""`run --dry-run` lists exactly the stages a run executes: the pipelines run in plan mode
(``RunContext.plan_only``), which computes every stage's cache key as a run does and builds nothing.

The committed reference records are the runs that were executed: where a reference's spec is
unchanged, the dry-run's (stage, dataset) sequence must equal the record's ``stages``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness.core.paths import PROJECT_ROOT, cache_dir
from harness.core.text_table import output_width
from harness.pipelines.context import RunContext
from harness.records.store import RunRecord, load_record, load_records, load_references
from harness.run.run_result import RunResult
from harness.run.runner import run_method
from harness.spec.files import list_methods
from harness.spec.hashing import settings_hash
from harness.spec.method import load_method, pretraining_methods, profiles_of
from harness.stages.artifacts import StageCache
from harness.stages.graph import STAGES

RECORDS = PROJECT_ROOT / "runs" / "records"
# Names of the spec's `stages:` list: they say which fine-tuning stages a pipeline runs, but no
# pipeline executes a stage by these names.
SPEC_STAGE_NAMES = {"corpus", "finetune_r1", "mine", "finetune_r2", "finetune_r3"}


def pairs(entries: list[dict]) -> list[tuple[str, str | None]]:
    return [(e["stage"], e["dataset"]) for e in entries]


def dry_run(method: str, profile: str, **kwargs) -> RunResult:
    result = run_method(method, profile, dry_run=True, **kwargs)
    assert result.dry_run and result.run_record is None
    return result


def references() -> dict[str, RunRecord]:
    """method/profile -> its reference record, loaded with the project's own loaders."""
    out = {}
    for (method, profile), entry in sorted(load_references(RECORDS).items()):
        record = load_record(RECORDS / f"{entry['run_id']}.json")
        assert isinstance(record, RunRecord), record
        out[f"{method}/{profile}"] = record
    return out


REFERENCES = references()
# the settings that run (documentation keys left out), as the gate's STALE-REFERENCE compares them
COMPARABLE = {
    key: rec
    for key, rec in REFERENCES.items()
    if settings_hash(rec.spec) == load_method(rec.method, rec.profile).spec_hash
}


def test_the_comparable_references_cover_bm25_and_several_methods_tiny_and_mini():
    for key, rec in REFERENCES.items():
        why = (
            "compared"
            if key in COMPARABLE
            else (
                f"not compared: spec changed since (record {settings_hash(rec.spec)}, spec now "
                f"{load_method(rec.method, rec.profile).spec_hash})"
            )
        )
        print(f"{key:<22} {rec.run_id:<46} {why}")
    assert "bm25/paper" in COMPARABLE
    for profile in ("tiny", "mini"):
        methods = {key.split("/")[0] for key in COMPARABLE if key.endswith(f"/{profile}")}
        assert len(methods) >= 4, (profile, methods)


@pytest.mark.parametrize("key", sorted(COMPARABLE))
def test_dry_run_lists_the_stages_the_reference_run_executed(key, capsys):
    rec = COMPARABLE[key]
    result = dry_run(rec.method, rec.profile, datasets=list(rec.datasets or {}) or None)
    print(f"compared {key} with {rec.run_id}: {len(rec.stages)} stages")
    assert pairs(result.stages) == pairs(rec.stages)


def record_cache_dir(rec: RunRecord) -> str | None:
    """The cache folder a run used: its run files are <cache>/<stage>/<key>/run.trec."""
    for runs in (rec.run_files or {}).values():
        for run_file in runs.values():
            path = Path(run_file)
            if path.name == "run.trec" and len(path.parents) > 3:
                return str(path.parents[2])
    return None


@pytest.mark.parametrize(
    "key", sorted(k for k, rec in COMPARABLE.items() if rec.profile == "tiny" and record_cache_dir(rec))
)
def test_planned_keys_equal_the_tiny_reference_runs_keys(key, monkeypatch, capsys):
    """A tiny run trains its tokenizer into the cache, and the passages stage keys the tokenizer by its path:
    pointed at the reference's (absent) cache folder, the plan computes every key that run computed."""
    rec = COMPARABLE[key]
    monkeypatch.setenv("HARNESS_CACHE_DIR", record_cache_dir(rec))  # read only: a dry-run writes nothing
    stages = dry_run(rec.method, rec.profile).stages
    assert [(e["stage"], e["dataset"], e.get("key")) for e in stages] == [
        (e["stage"], e["dataset"], e.get("key")) for e in rec.stages
    ]


def all_specs_and_profiles() -> list[tuple[str, str]]:
    return [(method, profile) for method in list_methods() for profile in profiles_of(method)]


def executed_stage_names() -> set[str]:
    """Every stage name a run has logged in a committed record."""
    records, _ = load_records(RECORDS)
    return {s["stage"] for rec in records for s in rec.stages}


def test_every_spec_and_profile_is_listed():
    specs = all_specs_and_profiles()
    assert ("bm25", "paper") in specs and ("lexmae", "paper") in specs and ("cotmae_qc", "mini") in specs
    assert len(specs) >= 22


@pytest.mark.parametrize("method,profile", all_specs_and_profiles())
def test_dry_run_works_for_every_spec_and_profile_on_an_empty_cache(method, profile, capsys):
    assert not cache_dir().exists()
    result = dry_run(method, profile)
    out = capsys.readouterr().out
    stages = result.stages
    spec = load_method(method, profile)
    datasets = list(spec.get("datasets"))

    built = [e for e in stages if e["stage"] != "evaluate"]
    assert built, "no stage planned"
    assert all(e["plan"] in ("to run", "reused") for e in built)  # nothing is cached in an empty cache
    assert all(set(e) >= {"stage", "dataset", "cached", "seconds", "key"} for e in built)
    # The evaluation entries close the list, one per (fine-tuning stage, dataset) for every dataset.
    first_eval = next(i for i, e in enumerate(stages) if e["stage"] == "evaluate")
    evaluations = stages[first_eval:]
    assert all(e["stage"] == "evaluate" for e in evaluations)
    variants = list(dict.fromkeys(e["dataset"].split("/")[0] for e in evaluations))
    assert [e["dataset"] for e in evaluations] == [f"{v}/{d}" for v in variants for d in datasets]

    names = {e["stage"] for e in stages}
    assert not names & SPEC_STAGE_NAMES
    # merge_parts runs in tests/test_pipeline_forums.py: no committed record evaluates cqadupstack
    known = executed_stage_names() | {"merge_parts"}
    assert names <= known, names - known

    # What is printed is that list, numbered, in order.
    printed = re.findall(r"^\s+\d+\. (\S+)\s+(to run|cached|reused)", out, re.M)
    assert [label for label, _ in printed] == [
        f"{e['stage']}/{e['dataset']}" if e["dataset"] else e["stage"] for e in stages
    ]
    assert not cache_dir().exists(), "a dry-run wrote into the cache"


@pytest.mark.parametrize("stage", ["tokenizer", "pretrain", "retriever1", "dense_retrieve", "retriever2"])
def test_stage_flag_plans_up_to_and_including_the_first_stage_of_that_name(stage):
    whole = [e["stage"] for e in dry_run("cotmae", "tiny").stages]
    upto = [e["stage"] for e in dry_run("cotmae", "tiny", stage=stage).stages]
    assert upto == whole[: whole.index(stage) + 1]


def test_stage_flag_names_the_method_s_stages_when_it_has_no_such_stage():
    from harness.core.errors import HarnessError

    with pytest.raises(HarnessError, match=r"nopretrain \[tiny\] runs no stage 'pretrain' \(its stages: tokenizer, "):
        run_method("nopretrain", "tiny", stage="pretrain")


def test_the_declared_stages_are_exactly_the_stages_runs_execute():
    # merge_parts runs in tests/test_pipeline_forums.py: no committed record evaluates cqadupstack
    assert set(STAGES) == executed_stage_names() | {"merge_parts"}


def test_a_paper_profile_reports_missing_checkpoints_and_inputs_as_plan_lines(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HARNESS_MODELS_DIR", str(tmp_path / "no-models"))
    result = dry_run("lexmae", "paper")
    out = capsys.readouterr().out
    notes = result.plan_notes
    assert any("zhou2022b-ranker" in n and "not available locally" in n for n in notes)
    assert "! missing download msmarco-passage/qrels-train" in out  # the training data: a download, listed
    assert out.count("! a run stops here:") == 1  # the first problem; the later ones say "would stop here too"
    assert [e["dataset"] for e in result.stages if e["stage"] == "evaluate"][-1] == "retriever3/cqadupstack"


def test_plan_mode_writes_nothing_and_shows_a_finished_stage_as_cached(monkeypatch, capsys):
    root = cache_dir()
    caches: list[StageCache] = []
    plan_stage = RunContext._plan_stage

    def spy(self, cache, *args, **kwargs):
        caches.append(cache)
        return plan_stage(self, cache, *args, **kwargs)

    monkeypatch.setattr(RunContext, "_plan_stage", spy)
    first = dry_run("bm25", "paper").stages
    assert [e["plan"] for e in first if e["stage"] != "evaluate"] == ["to run"] * 4
    assert not root.exists() or not any(root.rglob("*")), "a dry-run wrote into the cache"

    # Finish the first stage (index/scifact) through the cache API, as a run would.
    index = caches[0]
    assert (index.stage, index.key) == ("index", first[0]["key"])
    with index.building() as work:
        (work / "index").mkdir()
        index.mark_finished(work, {"documents": 1})
    written = sorted(p.relative_to(root).as_posix() for p in root.rglob("*"))

    second = dry_run("bm25", "paper").stages
    assert pairs(second) == pairs(first) and [e.get("key") for e in second] == [e.get("key") for e in first]
    assert [e["plan"] for e in second[:4]] == ["cached", "to run", "to run", "to run"]
    assert second[0]["cached"] is True and second[1]["cached"] is False
    assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*")) == written  # no lock, no folder added
    assert "index/scifact" in capsys.readouterr().out

    # --force: a run rebuilds it, so the plan says so.
    forced = dry_run("bm25", "paper", force=True).stages
    assert forced[0]["plan"] == "to run"


def test_a_stage_met_twice_is_reused_not_built_again(capsys):
    stages = dry_run("lexmae", "tiny").stages
    index_entries = [e for e in stages if e["stage"] == "impact_index" and e["dataset"] == "nfcorpus/retriever1"]
    assert [e["plan"] for e in index_entries] == ["to run", "reused"]  # built for mining, reused for evaluation
    assert index_entries[0]["key"] == index_entries[1]["key"]
    out = capsys.readouterr().out
    assert re.search(r"impact_index/nfcorpus/retriever1\s+reused\s+the output of step \d+", out)


@pytest.mark.parametrize("method", pretraining_methods("paper"))
def test_paper_plan_reaches_evaluation_and_lists_only_what_to_fetch(method, capsys, monkeypatch):
    """Without the paper's checkpoints and data, the plan still goes through every stage to the
    evaluation of every benchmark; what is missing is a checkpoint or a download, each with the
    command that fetches it."""
    from harness.data.download import MIRROR_ENV

    monkeypatch.delenv(MIRROR_ENV, raising=False)
    with output_width(None):  # a line per missing input, as `--wide` prints it (by default they wrap at 120)
        result = dry_run(method, "paper")
    out = capsys.readouterr().out
    spec = load_method(method, "paper")
    evaluated = {e["dataset"].split("/", 1)[1] for e in result.stages if e["stage"] == "evaluate"}
    assert evaluated == set(spec.get("datasets"))
    assert result.plan_notes, "a paper run on this machine lacks its checkpoints"
    for note in result.plan_notes:
        assert "not available locally" in note and "fetch: python -m harness fetch --model " in note, note
    missing = [line for line in out.splitlines() if line.strip().startswith("! missing download")]
    assert missing and all("fetch: python -m harness fetch " in line for line in missing)
    assert "projection (per stage" in out
