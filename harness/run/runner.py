"""Run a method spec end to end: stages -> evaluation -> comparison -> tracking + run record.

Each family of methods has a pipeline function (declared in harness/stages/graph.py) that turns a
resolved spec and a dataset into a TREC run (through cached stages). Everything after the run
file (evaluation with the benchmark's conventions, comparison with the papers, MLflow, the run
record) is shared.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.core import ranks
from harness.core.errors import HarnessError
from harness.core.hardware import detect, total_memory_gib
from harness.core.paths import require_writable_homes
from harness.core.points import fmt
from harness.core.seeds import DEFAULT_SEED
from harness.data import download
from harness.data.catalog import get_benchmark
from harness.data.formats import read_trec_run
from harness.data.setting import data_setting
from harness.evaluation.chance import describe as describe_chance
from harness.evaluation.compare import RAN_OTHERWISE, TRAINING_FREE_FAMILIES, compare, format_comparison_table
from harness.evaluation.measures import (
    benchmark_qrels,
    evaluate_benchmark,
    normalise_subset_ids,
    warn_unretrievable,
)
from harness.gate.cell_state import run_summary_states
from harness.papers.registry import cells_for
from harness.papers.schema import KNOWN_METHODS
from harness.pipelines.context import RunContext, StageLog
from harness.records.tracking import (
    Tracker,
    log_parent_summary,
    new_run_id,
    parent_params,
    parent_tracker,
    tracking_line,
)
from harness.run import device_check, footprint, preflight
from harness.run.plan import describe
from harness.run.record import build_record, write_record
from harness.run.scores import Scored, score_variants
from harness.run.validation import require_valid
from harness.spec.conditions import run_conditions
from harness.spec.method import MethodSpec, load_method, profiles_of
from harness.spec.stage_settings import PretrainSettings, StageSettings
from harness.stages.artifacts import config_hash
from harness.stages.graph import FAMILIES, StopAfterStage, resolve
from harness.training.precision import resolve_precision


def score_run_file(run_path: Path, bench: Any) -> Any:
    """A pipeline's run file scored on its benchmark through the one evaluation path that `eval`
    uses too: a benchmark made of sub-forums (cqadupstack) takes ``<forum>/<qid>`` query ids and
    scores the mean of its forums."""

    run = read_trec_run(run_path)
    if bench.sub_benchmarks():
        run = normalise_subset_ids(run, bench.name)
    _check_judged_documents(bench)
    return evaluate_benchmark(run, bench, bench.eval_split)


# (benchmark, judged documents) whose corpus was read for them: a run scores each of its stages on the
# same benchmark, and reading a corpus (MS MARCO: 8.8M passages) once is enough.
_CHECKED: set[tuple[str, frozenset[str]]] = set()


def _check_judged_documents(bench: Any) -> None:
    """Warn (once) when the qrels judge documents the corpus does not hold."""
    parts = bench.sub_benchmarks() or [bench]
    if not all(_corpus_here(part) for part in parts):  # the pipeline read it; a test's run file alone need not
        return
    qrels = benchmark_qrels(bench, bench.eval_split)
    key = (bench.name, frozenset(doc for docs in qrels.values() for doc in docs))
    if key not in _CHECKED:
        _CHECKED.add(key)
        warn_unretrievable(qrels, (doc for part in parts for doc, _ in part.iter_corpus()))


def _corpus_here(bench: Any) -> bool:
    """Whether ``bench``'s corpus can be read without a download."""
    sources = bench.sources()
    return bench.has_corpus() or bool(sources) and all(download.available(key) for key in sources)


def stage_conditions(spec: MethodSpec, variant: str, final: str, batch_changed: str = "") -> dict[str, Any]:
    """What a run's stage states about its setting, for comparison with the papers' cells: the
    conditions derived from its resolved spec (``harness.spec.conditions``), which fine-tuning stage
    (of how many) it is, and what the run changed of the spec's batches (:func:`batch_changes`)."""

    conditions = run_conditions(spec.config, spec.name, spec.profile)
    if variant.startswith("retriever"):
        conditions.update(finetune_stage=variant, final_stage=final)
    if batch_changed:
        conditions[RAN_OTHERWISE] = batch_changed
    return conditions


RETRIEVERS = ("retriever1", "retriever2", "retriever3")


