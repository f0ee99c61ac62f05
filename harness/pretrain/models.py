"""Model pieces shared by the pre-training objectives.

- ``bert_config_from_dict``: a (small) ``BertConfig`` from a spec dict, rejecting unknown keys.
- ``new_masked_lm``: a randomly initialised ``BertForMaskedLM`` whose output projection is tied
  to the word embeddings (BERT's own tying: ``cls.predictions.decoder.weight`` is
  ``bert.embeddings.word_embeddings.weight``).
- ``masked_lm_loss``: cross entropy at masked positions only. The hidden states where
  ``labels != -100`` are gathered *before* the head, so the |V|-wide projection runs on ~15-30 %
  of the tokens: full-vocabulary logits at every position made a 2-layer/128 BERT step ~10x
  slower on CPU (REFERENCES.md §4).
- ``run_layers``: a stack of ``BertLayer`` (Condenser head, CoT-MAE / LexMAE decoders) under
  the same attention-mask convention as the encoder.
- ``tied_mlm_head``: an extra MLM head (own transform and bias) whose projection shares the
  word-embedding matrix (LexMAE's decoder head).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from transformers import BertConfig, BertForMaskedLM
from transformers.masking_utils import create_bidirectional_mask
from transformers.models.bert.modeling_bert import BertLayer, BertOnlyMLMHead

from harness.core.errors import HarnessError
from harness.core.numerics import upcast
from harness.stages.checkpoints import load_pretrained

IGNORE_INDEX = -100

# The tiny profile's defaults: 2 layers, hidden 128 (REFERENCES.md §4 timings were taken on this).
TINY_BERT: dict[str, Any] = {
    "vocab_size": 8192,
    "hidden_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 512,
    "max_position_embeddings": 160,
}


def bert_config_from_dict(values: dict[str, Any] | None = None, **overrides: Any) -> BertConfig:
    """A ``BertConfig`` from ``TINY_BERT`` updated with ``values`` and ``overrides``.

    Unknown keys raise ``HarnessError`` (BertConfig itself would silently keep a typo as an
    attribute, e.g. ``num_layers``).
    """
    merged = {**TINY_BERT, **(values or {}), **overrides}
    known = set(BertConfig().to_dict())
    unknown = sorted(set(merged) - known)
    if unknown:
        raise HarnessError(f"unknown BERT config key(s): {', '.join(unknown)}. Known: {', '.join(sorted(known))}")
    if merged["hidden_size"] % merged["num_attention_heads"]:
        raise HarnessError(
            f"hidden_size {merged['hidden_size']} is not a multiple of "
            f"num_attention_heads {merged['num_attention_heads']}"
        )
    return BertConfig(**merged)


def load_masked_lm(path: str | Path) -> tuple[BertForMaskedLM, bool]:
    """A BERT masked LM from a local checkpoint, and whether its MLM head is new.

    An encoder-only checkpoint (all-MiniLM-L6-v2, a sentence-transformers body) gets BERT's head:
    the transform (dense + GELU + LayerNorm) and the output bias initialised as BERT initialises
    them, the decoder tied to the word embeddings as in BERT. Anything missing from the encoder
    itself is refused by the caller.
    """
    model, info = load_pretrained(BertForMaskedLM, path, "a checkpoint", output_loading_info=True)
    missing = set(info.get("missing_keys", ()))
    new_head = any(k.startswith("cls.") for k in missing)
    model.tie_weights()
    out, emb = model.get_output_embeddings(), model.get_input_embeddings()
    if out.weight.data_ptr() != emb.weight.data_ptr():
        raise HarnessError(
            f"{path}: the MLM decoder is not tied to the word embeddings (tie_word_embeddings is off "
            "in its config); the objectives' heads assume BERT's tying"
        )
    return model, new_head


def new_masked_lm(config: BertConfig) -> BertForMaskedLM:
    """A randomly initialised BERT + MLM head with the projection tied to the word embeddings."""
    model = BertForMaskedLM(config)
    decoder = model.cls.predictions.decoder
    embeddings = model.bert.embeddings.word_embeddings
    if decoder.weight is not embeddings.weight:  # a config with tie_word_embeddings=False
        decoder.weight = embeddings.weight
    if decoder.bias is not model.cls.predictions.bias:
        decoder.bias = model.cls.predictions.bias
    return model


def init_like(model: BertForMaskedLM, module: nn.Module) -> nn.Module:
    """Initialise a new module (decoder layers, heads) exactly like BERT's own weights."""
    module.apply(model._init_weights)
    return module


