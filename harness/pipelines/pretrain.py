"""Pre-training pipeline: tokenizer -> passages -> (query generation) -> pre-train -> exported encoder.

Every step is a cached stage (see harness/cache.py): its output folder is named by the hash
of its config and inputs, so a changed hyper-parameter re-runs only what depends on it, and
the pre-training stage resumes from its own checkpoints after a kill.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.core import ranks
from harness.core.errors import HarnessError
from harness.core.seeds import DEFAULT_SEED
from harness.corpus.tokenizer import train_wordpiece
from harness.data.catalog import benchmark_split, get_benchmark
from harness.pipelines.context import input_key
from harness.pretrain.objectives import build_objective
from harness.spec.block_settings import CorpusSettings, QgenSettings, TokenizerSettings
from harness.spec.stage_settings import PretrainSettings, precision_source
from harness.stages.checkpoints import resolve_checkpoint

if TYPE_CHECKING:
    from harness.pipelines.context import RunContext

# Tiny-profile architecture keys in the spec -> BertConfig keys.
ARCH_KEYS = {
    "layers": "num_hidden_layers",
    "hidden": "hidden_size",
    "heads": "num_attention_heads",
    "intermediate": "intermediate_size",
}


def corpus_names(spec_value: Any) -> list[str]:
    names = spec_value if isinstance(spec_value, list) else [spec_value]
    return [str(n) for n in names]


def corpus_checksums(names: list[str]) -> dict[str, str]:
    """Checksums of the named corpora: enough for a stage's cache key, without reading them."""

    files: dict[str, str] = {}
    for name in names:  # embedded, or downloaded when the stage is built (HARNESS_DATA_MIRROR: a local copy)
        files.update(get_benchmark(name).corpus_files())
    return files


def load_corpora(names: list[str]) -> dict[str, dict[str, str]]:
    """Union of the named corpora, doc ids prefixed by dataset; read only when a stage is built."""

    return {f"{name}:{doc_id}": doc for name in names for doc_id, doc in get_benchmark(name).iter_corpus()}


def iter_corpora(names: list[str]) -> Iterator[tuple[str, dict[str, str]]]:
    """:func:`load_corpora`'s documents in its order, streamed (one document in memory at a time)."""

    for name in names:
        for doc_id, doc in get_benchmark(name).iter_corpus():
            yield f"{name}:{doc_id}", doc


def tokenizer_stage(ctx: RunContext) -> Path:
    tok = TokenizerSettings.from_spec(ctx.spec)
    if tok.from_ != "wordpiece":
        return ctx.checkpoint(tok.from_, "tokenizer")

    names = corpus_names(tok.corpora)
    files = corpus_checksums(names)
    config = {**tok.key(), "corpora": names, "lowercase": True}

    def build(work: Path) -> dict[str, Any]:
        texts = [f"{d.get('title', '')} {d.get('text', '')}".strip() for d in load_corpora(names).values()]
        train_wordpiece(texts, work / "tokenizer", vocab_size=config["vocab_size"])
        return {"documents": len(texts)}

    return ctx.cached_stage("tokenizer", None, config, files, build).dir / "tokenizer"


def passages_stage(ctx: RunContext, tokenizer_dir: Path) -> Path:
    from harness.corpus.passages import build_passages, load_tokenizer, save_passages

    corpus = CorpusSettings.from_spec(ctx.spec)
    names = corpus_names(corpus.source)
    files = corpus_checksums(names)
    config = {**corpus.key(), "source": names, "splitter": "punkt-trained-on-corpus"}

    def build(work: Path) -> dict[str, Any]:
        # every document: streamed, resumable by shard, split by a pool on the node's cores (same file for
        # any number of workers; the output's `workers` says how many, never the key)
        if config["max_passages"] is None:
            from harness.corpus.passage_shards import write_passages

            return write_passages(
                lambda: iter_corpora(names),
                tokenizer_dir,
                work / "passages.jsonl",
                work,
                config["max_tokens"],
                seed=config["seed"],
                punkt_train_chars=config["punkt_train_chars"],
            )
        corpus = load_corpora(names)
        # max_passages: a fixed, seeded set of whole documents keeps tiny runs short while every
        # method sees the same passages.
        passages = build_passages(
            corpus,
            load_tokenizer(tokenizer_dir),
            config["max_tokens"],
            seed=config["seed"],
            punkt_cache_dir=work,
            max_passages=config["max_passages"],
            punkt_train_chars=config["punkt_train_chars"],
        )
        save_passages(passages, work / "passages.jsonl")
        return {
            "passages": len(passages),
            "documents": len({p.doc_id for p in passages}),
            "corpus_documents": len(corpus),
        }

    inputs = {**files, "tokenizer": input_key(tokenizer_dir)}
    return ctx.cached_stage("passages", None, config, inputs, build).dir / "passages.jsonl"


