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
from harness.core.text_table import reflow, wrap_text
from harness.data import download
from harness.data.catalog import get_benchmark
from harness.data.formats import read_trec_run
from harness.data.setting import data_setting
from harness.evaluation.chance import describe as describe_chance
from harness.evaluation.compare import RAN_OTHERWISE, TRAINING_FREE_FAMILIES, closing_table, compare
from harness.evaluation.measures import (
    benchmark_qrels,
    evaluate_benchmark,
    normalise_subset_ids,
    warn_unretrievable,
)
from harness.gate.cell_state import run_summary_states
from harness.gate.closing_check import check_run, closing_line
from harness.papers.registry import cells_for
from harness.papers.schema import KNOWN_METHODS
from harness.pipelines.context import RunContext, StageLog
from harness.pipelines.families import family_pipeline
from harness.records.parent_run import log_parent_summary, parent_params, parent_tracker
from harness.records.run_precision import NO_TRAINING, precision_label
from harness.records.run_record import RunRecord
from harness.records.tracker import Tracker, tracking_line
from harness.records.writer import new_run_id
from harness.run import device_check, footprint, preflight
from harness.run.record import build_record, write_record
from harness.run.run_plan import ProfileChoice, RunPlan
from harness.run.run_result import RunResult
from harness.run.scores import RunScores, Scored, score_variants
from harness.run.validation import require_valid
from harness.spec.conditions import run_conditions
from harness.spec.method import MethodSpec, load_method, profiles_of
from harness.spec.stage_settings import PretrainSettings, StageSettings
from harness.stages.artifacts import config_hash
from harness.stages.graph import FAMILIES, PRETRAIN_SEEDED, StopAfterStage
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


def choose_profile(spec_name: str, requested: str | None) -> ProfileChoice:
    """`paper` on a GPU machine where the paper run's data and checkpoints are present (fewer GPUs than
    declared keep the global batch by accumulation); otherwise the CPU profile that learns (`mini`)
    where the method has one, else `tiny`. Returns (profile, why): why names what was missing."""

    if requested:
        return ProfileChoice(requested, "requested with --profile")
    paper = load_method(spec_name, "paper")
    require_valid(paper)  # the choice reads its declared hardware
    hw = detect()
    declared = paper.get("hardware") or {}
    if declared.get("device_type", "cpu") == "cpu":
        return ProfileChoice("paper", f"declared hardware is present ({hw.describe()})")
    fallback = "mini" if "mini" in profiles_of(spec_name) else "tiny"
    if hw.device_type != "cuda":
        return ProfileChoice(
            fallback,
            f"declared hardware {declared.get('devices')} x {declared.get('device_type')} "
            f"is not present ({hw.describe()})",
        )
    missing = paper_run_missing(paper)
    if missing:
        return ProfileChoice(
            fallback, f"GPU present ({hw.describe()}) but the paper run's inputs are missing: {'; '.join(missing)}"
        )
    return ProfileChoice(
        "paper",
        f"GPU present ({hw.describe()}; {declared.get('devices')} declared: the global batch is kept) "
        "with the paper run's data and checkpoints",
    )


def paper_run_missing(spec: MethodSpec) -> list[str]:
    """What a run of `spec` would refuse to start for: its missing data and checkpoints (the preflight's lines)."""
    datasets = list(spec.get("datasets", []))
    with data_setting(spec):
        lines = preflight.problems(spec, datasets, plan_method(spec, datasets))
    return [line.split("; fetch:", 1)[0].split(" (", 1)[0] for line in lines]  # the what, not the how


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
    return family_pipeline(family)


def run_params(spec: MethodSpec, seed: int = DEFAULT_SEED) -> dict[str, Any]:
    """A run's parent params (:func:`harness.records.parent_run.parent_params`): its identity, the settings
    its profile ran with as ``spec.<dotted.path>`` keys (``spec.retrieval.k1``) and its conditions."""
    conditions = run_conditions(spec.config, spec.name, spec.profile)
    return parent_params(spec.name, spec.profile, spec.spec_hash, seed, spec.config, conditions)


