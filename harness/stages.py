"""The declared stage graph: every stage a pipeline executes, what it reads, and the spec step that runs it.

A stage's name is the ``stage`` of a run record's entries, the folder ``cache/<name>/<key>/`` of
its output (:class:`harness.artifacts.StageCache`), its MLflow child run, its line in
``run --dry-run`` and what ``run --stage NAME`` runs up to. Each stage is one :class:`Stage`:

- ``needs``: the stages whose outputs it may read. :meth:`harness.context.RunContext.cached_stage`
  refuses an input from any other stage (an input is keyed ``<stage>/<key>/...`` by
  :func:`harness.context.input_key`), so this graph is the one the pipelines really run, and a
  stage's key covers its settings and the keys of the stages it read (content, never paths);
- ``step``: the entry of a spec's ``stages:`` outline that runs it, and ``families`` the
  pipelines that can (:data:`FAMILY_STEPS` and the outline's rules derive from these);
- ``resumable``: whether an interrupted build continues from its own checkpoints.

Which stages a given spec runs, in which order and with which keys, is its pipeline in plan mode
(``run --dry-run``); ``python -m harness ls stages`` prints this graph.
"""

from __future__ import annotations

from dataclasses import dataclass

DENSE, SPARSE, LEXICAL = "dense", "learned-sparse", "lexical"
TRAINED = (DENSE, SPARSE)


@dataclass(frozen=True)
class Stage:
    name: str
    does: str
    step: str
    needs: tuple[str, ...] = ()
    families: tuple[str, ...] = TRAINED
    resumable: bool = False


# In the order a run meets them.
GRAPH: tuple[Stage, ...] = (
    Stage("tokenizer", "train a WordPiece tokenizer on the corpora", "corpus"),
    Stage("passages", "train Punkt on the corpus, split the documents into passages", "corpus", ("tokenizer",)),
    Stage("qgen_model", "train the small query generator (T5) on training pairs", "corpus", ("tokenizer",)),
    Stage("qgen", "generate queries per passage (query-as-context)", "corpus", ("passages", "qgen_model"),
          resumable=True),
    Stage("pretrain", "pre-train the encoder with the objective, export it as a plain BERT", "pretrain",
          ("tokenizer", "passages", "qgen"), resumable=True),
    Stage("random_init", "the seeded random encoder (no pre-training)", "pretrain", ("tokenizer",)),
    Stage("index", "Lucene BM25 index of the corpus", "index", families=(LEXICAL, *TRAINED)),
    Stage("retrieve", "BM25 top-k search of the queries", "retrieve", ("index",), families=(LEXICAL, *TRAINED)),
    Stage("bm25_negatives", "the training queries' BM25 negatives from a published file (data.bm25_negatives)",
          "finetune_r1"),
    Stage("retriever1", "retriever 1: fine-tune on BM25 negatives", "finetune_r1",
          ("pretrain", "random_init", "retrieve", "bm25_negatives"), resumable=True),
    Stage("dense_retrieve", "encode the queries, exact inner-product top-k over the corpus vectors (encoded once "
          "per model and corpus: harness/retrieval/corpus_vectors.py)", "evaluate",
          ("pretrain", "random_init", "retriever1", "retriever2"), families=(DENSE,)),
    Stage("impact_index", "encode the corpus, quantise, Lucene impact index", "evaluate",
          ("retriever1", "retriever2", "retriever3"), families=(SPARSE,)),
    Stage("impact_search", "encode and quantise the queries, impact search", "evaluate", ("impact_index",),
          families=(SPARSE,)),
    Stage("retriever2", "retriever 2: fine-tune on mined negatives", "finetune_r2",
          ("pretrain", "random_init", "retriever1", "retrieve", "bm25_negatives", "dense_retrieve", "impact_search"),
          resumable=True),
    Stage("reranker", "train the tiny cross-encoder teacher", "finetune_r3",
          ("pretrain", "random_init", "retrieve", "bm25_negatives"), families=(SPARSE,), resumable=True),
    Stage("teacher_scores", "score the mined candidates with the teacher", "finetune_r3",
          ("reranker", "impact_search"), families=(SPARSE,)),
    Stage("retriever3", "retriever 3: distil the reranker's scores", "finetune_r3",
          ("pretrain", "random_init", "retriever1", "retriever2", "teacher_scores"), families=(SPARSE,),
          resumable=True),
    Stage("merge_parts", "merge the runs of a benchmark's parts (cqadupstack's 12 forums) into one", "evaluate",
          ("retrieve", "dense_retrieve", "impact_search"), families=(LEXICAL, *TRAINED)),
    Stage("evaluate", "score the run with the benchmark's measures; compare with the papers", "evaluate",
          families=(LEXICAL, *TRAINED)),
)
STAGES: dict[str, Stage] = {stage.name: stage for stage in GRAPH}

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
# The steps each family's pipeline can run (a step whose stages run in that family), and the ones it always runs.
FAMILY_STEPS = {family: tuple(step for step in SPEC_STEPS
                              if step == "mine" and family in TRAINED
                              or any(s.step == step and family in s.families for s in GRAPH))
                for family in (LEXICAL, DENSE, SPARSE)}
ALWAYS_STEPS = {LEXICAL: ("evaluate",), DENSE: ("finetune_r1", "evaluate"), SPARSE: ("finetune_r1", "evaluate")}

# The stages before fine-tuning: a run that stops at one of them needs no fine-tuning data.
PRETRAINING = tuple(s.name for s in GRAPH if s.step in ("corpus", "pretrain"))
# The fine-tuning stages: the names the papers' cells use too (`finetune_stage` in the registry).
FINETUNE_STAGES = tuple(s.name for s in GRAPH if s.name.startswith("retriever"))
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