def batch_changes(spec: MethodSpec, entries: list[dict[str, Any]]) -> str:
    """What the run's training stages changed of the spec's global batches ("" when every one kept
    its batch): what ran, from each stage's output, not what the spec says, so a run whose processes
    could not share the batch evenly is not graded against the paper's cells."""
    changed = []
    for entry in entries:
        out, stage = entry.get("output") or {}, entry["stage"]
        if stage in RETRIEVERS and out.get("effective_batch"):
            settings = StageSettings.from_spec(spec, stage)
            want = settings.global_queries * settings.passages_per_query
            if out["effective_batch"] != want:
                changed.append(
                    f"{stage} trained on {out['effective_batch']} passages per step, the spec's global batch is {want}"
                )
        if stage == "pretrain" and out.get("global_batch"):
            want = PretrainSettings.from_spec(spec).global_batch
            if out["global_batch"] != want:
                changed.append(f"pretrain trained on {out['global_batch']} examples per step, the spec's is {want}")
    return "; ".join(dict.fromkeys(changed))


def choose_profile(spec_name: str, requested: str | None) -> tuple[str, str]:
    """`paper` on a GPU machine where the paper run's data and checkpoints are present (fewer GPUs than
    declared keep the global batch by accumulation); otherwise the CPU profile that learns (`mini`)
    where the method has one, else `tiny`. Returns (profile, why): why names what was missing."""

    if requested:
        return requested, "requested with --profile"
    paper = load_method(spec_name, "paper")
    require_valid(paper)  # the choice reads its declared hardware
    hw = detect()
    declared = paper.get("hardware") or {}
    if declared.get("device_type", "cpu") == "cpu":
        return "paper", f"declared hardware is present ({hw.describe()})"
    fallback = "mini" if "mini" in profiles_of(spec_name) else "tiny"
    if hw.device_type != "cuda":
        return fallback, (
            f"declared hardware {declared.get('devices')} x {declared.get('device_type')} "
            f"is not present ({hw.describe()})"
        )
    missing = paper_run_missing(paper)
    if missing:
        return fallback, f"GPU present ({hw.describe()}) but the paper run's inputs are missing: {'; '.join(missing)}"
    return "paper", (
        f"GPU present ({hw.describe()}; {declared.get('devices')} declared: the global batch is kept) "
        "with the paper run's data and checkpoints"
    )


def paper_run_missing(spec: MethodSpec) -> list[str]:
    """What a run of `spec` would refuse to start for: its missing data and checkpoints (the preflight's lines)."""
    datasets = list(spec.get("datasets", []))
    with data_setting(spec):
        lines = preflight.problems(spec, datasets, plan_method(spec, datasets))
    return [line.split("; fetch:", 1)[0].split(" (", 1)[0] for line in lines]  # the what, not the how


def declared_hardware(method: str, profile: str | None) -> dict[str, Any]:
    """The hardware the run's profile declares (the one :func:`choose_profile` picks when none is asked)."""
    return dict(load_method(method, choose_profile(method, profile)[0]).get("hardware") or {})


def join_ranks() -> None:
    """A launched worker joins its process group before the first stage: the stage hand-overs of
    :meth:`RunContext.cached_stage` and DDP training need it (single-process runs skip this)."""
    if ranks.launched_world_size() > 1:
        from harness.training import distributed as D

        info = D.init_distributed()
        if info.is_main:
            print(f"ranks: {info.world_size} processes on {info.backend} ({info.device.type}); rank 0 records the run")


def shared_by_ranks(value: Any) -> Any:
    """Rank 0's `value` on every rank of a launched run (itself in a single-process run)."""
    if ranks.launched_world_size() == 1:
        return value
    from harness.training import distributed as D

    return D.control_broadcast(value)


def rank_tracker(
    spec: MethodSpec, run_id: str, tags: dict[str, str], required: bool = False, seed: int = DEFAULT_SEED
) -> Tracker:
    """Rank 0's MLflow run; the other ranks of a launched run log nothing (one MLflow run per run)."""
    if not ranks.is_main():
        return Tracker(experiment=spec.name, run_name=f"rank {ranks.rank()}", tags={}, enabled=False)
    return parent_tracker(spec.name, spec.name, spec.profile, seed, run_id, tags, required=required)


Pipeline = Callable[[RunContext, list[str]], dict[str, dict[str, Path]]]


