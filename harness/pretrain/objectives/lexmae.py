"""LexMAE: lexicon-bottlenecked masked autoencoder (Shen et al., ICLR 2023, §3).

    S^(enc) = Transformer-LM(x_bar; theta_enc) in R^{|V| x n}                            (1)
    L^(elm) = - sum_D sum_{j in M_enc} log P(w^j = x_j | x_bar),  P = softmax(S_{:,j})    (2)
    a       = Normalize(Max-Pool(S^(enc))) in [0, 1]^|V|,  Normalize = softmax           (3)
    b       = E_{w ~ a}[e^(w)] = W^(we) a                                                (4)
    S^(dec) = Transformer-LM(b, x_tilde; theta_dec)                                      (5)
    L^(dlm) = - sum_D sum_{j in M_dec} log P(w^j = x_j | ...)                             (6)
    L^(lm)  = L^(elm) + L^(dlm)                                                          (7)

- x_bar: x with alpha = ``enc_mask_ratio`` (30 %) of its tokens BERT-masked. x_tilde: x_bar
  with extra positions masked until alpha + beta = ``dec_mask_ratio`` (50 %) of the tokens are
  masked; M_dec is all of them (the decoder also recovers the encoder's masked tokens, "the
  decoder is required to recover all the masked tokens that are also absent in the encoder").
  The extra positions get the same 80/10/10 treatment.
- Max-Pool is over the sequence axis, at text positions only: padding and [CLS]/[SEP] are left
  out (official code, taoshen58/LexMAE ``text_part_mask_generation``); masked positions are
  pooled (they are text positions of x_bar).
- Eq. (4): with HF's [|V|, d] embedding matrix, b = a @ W_we. The gradient is cut for W_we
  there ("we cut-off the gradient back-propagation for W^(we) in Eq. (4)"): b = a @ W_we.detach().
- Decoder: ``n_head_layers`` (2, "shallow Transformer layers (says two layers)") fresh
  ``BertLayer`` over [b ; embeddings of x_tilde[1:]]: b replaces the [CLS] slot. The embedding
  module is the encoder's (official code). The decoder LM head has its own transform and bias,
  its projection tied to the word embeddings ("we tie all word embedding metrics ... including
  the word embedding modules and language model heads of both the encoder & decoder").
- Losses are means over masked tokens (the paper sums over the dataset D).

Cost, inherent to the method: Eq. (3) max-pools the encoder's full-vocabulary logits over all
positions, so S^(enc) is computed at every position ([B, L, |V|]), unlike the other
objectives which project only masked positions. L^(elm) reuses those logits. The decoder's
logits are computed at masked positions only.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor
from transformers import BertConfig

from harness.core.numerics import upcast
from harness.pretrain import masking
from harness.pretrain.models import (
    gather_masked,
    masked_lm_loss,
    new_layers,
    replace_first_position,
    run_layers,
    tied_mlm_head,
)
from harness.pretrain.objective_params import Param, register_objective
from harness.pretrain.objectives.base import HEAD_LAYERS, Batch, Losses, Objective
from harness.spec.kinds import RATIO


def lexicon_importance(logits: Tensor, pool_mask: Tensor) -> Tensor:
    """Eq. (3): softmax over |V| of the max over text positions of S^(enc) [B, L, |V|].

    A row without any text position (empty text) pools over all its positions instead of
    producing NaN.
    """
    pool = pool_mask.bool()
    pool = pool | ~pool.any(dim=1, keepdim=True)
    masked = upcast(logits).masked_fill(~pool.unsqueeze(-1), float("-inf"))
    return torch.softmax(masked.max(dim=1).values, dim=-1)


def cbow_bottleneck(a: Tensor, word_embeddings: Tensor) -> Tensor:
    """Eq. (4): b = W_we a, with no gradient into W_we."""
    return a @ word_embeddings.detach().to(a.dtype)


def _decoder_total(p: dict[str, Any]) -> str | None:
    if p["dec_mask_ratio"] >= p["enc_mask_ratio"]:
        return None
    return (
        f"{p['dec_mask_ratio']!r} is the decoder's total (alpha + beta) and must be >= enc_mask_ratio "
        f"({p['enc_mask_ratio']!r})"
    )


@register_objective(
    "lexmae",
    losses=("mlm", "dec_mlm"),
    params={
        "enc_mask_ratio": Param(RATIO, 0.30, "encoder masking ratio"),
        "dec_mask_ratio": Param(RATIO, 0.50, "decoder masking ratio: the decoder's total (alpha + beta)"),
        "n_head_layers": HEAD_LAYERS,
    },
    checks=(("dec_mask_ratio", _decoder_total),),
)
class LexMAE(Objective):
    supports_accumulation = True

    def __init__(self, bert_config: BertConfig, **params: Any):
        super().__init__(bert_config, **params)
        self.enc_mask_ratio = float(self.params["enc_mask_ratio"])  # the ratios, and dec >= enc, are checked
        self.dec_mask_ratio = float(self.params["dec_mask_ratio"])
        self.decoder_layers = new_layers(self.lm, int(self.params["n_head_layers"]))
        self.decoder_head = tied_mlm_head(self.lm)

    def collate(self, examples, tokenizer, max_length: int, generator: torch.Generator) -> Batch:
        texts = [anchor for anchor, _ in examples]
        enc = self._tokenize(tokenizer, texts, max_length)
        ids, maskable = enc["input_ids"], ~enc["special_mask"]
        random_ids = masking.random_token_ids(tokenizer)
        mask_id = tokenizer.mask_token_id
        enc_pos = masking.choose_positions(maskable, self.enc_mask_ratio, generator)
        x_bar = masking.corrupt(ids, enc_pos, generator, mask_id, random_ids)
        dec_pos = masking.choose_positions(maskable, self.dec_mask_ratio, generator, include=enc_pos)
        x_tilde = masking.corrupt(x_bar, dec_pos & ~enc_pos, generator, mask_id, random_ids)
        return {
            "input_ids": x_bar,
            "attention_mask": enc["attention_mask"],
            "labels": masking.labels_at(ids, enc_pos),
            "pool_mask": maskable.long(),
            "decoder_input_ids": x_tilde,
            "decoder_labels": masking.labels_at(ids, dec_pos),
        }

    def compute(self, batch: Batch) -> tuple[Losses, dict[str, Tensor]]:
        hidden = self._encode(batch).last_hidden_state
        logits = self.lm.cls(hidden)  # Eq. (1): every position (needed by the max-pool)
        flat_logits, targets = gather_masked(logits, batch["labels"])
        if targets.numel():
            elm = F.cross_entropy(upcast(flat_logits), targets)  # Eq. (2)
        else:
            elm = logits.sum() * 0.0
        a = lexicon_importance(logits, batch["pool_mask"])  # Eq. (3)
        word_embeddings = self.lm.bert.embeddings.word_embeddings.weight
        b = cbow_bottleneck(a, word_embeddings)  # Eq. (4)

        embeddings = self.lm.bert.embeddings(input_ids=batch["decoder_input_ids"])
        decoded = run_layers(
            self.decoder_layers,
            self.config,
            replace_first_position(embeddings, b),
            batch["attention_mask"],
        )  # Eq. (5)
        dlm, dec_logits, dec_targets = masked_lm_loss(self.decoder_head, decoded, batch["decoder_labels"])  # Eq. (6)
        losses = {"loss": elm + dlm, "mlm": elm, "dec_mlm": dlm}  # Eq. (7)
        extras = {
            "enc_logits": logits,
            "a": a,
            "b": b,
            "mlm_logits": flat_logits,
            "mlm_targets": targets,
            "dec_logits": dec_logits,
            "dec_targets": dec_targets,
        }
        return losses, extras
