"""Dense pipeline (Tevatron-style): pre-trained encoder -> retriever 1 (BM25 negatives) ->
mine hard negatives with retriever 1 -> retriever 2 -> evaluation of both retrievers.

Stage 2 is under-specified in the papers' code (texttron/tevatron#43, #81, #107), so the
spec states both choices explicitly: `retriever2.init` (pretrained | retriever1) and
`retriever2.negatives` (mined, optionally plus bm25).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness import SEED
from harness.context import input_key
from harness.data.requirements import train_split
from harness.errors import HarnessError
from harness.stage_settings import MineSettings, StageSettings, finetune_settings

if TYPE_CHECKING:
    from harness.context import RunContext


def check_train_queries(ctx: "RunContext") -> None:
    """Fail fast, before pre-training, when the catalog has no such training queries (the run would
    otherwise stop at the first stage that reads them). A dry-run shows it as a line of its plan
    instead and goes on, so that it lists every stage on any machine."""
    from harness.data.catalog import get_benchmark
    from harness.stages import PRETRAINING

    if ctx.stop_after in PRETRAINING:
        return  # run --stage pretrain (or earlier): fine-tuning's data is not read
    name, split = train_split(ctx.spec)
    bench = get_benchmark(name)  # an unknown name is an error, in a dry-run too
    if not bench.has_split(split):
        message = (f"finetune.train_queries {ctx.spec.get('finetune.train_queries')}: the catalog has no '{split}' "
                   f"queries of '{name}' (its splits: {', '.join(bench.splits()) or 'none'}); fine-tuning reads "
                   "its training queries and qrels from them")
        if not ctx.plan_only:
            raise HarnessError(message)
        ctx.plan_stop(message)


def train_queries(bench: Any, split: str, limit: int | None) -> tuple[dict[str, str], dict[str, dict[str, int]]]:
    """The training queries and qrels, subsampled (seeded) to ``limit`` judged queries."""
    queries, qrels = bench.queries(split), bench.qrels(split)
    if limit and len(qrels) > limit:
        import random

        keep = set(random.Random(SEED).sample(sorted(qrels), limit))
        qrels = {q: r for q, r in qrels.items() if q in keep}
    return queries, qrels


def detected_world_size() -> int:
    """Devices this machine trains on (1 on CPU); the per-device share of a global batch divides by it."""
    from harness.hardware import detect, world_size

    return world_size(detect())


def encoder_stage(ctx: "RunContext") -> Path:
    """The starting encoder: pre-trained by the spec's objective, or the untouched init (control)."""
    if ctx.spec.get("pretrain.objective") not in (None, "none"):
        from harness.pipelines.pretrain import run_pretrain

        return run_pretrain(ctx)
    return random_init_stage(ctx)


def random_init_stage(ctx: "RunContext") -> Path:
    """No pre-training: the same seeded random init the objectives start from, exported as is."""
    from harness.pipelines.pretrain import ARCH_KEYS, tokenizer_stage

    model = ctx.spec.get("model") or {}
    tokenizer_dir = tokenizer_stage(ctx)
    if model.get("init") != "scratch":
        return ctx.checkpoint(model["init"], "initial encoder")

    def build(work: Path) -> dict[str, Any]:
        import torch
        from transformers import AutoTokenizer, BertModel

        from harness.pretrain.models import bert_config_from_dict

        tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir), local_files_only=True)
        config = bert_config_from_dict({ARCH_KEYS[k]: v for k, v in model.items() if k in ARCH_KEYS},
                                       vocab_size=len(tokenizer))
        torch.manual_seed(SEED)
        BertModel(config, add_pooling_layer=False).save_pretrained(work / "encoder")
        tokenizer.save_pretrained(work / "encoder")
        return {}

    return ctx.cached_stage("random_init", None, {"model": model}, {"tokenizer": input_key(tokenizer_dir)},
                            build).dir / "encoder"


def train_stage(ctx: "RunContext", stage: str, init_dir: Path, pools: list[Path], extra_key: dict[str, str]) -> Path:
    """Fine-tune a bi-encoder from `init_dir` on the train queries with negatives from `pools`."""
    from harness.data.catalog import get_benchmark
    from harness.data.formats import read_trec_run
    from harness.finetune.dense import DenseTrainConfig, train_dense
    from harness.finetune.negatives import make_examples, negative_pool

    settings = StageSettings.from_spec(ctx.spec, stage)
    name, split = train_split(ctx.spec)
    bench = get_benchmark(name)
    config = StageSettings.raw(ctx.spec, stage, ("lr", "global_queries", "passages_per_query", "epochs", "max_q_len",
                                                 "max_p_len", "warmup_ratio", "weight_decay", "negative_depth",
                                                 "max_train_queries"))
    config["train_queries"] = f"{name}-{split}"

    def build(work: Path) -> dict[str, Any]:
        queries, qrels = train_queries(bench, split, config["max_train_queries"])
        depth = settings.negative_depth
        examples = make_examples(queries, qrels, [negative_pool(read_trec_run(p), qrels, depth) for p in pools])
        if not examples:
            raise HarnessError(f"{stage}: no training groups (queries with positives and negatives) in {name}-{split}")
        train_cfg = DenseTrainConfig(**settings.trainer_kwargs(detected_world_size()), seed=SEED)
        stats = train_dense(init_dir, examples, train_cfg, work / "model", passages=bench.corpus(),
                            logger=lambda step, m: ctx.tracker.log_metrics({f"{stage}/{k}": v for k, v in m.items()},
                                                                         step=step))
        losses = stats.get("loss_history") or []
        print(f"  {stage}: {len(examples)} groups, effective batch {stats.get('effective_batch')}, "
              f"loss {losses[0]:.3f} -> {losses[-1]:.3f}" if losses else f"  {stage}: {len(examples)} groups")
        return {"groups": len(examples), "effective_batch": stats.get("effective_batch"),
                "loss_first": losses[0] if losses else None, "loss_last": losses[-1] if losses else None}

    inputs = {"init": input_key(init_dir), **extra_key, **bench.files()}
    return ctx.cached_stage(stage, None, config, inputs, build).dir / "model"