def pipeline_for(spec: MethodSpec) -> Pipeline:
    """The pipeline function of the spec's family (declared in harness/stages/graph.py :data:`FAMILIES`)."""
    family = spec.get("family")
    if family not in FAMILIES:
        raise HarnessError(
            f"method '{spec.name}' ({family}): its fine-tuning pipeline is not built yet; "
            f"run its pre-training with `python -m harness run --method {spec.name} --stage pretrain` "
            "(see the status table in docs/status.md)"
        )
    return resolve(FAMILIES[family].pipeline)


def run_params(spec: MethodSpec, seed: int = DEFAULT_SEED) -> dict[str, Any]:
    """A run's parent params (:func:`harness.records.tracking.parent_params`): its identity, the settings
    its profile ran with as ``spec.<dotted.path>`` keys (``spec.retrieval.k1``) and its conditions."""
    conditions = run_conditions(spec.config, spec.name, spec.profile)
    return parent_params(spec.name, spec.profile, spec.spec_hash, seed, spec.config, conditions)


def run_tags(spec: MethodSpec) -> dict[str, str]:
    """A run's parent tags besides method / profile / seed / run_id (:func:`harness.records.tracking.parent_tracker`)."""
    return {"spec_hash": spec.spec_hash, "papers": ",".join(spec.get("papers", []))}


def run_until(
    spec: MethodSpec,
    datasets: list[str],
    stage: str,
    force: bool,
    track_required: bool = False,
    seed: int = DEFAULT_SEED,
    seed_study: bool = False,
) -> dict[str, Any]:
    """`run --stage NAME`: the stages up to and including the first one named NAME, logged to MLflow
    (no run record: there are no metrics to compare yet)."""
    run_id = new_run_id(spec.name, spec.profile, seed)
    tracker = rank_tracker(spec, run_id, {**run_tags(spec), "stage": stage}, track_required, seed)
    log = planned_stages(spec, datasets, force, stage, seed, seed_study)
    ctx = RunContext(spec, tracker, log, force, stop_after=stage, seed=seed, seed_study=seed_study)
    started = time.time()
    output = None
    with tracker.run():
        tracker.log_params(run_params(spec, seed))
        try:
            pipeline_for(spec)(ctx, datasets)
        except StopAfterStage as stop:
            output = stop.output
    if output is None:  # the plan said the stage runs, so this is a pipeline that skipped it
        raise HarnessError(f"--stage {stage}: the run finished without reaching stage '{stage}'")
    seconds = round(time.time() - started, 1)
    where = tracking_line(tracker.info(), with_uri=False)
    print(
        f"{spec.name} [{spec.profile}] stopped after stage {stage} as asked, in {seconds}s -- output {output}; {where}"
    )
    return {
        "method": spec.name,
        "profile": spec.profile,
        "run_id": run_id,
        "spec_hash": spec.spec_hash,
        "output": str(output),
        "stages": ctx.stages.entries,
        "mlflow": tracker.info(),
        "seconds": seconds,
        "metrics": {},
        "comparison": [],
        "run_record": None,
    }


def plan_method(
    spec: MethodSpec,
    datasets: list[str],
    force: bool = False,
    stage: str | None = None,
    seed: int = DEFAULT_SEED,
    seed_study: bool = False,
) -> RunContext:
    """What a run of `spec` on `datasets` would execute, built by nothing: the run's own pipeline in
    plan mode (``RunContext.plan_only``), then the evaluation entries :func:`run_method` adds. The
    context's ``stages.entries`` are in a run record's ``stages`` shape (plus ``plan``: cached, to
    run or reused); ``plan_notes`` hold what the plan reports besides (e.g. a missing checkpoint)."""
    tracker = Tracker(experiment=spec.name, run_name="dry-run", tags={}, enabled=False)
    ctx = RunContext(
        spec, tracker, StageLog(), force, plan_only=True, stop_after=stage, seed=seed, seed_study=seed_study
    )
    try:
        variants = pipeline_for(spec)(ctx, datasets)
    except StopAfterStage:
        return ctx  # --stage NAME: the plan ends with that stage
    for variant, runs in variants.items():  # the order run_method evaluates in
        for name in runs:
            ctx.stages.add("evaluate", f"{variant}/{name}", False, 0.0, plan="to run")
    return ctx