def qgen_stage(ctx: RunContext, passages_file: Path, tokenizer_dir: Path) -> Path:
    """Generated queries per passage: a local doc2query checkpoint, or a tiny T5 trained here."""
    import torch

    from harness.corpus.passage_file import PassageFile
    from harness.corpus.qgen import generate_queries, generation_dtype, merge_query_shards, sample_text
    from harness.training import distributed as D

    q = QgenSettings.from_spec(ctx.spec)
    if q.model == "term-sampler":
        return term_qgen_stage(ctx, q, passages_file)
    if q.model == "tiny-t5":
        model_dir = tiny_t5_stage(ctx, q, tokenizer_dir)
    elif q.model is None:
        raise HarnessError("qgen.model is required: a query generator checkpoint, tiny-t5 or term-sampler")
    else:
        model_dir = ctx.checkpoint(q.model, "query generator")
    model_key = input_key(model_dir)
    device = str(D.cuda_device(ranks.local_rank())) if torch.cuda.is_available() else "cpu"
    batch_size = q.cuda_batch_size if device.startswith("cuda") else q.batch_size

    def build(work: Path) -> dict[str, Any]:
        # Every rank of a launched run generates its share (global batches, seeded by their first
        # passage: harness.corpus.qgen), then rank 0 merges the shards in passage order: the file a
        # one-process run writes.
        # Read by index from the file, a batch at a time: a rank never holds the corpus.
        passages = PassageFile(passages_file)
        rank, world = ranks.rank(), ranks.world_size()
        result = generate_queries(
            model_dir,
            passages,
            num_queries=q.num_queries,
            top_k=q.top_k,
            top_p=q.top_p,
            input_prefix=q.input_prefix,
            max_new_tokens=q.max_new_tokens,
            seed=ctx.pretraining_seed,
            rank=rank,
            world_size=world,
            out_path=work / "queries.jsonl",
            batch_size=batch_size,
            device=device,
            passages_key=input_key(passages_file),
        )
        if world > 1:
            D.control_barrier()  # every shard is complete
            if not ranks.is_main():
                return {}
            merge_query_shards(work / "queries.jsonl", passages, world)
        for sample in result.samples[:3]:
            print(f"  sample queries: {sample_text(sample)}")
        ctx.tracker.log_text("\n".join(map(str, result.samples)), "qgen_samples.txt")
        grounding = report_grounding(passages, work / "queries.jsonl")
        return {
            "passages": len(passages),
            "samples": [str(s) for s in result.samples[:5]],
            **grounding,
            "processes": world,  # kept in done.json: a cached entry says it too
            "precision": generation_dtype(device),
        }

    config = {**q.key("qgen"), "model": model_key}
    if device.startswith("cuda"):  # half precision at the CUDA batch samples other queries than the CPU
        config.update({"batch_size": batch_size, "precision": generation_dtype(device)})
    cache = ctx.cached_stage("qgen", None, config, {"passages": input_key(passages_file)}, build)
    return cache.dir / "queries.jsonl"


def report_grounding(passages: Sequence[Any], queries_file: Path) -> dict[str, float]:
    """Print and return how much the queries depend on their passage (own vs another document's)."""
    from harness.corpus.qgen import load_queries, query_grounding

    grounding = query_grounding(passages, load_queries(queries_file))
    own, other = grounding["query_word_overlap_own"], grounding["query_word_overlap_other"]
    ratio = own / other if other else float("inf")
    grounding["query_word_overlap_ratio"] = round(ratio, 2) if other else None
    verdict = "" if own - other >= 0.05 else " -- the generated queries barely depend on their passage"
    print(
        f"  query words found in their own passage {own:.1%}, in another document's passage {other:.1%} "
        f"({ratio:.1f}x){verdict}"
    )
    return grounding


def train_pairs(source: str) -> list[tuple[str, str]]:
    """(query, relevant document text) pairs of a training split, e.g. 'nfcorpus-train'."""
    from harness.corpus.tiny_t5 import pairs_from_qrels

    name, split = benchmark_split(source)
    if split in ("test", ""):
        raise HarnessError(
            f"query generator training pairs '{source}': name a training split (e.g. nfcorpus-train); "
            "test queries are never training text"
        )
    bench = get_benchmark(name)
    return pairs_from_qrels(bench.corpus(), bench.queries(split), bench.qrels(split))


