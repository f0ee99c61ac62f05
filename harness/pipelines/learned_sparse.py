"""Learned-sparse pipeline (LexMAE, Shen et al. ICLR 2023, §4.2 and Fig. 2; SimLM's recipe).

pre-trained masked LM -> retriever 1 (SPLADE-max on BM25 negatives, FLOPS 0.002) -> mine with
retriever 1 -> retriever 2 (mined negatives, FLOPS 0.008) -> mine with retriever 2 -> reranker
scores of the mined candidates -> retriever 3 (KL to the reranker + 0.2 x InfoNCE + FLOPS) ->
Lucene impact index + search for each retriever and dataset.

Choices the paper leaves open, stated here and in the spec:
- Initialisation: every retriever starts from the LexMAE pre-trained *masked LM* (encoder + MLM
  head, the pre-training stage's ``mlm/`` folder), as SPLADE needs the LM logits. Retriever 2 and
  3 follow ``finetune.retriever2.init`` / ``finetune.retriever3.init`` (default: pretrained).
- Teacher (stage 3): ``reranker: tiny-cross-encoder`` trains a small cross-encoder here (from the
  pre-trained encoder: from random init it stays at chance) on the train queries' BM25 groups;
  ``configured-checkpoint`` loads the off-the-shelf reranker the paper used (Zhou et al. 2022b)
  from ``models/<finetune.retriever3.reranker_checkpoint>`` (default name ``zhou2022b-ranker``, the paper's teacher),
  identified by its weights' sha256 (``reranker_sha256``: other weights under that name stop the run; unset, the
  run states its teacher as unidentified and is graded against no cell of a named teacher);
  ``bi-encoder`` scores with the off-the-shelf bi-encoder ``reranker_checkpoint`` as
  ``teacher_scale x sim(q, p)`` (the mini profile's teacher, see harness/finetune/reranker.py);
  any other value is itself a checkpoint name or path.
- Scored candidates (stage 3): training draws one positive and ``passages_per_query - 1``
  negatives per query and epoch, so the reranker scores ``epochs`` positives and
  ``epochs x (passages_per_query - 1)`` negatives per query (seeded samples of the query's
  positives and of its retriever-2 pool at ``negative_depth``); ``teacher_positives`` /
  ``teacher_negatives`` in ``finetune.retriever3`` override the counts.
- Retrieval: documents are quantised to ``floor(quantization x w)`` after the optional top-k
  sparsification (``retrieval.topk_sparsify``), queries quantised the same way. A query keeps at
  most ``retrieval.max_query_terms`` (default and maximum 1024, Lucene's clause limit: beyond it
  Anserini's search fails and the query silently gets no results) of its largest impacts; trained
  SPLADE queries have tens of terms, so this bites only barely trained (tiny) models, and the
  search stage says how many queries it capped.

One impact index per (retriever, corpus) serves both mining (train queries) and evaluation.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.core import ranks
from harness.core.errors import HarnessError
from harness.data.catalog import get_benchmark
from harness.data.formats import iter_trec_run, write_trec_run
from harness.data.requirements import train_split
from harness.finetune import teacher_pairs
from harness.finetune.negatives import (
    make_examples,
    negative_pool,
    positives,
    sample_group,
)
from harness.finetune.teacher_pairs import iter_key_chunks, write_scores_json
from harness.finetune.teacher_shards import merged_scores, remove_shards, score_shard
from harness.pipelines.chain import (
    Family,
    Runs,
    mining_depth,
    run_chain,
    train_queries,
    training_key,
)
from harness.pipelines.context import input_key
from harness.pipelines.pretrain import ARCH_KEYS
from harness.retrieval.encoder import DEFAULT_TITLE_SEPARATOR, passage_text
from harness.retrieval.impact import (
    ImpactVector,
    build_impact_index,
    load_sparse_encoder,
    quantise,
    search_impact,
    sparsify_topk,
)
from harness.retrieval.impact_shards import encode_impacts
from harness.spec.block_settings import LUCENE_MAX_CLAUSES, RetrievalSettings
from harness.spec.conditions import PAPER_RERANKER
from harness.spec.run_settings import FinetuneSettings
from harness.spec.stage_settings import (
    BI_ENCODER_TEACHER,
    CONFIGURED_RERANKER,
    TINY_RERANKER,
    RerankerSettings,
    StageSettings,
    precision_source,
)
from harness.stages import registry
from harness.stages.checkpoints import WEIGHT_SUFFIXES, resolve_checkpoint, weights_sha256
from harness.stages.graph import PRETRAINING, SPARSE

if TYPE_CHECKING:
    from harness.pipelines.context import RunContext
    from harness.stages.artifacts import StageCache

DEFAULT_RERANKER_NAME = PAPER_RERANKER  # the paper's teacher (harness/spec/conditions.py)
# Items per encoding chunk (sorted by length within it): a chunk is what a rank encodes
# (harness/retrieval/impact_shards.py), so these sizes, not the process count, decide the batches.
ENCODE_CHUNK = 20_000  # passages
QUERY_CHUNK = 10_000  # queries: an evaluation split (MS MARCO dev: 6,980) is one chunk
EFFICIENCY_KEYS = (
    "qps",
    "index_bytes",
    "avg_doc_nonzeros",
    "avg_query_nonzeros",
    "search_seconds",
    "docs",
    "capped_queries",
)


# --- groups -------------------------------------------------------------------------------------


def grouped_examples(
    queries: Mapping[str, str], qrels: Mapping[str, Mapping[str, int]], pools: list[dict[str, list[str]]]
) -> list[tuple[str, str, list[str], list[str]]]:
    """(qid, query, positive ids, negative ids): one group per (pool, query), as negatives.make_examples."""

    out = []
    for pool in pools:
        for qid in sorted(pool):
            pos = positives(qrels, qid)
            if qid in queries and pos and pool[qid]:
                out.append((qid, queries[qid], pos, list(pool[qid])))
    return out


def masked_lm_init(encoder_dir: Path, ctx: RunContext | None = None) -> Path:
    """The pre-trained masked LM next to the exported encoder, or the encoder itself (fresh MLM head)."""
    mlm = encoder_dir.parent / "mlm"
    builder = ctx.planned_builder(encoder_dir) if ctx is not None else None
    # A dry-run plans before the encoder's stage is built: the pretrain stage writes mlm/ next to
    # encoder/ (pipelines.pretrain.pretrain_stage), random_init only the encoder.
    if (mlm / "config.json").is_file() if builder is None else builder == "pretrain":
        return mlm
    note = (
        f"no pre-trained masked LM at {mlm}; SPLADE fine-tuning starts from the encoder {encoder_dir} "
        "with an MLM head tied to its word embeddings (transform and bias initialised, not pre-trained)"
    )
    if ctx is not None and ctx.plan_only:
        ctx.plan_note(f"note: {note}")
    else:
        print(f"  note: {note}")
    return encoder_dir


def encoder_max_positions(ctx: RunContext, encoder_dir: Path) -> int:
    """``max_position_embeddings`` of the encoder in `encoder_dir` (part of the reranker stage's key).

    In a dry-run the encoder may not be built yet; its config is then the one its stage will export:
    the spec's scratch architecture (pretrain and random_init build it from the same config), else
    the init checkpoint's (512, BERT's, where that checkpoint is missing here too).
    """
    if ctx.planned_builder(encoder_dir) is None:
        init_cfg = json.loads((encoder_dir / "config.json").read_text(encoding="utf-8"))
        return int(init_cfg.get("max_position_embeddings", 512))

    model = ctx.spec.get("model") or {}
    if model.get("init") == "scratch":
        from harness.pretrain.models import bert_config_from_dict

        return int(
            bert_config_from_dict({ARCH_KEYS[k]: v for k, v in model.items() if k in ARCH_KEYS}).max_position_embeddings
        )

    try:
        config_file = Path(resolve_checkpoint(model["init"], "initial encoder")) / "config.json"
        return int(json.loads(config_file.read_text(encoding="utf-8")).get("max_position_embeddings", 512))
    except (HarnessError, OSError):
        return 512


# --- training -----------------------------------------------------------------------------------


def splade_train_stage(
    ctx: RunContext,
    stage: str,
    init_dir: Path,
    pools: list[Path],
    extra_key: dict[str, str],
    teacher_dir: Path | None = None,
) -> Path:
    """Fine-tune a SPLADE-max retriever from `init_dir` on negatives from `pools` (TREC runs).

    With `teacher_dir` (stage 3) the groups and the reranker's scores come from that folder
    (``groups.json``, ``scores.json``) and the loss is the distillation one.
    """
    from harness.finetune.splade import SpladeTrainConfig, train_splade

    settings = StageSettings.from_spec(ctx.spec, stage)
    name, split = train_split(ctx.spec)
    bench = get_benchmark(name)
    config = {**training_key(ctx, stage, settings), "distill": teacher_dir is not None}

    def build(work: Path) -> dict[str, Any]:
        passages = bench.corpus()
        teacher = None
        if teacher_dir is not None:
            groups = json.loads((teacher_dir / "groups.json").read_text(encoding="utf-8"))
            teacher = json.loads((teacher_dir / "scores.json").read_text(encoding="utf-8"))
            examples = [tuple(g) for g in groups]
        else:
            queries, qrels = train_queries(
                bench, split, FinetuneSettings.from_spec(ctx.spec).max_train_queries, ctx.seed
            )
            examples = grouped_examples(
                queries, qrels, [negative_pool(iter_trec_run(p), qrels, settings.negative_depth) for p in pools]
            )
        if not examples:
            raise HarnessError(f"{stage}: no training groups (queries with positives and negatives) in {name}-{split}")
        train_cfg = SpladeTrainConfig(
            **settings.splade_kwargs(ranks.world_size()), distill=teacher_dir is not None, seed=ctx.seed
        )
        stats = train_splade(
            init_dir,
            examples,
            train_cfg,
            work / "model",
            passages=passages,
            teacher_scores=teacher,
            logger=lambda step, m: ctx.tracker.log_metrics({f"{stage}/{k}": v for k, v in m.items()}, step=step),
        )
        losses = stats.get("loss_history") or []
        nnz = (
            f", nnz q {stats['avg_query_nonzeros']:.0f} / d {stats['avg_doc_nonzeros']:.0f}"
            if stats.get("avg_query_nonzeros") is not None
            else ""
        )
        print(
            f"  {stage}: {stats['examples']} groups, effective batch {stats['effective_batch']}, "
            + (f"loss {losses[0]:.3f} -> {losses[-1]:.3f}" if losses else "no steps")
            + nnz
        )
        return {
            "groups": stats["examples"],
            "effective_batch": stats["effective_batch"],
            "steps": stats["steps"],
            "mlm_head": stats["mlm_head"],
            "loss_first": losses[0] if losses else None,
            "loss_last": losses[-1] if losses else None,
            "avg_query_nonzeros": stats.get("avg_query_nonzeros"),
            "avg_doc_nonzeros": stats.get("avg_doc_nonzeros"),
            "start_bias_shift": stats.get("start_bias_shift"),
            "head_fit": stats.get("head_fit"),
            "notes": stats.get("notes"),
            "precision": stats.get("precision"),
            "precision_source": precision_source(ctx.spec, stage),
            "weight_change": stats.get("weight_change"),
        }

    inputs = {"init": input_key(init_dir), **extra_key, **bench.files()}
    return ctx.cached_stage(stage, None, config, inputs, build).dir / "model"


# --- stage 3 teacher ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Teacher:
    """Stage 3's scorer: a cross-encoder folder, or a bi-encoder scaled to logits (mini profile)."""

    path: Path
    key: str  # cache-key part: what decides the scores
    kind: str = "cross-encoder"
    scale: float = 1.0
    max_length: int = 128


