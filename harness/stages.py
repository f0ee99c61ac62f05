"""The declared stage graph: every stage a pipeline executes, by the one name it has everywhere.

A stage's name is the ``stage`` of a run record's entries, the folder ``cache/<name>/<key>/`` of
its output (:class:`harness.artifacts.StageCache`), its MLflow child run, its line in
``run --dry-run`` and what ``run --stage NAME`` runs up to. :meth:`harness.context.RunContext.
cached_stage` refuses a name that is not declared here, so a pipeline cannot invent a second
name for a stage. Which stages a method runs, in which order and with which inputs and keys,
is its pipeline run in plan mode (``harness.runner.plan_method``); the fine-tuning stages
retriever1/2/3 are the names the papers' cells use too (``finetune_stage`` in the registry).
"""

from __future__ import annotations

# name -> what the stage does (printed by the plan)
STAGES = {
    "tokenizer": "train a WordPiece tokenizer on the corpora",
    "passages": "train Punkt on the corpus, split the documents into passages",
    "qgen_model": "train the small query generator (T5) on training pairs",
    "qgen": "generate queries per passage (query-as-context)",
    "pretrain": "pre-train the encoder with the objective, export it as a plain BERT",
    "random_init": "the seeded random encoder (no pre-training)",
    "index": "Lucene BM25 index of the corpus",
    "retrieve": "BM25 top-k search of the queries",
    "retriever1": "retriever 1: fine-tune on BM25 negatives",
    "retriever2": "retriever 2: fine-tune on mined negatives",
    "retriever3": "retriever 3: distil the reranker's scores",
    "dense_retrieve": "encode corpus and queries, exact inner-product top-k",
    "reranker": "train the tiny cross-encoder teacher",
    "teacher_scores": "score the mined candidates with the teacher",
    "impact_index": "encode the corpus, quantise, Lucene impact index",
    "impact_search": "encode and quantise the queries, impact search",
    "evaluate": "score the run with the benchmark's measures; compare with the papers",
}
# The stages before fine-tuning: a run that stops at one of them needs no fine-tuning data.
PRETRAINING = ("tokenizer", "passages", "qgen_model", "qgen", "pretrain", "random_init")
# The stages `run --stage` can stop after (evaluation is what a whole run ends with).
STOPPABLE = tuple(name for name in STAGES if name != "evaluate")


class StopAfterStage(Exception):
    """Raised by a run's context once the stage ``run --stage NAME`` asked for is finished."""

    def __init__(self, name: str, output: object):
        super().__init__(name)
        self.name, self.output = name, output