def new_layers(model: BertForMaskedLM, n: int) -> nn.ModuleList:
    """``n`` fresh ``BertLayer`` with the encoder's config, BERT-initialised (from scratch)."""
    if n < 1:
        raise HarnessError(f"a head/decoder needs at least 1 layer, got {n}")
    return init_like(model, nn.ModuleList(BertLayer(model.config) for _ in range(n)))


def tied_mlm_head(model: BertForMaskedLM) -> BertOnlyMLMHead:
    """A second MLM head (own transform + bias) projecting with the shared word embeddings."""
    head = init_like(model, BertOnlyMLMHead(model.config))
    head.predictions.decoder.weight = model.bert.embeddings.word_embeddings.weight
    # nn.Linear's own bias would leave ``predictions.bias`` unused (DDP rejects unused params).
    head.predictions.decoder.bias = head.predictions.bias
    return head


def run_layers(layers: nn.ModuleList, config: BertConfig, hidden: Tensor, attention_mask: Tensor) -> Tensor:
    """Run ``BertLayer`` s over ``hidden`` [B, L, H] with a 0/1 padding mask [B, L].

    The mask is built with the same helper (and attention implementation) as ``BertModel``.
    """
    mask = create_bidirectional_mask(config=config, inputs_embeds=hidden, attention_mask=attention_mask)
    for layer in layers:
        out = layer(hidden, mask)
        hidden = out[0] if isinstance(out, tuple) else out
    return hidden


def gather_masked(hidden: Tensor, labels: Tensor) -> tuple[Tensor, Tensor]:
    """Hidden states [N, H] and targets [N] at the positions where ``labels != -100``."""
    selected = labels != IGNORE_INDEX
    return hidden[selected], labels[selected]


def masked_lm_logits(head: nn.Module, hidden: Tensor, labels: Tensor) -> tuple[Tensor, Tensor]:
    """Vocabulary logits [N, V] at masked positions only, with their targets [N]."""
    states, targets = gather_masked(hidden, labels)
    return head(states), targets


def masked_lm_loss(
    head: nn.Module, hidden: Tensor, labels: Tensor, reduction: str = "mean"
) -> tuple[Tensor, Tensor, Tensor]:
    """Cross entropy at masked positions: (loss, logits [N, V], targets [N]).

    ``reduction="mean"`` averages over the masked tokens of the batch (BERT's convention; the
    papers write the sum, Eq. (4) of the QC paper). ``"sum"`` is for gradient caching, which
    divides by the whole batch's token count itself. No masked token gives an exact 0 that is
    still connected to the graph (so DDP sees every parameter used).
    """
    logits, targets = masked_lm_logits(head, hidden, labels)
    if targets.numel() == 0:
        return logits.sum() * 0.0, logits, targets
    return F.cross_entropy(upcast(logits), targets, reduction=reduction), logits, targets


def count_masked(labels: Tensor) -> int:
    return int((labels != IGNORE_INDEX).sum())


def replace_first_position(embeddings: Tensor, first: Tensor) -> Tensor:
    """[first; embeddings[:, 1:]]: put a sentence vector where the [CLS] embedding was."""
    return torch.cat([first.unsqueeze(1).to(embeddings.dtype), embeddings[:, 1:]], dim=1)