def configured_reranker(ctx: RunContext) -> Teacher | None:
    """The configured stage-3 teacher; None when the spec trains the tiny cross-encoder here.

    Called before any training, so a missing checkpoint fails the run at once (a dry-run shows it as
    a line of its plan).
    """
    r3 = RerankerSettings.from_spec(ctx.spec)
    choice = r3.reranker
    if choice == TINY_RERANKER:
        return None
    if choice == BI_ENCODER_TEACHER:
        name = r3.reranker_checkpoint
        if not name:
            raise HarnessError(
                f"finetune.retriever3: reranker {BI_ENCODER_TEACHER} needs reranker_checkpoint "
                "(a local bi-encoder, e.g. all-minilm-l6-v2)"
            )
        scale, length = float(r3.teacher_scale), r3.teacher_max_length
        path = ctx.checkpoint(name, "stage-3 teacher (bi-encoder)")
        return Teacher(path, f"bi-encoder:{input_key(path)}:scale={scale:g}:len={length}", "bi-encoder", scale, length)
    ckpt_name = (r3.reranker_checkpoint or DEFAULT_RERANKER_NAME) if choice == CONFIGURED_RERANKER else choice
    path = ctx.checkpoint(
        ckpt_name,
        "stage-3 reranker (cross-encoder)",
        hint=(
            "\nLexMAE's stage 3 distils the off-the-shelf cross-encoder of Zhou et al. (2022b); put a local "
            "copy (an AutoModelForSequenceClassification folder with 1 or 2 labels) there, or name another one "
            "with finetune.retriever3.reranker_checkpoint in the spec"
        ),
    )
    check_teacher_weights(path, r3.reranker_sha256)
    return Teacher(path, f"checkpoint:{input_key(path)}")


