"""The pairwise fine-tuning loss of CPDAE (Ma et al., CIKM 2022, §4.1.3 "Fine-tuning details").

What the paper states
    "we employ a bi-encoder architecture based on the encoder of CPDAE and use a pairwise loss for
    fine-tuning. We use a learning rate of 5e-6, a batch size of 64, and pair each positive example
    with 7 negative examples", the negatives being "static hard negatives using the BM25 warm-up model
    following [23]" (Zhan et al., SIGIR 2021, STAR). The paper prints no equation for this loss: its
    numbered equations (1)-(8) are the pre-training objective (:mod:`harness.pretrain.objectives`), so
    the form below is the one of the works it follows, [22] (ANCE) and [23] (STAR).
The loss
    For query ``q`` with positive ``d+`` and its negatives ``d-_1 .. d-_n`` (n = 7), scored by the dot
    product ``s(q, d) = <E(q), E(d)>`` of the [CLS] vectors, each (positive, negative) pair costs
    RankNet's logistic loss, the negative log-probability that the positive outranks the negative:

        l(q, d+, d-) = -log( e^s(q,d+) / (e^s(q,d+) + e^s(q,d-)) ) = log(1 + e^(s(q,d-) - s(q,d+)))

    (ANCE's and STAR's training loss; :func:`pairwise_loss`), and the batch loss is the mean over all
    ``Q x n`` pairs of the batch. Unlike InfoNCE (:func:`harness.finetune.dense.info_nce_loss`) a
    pair sees only its own two passages: no softmax over the group and no in-batch negatives, so
    the other queries' passages do not enter the loss ("pair each positive example with 7 negative
    examples"). Its gradient: ``dl/ds+ = -sigmoid(s- - s+) < 0`` and ``dl/ds- = +sigmoid(s- - s+) > 0``,
    pushing the positive's score up and the negative's down, by less the better they are ordered.
What the spec chooses (assumptions, declared in baselines/cpdae_pairwise.yaml)
    The mean over pairs (STAR divides its summed pair losses by their count; ANCE takes the mean), no
    temperature (1, as the dot product of both works), and no in-batch negatives.
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor

from harness.core.errors import HarnessError
from harness.core.numerics import upcast
from harness.spec.stage_settings import INFONCE, LOSSES, PAIRWISE  # a stage's ``loss`` setting

__all__ = ["INFONCE", "LOSSES", "PAIRWISE", "group_scores", "pairwise_loss"]


def group_scores(q_reps: Tensor, p_reps: Tensor, passages_per_query: int) -> Tensor:
    """``[Q, P]``: query i against the ``P`` passages of its own group (its positive in column 0)."""
    queries = q_reps.shape[0]
    if p_reps.shape[0] != queries * passages_per_query:
        raise HarnessError(f"{p_reps.shape[0]} passage vectors for {queries} queries x {passages_per_query} passages")
    groups = upcast(p_reps).view(queries, passages_per_query, -1)
    return (groups @ upcast(q_reps).unsqueeze(-1)).squeeze(-1)


def pairwise_loss(q_reps: Tensor, p_reps: Tensor, passages_per_query: int) -> Tensor:
    """Mean of ``log(1 + exp(s(q, d-) - s(q, d+)))`` over each query's (positive, negative) pairs.

    ``p_reps`` holds the groups one after another, positive first in each (as
    :func:`harness.finetune.dense.info_nce_loss` reads them); a group needs at least one negative.
    """
    if passages_per_query < 2:
        raise HarnessError(f"a pairwise loss needs a negative per group: passages_per_query is {passages_per_query}")
    scores = group_scores(q_reps, p_reps, passages_per_query)
    margins = scores[:, 1:] - scores[:, :1]  # s(q, d-) - s(q, d+), one column per negative
    return F.softplus(margins).mean()  # softplus(x) = log(1 + e^x), computed without overflow
