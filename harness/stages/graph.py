"""The declared stage graph: every stage a pipeline executes, what it reads, and the spec step that runs it.

A stage's name is the ``stage`` of a run record's entries, the folder ``cache/<name>/<key>/`` of
its output (:class:`harness.stages.artifacts.StageCache`), its MLflow child run, its line in
``run --dry-run`` and what ``run --stage NAME`` runs up to. Each stage is one :class:`Stage`:

- ``needs``: the stages whose outputs it may read. :meth:`harness.pipelines.context.RunContext.cached_stage`
  refuses an input from any other stage (an input is keyed ``<stage>/<key>/...`` by
  :func:`harness.pipelines.context.input_key`), so this graph is the one the pipelines really run, and a
  stage's key covers its settings and the keys of the stages it read (content, never paths);
- ``step``: the entry of a spec's ``stages:`` outline that runs it, and ``families`` the
  pipelines that can (:data:`FAMILY_STEPS` and the outline's rules derive from these);
- ``resumable``: whether an interrupted build continues from its own checkpoints;
- ``ranks``: in a multi-process run, :data:`EVERY_RANK` when every rank runs its build together (DDP
  training), :data:`SHARDED` when every rank builds its share and rank 0 merges them (query generation,
  encoding, teacher scoring: the output does not depend on the number of processes), else :data:`MAIN_RANK`: rank 0
  builds it alone while the others wait (:meth:`harness.pipelines.context.RunContext.cached_stage`);
  the projection divides only an every-rank or sharded stage by the device count;
- ``details``: whether it has settings lines in ``run --dry-run`` (:mod:`harness.run.plan`), printed once for
  the stages of one ``details_group`` (BM25 index and search share theirs);
- ``gpu``: whether its work can use a GPU at all (the projection names those that cannot);
- ``cost``: its row of the dry-run's projection (:mod:`harness.run.projection`): :data:`PROJECTED` (its
  FLOPs, wall time and memory), :data:`NOT_PROJECTED` (listed without FLOPs: no measured step of its
  kind), or ``None``: left out of the projection (BM25, file work, encoding queries only).

Each family is one :class:`Family`: its name and the spec steps it always runs.

This module declares; it names no function of the modules above it. The settings lines, the cost
function and each family's pipeline are registered by those modules, with the decorators of
:mod:`harness.stages.registry` (``@registry.details("passages")``, ``@registry.cost("pretrain")``,
``@registry.pipeline(DENSE)``), so every such dependency is an import pointing down.

Which stages a given spec runs, in which order and with which keys, is its pipeline in plan mode
(``run --dry-run``); ``python -m harness ls stages`` prints this graph.
"""

from __future__ import annotations

from dataclasses import dataclass

DENSE, SPARSE, LEXICAL = "dense", "learned-sparse", "lexical"
TRAINED = (DENSE, SPARSE)
EVERY_RANK, SHARDED, MAIN_RANK = "every rank", "every rank, sharded", "rank 0"  # Stage.ranks
ALL_RANKS = (EVERY_RANK, SHARDED)  # the stages whose build every rank of a launched run enters
PROJECTED = "projected"  # Stage.cost: a row of the projection, by its registered cost function
NOT_PROJECTED = "not projected"  # Stage.cost: listed in the projection without FLOPs (no measured step of its kind)
# A search of the training queries (a dense_retrieve or impact_search entry of a ``.../mine`` dataset) is the
# spec's ``mine`` step: the plan shows its settings lines (registered under this name, group "mine") instead
# of its stage's.
MINING = "mine"


@dataclass(frozen=True)
class Stage:
    """One stage (the fields: this module's docstring). What the modules above register for it
    (:mod:`harness.stages.registry`):

    - with ``details``: ``(spec, entry, hw) -> list[str]``, the settings lines under its first plan entry;
    - with ``cost=PROJECTED``: ``(spec, entry, counted) -> Cost | list[Cost | None] | None``, one "to run"
      entry's projected cost, or its rows (a dense search: its encoding and the search itself)
      (``counted``: a set shared by a plan's entries, for what is counted once; ``None``: no row).
    """

    name: str
    does: str
    step: str
    needs: tuple[str, ...] = ()
    families: tuple[str, ...] = TRAINED
    resumable: bool = False
    ranks: str = MAIN_RANK
    details: bool = False  # whether it has settings lines in the plan (a registered details function)
    details_group: str = ""  # stages that share their settings lines; "" = its own name
    cost: str | None = None  # PROJECTED, NOT_PROJECTED or None (left out of the projection)
    gpu: bool = True  # whether its work can use a GPU (False: Lucene/BM25, file and scoring work)

    def __post_init__(self) -> None:
        if self.cost not in (PROJECTED, NOT_PROJECTED, None):  # e.g. a function's name: register it instead
            raise ValueError(f"stage '{self.name}': cost is PROJECTED, NOT_PROJECTED or None, not {self.cost!r}")

    @property
    def group(self) -> str:
        return self.details_group or self.name


