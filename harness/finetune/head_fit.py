"""A closed-form MLM head for SPLADE fine-tuning (``finetune.fit_head``).

SPLADE's term weights start from the masked-LM head's logits at *unmasked* positions, where a
long-trained BERT head predicts the input token itself: a text starts as (roughly) its own bag of
words. The mini profile's encoder, all-MiniLM-L6-v2, has no MLM head; BERT's is added fresh, and
the 100 LexMAE pre-training steps a CPU run affords (lr 5e-5, loss on masked positions only) leave
it predicting the input token at 4 % of the positions, and SPLADE fine-tuning from there starts
at chance.

The fit gives the head that property in one ridge-regression solve: the transform's dense layer
gets the weight and bias minimising ``sum_t || W h_t + b - e(x_t) ||^2 + lambda ||W||^2`` over the
non-padding tokens t of the given passages, with ``h_t`` the encoder's last hidden state and
``e(x_t)`` the token's own (tied) word embedding. ``lambda = RIDGE x`` the mean eigenvalue of
``sum_t h_t h_t^T``: the states are nearly flat in some directions (smallest eigenvalue ~1e-6 of
the mean), where plain least squares puts weights of norm ~7e6 that turn dropout noise into
garbage; RIDGE = 1e-3 gives norm ~5 at the same held-out identity accuracy (0.78). GELU and LayerNorm stay as they are, so it is an approximation; the
identity accuracy before and after is measured and returned (NFCorpus passages, MiniLM after
LexMAE mini pre-training: 0.04 -> 0.78). The output bias is left alone: a constant added to it
is invisible to the MLM softmax, and ``start_terms`` sets that gauge for SPLADE.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from transformers import BertForMaskedLM

FIT_PASSAGES = 256  # ~12,000 tokens at 64 per passage for 384 x 384 + 384 unknowns
RIDGE = 1e-3  # lambda as a share of the mean eigenvalue of the states' Gram matrix (docstring)


@torch.no_grad()
def identity_accuracy(model: BertForMaskedLM, batch: dict[str, torch.Tensor]) -> float:
    """Share of non-padding positions whose top MLM prediction is the input token itself."""
    keep = batch["attention_mask"].bool()
    predicted = model(**batch).logits.argmax(-1)
    return float((predicted[keep] == batch["input_ids"][keep]).float().mean())


@torch.no_grad()
def fit_head_to_identity(
    model: BertForMaskedLM, tokenizer: Any, texts: Sequence[str], max_length: int
) -> dict[str, float]:
    """Set the MLM head's dense layer by ridge regression (module docstring); returns identity accuracy."""
    was_training = model.training
    model.eval()
    device = model.get_input_embeddings().weight.device
    encoded = tokenizer(list(texts), padding=True, truncation=True, max_length=max_length, return_tensors="pt")
    batch = {k: v.to(device) for k, v in encoded.items()}
    before = identity_accuracy(model, batch)
    keep = batch["attention_mask"].bool()
    hidden = model.bert(**batch).last_hidden_state[keep].double()
    targets = model.get_input_embeddings().weight[batch["input_ids"][keep]].double()
    design = torch.cat([hidden, torch.ones(len(hidden), 1, dtype=hidden.dtype, device=device)], dim=1)
    gram = design.T @ design
    dim = hidden.shape[1]
    penalty = torch.eye(dim + 1, dtype=gram.dtype, device=device) * (RIDGE * torch.trace(gram[:dim, :dim]) / dim)
    penalty[dim, dim] = 0  # the bias column is not penalised
    solution = torch.linalg.solve(gram + penalty, design.T @ targets)  # [hidden + 1, embedding]
    dense = model.cls.predictions.transform.dense
    dense.weight.copy_(solution[:-1].T.to(dense.weight.dtype))
    dense.bias.copy_(solution[-1].to(dense.bias.dtype))
    after = identity_accuracy(model, batch)
    model.train(was_training)
    return {"identity_accuracy_before": before, "identity_accuracy_after": after, "tokens": int(keep.sum())}