def planned_stages(
    spec: MethodSpec,
    datasets: list[str],
    force: bool,
    stage: str | None = None,
    seed: int = DEFAULT_SEED,
    seed_study: bool = False,
) -> StageLog:
    """The log a run starts with: how many stages (built, cached or scored) it will go through, the N of
    its "[k/N] stage" lines, from its own plan (0, "unknown", when the plan cannot be made: the run then
    says why), and what each data stage would write (a full disk says it)."""
    try:
        entries = plan_method(spec, datasets, force, stage, seed, seed_study).stages.entries
    except Exception:  # noqa: BLE001 - a progress count must never stop a run
        return StageLog()
    if ranks.is_main():
        warn_if_too_big(spec, entries)
    try:
        needs = footprint.stage_disk_mib(spec, entries, footprint.measured_slopes())
    except Exception:  # noqa: BLE001 - an estimate for a message must never stop a run
        needs = {}
    return StageLog(total=len(entries), needs_mib=needs)


def warn_if_too_big(spec: MethodSpec, entries: list[dict[str, Any]]) -> None:
    """Before anything runs: the data stages whose projected memory or disk exceeds this machine
    (harness/run/footprint.py; the dry-run prints the whole table). A warning, never a stop: the
    projection extends bench_scale's slopes, it does not measure this run."""
    try:
        lines = footprint.would_not_fit(
            footprint.project(spec, entries, footprint.measured_slopes()), total_memory_gib(), footprint.free_disk_gib()
        )
    except Exception:  # noqa: BLE001 - a warning must never stop a run
        return
    for line in lines:
        print(f"  ! {line} (projected from bench_scale's slopes; run --dry-run for each stage)", flush=True)


def run_method(
    method: str,
    profile: str | None = None,
    datasets: list[str] | None = None,
    force: bool = False,
    stage: str | None = None,
    dry_run: bool = False,
    track_required: bool = False,
    precision: str | None = None,
    allow_cpu: bool = False,
    seed: int = DEFAULT_SEED,
    seed_study: bool = False,
) -> dict[str, Any]:
    """Run ``method`` end to end (or up to ``stage``, or only plan it); ``track_required``: a tracking
    failure fails the run (before its first stage when the server fails at the start) instead of a warning;
    ``precision``: what the spec's ``precision: auto`` resolves to (fp32 / bf16) instead of measuring;
    ``allow_cpu``: a CUDA-declared paper profile may run on the CPU (device_check.py refuses it otherwise);
    ``seed``: the seed every stage draws from; ``seed_study``: this run is one seed of `run --seeds`."""

    profile, why = choose_profile(method, profile)
    spec = load_method(method, profile)
    # Every check a stage would make of the spec's values, before the first stage (and in a dry-run):
    # a wrong value stops the run now, not hours in when the stage that reads it starts.
    require_valid(spec)
    if not dry_run:
        join_ranks()
    # Before any key is computed (a dry-run's too): the keys hold the resolved precision, never `auto`.
    # Rank 0 measures; every rank trains in what it chose.
    if ranks.is_main():
        spec = resolve_precision(spec, precision, save=not dry_run)  # a dry-run writes nothing
    spec = shared_by_ranks(spec)

    with data_setting(spec):  # the spec's `data:` block (e.g. the rehearsal's fixture mirror), for this run only
        return _run_spec(spec, why, datasets, force, stage, dry_run, track_required, allow_cpu, seed, seed_study)


