"""The chain every trained method runs, shared by the dense and the learned-sparse families.

    start encoder (pre-trained, or the control's init) -> retriever 1 on BM25 negatives
    -> mine with retriever 1 -> retriever 2 on the mined negatives (-> retriever 3, distilled)
    -> each retriever searches each benchmark

A family (:class:`Family`: harness/pipelines/dense.py, learned_sparse.py) supplies how it trains a
retriever, mines with one and searches with one; this module owns the order, the negative pools,
which model each retriever starts from (``finetune.retrieverN.init``) and the evaluation runs, so
the two families cannot drift apart. The stages and their reads are declared in harness/stages/graph.py.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.core.errors import HarnessError
from harness.core.seeds import DEFAULT_SEED
from harness.data.catalog import get_benchmark
from harness.data.requirements import train_split
from harness.pipelines.bm25 import bm25_negatives_run
from harness.pipelines.context import input_key
from harness.pipelines.forums import retrieve_parts
from harness.pipelines.hard_negatives import hard_negatives_run
from harness.pipelines.pretrain import ARCH_KEYS, run_pretrain, tokenizer_stage
from harness.spec.run_settings import FinetuneSettings
from harness.spec.stage_settings import StageSettings, finetune_settings, pretrains
from harness.stages.graph import PRETRAINING

if TYPE_CHECKING:
    from harness.pipelines.context import RunContext

Runs = dict[str, dict[str, Path]]  # label (start, retriever1, ...) -> dataset -> TREC run


@dataclass(frozen=True)
class Family:
    """What a family plugs into :func:`run_chain`.

    - ``start(encoder)``: the folder its retrievers start from (dense: the encoder; SPLADE: its masked LM);
    - ``train(stage, init, pools, key)``: fine-tune retriever ``stage`` on the negatives of ``pools``
      (TREC runs), ``key`` naming what the stage read for its cache key;
    - ``mine(label, model, depth)``: the run of the training queries whose top ``depth`` results are the
      next stage's negatives (``depth``: that stage's ``negative_depth``: one setting, no separate mining depth);
    - ``search(label, model, dataset)``: the evaluation run of one benchmark (or forum);
    - ``distil(models, encoder, bm25, init)``: retriever 3 from a teacher (learned-sparse only);
    - ``zero_shot``: models scored before the retrievers (dense: the start encoder, ``finetune.evaluate_start``).
    """

    start: Callable[[Path], Path]
    train: Callable[[str, Path, list[Path], dict[str, str]], Path]
    mine: Callable[[str, Path, int], Path]
    search: Callable[[str, Path, str], Path]
    distil: Callable[[dict[str, Path], Path, Path, Path], Path] | None = None
    zero_shot: Callable[[Path], dict[str, Path]] = lambda encoder: {}


def run_chain(ctx: RunContext, datasets: list[str], family: Family, before: Callable[[], None] = lambda: None) -> Runs:
    """Runs per retriever and dataset: {"retriever1": {dataset: run}, "retriever2": {...}, ...}; ``before``
    runs the family's own fail-fast checks first."""

    steps = ctx.spec.get("stages", [])
    before()
    check_train_queries(ctx)
    encoder0 = encoder_stage(ctx)
    init0 = family.start(encoder0)
    name, split = train_split(ctx.spec)
    published = FinetuneSettings.from_spec(ctx.spec).hard_negatives
    bm25_train = (
        hard_negatives_run(ctx, published, name, split)
        if published
        else bm25_negatives_run(ctx, name, split, StageSettings.from_spec(ctx.spec, "retriever1").negative_depth)
    )
    models = {"retriever1": family.train("retriever1", init0, [bm25_train], {"bm25": input_key(bm25_train)})}

    def init_for(stage: str) -> Path:
        choice = finetune_settings(ctx.spec, stage).get("init") or "pretrained"
        if choice == "pretrained":
            return init0
        if choice not in models:
            raise HarnessError(
                f"finetune.{stage}.init: {choice!r} is not pretrained or an earlier retriever ({', '.join(models)})"
            )
        return models[choice]

    if "finetune_r2" in steps:
        mined = family.mine("retriever1", models["retriever1"], mining_depth(ctx, "retriever2"))
        negatives = finetune_settings(ctx.spec, "retriever2").get("negatives") or []
        pools = [mined] + ([bm25_train] if "bm25" in negatives else [])
        models["retriever2"] = family.train(
            "retriever2", init_for("retriever2"), pools, {"pools": ",".join(input_key(p) for p in pools)}
        )
        if "finetune_r3" in steps:
            if family.distil is None:
                raise HarnessError(f"{ctx.spec.get('family')} methods have no retriever 3")
            models["retriever3"] = family.distil(models, encoder0, bm25_train, init_for("retriever3"))
    evaluated = {**family.zero_shot(encoder0), **models}
    out: Runs = {label: {} for label in evaluated}
    for dataset in datasets:
        for label, model in evaluated.items():
            out[label][dataset] = retrieve_parts(
                ctx, label, dataset, lambda part, label=label, model=model: family.search(label, model, part)
            )
    return out