def run_tags(spec: MethodSpec) -> dict[str, str]:
    """A run's parent tags besides method / profile / seed / run_id (:func:`harness.records.parent_run.parent_tracker`)."""
    return {"spec_hash": spec.spec_hash, "papers": ",".join(spec.get("papers", []))}


def run_until(plan: RunPlan, track_required: bool = False) -> RunResult:
    """`run --stage NAME`: the stages up to and including the first one named NAME, logged to MLflow
    (no run record: there are no metrics to compare yet)."""
    spec, stage = plan.spec, str(plan.stop_after)
    run_id = new_run_id(spec.name, spec.profile, plan.seed, plan.pretrain_seed)
    tracker = rank_tracker(spec, run_id, {**run_tags(spec), "stage": stage}, track_required, plan.seed)
    if ranks.is_main():
        warn_if_too_big(plan)
    ctx = RunContext(
        spec,
        tracker,
        plan.stage_log(),
        plan.force,
        stop_after=stage,
        seed=plan.seed,
        seed_study=plan.seed_study,
        pretrain_seed=plan.pretraining_seed,
    )
    started = time.time()
    output = None
    with tracker.run():
        tracker.log_params(run_params(spec, plan.seed))
        try:
            pipeline_for(spec)(ctx, list(plan.datasets))
        except StopAfterStage as stop:
            output = stop.output
    if output is None:  # the plan said the stage runs, so this is a pipeline that skipped it
        raise HarnessError(f"--stage {stage}: the run finished without reaching stage '{stage}'")
    seconds = round(time.time() - started, 1)
    where = tracking_line(tracker.info(), with_uri=False)
    print(
        reflow(
            f"{spec.name} [{spec.profile}] stopped after stage {stage} as asked, in {seconds}s -- output {output}; "
            f"{where}"
        )
    )
    return RunResult(
        spec.name,
        spec.profile,
        spec.spec_hash,
        ctx.stages.entries,
        plan,
        run_id=run_id,
        mlflow=tracker.info(),
        seconds=seconds,
        output=Path(output),
    )


def plan_method(
    spec: MethodSpec,
    datasets: list[str],
    force: bool = False,
    stage: str | None = None,
    seed: int = DEFAULT_SEED,
    seed_study: bool = False,
    pretrain_seed: int = DEFAULT_SEED,
) -> RunContext:
    """What a run of `spec` on `datasets` would execute, built by nothing: the run's own pipeline in
    plan mode (``RunContext.plan_only``), then the evaluation entries :func:`run_method` adds. The
    context's ``stages.entries`` are in a run record's ``stages`` shape (plus ``plan``: cached, to
    run or reused); ``plan_notes`` hold what the plan reports besides (e.g. a missing checkpoint);
    ``pretrain_seed``: a seed study's pre-training seed (its pre-training stages' keys and draws)."""
    tracker = Tracker(experiment=spec.name, run_name="dry-run", tags={}, enabled=False)
    ctx = RunContext(
        spec,
        tracker,
        StageLog(),
        force,
        plan_only=True,
        stop_after=stage,
        seed=seed,
        seed_study=seed_study,
        pretrain_seed=pretrain_seed,
    )
    try:
        variants = pipeline_for(spec)(ctx, datasets)
    except StopAfterStage:
        return ctx  # --stage NAME: the plan ends with that stage
    for variant, runs in variants.items():  # the order run_method evaluates in
        for name in runs:
            ctx.stages.add("evaluate", f"{variant}/{name}", False, 0.0, plan="to run")
    return ctx


