"""What `run --dry-run` prints: the stages a run executes and the hardware mapping of a resolved spec.

The stage list comes from the run's own pipeline in plan mode (``harness.run.runner.plan_method``,
``RunContext.plan_only``): every stage a run would execute, in order, with its cache key and
whether a finished output is already in the cache; then the evaluation entries the runner adds.
Under a stage's first entry, its settings lines: the function registered for a stage that declares
``details`` in harness/stages/graph.py (:mod:`harness.stages.registry`; the built-in stages' are defined
and registered here).

The paper profiles declare their hardware (e.g. 16 x V100 for CoT-MAE + QC). On other
hardware the harness keeps the global batch: per-device batch x devices x accumulation, or
gradient caching when a contrastive loss needs the whole batch at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from harness.core.hardware import Hardware, detect, planned_world_size
from harness.core.seeds import DEFAULT_SEED
from harness.data.requirements import missing_inputs
from harness.gate.cell_state import paper_run, stage_reason
from harness.papers.registry import cells_for
from harness.papers.schema import KNOWN_METHODS
from harness.pipelines.context import STOP
from harness.pipelines.learned_sparse import DEFAULT_RERANKER_NAME
from harness.pretrain.objectives import objective_class
from harness.run import footprint, projection
from harness.run.footprint import is_mining
from harness.run.projection import Cost
from harness.spec.block_settings import (
    CorpusSettings,
    QgenSettings,
    RetrievalSettings,
    TokenizerSettings,
)
from harness.spec.conditions import run_conditions
from harness.spec.method import MethodSpec
from harness.spec.run_settings import ModelSettings
from harness.spec.stage_settings import (
    BI_ENCODER_TEACHER,
    CONFIGURED_RERANKER,
    TINY_RERANKER,
    PretrainSettings,
    RerankerSettings,
    StageSettings,
    finetune_settings,
    precision_source,
)
from harness.stages import registry
from harness.stages.graph import MINING, STAGES
from harness.training.precision import device_precision


def entry_label(entry: dict[str, Any]) -> str:
    """`stage[/dataset]`, as the stage's own progress lines name it."""
    return f"{entry['stage']}/{entry['dataset']}" if entry.get("dataset") else entry["stage"]


def describe(
    spec: MethodSpec,
    datasets: list[str],
    stages: list[dict[str, Any]],
    notes: list[tuple[int, str]] | None = None,
    hw: Hardware | None = None,
    preflight: list[str] | None = None,
    seed: int = DEFAULT_SEED,
    costs: Sequence[Cost] = (),
) -> str:
    """The plan: header, hardware, numbered `stages` (a dry-run's entries) with `notes` in place; `preflight`:
    the lines a run refuses to start with (harness/run/preflight.py; the missing data alone when not given);
    `seed`: the run's; `costs`: the plan's projected stage costs (harness/run/projection.py; none given, no projection)."""
    hw = hw or detect()

    lines = [f"plan for {spec.name} [{spec.profile}] (spec hash {spec.spec_hash}, seed {seed})"]
    declared = spec.get("hardware") or {}
    on_cpu = declared.get("device_type", "cpu") == "cpu"  # a tiny profile inherits the paper's gpu/hours keys
    decl = (
        f"{declared.get('devices', 1)} x {'cpu' if on_cpu else declared.get('gpu') or declared.get('device_type')}"
        + (f", {declared['hours']} h" if declared.get("hours") and not on_cpu else "")
    )
    lines.append(f"  hardware: declared {decl}; detected {hw.describe()}")
    built = [e for e in stages if e["stage"] != "evaluate"]
    counts = {s: sum(e.get("plan") == s for e in built) for s in ("to run", "cached", "reused")}
    lines.append(
        f"  stages, in the order a run executes them ({counts['to run']} to run, {counts['cached']} cached"
        + (f", {counts['reused']} reused" if counts["reused"] else "")
        + "):"
    )
    by_index: dict[int, list[str]] = {}
    stops = 0
    for index, text in notes or []:
        if text.startswith(STOP):  # the first one is where a run stops; the others stop it once that is fixed
            stops += 1
            text = text if stops == 1 else "a run would stop here too: " + text[len(STOP) :]
        by_index.setdefault(index, []).append("\n         ".join(text.splitlines()))
    helped: set[str] = set()
    described: set[str] = set()
    width = max([len(entry_label(e)) for e in stages] + [12])
    digits = len(str(len(stages)))
    first_step: dict[Any, int] = {}  # key -> the step that builds it or takes it from the cache
    readers = vector_readers(stages)
    for i, entry in enumerate(stages, 1):
        lines.extend(f"       ! {text}" for text in by_index.get(i - 1, []))
        if entry["stage"] == "evaluate" and (i == 1 or stages[i - 2]["stage"] != "evaluate"):
            lines.append("  evaluation, after the stages:")
        status = entry.get("plan", "to run")
        if status == "reused":
            remark = f"the output of step {first_step.get(entry.get('key'), '?')}"
        else:
            remark = STAGES[entry["stage"]].does if entry["stage"] in STAGES and entry["stage"] not in helped else ""
            helped.add(entry["stage"])
        first_step.setdefault(entry.get("key"), i)
        lines.append(f"    {i:>{digits}}. {entry_label(entry):<{width}}  {status:<6}  {remark}".rstrip())
        if entry.get("resumes"):
            lines.append("          resumes from its unfinished work folder (.<key>.partial.tmp)")
        lines.extend(f"          {line}" for line in vectors_line(i, entry, readers))
        if status != "reused" and detail_kind(entry) not in described:  # a kind of stage's settings, once
            described.add(detail_kind(entry))
            lines.extend(f"          {detail}" for detail in stage_details(spec, entry, hw))
    lines.extend(f"       ! {text}" for text in by_index.get(len(stages), []))
    lines.append(f"  benchmarks: {', '.join(datasets)}")

    lines.extend(projection.describe(spec, stages, hw, costs))
    lines.extend(footprint.describe(spec, stages))

    missing = missing_inputs(spec, datasets) if preflight is None else preflight
    if missing:
        lines.append(
            f"  inputs this machine lacks ({len(missing)}; a run refuses to start until every one is here: "
            f"`python -m harness fetch --method {spec.name} --profile {spec.profile}` gets them):"
        )
        lines.extend(f"    ! {line}" for line in missing)
    else:
        lines.append("  inputs: every data file and checkpoint the run reads is here (or on the mirror) and verified")
    lines.extend(graded_cells(spec, datasets, stages))
    return "\n".join(lines)