# --- the start of the chain ---------------------------------------------------------------------


def check_train_queries(ctx: RunContext) -> None:
    """Fail fast, before pre-training, when the catalog has no such training queries (the run would
    otherwise stop at the first stage that reads them). A dry-run shows it as a line of its plan
    instead and goes on, so that it lists every stage on any machine."""

    if ctx.stop_after in PRETRAINING:
        return  # run --stage pretrain (or earlier): fine-tuning's data is not read
    name, split = train_split(ctx.spec)
    bench = get_benchmark(name)  # an unknown name is an error, in a dry-run too
    if not bench.has_split(split):
        message = (
            f"finetune.train_queries {FinetuneSettings.from_spec(ctx.spec).train_queries}: the catalog has no '{split}' "
            f"queries of '{name}' (its splits: {', '.join(bench.splits()) or 'none'}); fine-tuning reads "
            "its training queries and qrels from them"
        )
        if not ctx.plan_only:
            raise HarnessError(message)
        ctx.plan_stop(message)


def train_queries(
    bench: Any, split: str, limit: int | None, seed: int = DEFAULT_SEED
) -> tuple[dict[str, str], dict[str, dict[str, int]]]:
    """The training queries and qrels, subsampled (by ``seed``, the run's) to ``limit`` judged queries."""
    queries, qrels = bench.queries(split), bench.qrels(split)
    if limit and len(qrels) > limit:
        keep = set(random.Random(seed).sample(sorted(qrels), limit))
        qrels = {q: r for q, r in qrels.items() if q in keep}
    return queries, qrels


def mining_depth(ctx: RunContext, stage: str) -> int:
    """How deep the previous retriever searches the training queries for `stage`'s negatives: the
    stage's own ``negative_depth`` (it draws its negatives from no deeper than that)."""
    return StageSettings.from_spec(ctx.spec, stage).negative_depth


def training_key(ctx: RunContext, stage: str, settings: StageSettings) -> dict[str, Any]:
    """A fine-tuning stage's cache key: every keyed setting of the stage (harness.spec.settings.Settings.key)
    and which training queries it reads; its init, negatives and teacher are its inputs."""
    name, split = train_split(ctx.spec)
    return {
        **settings.key(),
        "max_train_queries": FinetuneSettings.from_spec(ctx.spec).max_train_queries,
        "train_queries": f"{name}-{split}",
    }


def encoder_stage(ctx: RunContext) -> Path:
    """The starting encoder: pre-trained by the spec's objective, or the untouched init (control)."""
    if pretrains(ctx.spec):
        return run_pretrain(ctx)
    return random_init_stage(ctx)


def random_init_stage(ctx: RunContext) -> Path:
    """No pre-training: the same seeded random init the objectives start from, exported as is."""

    model = ctx.spec.get("model") or {}
    tokenizer_dir = tokenizer_stage(ctx)
    if model.get("init") != "scratch":
        return ctx.checkpoint(model["init"], "initial encoder")

    def build(work: Path) -> dict[str, Any]:
        import torch
        from transformers import AutoTokenizer, BertModel

        from harness.pretrain.models import bert_config_from_dict

        tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir), local_files_only=True)
        config = bert_config_from_dict(
            {ARCH_KEYS[k]: v for k, v in model.items() if k in ARCH_KEYS}, vocab_size=len(tokenizer)
        )
        torch.manual_seed(ctx.pretraining_seed)
        BertModel(config, add_pooling_layer=False).save_pretrained(work / "encoder")
        tokenizer.save_pretrained(work / "encoder")
        return {}

    return (
        ctx.cached_stage("random_init", None, {"model": model}, {"tokenizer": input_key(tokenizer_dir)}, build).dir
        / "encoder"
    )