def build_plan(
    spec: MethodSpec,
    choice: ProfileChoice,
    datasets: list[str],
    force: bool = False,
    stage: str | None = None,
    seed: int = DEFAULT_SEED,
    seed_study: bool = False,
    pretrain_seed: int | None = None,
) -> RunPlan:
    """The run's plan, built once per `run` (a dry-run prints it, a run executes it): its stages from the
    pipeline in plan mode (:func:`plan_method`), the preflight's problems with them, and the projection of
    what each data stage holds in memory and writes to disk."""
    pretraining = DEFAULT_SEED if pretrain_seed is None else pretrain_seed
    ctx = plan_method(spec, datasets, force, stage, seed, seed_study, pretraining)
    if pretrain_seed is not None and not any(e["stage"] in PRETRAIN_SEEDED for e in ctx.stages.entries):
        raise HarnessError(
            f"--pretrain-seeds: {spec.name} [{spec.profile}] runs no stage that draws from a pre-training seed "
            f"({', '.join(PRETRAIN_SEEDED)}): every pre-training seed would repeat the same runs"
        )
    footprints, needs = projected_footprints(spec, ctx.stages.entries)
    return RunPlan(
        spec=spec,
        choice=choice,
        seed=seed,
        datasets=tuple(datasets),
        stop_after=stage,
        force=force,
        stages=tuple(ctx.stages.entries),
        notes=tuple(ctx.plan_notes),
        problems=tuple(preflight.problems(spec, datasets, ctx)),
        footprints=tuple(footprints),
        needs_mib=needs,
        seed_study=seed_study,
        pretrain_seed=pretrain_seed,
    )


def projected_footprints(
    spec: MethodSpec, entries: list[dict[str, Any]]
) -> tuple[list[footprint.Footprint], dict[tuple[str, str | None], float]]:
    """Each data stage's projected footprint and the MiB each would write (harness/run/footprint.py, from
    bench_scale's slopes); nothing where they cannot be projected: an estimate must never stop a run."""
    try:
        slopes = footprint.measured_slopes()
    except Exception:  # noqa: BLE001 - an estimate for a message must never stop a run
        return [], {}
    try:
        feet = footprint.project(spec, entries, slopes)
    except Exception:  # noqa: BLE001 - a warning must never stop a run
        feet = []
    try:
        needs = footprint.stage_disk_mib(spec, entries, slopes)
    except Exception:  # noqa: BLE001 - an estimate for a message must never stop a run
        needs = {}
    return feet, needs


def warn_if_too_big(plan: RunPlan) -> None:
    """Before anything runs: the data stages whose projected memory or disk exceeds this machine
    (harness/run/footprint.py; the dry-run prints the whole table). A warning, never a stop: the
    projection extends bench_scale's slopes, it does not measure this run."""
    try:
        lines = footprint.would_not_fit(list(plan.footprints), total_memory_gib(), footprint.free_disk_gib())
    except Exception:  # noqa: BLE001 - a warning must never stop a run
        return
    for line in lines:
        print(f"  ! {line} (projected from bench_scale's slopes; run --dry-run for each stage)", flush=True)


def run_method(
    method: str,
    profile: str | ProfileChoice | None = None,
    datasets: list[str] | None = None,
    force: bool = False,
    stage: str | None = None,
    dry_run: bool = False,
    track_required: bool = False,
    precision: str | None = None,
    allow_cpu: bool = False,
    seed: int = DEFAULT_SEED,
    seed_study: bool = False,
    pretrain_seed: int | None = None,
) -> RunResult:
    """Run ``method`` end to end (or up to ``stage``, or only plan it); ``profile``: the one asked for, or the
    :class:`ProfileChoice` the command already made (the profile is chosen once); ``track_required``: a tracking
    failure fails the run (before its first stage when the server fails at the start) instead of a warning;
    ``precision``: what the spec's ``precision: auto`` resolves to (fp32 / bf16) instead of measuring;
    ``allow_cpu``: a CUDA-declared paper profile may run on the CPU (device_check.py refuses it otherwise);
    ``seed``: the seed every stage draws from; ``seed_study``: this run is one seed of `run --seeds`;
    ``pretrain_seed``: that study's pre-training seed (`--pretrain-seeds`; None: seed 42's, unrecorded)."""

    if pretrain_seed is not None and not seed_study:
        raise HarnessError("a pre-training seed belongs to a seed study: run --seeds S --pretrain-seeds P")
    choice = profile if isinstance(profile, ProfileChoice) else choose_profile(method, profile)
    spec = load_method(method, choice.profile)
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
        seeds = (seed, seed_study, pretrain_seed)
        return _run_spec(spec, choice, datasets, force, stage, dry_run, track_required, allow_cpu, seeds)