def vector_readers(stages: list[dict[str, Any]]) -> dict[str, list[int]]:
    """Shared corpus vectors (a dense search's ``vectors`` tag) -> the steps that read them."""
    readers: dict[str, list[int]] = {}
    for i, entry in enumerate(stages, 1):
        if entry.get("vectors") and entry.get("plan") != "reused":
            readers.setdefault(str(entry["vectors"]), []).append(i)
    return readers


def vectors_line(step: int, entry: dict[str, Any], readers: dict[str, list[int]]) -> list[str]:
    """Under a search that shares its corpus vectors: the one encoding and the steps that read it."""
    steps = readers.get(str(entry.get("vectors")), [])
    if len(steps) < 2:
        return []
    if step == steps[0]:
        return [
            f"corpus vectors {entry['vectors'][:8]}: one encoding of this corpus with this model, "
            f"read by steps {', '.join(map(str, steps))}"
        ]
    return [f"corpus vectors {entry['vectors'][:8]}: those of step {steps[0]} (not encoded again)"]


def graded_cells(spec: MethodSpec, datasets: list[str], stages: list[dict[str, Any]]) -> list[str]:
    """The paper cells the planned run would be graded against, each with the conditions it matched:
    what the run can confirm, known before it spends any GPU time."""

    evaluated = [str(e["dataset"]) for e in stages if e["stage"] == "evaluate"]  # "<variant>/<benchmark>"
    variants = list(dict.fromkeys(name.split("/", 1)[0] for name in evaluated)) or ["final"]
    final = variants[-1]
    cells = [
        c
        for c in (cells_for(method=spec.graded_method) if spec.graded_method in KNOWN_METHODS else [])
        if c.benchmark in datasets and c.score is not None
    ]
    lines = []
    for variant in variants:
        conditions = run_conditions(spec.config, spec.name, spec.profile)
        if variant.startswith("retriever"):
            conditions.update(finetune_stage=variant, final_stage=final)
        for cell in cells:
            if stage_reason(cell, conditions):  # the rule every surface's cell state reads (gate.cell_state)
                continue
            matched = ", ".join(f"{k}={v}" for k, v in sorted((cell.conditions or {}).items())) or "none stated"
            lines.append(
                f"    {cell.paper} {cell.table} {cell.row} / {cell.column} ({cell.benchmark} {cell.measure}, "
                f"{variant}): {cell.value}; conditions matched: {matched}"
            )
    head = f"  graded cells: {len(lines)}"
    if not lines:
        if spec.profile != "paper":
            why = "the profile is not 'paper'"
        else:  # each reason no paper-profile run can grade these cells, as the glance and report give it
            # a cell a declared variant grades has no paper_run reason: this run's own mismatch says why
            own = run_conditions(spec.config, spec.name, spec.profile)
            reasons = dict.fromkeys(r for c in cells if (r := paper_run(c).reason or stage_reason(c, own)))
            why = (
                f"no paper-profile run can grade {spec.name}'s cells here: {'; '.join(reasons)}"
                if reasons
                else "no reported cell states this run's setting (steps, data, stage, deviations)"
            )
        return [f"{head} ({why}: nothing this run produces is compared with a paper)"]
    return [
        head + " (each paper cell this run's numbers will be graded against, by the rule of "
        "harness/evaluation/verdict.py)",
        *lines,
    ]