@dataclass(frozen=True)
class Family:
    """A family of methods (a spec's ``family``); ``always``: the spec steps it always runs. Its pipeline,
    turning a run's context and datasets into run files per variant and dataset, is registered by
    ``@registry.pipeline(name)`` (harness/pipelines/, looked up by harness/pipelines/families.py)."""

    name: str
    always: tuple[str, ...] = ()


# In the order a run meets them.
GRAPH: tuple[Stage, ...] = (
    Stage(
        "tokenizer",
        "train a WordPiece tokenizer on the corpora",
        "corpus",
        details=True,
        gpu=False,
    ),
    Stage(
        "passages",
        "train Punkt on the corpus, split the documents into passages",
        "corpus",
        ("tokenizer",),
        resumable=True,
        details=True,
        gpu=False,
    ),
    Stage(
        "qgen_model",
        "train the small query generator (T5) on training pairs",
        "corpus",
        ("tokenizer",),
        cost=PROJECTED,
    ),
    Stage(
        "qgen",
        "generate queries per passage (query-as-context)",
        "corpus",
        ("passages", "qgen_model"),
        resumable=True,
        ranks=SHARDED,
        details=True,
        cost=PROJECTED,
    ),
    Stage(
        "pretrain",
        "pre-train the encoder with the objective, export it as a plain BERT",
        "pretrain",
        ("tokenizer", "passages", "qgen"),
        resumable=True,
        ranks=EVERY_RANK,
        details=True,
        cost=PROJECTED,
    ),
    Stage("random_init", "the seeded random encoder (no pre-training)", "pretrain", ("tokenizer",), gpu=False),
    Stage(
        "index",
        "Lucene BM25 index of the corpus",
        "index",
        families=(LEXICAL, *TRAINED),
        details=True,
        details_group="bm25",
        gpu=False,
    ),
    Stage(
        "retrieve",
        "BM25 top-k search of the queries",
        "retrieve",
        ("index",),
        families=(LEXICAL, *TRAINED),
        details=True,
        details_group="bm25",
        gpu=False,
        cost=PROJECTED,
    ),
    Stage(
        "bm25_negatives",
        "the training queries' BM25 negatives from a published file (data.bm25_negatives)",
        "finetune_r1",
        gpu=False,
    ),
    Stage(
        "hard_negatives",
        "the training queries' negatives from a published hard-negative file (finetune.hard_negatives)",
        "finetune_r1",
        gpu=False,
    ),
    Stage(
        "retriever1",
        "retriever 1: fine-tune on BM25 negatives (or a published file's: finetune.hard_negatives)",
        "finetune_r1",
        ("pretrain", "random_init", "retrieve", "bm25_negatives", "hard_negatives"),
        resumable=True,
        ranks=EVERY_RANK,
        details=True,
        cost=PROJECTED,
    ),
    Stage(
        "dense_retrieve",
        "encode the queries, exact inner-product top-k over the corpus vectors (encoded once "
        "per model and corpus: harness/retrieval/corpus_vectors.py)",
        "evaluate",
        ("pretrain", "random_init", "retriever1", "retriever2"),
        families=(DENSE,),
        ranks=SHARDED,
        cost=PROJECTED,
    ),
    Stage(
        "impact_index",
        "encode the corpus, quantise, Lucene impact index",
        "evaluate",
        ("retriever1", "retriever2", "retriever3"),
        families=(SPARSE,),
        ranks=SHARDED,  # every rank encodes its chunks, rank 0 merges them and runs Lucene on the node's cores
        details=True,
        details_group="impact",
        cost=PROJECTED,
    ),
    Stage(
        "impact_search",
        "encode and quantise the queries, impact search",
        "evaluate",
        ("impact_index",),
        families=(SPARSE,),
        ranks=SHARDED,  # query encoding as impact_index's; rank 0 searches with Lucene's threads
        details=True,
        details_group="impact",
        cost=PROJECTED,
    ),
    Stage(
        "retriever2",
        "retriever 2: fine-tune on mined negatives",
        "finetune_r2",
        (
            "pretrain",
            "random_init",
            "retriever1",
            "retrieve",
            "bm25_negatives",
            "hard_negatives",
            "dense_retrieve",
            "impact_search",
        ),
        resumable=True,
        ranks=EVERY_RANK,
        details=True,
        cost=PROJECTED,
    ),
    Stage(
        "reranker",
        "train the tiny cross-encoder teacher",
        "finetune_r3",
        ("pretrain", "random_init", "retrieve", "bm25_negatives", "hard_negatives"),
        families=(SPARSE,),
        resumable=True,
        ranks=EVERY_RANK,
        details=True,
        details_group="teacher",
        cost=PROJECTED,
    ),
    Stage(
        "teacher_scores",
        "score the mined candidates with the teacher",
        "finetune_r3",
        ("reranker", "impact_search"),
        families=(SPARSE,),
        resumable=True,
        ranks=SHARDED,
        details=True,
        details_group="teacher",
        cost=PROJECTED,
    ),
    Stage(
        "retriever3",
        "retriever 3: distil the reranker's scores",
        "finetune_r3",
        ("pretrain", "random_init", "retriever1", "retriever2", "teacher_scores"),
        families=(SPARSE,),
        resumable=True,
        ranks=EVERY_RANK,
        details=True,
        cost=PROJECTED,
    ),
    Stage(
        "merge_parts",
        "merge the runs of a benchmark's parts (cqadupstack's 12 forums) into one",
        "evaluate",
        ("retrieve", "dense_retrieve", "impact_search"),
        families=(LEXICAL, *TRAINED),
        gpu=False,
    ),
    Stage(
        "evaluate",
        "score the run with the benchmark's measures; compare with the papers",
        "evaluate",
        families=(LEXICAL, *TRAINED),
        gpu=False,
    ),
)
STAGES: dict[str, Stage] = {stage.name: stage for stage in GRAPH}

