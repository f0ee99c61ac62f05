"""Retriever fine-tuning: dense bi-encoders (Tevatron style) and hard-negative mining.

- :mod:`harness.finetune.dense`: ``DenseTrainConfig``, ``train_dense`` (InfoNCE, DDP, resume).
- :mod:`harness.finetune.negatives`: negative pools from BM25 or dense runs, Tevatron's sampling.
"""