def detail_kind(entry: dict[str, Any]) -> str:
    """The group whose settings lines an entry shows (a plan prints them once per group): mining, or
    its stage's ``details_group`` (BM25 index and search share theirs)."""
    if is_mining(entry):
        return "mine"
    stage = STAGES.get(entry["stage"])
    return stage.group if stage else entry["stage"]


def stage_details(spec: MethodSpec, entry: dict[str, Any], hw: Hardware) -> list[str]:
    """An entry's settings lines: those registered for its stage (declared ``details`` in
    harness/stages/graph.py), or mining's; the functions are this module's own (registered as it loads)."""
    stage = STAGES.get(entry["stage"])
    name = MINING if is_mining(entry) else stage.name if stage and stage.details else None
    return registry.DETAILS.function(name)(spec, entry, hw) if name else []


# The settings lines of the stages declaring `details` in harness/stages/graph.py, registered for them:
# (spec, plan entry, hardware) -> the stage's settings lines.


@registry.details(MINING)
def mining_details(spec: MethodSpec, entry: dict[str, Any], hw: Hardware) -> list[str]:
    """Retriever 1 mines for retriever 2, retriever 2 for retriever 3, to the next stage's negative_depth."""
    miner, reader = (
        ("retriever2", "retriever3")
        if "mine-retriever2" in (entry.get("dataset") or "")
        else ("retriever1", "retriever2")
    )
    depth = StageSettings.from_spec(spec, reader).negative_depth
    return [
        f"mining: top {depth} of the training queries with {miner} (hard negatives for {reader}, its negative_depth)"
    ]


@registry.details("tokenizer")
def tokenizer_details(spec: MethodSpec, entry: dict[str, Any], hw: Hardware) -> list[str]:
    tok = TokenizerSettings.from_spec(spec)
    return [f"vocabulary {tok.vocab_size}, corpora {tok.corpora}"]


@registry.details("passages")
def passages_details(spec: MethodSpec, entry: dict[str, Any], hw: Hardware) -> list[str]:
    corpus = CorpusSettings.from_spec(spec)
    return [f"sources {corpus.source}, max {corpus.max_tokens} tokens, max passages {corpus.max_passages or 'all'}"]


@registry.details("qgen")
def qgen_details(spec: MethodSpec, entry: dict[str, Any], hw: Hardware) -> list[str]:
    q = QgenSettings.from_spec(spec)
    if q.model == "term-sampler":
        return [f"term sampler fitted on {q.train_pairs}, {q.num_queries} queries/passage"]
    return [
        f"model {q.model}, {q.num_queries} queries/passage, top_k {q.top_k}, top_p {q.top_p}, prefix {q.input_prefix!r}"
    ]


@registry.details("index", "retrieve")
def bm25_details(spec: MethodSpec, entry: dict[str, Any], hw: Hardware) -> list[str]:
    cfg = RetrievalSettings.from_spec(spec)
    return [f"BM25 k1 {cfg.k1}, b {cfg.b}, fields {', '.join(cfg.fields)}, {cfg.threads} thread(s)"]


@registry.details("impact_index", "impact_search")
def impact_details(spec: MethodSpec, entry: dict[str, Any], hw: Hardware) -> list[str]:
    return [", ".join(f"{k} {v}" for k, v in RetrievalSettings.from_spec(spec).impact().items())]