FAMILIES: dict[str, Family] = {
    family.name: family
    for family in (
        Family(LEXICAL, always=("evaluate",)),
        Family(DENSE, always=("finetune_r1", "evaluate")),
        Family(SPARSE, always=("finetune_r1", "evaluate")),
    )
}

# The outline a spec's `stages:` list gives, in this order: which parts of the method it runs
# (the pipelines read which retrievers to train from it). Each step executes the stages whose
# `step` it is (mining is the retrieval of the training queries by dense_retrieve / impact_search).
SPEC_STEPS = {
    "corpus": "build the pre-training corpus",
    "pretrain": "pre-train the encoder",
    "index": "index the corpus with BM25",
    "retrieve": "BM25 search",
    "finetune_r1": "fine-tune retriever 1 on BM25 negatives",
    "mine": "mine negatives with retriever 1 (its dense or impact search of the training queries)",
    "finetune_r2": "fine-tune retriever 2 on the mined negatives",
    "finetune_r3": "distil a reranker's scores into retriever 3",
    "evaluate": "retrieve with each retriever and score the benchmarks",
}
# A step of the outline that needs another listed before it (the stage it trains reads that one's output).
STEP_NEEDS = {"mine": ("finetune_r1",), "finetune_r2": ("mine",), "finetune_r3": ("finetune_r2",)}


def family_steps(family: str) -> tuple[str, ...]:
    """The steps a family's pipeline can run: those whose stages run in that family (and mining, for the
    trained families)."""
    return tuple(
        step
        for step in SPEC_STEPS
        if step == "mine" and family in TRAINED or any(s.step == step and family in s.families for s in GRAPH)
    )


# The steps each family's pipeline can run; the ones it always runs are its Family's `always`.
FAMILY_STEPS = {family: family_steps(family) for family in FAMILIES}

# The stages before fine-tuning: a run that stops at one of them needs no fine-tuning data.
PRETRAINING = tuple(s.name for s in GRAPH if s.step in ("corpus", "pretrain"))
# The fine-tuning stages: the names the papers' cells use too (`finetune_stage` in the registry).
FINETUNE_STAGES = tuple(s.name for s in GRAPH if s.name.startswith("retriever"))
# What a seed study (`run --seeds`) shares across its seeds: the corpus, pre-training and BM25 steps run
# once, under seed 42; fine-tuning and everything after it runs under each seed.
SEED_SHARED_STEPS = ("corpus", "pretrain", "index", "retrieve")


def seed_shared(stage: str, study: bool) -> bool:
    """Whether ``stage`` is seed 42's in a seed study (``study``): its cache key leaves the seed out."""
    return study and stage in STAGES and STAGES[stage].step in SEED_SHARED_STEPS


# The stages before fine-tuning that draw from the run's seed (query sampling, pre-training's init, masks
# and example order, the random init): a seed study's pre-training seed (`run --pretrain-seeds`) keys and
# seeds these. The tokenizer, the passages and the query generator's T5 draw from their spec's own seeds.
PRETRAIN_SEEDED = ("qgen", "pretrain", "random_init")


# The stages `run --stage` can stop after (evaluation is what a whole run ends with).
STOPPABLE = tuple(name for name in STAGES if name != "evaluate")


def outline() -> str:
    """The graph as text: each stage, the spec step that runs it, and what it reads."""
    width = max(len(s.name) for s in GRAPH)
    lines = []
    for s in GRAPH:
        flags = " (resumable)" if s.resumable else ""
        reads = f"  <- {', '.join(s.needs)}" if s.needs else ""
        lines.append(f"{s.name:<{width}}  [{s.step}]{flags} {s.does}{reads}")
    return "\n".join(lines)


class StopAfterStage(Exception):
    """Raised by a run's context once the stage ``run --stage NAME`` asked for is finished."""

    def __init__(self, name: str, output: object):
        super().__init__(name)
        self.name, self.output = name, output