def _run_spec(
    spec: MethodSpec,
    why: str,
    datasets: list[str] | None,
    force: bool,
    stage: str | None,
    dry_run: bool,
    track_required: bool = False,
    allow_cpu: bool = False,
    seed: int = DEFAULT_SEED,
    seed_study: bool = False,
) -> dict[str, Any]:

    method, profile = spec.name, spec.profile
    datasets = datasets or list(spec.get("datasets", []))
    benchmarks = {name: get_benchmark(name) for name in datasets}  # fail fast on unknown names
    print(f"{method}: profile '{profile}' ({why}); datasets: {', '.join(datasets)}; seed {seed}")
    for note in spec.get("substitutions") or []:
        print(f"  substitution: {note}")
    if stage is not None:
        entries = plan_method(spec, datasets, force, seed=seed, seed_study=seed_study).stages.entries
        planned = list(dict.fromkeys(e["stage"] for e in entries))
        if stage not in planned:
            raise HarnessError(
                f"--stage {stage}: {method} [{profile}] runs no stage '{stage}' (its stages: {', '.join(planned)})"
            )
    if dry_run:
        ctx = plan_method(spec, datasets, force, stage, seed, seed_study)
        problems = preflight.problems(spec, datasets, ctx)
        print(describe(spec, datasets, ctx.stages.entries, ctx.plan_notes, preflight=problems, seed=seed))
        return {
            "method": method,
            "profile": profile,
            "spec_hash": spec.spec_hash,
            "dry_run": True,
            "stages": ctx.stages.entries,
            "plan_notes": [text for _, text in ctx.plan_notes],
            "metrics": {},
            "comparison": [],
            "run_record": None,
            "run_id": None,
            "mlflow": None,
        }
    # The card first (one line): a paper run must not start its CPU stages where its GPU stages cannot run.
    device_check.require(spec, allow_cpu)
    # Every input of the whole plan before its first stage: a later stage's missing file stops the run now.
    refused = preflight.problems(spec, datasets, plan_method(spec, datasets, force, stage, seed, seed_study))
    if refused:
        raise preflight.refuse(spec, refused)
    require_writable_homes()
    if stage is not None:
        return run_until(spec, datasets, stage, force, track_required, seed, seed_study)

    run_id = new_run_id(method, profile, seed)
    tracker = rank_tracker(spec, run_id, run_tags(spec), track_required, seed)
    log = planned_stages(spec, datasets, force, seed=seed, seed_study=seed_study)
    ctx = RunContext(spec, tracker, log, force, seed=seed, seed_study=seed_study)
    pipeline = pipeline_for(spec)
    started = time.time()
    with tracker.run():
        tracker.log_params(run_params(spec, seed))  # first: a run that fails later still shows its setting
        variants = pipeline(ctx, datasets)
        if not ranks.is_main():  # rank 0 scores, compares and records; every stage is finished here
            return {
                "method": method,
                "profile": profile,
                "run_id": None,
                "stages": ctx.stages.entries,
                "metrics": {},
                "comparison": [],
                "run_record": None,
                "mlflow": None,
            }

        def score(variant: str, name: str) -> Scored:
            return Scored(score_run_file(variants[variant][name], benchmarks[name]), variants[variant][name])

        scores = score_variants(tracker, ctx.stages, benchmarks, variants, score, seed)
        final = scores.final

        # A control or a user's own spec (HARNESS_SPECS_DIR) has no printed numbers to compare with.
        reported = cells_for(method=method) if method in KNOWN_METHODS else []
        cells = [c for c in reported if c.benchmark in scores.metrics]
        comparisons = []
        for variant in variants:
            conditions = stage_conditions(spec, variant, final, batch_changes(spec, ctx.stages.entries))
            exact = spec.get("family") in TRAINING_FREE_FAMILIES  # deterministic: a fixed tolerance, no seed spread
            for comp in compare(
                scores.by_stage[variant], scores.per_query_by_stage[variant], cells, conditions, exact=exact
            ):
                comp.finetune_stage = variant
                comparisons.append(comp)
        record = build_record(
            run_id=run_id,
            method=method,
            profile=profile,
            spec=spec,
            scores=scores,
            comparisons=[c.to_dict() for c in comparisons],
            efficiency_by_stage=ctx.efficiency,
            stages=ctx.stages.entries,
            started=started,
            tracker=tracker,
            models_used=list(ctx.models_read),
            seed=seed,
        )
        log_parent_summary(tracker, record)  # final metrics, verdict counts, git, hardware on the parent
        path = write_record(record, tracker, seed_study)
    record["mlflow"] = tracker.info()
    print()
    print(format_comparison_table(comparisons) if comparisons else "(no reported cells to compare with)")
    print()
    for name, check in scores.chance.items():
        print(f"{final}: " + describe_chance(name, check, scores.metrics[name][check["measure"]]))
    print(summary_line(record, path))
    return {**record, "run_record": str(path), "config_hash": config_hash(spec.config)}


def summary_line(record: dict[str, Any], path: Path) -> str:
    """The run's last line: its final retriever's primary measure per benchmark, in points (out of 100:
    "nDCG@10 1.0 points" is a chance-level score, not a perfect one), with that cell's verdict."""
    final = record.get("finetune_stage")
    statuses = run_summary_states(record["comparison"], final)  # the table's verdicts, one per number
    parts = []
    for ds, values in record["metrics"].items():
        primary = next(iter(values))
        status = statuses.get((ds, primary), "no reported cell")
        parts.append(f"{ds} {primary} {fmt(100 * values[primary], 1)} points ({status})")
    where = tracking_line(record["mlflow"])
    stage = f" {final}:" if final else ""
    return (
        f"{record['method']} [{record['profile']}]{stage} "
        + "; ".join(parts)
        + f" in {record['seconds']}s -- record {path}; {where}"
    )
