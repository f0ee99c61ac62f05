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
    "bm25_negatives": "the training queries' BM25 negatives from a published file (data.bm25_negatives)",
    "retriever1": "retriever 1: fine-tune on BM25 negatives",
    "retriever2": "retriever 2: fine-tune on mined negatives",
    "retriever3": "retriever 3: distil the reranker's scores",
    "dense_retrieve": "encode corpus and queries, exact inner-product top-k",
    "reranker": "train the tiny cross-encoder teacher",
    "teacher_scores": "score the mined candidates with the teacher",
    "impact_index": "encode the corpus, quantise, Lucene impact index",
    "impact_search": "encode and quantise the queries, impact search",
    "merge_parts": "merge the runs of a benchmark's parts (cqadupstack's 12 forums) into one",
    "evaluate": "score the run with the benchmark's measures; compare with the papers",
}
# The outline a spec's `stages:` list gives, in this order: which parts of the method it runs
# (the pipelines read which retrievers to train from it). Each step executes the stages named.
SPEC_STEPS = {
    "corpus": "build the pre-training corpus (tokenizer, passages; qgen_model, qgen for query-as-context)",
    "pretrain": "pre-train the encoder (pretrain)",
    "index": "index the corpus with BM25 (index)",
    "retrieve": "BM25 search (retrieve)",
    "finetune_r1": "fine-tune retriever 1 on BM25 negatives (retriever1)",
    "mine": "mine negatives with retriever 1 (dense_retrieve or impact_index, impact_search)",
    "finetune_r2": "fine-tune retriever 2 on the mined negatives (retriever2)",
    "finetune_r3": "distil a reranker's scores into retriever 3 (reranker, teacher_scores, retriever3)",
    "evaluate": "retrieve with each retriever and score the benchmarks (evaluate)",
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