def check_teacher_weights(path: Path, declared: str | None) -> None:
    """A checkpoint teacher is the weights the spec identifies (``reranker_sha256``), not whatever its
    folder holds: other weights under the right name stop the run before anything is scored. Unidentified,
    the run goes on, states its teacher as such (harness.spec.conditions.teacher_condition) and prints
    the sha256 to declare once the weights are known to be the intended teacher's."""
    if not path.exists():  # a dry-run's missing checkpoint: its plan notes it already
        return
    found = weights_sha256(path)
    if not declared:
        print(
            f"  note: stage-3 teacher {path}: weights sha256 {found or '(no weights file)'}, not identified by "
            "finetune.retriever3.reranker_sha256, so the run states it as unidentified and no cell of a named "
            "teacher is graded against it"
        )
        return
    if found is None:
        raise HarnessError(
            f"{path}: no weights file ({', '.join(WEIGHT_SUFFIXES)}) to identify the stage-3 teacher "
            "by; put the teacher's checkpoint there"
        )
    if found != declared.strip().lower():
        raise HarnessError(
            f"{path}: the stage-3 teacher's weights have sha256 {found}, not the {declared} that "
            "finetune.retriever3.reranker_sha256 declares: this is another model under the teacher's "
            "name; put the declared teacher there, or give this one a folder and sha256 of its own"
        )