@registry.details("reranker", "teacher_scores")
def teacher_details(spec: MethodSpec, entry: dict[str, Any], hw: Hardware) -> list[str]:
    r3 = RerankerSettings.from_spec(spec)
    ckpt = r3.reranker_checkpoint or (DEFAULT_RERANKER_NAME if r3.reranker == CONFIGURED_RERANKER else None)
    line = f"teacher {r3.reranker}" + (f" ({ckpt})" if ckpt else "")
    if r3.reranker not in (TINY_RERANKER, BI_ENCODER_TEACHER):  # a checkpoint: identified by its weights
        line += (
            f", weights sha256 {r3.reranker_sha256} (checked before scoring)"
            if r3.reranker_sha256
            else ", weights unidentified (no reranker_sha256): no cell of a named teacher is graded"
        )
    return [line]


@registry.details("retriever1", "retriever2", "retriever3")
def retriever_details(spec: MethodSpec, entry: dict[str, Any], hw: Hardware) -> list[str]:
    return finetune_details(spec, entry["stage"], hw)


@registry.details("pretrain")
def pretrain_details(spec: MethodSpec, entry: dict[str, Any], hw: Hardware) -> list[str]:
    from harness.pretrain.trainer import plan_batches

    pre = PretrainSettings.from_spec(spec)
    cls = objective_class(pre.objective)
    n = planned_world_size(hw, spec.get("hardware"))
    lines = [
        f"objective {pre.objective} ({pre.context} context), params {pre.objective_params or {}}",
        f"init {ModelSettings.from_spec(spec).init}, steps {pre.steps or f'{pre.epochs} epochs'}, "
        f"lr {pre.lr}, warm-up {pre.warmup_ratio}, max length {pre.max_length}",
    ]
    declared_n = int((spec.get("hardware") or {}).get("devices", 1))
    try:
        declared_plan = plan_batches(
            pre.global_batch,
            pre.per_device_batch,
            declared_n,
            cls.supports_accumulation,
            pre.grad_cache_chunk,
            cls.gathers_across_ranks,
        )
        lines.append(f"declared: {declared_plan['note']}")
        here = plan_batches(
            pre.global_batch,
            pre.per_device_batch,
            n,
            cls.supports_accumulation,
            pre.grad_cache_chunk,
            cls.gathers_across_ranks,
        )
        lines.append(f"here:     {here['note']}")
    except Exception as exc:  # noqa: BLE001 - the plan reports the problem instead of failing
        lines.append(f"batch mapping problem: {exc}")
    lines.append(precision_line(pre.precision, precision_source(spec, "pretrain"), hw))
    return lines


def precision_line(precision: str, source: str, hw: Hardware) -> str:
    """The precision a training stage runs in here, and why (``auto`` as measured or flagged)."""
    how = {"measured": "auto, measured on this CPU", "flag": "auto, set by --precision"}.get(source, "stated")
    if precision not in ("fp32", "auto") and hw.device_type != "cuda":
        import torch

        said: list[str] = []
        here = device_precision(precision, torch.device("cpu"), said.append)
        return f"precision: {precision} ({how}); {here} here" + (f" ({said[0]})" if said else "")
    if hw.device_type == "cuda":  # harness.training.engine: the fp16 loss scaler, TF32 for what stays fp32
        scaled = " with loss scaling" if precision == "fp16" else ""
        return f"precision: {precision} ({how}){scaled}; TF32 for fp32 matmuls"
    return f"precision: {precision} ({how})"


def finetune_details(spec: MethodSpec, retriever: str, hw: Hardware) -> list[str]:
    merged = finetune_settings(spec, retriever)
    s = StageSettings.from_spec(spec, retriever)
    n = planned_world_size(hw, spec.get("hardware"))
    q, p = s.global_queries, s.passages_per_query
    lines = [
        f"init {merged.get('init', 'pretrained')}, negatives {merged.get('negatives')}, "
        f"depth {s.negative_depth}, epochs {s.epochs}, lr {s.lr}"
    ]
    if q and p:
        per = q // n if q % n == 0 else q / n
        lines.append(f"effective batch {q} queries x {p} passages = {q * p} ({n} device(s) x {per} queries each)")
    for key in ("flops_lambda", "distill", "contrastive_weight"):
        if key in merged:
            lines.append(f"{key} {merged[key]}")
    lines.append(precision_line(s.precision, precision_source(spec, retriever), hw))
    return lines