def start_encoding(spec: Any) -> dict[str, Any]:
    """How the fine-tuned retrievers encode (pooling, no normalisation, their query and passage
    lengths), so the zero-shot start is scored like for like. A sentence-transformers init such
    as all-MiniLM-L6-v2 would otherwise be read with its own normalised mean pooling, and
    "fine-tuning minus start" would mix in a change of pooling."""
    r1 = StageSettings.from_spec(spec, "retriever1")
    return {"pooling": "cls", "normalize": False,  # DenseTrainConfig trains with CLS pooling
            "query_max_length": r1.max_q_len, "passage_max_length": r1.max_p_len}


# What a dense_retrieve stage's done.json keeps: the numbers of the search itself.
SEARCH_OUTPUTS = ("shards", "docs", "dim", "index_bytes", "queries", "k", "search_seconds", "qps")


def retrieve_stage(ctx: "RunContext", label: str, model_dir: Path, dataset: str, split: str, depth: int,
                   encoding: dict[str, Any] | None = None) -> Path:
    """Encode the corpus and the split's queries with `model_dir` (``encoding`` overrides what the
    folder says: pooling, normalize, query/passage max length); exact inner-product top-k."""
    from harness.data.catalog import get_benchmark
    from harness.evaluation.dense_run import retrieve
    from harness.retrieval.encoder import load_encoder

    bench = get_benchmark(dataset)

    def build(work: Path) -> dict[str, Any]:
        encoder = load_encoder(model_dir, **(encoding or {}))
        _, stats = retrieve(encoder, bench, split, depth, run_file=work / "run.trec", tag=f"{ctx.spec.name}-{label}")
        return {k: stats[k] for k in SEARCH_OUTPUTS}

    inputs = {"model": input_key(model_dir), **bench.files()}
    config = {"depth": depth, "split": split, **({"encoding": encoding} if encoding else {})}
    cache = ctx.cached_stage("dense_retrieve", f"{dataset}/{split}/{label}", config, inputs, build)
    ctx.efficiency.setdefault(label, {})[dataset] = {k: v for k, v in ctx.stage_meta(cache).items()
                                                     if k in ("qps", "index_bytes", "search_seconds")}
    return cache.dir / "run.trec"


def run_dense(ctx: "RunContext", datasets: list[str]) -> dict[str, dict[str, Path]]:
    """Runs per fine-tuning stage and dataset: {"retriever1": {dataset: run}, "retriever2": {...}}."""
    from harness.pipelines.bm25 import bm25_negatives_run

    stages = ctx.spec.get("stages", [])
    check_train_queries(ctx)
    encoder0 = encoder_stage(ctx)
    name, split = train_split(ctx.spec)
    bm25_train = bm25_negatives_run(ctx, name, split, StageSettings.from_spec(ctx.spec, "retriever1").negative_depth)
    r1 = train_stage(ctx, "retriever1", encoder0, [bm25_train], {"bm25": input_key(bm25_train)})
    out: dict[str, dict[str, Path]] = {}
    # `finetune.evaluate_start`: also score the encoder fine-tuning starts from (zero-shot, encoded
    # exactly as the retrievers are), so a run shows what fine-tuning added (the control's check
    # that fine-tuning works).
    start = encoder0 if ctx.spec.get("finetune.evaluate_start") else None
    if start is not None:
        out["start"] = {}
    out["retriever1"] = {}
    if "finetune_r2" in stages:
        mined = retrieve_stage(ctx, "mine", r1, name, split, MineSettings.from_spec(ctx.spec).depth)
        r2_cfg = finetune_settings(ctx.spec, "retriever2")
        init = r1 if r2_cfg.get("init") == "retriever1" else encoder0
        pools = [mined] + ([bm25_train] if "bm25" in (r2_cfg.get("negatives") or []) else [])
        r2 = train_stage(ctx, "retriever2", init, pools, {"pools": ",".join(input_key(p) for p in pools)})
        out["retriever2"] = {}
    from harness.data.catalog import get_benchmark
    from harness.pipelines.forums import retrieve_parts

    models = {"start": start, "retriever1": r1, "retriever2": r2 if "retriever2" in out else None}
    for dataset in datasets:
        for label, model in models.items():
            if model is None:
                continue
            encoding = start_encoding(ctx.spec) if label == "start" else None
            out[label][dataset] = retrieve_parts(ctx, label, dataset, lambda part, label=label, model=model, enc=encoding:
                                                 retrieve_stage(ctx, label, model, part,
                                                                get_benchmark(part).eval_split, 1000, enc))
    return out