def reranker_stage(ctx: RunContext, encoder_dir: Path, bm25_train: Path) -> Teacher:
    """The tiny cross-encoder trained here on the BM25 groups.

    It starts from the pre-trained encoder (`encoder_dir`); the classification head is new.
    """
    from harness.finetune.reranker import RerankerTrainConfig, train_cross_encoder

    r3 = RerankerSettings.from_spec(ctx.spec)
    settings = r3.train()
    name, split = train_split(ctx.spec)
    bench = get_benchmark(name)
    max_length = min(settings.max_length, encoder_max_positions(ctx, encoder_dir))  # longer: no position embedding
    train = {**settings.key(), "max_length": max_length}
    depth = StageSettings.from_spec(ctx.spec, "retriever1").negative_depth
    most = FinetuneSettings.from_spec(ctx.spec).max_train_queries
    config = {
        "reranker": TINY_RERANKER,
        "train": train,
        "negative_depth": depth,
        "max_train_queries": most,
        "train_queries": f"{name}-{split}",
    }

    def build(work: Path) -> dict[str, Any]:
        queries, qrels = train_queries(bench, split, most, ctx.seed)
        examples = make_examples(queries, qrels, [negative_pool(iter_trec_run(bm25_train), qrels, depth)])
        train_cfg = RerankerTrainConfig(**{**settings.trainer_kwargs(), "max_length": max_length}, seed=ctx.seed)
        stats = train_cross_encoder(
            encoder_dir,
            examples,
            train_cfg,
            work / "model",
            passages=bench.corpus(),
            logger=lambda step, m: ctx.tracker.log_metrics({f"reranker/{k}": v for k, v in m.items()}, step=step),
        )
        print(f"  reranker: {stats['examples']} groups, loss {stats['first_loss']:.3f} -> {stats['final_loss']:.3f}")
        return {
            "groups": stats["examples"],
            "steps": stats["steps"],
            "loss_first": stats["first_loss"],
            "loss_last": stats["final_loss"],
            "init": stats["init"],
            "weight_change": stats.get("weight_change"),
        }

    inputs = {"init": input_key(encoder_dir), "bm25": input_key(bm25_train), **bench.files()}
    # code 2: trained on the shared engine (dropout seeded at step 0 like every trainer): other weights than code 1's.
    cache = ctx.cached_stage("reranker", None, config, inputs, build, code_version="2")
    return Teacher(cache.dir / "model", input_key(cache.dir / "model"))


