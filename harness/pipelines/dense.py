"""Dense family (Tevatron-style) of the shared chain (harness/pipelines/chain.py): bi-encoders with CLS
pooling trained with InfoNCE, mining and evaluation by exact inner-product search.

Stage 2 is under-specified in the papers' code (texttron/tevatron#43, #81, #107), so the
spec states both choices explicitly: `retriever2.init` (pretrained | retriever1) and
`retriever2.negatives` (mined, optionally plus bm25).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from harness.core import ranks
from harness.core.errors import HarnessError
from harness.data.catalog import get_benchmark
from harness.data.formats import iter_trec_run
from harness.data.requirements import train_split
from harness.evaluation.dense_run import judged_queries, retrieve
from harness.finetune.negatives import make_examples, negative_pool
from harness.pipelines.chain import (
    Family,
    Runs,
    run_chain,
    train_queries,
    training_key,
)
from harness.pipelines.context import input_key
from harness.retrieval.corpus_vectors import corpus_embeddings, vectors_tag
from harness.retrieval.encoder import default_batch_size, gather_embeddings, load_encoder, pick_device
from harness.retrieval.rank_search import local_shard
from harness.spec.run_settings import FinetuneSettings
from harness.spec.stage_settings import StageSettings, precision_source
from harness.stages import registry
from harness.stages.checkpoints import model_fingerprint
from harness.stages.graph import DENSE
from harness.training.precision import cuda_encode_precision, encode_precision

if TYPE_CHECKING:
    from harness.pipelines.context import RunContext


def train_stage(ctx: RunContext, stage: str, init_dir: Path, pools: list[Path], extra_key: dict[str, str]) -> Path:
    """Fine-tune a bi-encoder from `init_dir` on the train queries with negatives from `pools`."""
    from harness.finetune.dense import DenseTrainConfig, train_dense

    settings = StageSettings.from_spec(ctx.spec, stage)
    name, split = train_split(ctx.spec)
    bench = get_benchmark(name)
    config = training_key(ctx, stage, settings)

    def build(work: Path) -> dict[str, Any]:
        queries, qrels = train_queries(bench, split, config["max_train_queries"], ctx.seed)
        depth = settings.negative_depth
        examples = make_examples(queries, qrels, [negative_pool(iter_trec_run(p), qrels, depth) for p in pools])
        if not examples:
            raise HarnessError(f"{stage}: no training groups (queries with positives and negatives) in {name}-{split}")
        train_cfg = DenseTrainConfig(**settings.trainer_kwargs(ranks.world_size()), seed=ctx.seed)
        stats = train_dense(
            init_dir,
            examples,
            train_cfg,
            work / "model",
            passages=bench.corpus(),
            logger=lambda step, m: ctx.tracker.log_metrics({f"{stage}/{k}": v for k, v in m.items()}, step=step),
        )
        losses = stats.get("loss_history") or []
        print(
            f"  {stage}: {len(examples)} groups, effective batch {stats.get('effective_batch')}, "
            f"loss {losses[0]:.3f} -> {losses[-1]:.3f}"
            if losses
            else f"  {stage}: {len(examples)} groups"
        )
        return {
            "groups": len(examples),
            "effective_batch": stats.get("effective_batch"),
            "loss_first": losses[0] if losses else None,
            "loss_last": losses[-1] if losses else None,
            "precision": stats.get("precision"),
            "precision_source": precision_source(ctx.spec, stage),
            "weight_change": stats.get("weight_change"),
        }

    inputs = {"init": input_key(init_dir), **extra_key, **bench.files()}
    return ctx.cached_stage(stage, None, config, inputs, build).dir / "model"


def start_encoding(spec: Any) -> dict[str, Any]:
    """How the fine-tuned retrievers encode (pooling, no normalisation, their query and passage
    lengths), so the zero-shot start is scored like for like. A sentence-transformers init such
    as all-MiniLM-L6-v2 would otherwise be read with its own normalised mean pooling, and
    "fine-tuning minus start" would mix in a change of pooling."""
    r1 = StageSettings.from_spec(spec, "retriever1")
    return {
        "pooling": "cls",
        "normalize": False,  # DenseTrainConfig trains with CLS pooling
        "query_max_length": r1.max_q_len,
        "passage_max_length": r1.max_p_len,
    }


# What a dense_retrieve stage's done.json keeps: the numbers of the search itself.
SEARCH_OUTPUTS = (
    "index_device",
    "search_devices",
    "search_processes",
    "shards",
    "docs",
    "dim",
    "index_bytes",
    "queries",
    "k",
    "search_seconds",
    "qps",
)


def retrieve_stage(
    ctx: RunContext,
    label: str,
    model_dir: Path,
    dataset: str,
    split: str,
    depth: int,
    encoding: dict[str, Any] | None = None,
) -> Path:
    """The split's queries encoded with `model_dir` (``encoding`` overrides what the folder says:
    pooling, normalize, query/passage max length), exact inner-product top-k over the corpus vectors
    of the shared cache (:mod:`harness.retrieval.corpus_vectors`: a corpus is encoded once per model,
    so mining and evaluating with retriever 1 on one corpus encode it once). The run's
    :func:`~harness.training.precision.encode_precision` joins ``encoding`` only when it is not fp32, so fp32 keys stay as they were.
    On CUDA an fp32 run encodes under fp16 autocast in token-sorted batches of 2048 and searches with
    faiss on the GPUs where a GPU faiss is installed, as the official CoT-MAE scripts do (caskcsg/ir
    cotmae-qc/msmarco/test_retriever.sh: ``--fp16``, per-device batch 2048, 8 corpus splits on 8 GPUs,
    faiss on GPUs); the record's ``encode_precision``, ``encode_batching`` and ``index_device`` say which,
    the key does not (a CPU run encodes and searches as before: fp32 or its run's precision, batches of 64
    sorted by characters, faiss on the CPU). With several processes every rank searches the corpus rows it
    holds and rank 0 merges (:mod:`harness.retrieval.rank_search`: the one-process run file; the record's
    ``search_processes``/``search_devices`` say where it ran)."""

    bench = get_benchmark(dataset)
    if (precision := encode_precision(ctx.spec)) != "fp32":
        encoding = {**(encoding or {}), "precision": precision}

    def build(work: Path) -> dict[str, Any]:
        # Every rank of a launched run encodes its slice of the corpus and of the queries (merged in id
        # order on rank 0); on CUDA under fp16 autocast in token-sorted batches of 2048,
        # as the official scripts encode. Neither the process count nor the CUDA precision and batching is
        # in the key: they change vectors only at float rounding level (rounding of fp16, or of other
        # padded batch shapes in fp32).
        encoder = load_encoder(model_dir, **_device_encoding(encoding))
        batch_size = default_batch_size(encoder.device)  # 64 on a CPU, as before
        ids, vectors, info = corpus_embeddings(encoder, bench, model_fingerprint(model_dir), batch_size)
        qids, q_emb, seconds = sharded_queries(encoder, judged_queries(bench, split))
        # Several processes: each searches the rows it holds and rank 0 merges (harness.retrieval.rank_search)
        from harness.training import distributed as D

        multi = ranks.world_size() > 1 and D.active()
        corpus = local_shard(ids, vectors, info.get("cache_file"), encoder.device) if multi else (ids, vectors)
        _, stats = retrieve(
            encoder,
            bench,
            split,
            depth,
            corpus=corpus,
            run_file=work / "run.trec",
            tag=f"{ctx.spec.name}-{label}",
            query_vectors=(qids, q_emb, seconds),
        )
        if not ranks.is_main():
            return {}
        return {
            **{k: stats[k] for k in SEARCH_OUTPUTS},
            "encode_precision": encoder.precision,
            "encode_batching": encoder.batching(batch_size),
            "encode_processes": info["processes"],
            "corpus_cached": info["cached"],
            "corpus_encode_seconds": round(info["encode_seconds"], 2),
            "corpus_vectors": info["key"],
        }

    inputs = {"model": input_key(model_dir), **bench.files()}
    config = {"depth": depth, "split": split, **({"encoding": encoding} if encoding else {})}
    # `vectors` (log entry only, not the key): the searches of one model over one corpus share it
    tags = {"vectors": vectors_tag(inputs["model"], encoding, bench)}
    cache = ctx.cached_stage("dense_retrieve", f"{dataset}/{split}/{label}", config, inputs, build, tags=tags)
    ctx.efficiency.setdefault(label, {})[dataset] = {
        k: v for k, v in ctx.stage_meta(cache).items() if k in ("qps", "index_bytes", "search_seconds")
    }
    return cache.dir / "run.trec"


def _device_encoding(encoding: dict[str, Any] | None) -> dict[str, Any]:
    """``encoding`` with the precision this device encodes in (fp16 autocast on CUDA for an fp32 run)."""
    requested = (encoding or {}).get("precision", "fp32")
    return {**(encoding or {}), "precision": cuda_encode_precision(requested, pick_device())}


def sharded_queries(encoder: Any, queries: dict[str, str]) -> tuple[list[str], np.ndarray, float]:
    """(query ids, vectors, seconds): each rank of a launched run encodes its contiguous slice of the
    queries, gathered in id order on every rank (one process: all of them)."""
    started = time.perf_counter()
    qids, local = encoder.encode_queries(queries, rank=ranks.rank(), world_size=ranks.world_size())
    return qids, gather_embeddings(local, len(qids)), time.perf_counter() - started


@registry.pipeline(DENSE)
def run_dense(ctx: RunContext, datasets: list[str]) -> Runs:
    """Runs per fine-tuning stage and dataset: {"retriever1": {dataset: run}, "retriever2": {...}}."""

    name, split = train_split(ctx.spec)

    def zero_shot(encoder: Path) -> dict[str, Path]:
        # `finetune.evaluate_start`: also score the encoder fine-tuning starts from (zero-shot, encoded
        # exactly as the retrievers are), so a run shows what fine-tuning added (the control's check
        # that fine-tuning works).
        return {"start": encoder} if FinetuneSettings.from_spec(ctx.spec).evaluate_start else {}

    def search(label: str, model: Path, dataset: str) -> Path:
        encoding = start_encoding(ctx.spec) if label == "start" else None
        return retrieve_stage(ctx, label, model, dataset, get_benchmark(dataset).eval_split, 1000, encoding)

    return run_chain(
        ctx,
        datasets,
        Family(
            start=lambda encoder: encoder,
            train=lambda stage, init, pools, key: train_stage(ctx, stage, init, pools, key),
            mine=lambda label, model, depth: retrieve_stage(ctx, "mine", model, name, split, depth),
            search=search,
            zero_shot=zero_shot,
        ),
    )