def _run_spec(
    spec: MethodSpec,
    choice: ProfileChoice,
    datasets: list[str] | None,
    force: bool,
    stage: str | None,
    dry_run: bool,
    track_required: bool = False,
    allow_cpu: bool = False,
    seeds: tuple[int, bool, int | None] = (DEFAULT_SEED, False, None),
) -> RunResult:
    """The resolved spec's run: its plan built once, then printed (a dry-run), or checked and executed;
    ``seeds``: the run's seed, whether it is one seed of a study, and that study's pre-training seed."""
    seed, seed_study, pretrain_seed = seeds
    datasets = datasets or list(spec.get("datasets", []))
    benchmarks = {name: get_benchmark(name) for name in datasets}  # fail fast on unknown names
    pretraining = "" if pretrain_seed is None else f" (pre-training seed {pretrain_seed})"
    print(
        reflow(
            f"{spec.name}: profile '{spec.profile}' ({choice.why}); datasets: {', '.join(datasets)}; seed {seed}{pretraining}"
        )
    )
    for note in spec.get("substitutions") or []:
        print(reflow(f"  substitution: {note}"))
    if not dry_run:
        # The card first (one line): a paper run must not start its CPU stages where its GPU stages cannot run.
        device_check.require(spec, allow_cpu)
    plan = build_plan(spec, choice, datasets, force, stage, seed, seed_study, pretrain_seed)
    if stage is not None and stage not in plan.stage_names():
        raise HarnessError(
            f"--stage {stage}: {spec.name} [{spec.profile}] runs no stage '{stage}' "
            f"(its stages: {', '.join(plan.stage_names())})"
        )
    if dry_run:
        print(reflow(plan.describe()))  # every line fits the output (--wide: as built)
        return RunResult(spec.name, spec.profile, spec.spec_hash, list(plan.stages), plan, dry_run=True)
    # Every input of the whole plan before its first stage: a later stage's missing file stops the run now.
    if plan.problems:
        raise preflight.refuse(spec, list(plan.problems))
    require_writable_homes()
    if stage is not None:
        return run_until(plan, track_required)
    return execute(plan, benchmarks, track_required)


def execute(plan: RunPlan, benchmarks: dict[str, Any], track_required: bool = False) -> RunResult:
    """The plan's stages, then (rank 0) their scores, the comparison with the papers and the run record."""
    spec = plan.spec
    run_id = new_run_id(spec.name, spec.profile, plan.seed, plan.pretrain_seed)
    tracker = rank_tracker(spec, run_id, run_tags(spec), track_required, plan.seed)
    if ranks.is_main():
        warn_if_too_big(plan)
    ctx = RunContext(
        spec,
        tracker,
        plan.stage_log(),
        plan.force,
        seed=plan.seed,
        seed_study=plan.seed_study,
        pretrain_seed=plan.pretraining_seed,
    )
    pipeline = pipeline_for(spec)
    started = time.time()
    with tracker.run():
        tracker.log_params(run_params(spec, plan.seed))  # first: a run that fails later still shows its setting
        variants = pipeline(ctx, list(plan.datasets))
        if not ranks.is_main():  # rank 0 scores, compares and records; every stage is finished here
            return RunResult(spec.name, spec.profile, spec.spec_hash, ctx.stages.entries, plan)

        def score(variant: str, name: str) -> Scored:
            return Scored(score_run_file(variants[variant][name], benchmarks[name]), variants[variant][name])

        scores = score_variants(tracker, ctx.stages, benchmarks, variants, score, plan.seed)
        comparisons = compare_variants(spec, list(variants), scores, ctx.stages.entries)
        record = build_record(
            run_id=run_id,
            method=spec.name,
            profile=spec.profile,
            spec=spec,
            scores=scores,
            comparisons=[c.to_dict() for c in comparisons],
            efficiency_by_stage=ctx.efficiency,
            stages=ctx.stages.entries,
            started=started,
            tracker=tracker,
            models_used=list(ctx.models_read),
            seed=plan.seed,
            pretrain_seed=plan.pretrain_seed,
        )
        log_parent_summary(tracker, record)  # final metrics, verdict counts, git, hardware on the parent
        path = write_record(record, tracker, plan.seed_study)
    record = record.replace(mlflow=tracker.info())  # after the write: the tracker's last word on the run
    print_outcome(comparisons, scores, record, path)
    return recorded_result(plan, record, path)