def teacher_stage(ctx: RunContext, teacher: Teacher, mined: Path) -> Path:
    """Stage-3 groups (positives + retriever-2 negatives) and the teacher's score for each of their items.

    Sharded over every rank of a launched run (harness/stages/graph.py): each rank scores its chunks of the
    pairs into its own file, and rank 0 merges them in the groups' order into the ``scores.json`` one process
    writes, the same floats whatever the number of processes (harness.finetune.teacher_shards). A killed
    build resumes with the chunks already scored; the entry states the processes that ran it."""
    from harness.training import distributed as D

    stage = StageSettings.from_spec(ctx.spec, "retriever3")
    name, split = train_split(ctx.spec)
    bench = get_benchmark(name)
    r3 = RerankerSettings.from_spec(ctx.spec)
    positives, negatives = r3.scored(stage)
    most = FinetuneSettings.from_spec(ctx.spec).max_train_queries
    config = {
        **r3.key("teacher_scores"),
        "negative_depth": stage.negative_depth,
        "positives": positives,
        "negatives": negatives,
        "max_train_queries": most,
        "train_queries": f"{name}-{split}",
    }

    def build(work: Path) -> dict[str, Any]:
        queries, qrels = train_queries(bench, split, most, ctx.seed)
        pool = negative_pool(iter_trec_run(mined), qrels, config["negative_depth"])
        groups = teacher_groups(
            grouped_examples(queries, qrels, [pool]), config["positives"], config["negatives"], ctx.seed
        )
        if not groups:
            raise HarnessError(f"stage 3: no training groups in {name}-{split} from {mined}")
        rank, world = ranks.rank(), ranks.world_size()
        if rank == 0:
            (work / "groups.json").write_text(json.dumps(groups, ensure_ascii=False), encoding="utf-8")

        def chunks() -> Iterator[list[tuple[str, str]]]:  # the keys of the pairs, chunked as the groups decide
            return iter_key_chunks(((qid, [*pos, *negs]) for qid, _, pos, negs in groups), teacher_pairs.PAIR_CHUNK)

        shard = score_shard(lambda: teacher_scorer(teacher, queries, bench), chunks(), work, rank, world)
        if shard["resumed"]:
            print(f"  teacher (rank {rank}): {shard['resumed']} of its {shard['chunks']} chunks already scored")
        if world > 1:
            D.control_barrier()  # every rank's chunks are scored: rank 0 merges them
            if rank != 0:
                return {}
        pairs, accuracy = write_counted_scores(groups, merged_scores(chunks(), work, world), work / "scores.json")
        remove_shards(work)
        on = f" on {world} processes" if world > 1 else ""
        print(f"  teacher: {pairs} pairs scored{on} for {len(groups)} queries; positive above negative {accuracy:.3f}")
        return {
            "groups": len(groups),
            "pairs": pairs,
            "teacher_pairwise_accuracy": accuracy,
            "processes": world,  # kept in done.json: a cached entry says it too
        }

    inputs = {"reranker": teacher.key, "mined": input_key(mined), **bench.files()}
    return ctx.cached_stage("teacher_scores", None, config, inputs, build).dir


Group = tuple[str, str, list[str], list[str]]  # (query id, query, positive ids, negative ids)


def teacher_groups(examples: Iterable[Group], positives: int, negatives: int, seed: int) -> list[Group]:
    """Each training query's group with at most ``positives`` positives and ``negatives`` negatives: samples
    (by ``seed``) of what training would draw over its epochs, so the teacher scores no unused pair."""
    groups = []
    for qid, query, pos, negs in examples:
        pos = sorted(pos) if len(pos) <= positives else sample_group(pos, positives, seed, f"teacher-pos/{qid}")
        negs = negs if len(negs) <= negatives else sample_group(negs, negatives, seed, f"teacher-neg/{qid}")
        groups.append((qid, query, pos, negs))
    return groups