def term_qgen_stage(ctx: RunContext, q: QgenSettings, passages_file: Path) -> Path:
    """Queries from the learned term sampler (harness/corpus/term_qgen.py), which stands in
    for doc2query-T5 where none is available; fitted on training pairs only."""
    from harness.corpus.passages import load_passages
    from harness.corpus.qgen import sample_text
    from harness.corpus.term_qgen import (
        fit_term_model,
        sample_queries,
        write_term_queries,
    )

    source = q.train_pairs
    config = {**q.key("qgen"), "version": 2}  # 2: no empty query for word-less passages

    def build(work: Path) -> dict[str, Any]:
        if not ranks.is_main():  # a CPU sampler: rank 0 writes it all while the others wait
            return {}
        model = fit_term_model(train_pairs(source), smoothing=config["smoothing"])
        passages = load_passages(passages_file)
        write_term_queries(model, passages, config["num_queries"], ctx.pretraining_seed, work / "queries.jsonl")
        samples = [
            {"pid": p.pid, "queries": sample_queries(model, p, config["num_queries"], ctx.pretraining_seed)}
            for p in passages[:3]
        ]
        for sample in samples:
            print(f"  sample queries: {sample_text(sample)}")
        ctx.tracker.log_text("\n".join(map(str, samples)), "qgen_samples.txt")
        return {
            "passages": len(passages),
            "training_pairs": model.pairs,
            "samples": [str(s) for s in samples],
            **report_grounding(passages, work / "queries.jsonl"),
        }

    inputs = {"passages": input_key(passages_file), **get_benchmark(benchmark_split(source)[0]).files()}
    return ctx.cached_stage("qgen", None, config, inputs, build).dir / "queries.jsonl"


def tiny_t5_stage(ctx: RunContext, q: QgenSettings, tokenizer_dir: Path) -> Path:
    from harness.corpus.tiny_t5 import pairs_from_qrels, train_tiny_t5

    source = q.train_pairs
    name, split = benchmark_split(source)
    bench = get_benchmark(name)
    config = q.key("qgen_model")

    def build(work: Path) -> dict[str, Any]:
        pairs = pairs_from_qrels(bench.corpus(), bench.queries(split or "train"), bench.qrels(split or "train"))
        result = train_tiny_t5(
            pairs,
            tokenizer_dir,
            work / "model",
            steps=q.steps,
            input_prefix=q.input_prefix,
            max_input_tokens=q.max_input_tokens,
        )
        return {
            "pairs": len(pairs),
            "final_loss": float(result.losses[-1]) if result.losses else None,
            "weight_change": result.weight_change,
        }

    inputs = {**bench.files(), "tokenizer": input_key(tokenizer_dir)}
    # code 2: trained on the shared engine (its schedule and epoch order): other weights than code 1's.
    return ctx.cached_stage("qgen_model", None, config, inputs, build, code_version="2").dir / "model"


def build_objective_for(spec: Any, tokenizer_dir: Path, seed: int = DEFAULT_SEED):
    import torch
    from transformers import AutoTokenizer

    from harness.pretrain.models import bert_config_from_dict

    pre = spec.get("pretrain")
    model = spec.get("model") or {}
    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir), local_files_only=True)
    # Seeded here: the new weights (the whole model from scratch, or decoders, heads and an MLM head
    # missing from a checkpoint) must not depend on which earlier stages happened to run in this
    # process rather than come from the cache; torch's default seed differs in every process.
    torch.manual_seed(seed)
    if model.get("init") == "scratch":
        arch = {ARCH_KEYS[k]: v for k, v in model.items() if k in ARCH_KEYS}
        config = bert_config_from_dict(arch, vocab_size=len(tokenizer))
        objective = build_objective(pre["objective"], config, **(pre.get("objective_params") or {}))
        return objective, tokenizer
    from harness.pretrain.models import load_masked_lm

    path = resolve_checkpoint(model["init"], "initial encoder")
    loaded, new_head = load_masked_lm(path)
    objective = build_objective(pre["objective"], loaded.config, **(pre.get("objective_params") or {}))
    missing, _ = objective.masked_lm().load_state_dict(loaded.state_dict(), strict=False)
    if any(not k.endswith("position_ids") for k in missing):
        raise HarnessError(f"checkpoint {path} lacks weights the encoder needs: {', '.join(missing[:5])} ...")
    if new_head:
        print(
            f"  {model['init']} has no MLM head: a BERT head was added (transform and bias new, decoder tied "
            "to the word embeddings)"
        )
    return objective, tokenizer