def compare_variants(
    spec: MethodSpec, variants: list[str], scores: RunScores, entries: list[dict[str, Any]]
) -> list[Any]:
    """Each variant's scores against the papers' reported cells of the method (none for a control or a user's
    own spec, HARNESS_SPECS_DIR: no printed numbers to compare with)."""
    reported = cells_for(method=spec.graded_method) if spec.graded_method in KNOWN_METHODS else []
    cells = [c for c in reported if c.benchmark in scores.metrics]
    exact = spec.get("family") in TRAINING_FREE_FAMILIES  # deterministic: a fixed tolerance, no seed spread
    comparisons = []
    for variant in variants:
        conditions = stage_conditions(spec, variant, scores.final, batch_changes(spec, entries))
        for comp in compare(
            scores.by_stage[variant], scores.per_query_by_stage[variant], cells, conditions, exact=exact
        ):
            comp.finetune_stage = variant
            comparisons.append(comp)
    return comparisons


def print_outcome(comparisons: list[Any], scores: RunScores, record: RunRecord, path: Path) -> None:
    """After the record is written: the comparison table, each benchmark's chance check, the summary line."""
    print()
    print(closing_table(comparisons))
    print()
    for name, check in scores.chance.items():
        print(reflow(f"{scores.final}: " + describe_chance(name, check, scores.metrics[name][check["measure"]])))
    print(reflow(summary_line(record, path)))
    print(wrap_text(reference_line(record), LINE_WIDTH, indent="  "))


LINE_WIDTH = 120  # the closing check's line wraps past this (a terminal's width; the run ids are long)


def reference_line(record: RunRecord, references: Path | None = None) -> str:
    """What the run's numbers were checked against: the committed reference of its precision in ``references``
    (default runs/records; the grading
    `check` gives it among "your runs"), or why none was; a manifest that cannot be read is said, never raised
    (the record is written)."""
    try:
        return closing_line(check_run(record, references))
    except HarnessError as exc:
        return f"not checked against a committed reference: {exc}"


def recorded_result(plan: RunPlan, record: RunRecord, path: Path) -> RunResult:
    """A finished run's result, read from the record it wrote."""
    return RunResult(
        record.method,
        record.profile,
        record.spec_hash,
        record.stages,
        plan,
        run_id=record.run_id,
        metrics=record.metrics,
        metrics_by_stage=record.metrics_by_stage,
        comparison=record.comparison,
        run_record=path,
        record=record,
        mlflow=record.mlflow,
        seconds=record.seconds,
        finetune_stage=record.finetune_stage,
        config_hash=config_hash(plan.spec.config),
    )


def summary_line(record: RunRecord, path: Path) -> str:
    """The run's summary line: the precision it trained in, its final retriever's primary measure per
    benchmark, in points (out of 100: "nDCG@10 1.0 points" is a chance-level score, not a perfect one),
    with that cell's verdict."""
    final = record.finetune_stage
    statuses = run_summary_states(record.comparison, final)  # the table's verdicts, one per number
    parts = []
    for ds, values in record.metrics.items():
        primary = next(iter(values))
        status = statuses.get((ds, primary), "no reported cell")
        parts.append(f"{ds} {primary} {fmt(100 * values[primary], 1)} points ({status})")
    where = tracking_line(record.mlflow)
    stage = f" {final}:" if final else ""
    precision = precision_label(record.stages)
    trained = f", {precision}" if precision != NO_TRAINING else ""  # the precision it was checked in
    return (
        f"{record.method} [{record.profile}{trained}]{stage} "
        + "; ".join(parts)
        + f" in {record.seconds}s -- record {path}; {where}"
    )