def teacher_scorer(
    teacher: Teacher, queries: dict[str, str], bench: Any
) -> Callable[[list[tuple[str, str]]], Sequence[float]]:
    """What scores (query id, passage id) pairs: the bi-encoder teacher's scaled cosine, else the cross-encoder's."""
    from harness.finetune.reranker import bi_encoder_scorer, cross_encoder_scorer

    if teacher.kind == "bi-encoder":
        return bi_encoder_scorer(
            teacher.path, queries, bench.corpus(), scale=teacher.scale, passage_max_length=teacher.max_length
        )
    return cross_encoder_scorer(teacher.path, queries, bench.corpus())


def write_counted_scores(
    groups: list[Group], per_query: Iterable[tuple[str, dict[str, float]]], path: Path
) -> tuple[int, float]:
    """Write the merged scores to ``path`` (one query's held at a time, in the groups' order) and return
    (pairs written, how often the teacher puts a positive above a negative: near 0.5 means chance)."""
    wins = total = 0
    group_of = iter(groups)

    def counted() -> Iterator[tuple[str, dict[str, float]]]:
        nonlocal wins, total
        for qid, s in per_query:
            _, _, pos, negs = next(g for g in group_of if g[0] == qid)
            wins += sum((s[p] > s[n]) + 0.5 * (s[p] == s[n]) for p in pos for n in negs)
            total += len(pos) * len(negs)
            yield qid, s

    pairs = write_scores_json(counted(), path)
    return pairs, wins / total if total else math.nan


# --- impact index and search --------------------------------------------------------------------