def pretrain_stage(ctx: RunContext, tokenizer_dir: Path, passages_file: Path, queries_file: Path | None) -> Path:
    from harness.corpus.epoch_examples import EpochExamples
    from harness.corpus.passage_file import PassageFile
    from harness.corpus.qgen import load_queries
    from harness.pretrain.export import export_encoder
    from harness.pretrain.trainer import TrainConfig, train

    settings = PretrainSettings.from_spec(ctx.spec)
    context = settings.context
    config = {"pretrain": settings.key(), "model": ctx.spec.get("model")}
    if context == "mixed":  # one kind per training step since QC v2 §5.2 was followed (earlier: per example)
        config["mixing"] = "per training step"
    inputs = {
        "passages": input_key(passages_file),
        "tokenizer": input_key(tokenizer_dir),
        "queries": input_key(queries_file) if queries_file else "",
    }

    def build(work: Path) -> dict[str, Any]:
        # Read lazily: one file offset per passage, a pair built when the trainer indexes it (each rank
        # its share); the same examples as corpus.pairs.make_examples (tests/test_epoch_examples.py).
        passages = PassageFile(passages_file)
        queries = load_queries(queries_file) if queries_file else None
        objective, tokenizer = build_objective_for(ctx.spec, tokenizer_dir, ctx.pretraining_seed)

        def examples_fn(epoch: int, rank: int = 0, world_size: int = 1) -> EpochExamples:
            return EpochExamples(context, passages, queries, epoch=epoch, seed=ctx.pretraining_seed)

        train_cfg = TrainConfig(
            **settings.trainer_kwargs(settings.total_steps(len(passages))),
            seed=ctx.pretraining_seed,
            output_dir=work / "checkpoints",
        )
        result = train(
            objective,
            examples_fn,
            tokenizer,
            train_cfg,
            logger=lambda step, metrics: ctx.tracker.log_metrics(
                {f"pretrain/{k}": v for k, v in metrics.items()}, step=step
            ),
        )
        if ranks.is_main():  # every rank holds the same weights after DDP; one writes them
            export_encoder(
                objective,
                tokenizer,
                work / "encoder",
                metadata={"method": ctx.spec.name, "profile": ctx.spec.profile, "spec_hash": ctx.spec.spec_hash},
            )
            # The encoder with its MLM head: learned-sparse fine-tuning (LexMAE) starts from the LM logits.
            objective.masked_lm().save_pretrained(work / "mlm")
            tokenizer.save_pretrained(work / "mlm")
        losses = result.loss_history
        head = sum(losses[:10]) / max(1, len(losses[:10]))
        tail = sum(losses[-10:]) / max(1, len(losses[-10:]))
        print(f"  pre-training loss: first 10 steps {head:.3f} -> last 10 steps {tail:.3f} ({result.step} steps)")
        return {
            "steps": result.step,
            "loss_first10": head,
            "loss_last10": tail,
            "plan": result.plan["note"],
            "world_size": result.plan["world_size"],
            "global_batch": result.plan["global_batch"],
            "per_device_batch": result.plan["per_device_batch"],
            "accumulation_steps": result.plan["accumulation_steps"],
            "resumed_from": result.resumed_from,
            "notes": result.notes,
            "precision": result.precision,
            "precision_source": precision_source(ctx.spec, "pretrain"),
            "weight_change": result.weight_change,
        }

    return ctx.cached_stage("pretrain", None, config, inputs, build, code_version="2").dir / "encoder"


def run_pretrain(ctx: RunContext) -> Path:
    """All pre-training stages for the spec; returns the exported encoder folder."""
    init = (ctx.spec.get("model") or {}).get("init")
    if init and init != "scratch":  # a missing init fails now (a dry-run lists it), not after the corpus stages
        ctx.checkpoint(init, "initial encoder")
    tokenizer_dir = tokenizer_stage(ctx)
    passages_file = passages_stage(ctx, tokenizer_dir)
    queries_file = None
    if PretrainSettings.as_stated(ctx.spec).context in ("qc", "mixed"):
        queries_file = qgen_stage(ctx, passages_file, tokenizer_dir)
    return pretrain_stage(ctx, tokenizer_dir, passages_file, queries_file)
