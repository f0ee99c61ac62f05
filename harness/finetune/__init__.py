"""Retriever fine-tuning: dense (Tevatron style) and SPLADE retrievers, their teacher, hard negatives.

- :mod:`harness.finetune.groups`: training on (query, positive, negatives) groups, what all three share.
- :mod:`harness.finetune.dense`: ``DenseTrainConfig``, ``train_dense`` (InfoNCE, DDP, resume).
- :mod:`harness.finetune.pairwise`: CPDAE's pairwise loss (each positive against each of its own negatives).
- :mod:`harness.finetune.negatives`: negative pools from BM25 or dense runs, Tevatron's sampling.
- :mod:`harness.finetune.splade`: learned-sparse (SPLADE-max) fine-tuning, LexMAE's three stages.
- :mod:`harness.finetune.head_fit`: a closed-form MLM head for SPLADE fine-tuning (``finetune.fit_head``).
- :mod:`harness.finetune.reranker`: the BERT cross-encoder that LexMAE's stage 3 distils.
- :mod:`harness.finetune.teacher_pairs`: the (query, candidate) pairs that teacher scores, in chunks.
- :mod:`harness.finetune.teacher_shards`: those chunks scored by every rank of a run, merged on rank 0.

The trainers among them run on the one engine of :mod:`harness.training.engine`.
"""