def index_stage(ctx: RunContext, label: str, model_dir: Path, dataset: str) -> StageCache:
    """Encode the corpus with `model_dir`, quantise (+ top-k), Lucene impact index; one per (model, corpus).

    Every rank of a launched run encodes its chunks of the corpus (:mod:`harness.retrieval.impact_shards`:
    the vectors do not depend on the number of processes); rank 0 merges them in corpus order and builds
    the index with Lucene's threads. The output states how many processes encoded (``encode_processes``).
    """

    bench = get_benchmark(dataset)
    rcfg = RetrievalSettings.from_spec(ctx.spec)
    config = rcfg.key("impact_index")

    def build(work: Path) -> dict[str, Any]:
        encoder = load_sparse_encoder(model_dir)
        sep = encoder.settings.get("title_separator", DEFAULT_TITLE_SEPARATOR)

        def encode(texts: list[str]) -> list[ImpactVector]:
            weights = encoder.encode(texts, "passage", topk=rcfg.topk_sparsify, show_progress=False)
            return [quantise(w, rcfg.quantization) for w in weights]

        docs = ((doc_id, passage_text(doc, sep)) for doc_id, doc in bench.iter_corpus())
        vectors, processes = encode_impacts(
            docs, encode, work / "corpus-shards", ENCODE_CHUNK, f"encode {dataset} corpus ({label})"
        )
        if not ranks.is_main():
            return {}
        stats = build_impact_index(vectors, work / "index", threads=rcfg.threads)
        numbers = {k: v for k, v in stats.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
        return {**numbers, "encode_processes": processes}

    inputs = {"model": input_key(model_dir), **bench.corpus_files()}
    return ctx.cached_stage("impact_index", f"{dataset}/{label}", config, inputs, build)


def search_stage(
    ctx: RunContext,
    label: str,
    model_dir: Path,
    dataset: str,
    split: str,
    depth: int,
    record: bool = True,
    train_only: bool = False,
) -> Path:
    """Top-`depth` impact search of the split's queries; the TREC run (efficiency recorded under `label`).

    `train_only` (mining) searches only the training queries (`finetune.max_train_queries` of them).
    """

    bench = get_benchmark(dataset)
    index = index_stage(ctx, label, model_dir, dataset)
    rcfg = RetrievalSettings.from_spec(ctx.spec)
    max_terms = rcfg.max_query_terms
    config = {**rcfg.key("impact_search"), "depth": depth, "split": split}
    most = FinetuneSettings.from_spec(ctx.spec).max_train_queries
    if train_only:
        config["max_train_queries"] = most

    def build(work: Path) -> dict[str, Any]:
        if train_only:
            queries, qrels = train_queries(bench, split, most, ctx.seed)
            queries = {q: queries[q] for q in sorted(qrels) if q in queries}
        else:
            queries = bench.queries(split)
        encoder = load_sparse_encoder(model_dir)

        def encode(texts: list[str]) -> list[ImpactVector]:
            return [quantise(w, rcfg.quantization) for w in encoder.encode(texts, "query", show_progress=False)]

        # Sharded over the ranks like the corpus when there are more than QUERY_CHUNK queries (mining
        # with the training queries); an evaluation split is one chunk, encoded by rank 0.
        encoded, processes = encode_impacts(
            queries.items(), encode, work / "query-shards", QUERY_CHUNK, f"encode {dataset} queries ({label})", "q"
        )
        if not ranks.is_main():
            return {}
        vectors = dict(encoded)
        capped = [q for q, v in vectors.items() if len(v) > max_terms]
        for q in capped:
            vectors[q] = sparsify_topk(vectors[q], max_terms)
        if capped:
            why = "Lucene's clause limit" if max_terms == LUCENE_MAX_CLAUSES else "retrieval.max_query_terms"
            print(
                f"  note: {len(capped)} of {len(vectors)} {dataset} queries have more than {max_terms} non-zero "
                f"terms ({why}); their {max_terms} largest impacts are searched"
            )
        run, stats = search_impact(index.dir / "index", vectors, k=depth, threads=rcfg.threads)
        write_trec_run(run, work / "run.trec", tag=f"{ctx.spec.name}-{label}")
        empty = sum(1 for v in vectors.values() if not v)
        if empty:
            print(f"  {label}: {empty} of {len(vectors)} {dataset} queries have no non-zero impact (no results)")
        return {
            **{k: v for k, v in stats.items() if isinstance(v, (int, float)) and not isinstance(v, bool)},
            "empty_queries": empty,
            "capped_queries": len(capped),
            "encode_processes": processes,
        }

    inputs = {"index": index.key, **{k: v for k, v in bench.files().items() if k not in bench.corpus_files()}}
    where = f"{dataset}/{split}/{label}" if record else f"{dataset}/{split}/mine-{label}"
    cache = ctx.cached_stage("impact_search", where, config, inputs, build)
    if record:
        meta = ctx.stage_meta(cache)
        ctx.efficiency.setdefault(label, {})[dataset] = {k: meta[k] for k in EFFICIENCY_KEYS if k in meta}
    return cache.dir / "run.trec"


# --- the pipeline -------------------------------------------------------------------------------


@registry.pipeline(SPARSE)
def run_learned_sparse(ctx: RunContext, datasets: list[str]) -> Runs:
    """Runs per fine-tuning stage and dataset: {"retriever1": {dataset: run}, "retriever2": ..., "retriever3": ...}."""

    steps = ctx.spec.get("stages", [])
    name, split = train_split(ctx.spec)
    configured: list[Teacher | None] = [None]

    def before() -> None:
        RetrievalSettings.from_spec(ctx.spec)  # fail fast on a malformed retrieval block
        # Fail fast on a missing teacher, unless the run stops before fine-tuning (run --stage pretrain).
        if "finetune_r3" in steps and ctx.stop_after not in PRETRAINING:
            configured[0] = configured_reranker(ctx)

    def mine(label: str, model: Path, depth: int) -> Path:
        return search_stage(ctx, label, model, name, split, depth, record=False, train_only=True)

    def distil(models: dict[str, Path], encoder: Path, bm25_train: Path, init: Path) -> Path:
        teacher = configured[0] or reranker_stage(ctx, encoder, bm25_train)
        scored = teacher_stage(ctx, teacher, mine("retriever2", models["retriever2"], mining_depth(ctx, "retriever3")))
        return splade_train_stage(ctx, "retriever3", init, [], {"teacher": input_key(scored)}, teacher_dir=scored)

    return run_chain(
        ctx,
        datasets,
        Family(
            start=lambda encoder: masked_lm_init(encoder, ctx),
            train=lambda stage, init, pools, key: splade_train_stage(ctx, stage, init, pools, key),
            mine=mine,
            search=lambda label, model, dataset: search_stage(
                ctx, label, model, dataset, get_benchmark(dataset).eval_split, 1000
            ),
            distil=distil,
        ),
        before=before,
    )
