"""CoT-MAE (Wu et al. 2022), as specified in the query-as-context paper (v2 §2.4, §3.1).

Each example is a pair {x, y}: x (the anchor) goes to the deep encoder, y (the context) to a
shallow decoder. Span pairs from one document, or with query-as-context the passage x and a
generated query y ("we fed the passage into the encoder, and query into the decoder").

    L_mlm     = - sum_{i in mask_pos(x)} CE(phi(h_i^L), x_i)                             (4)
    d^0       = {h_x, y_1, ..., y_n}                                                     (8)
    d^k       = {d_0^k, d_1^k, ..., d_n^k}                                               (9)
    L_ctx_mlm = - sum_{i in mask_pos(y)} CE(phi(d_i^N), y_i)                             (10)
    L         = L_mlm + L_ctx_mlm                                                        (11)

- Encoder: BERT with x masked at ``enc_mask_ratio`` (30 %, official ``bert_mask_ratio``).
- Decoder: N = ``n_head_layers`` fresh ``BertLayer`` (2 for CoT-MAE, 1 for CoT-MAE + QC per the
  official README), from scratch. Its input is the embedding of y masked at
  ``dec_mask_ratio`` (45 %), with the [CLS] slot replaced by h_x = h_0^L(x) (Eq. (8)).
- ``dec_loss_coef`` multiplies L_ctx_mlm (official ``head_mlm_coef``, 1.0 = Eq. (11)).
- MLM losses are means over masked tokens (the papers write sums).

Where the paper is silent, the official code (caskcsg/ir cotmae/modeling.py) is followed:
- the decoder's word/position embeddings and its MLM head phi are the encoder's own (shared).
  Hence L_ctx_mlm reaches the encoder's *Transformer layers* only through h_x, but it also
  trains the shared embedding table and MLM head directly. Tests pin both facts.
- y's own [CLS] embedding is dropped (replaced, not prefixed).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from transformers import BertConfig

from harness.pretrain.models import (
    masked_lm_loss,
    new_layers,
    replace_first_position,
    run_layers,
)
from harness.pretrain.objective_params import Param, register_objective
from harness.pretrain.objectives.base import HEAD_LAYERS, Batch, Losses, Objective
from harness.spec.kinds import NON_NEGATIVE, RATIO


@register_objective(
    "cotmae",
    losses=("mlm", "ctx_mlm"),
    params={
        "enc_mask_ratio": Param(RATIO, 0.30, "encoder masking ratio"),
        "dec_mask_ratio": Param(RATIO, 0.45, "decoder masking ratio"),
        "n_head_layers": HEAD_LAYERS,
        "dec_loss_coef": Param(NON_NEGATIVE, 1.0, "decoder loss weight"),
    },
)
class CoTMAE(Objective):
    supports_accumulation = True

    def __init__(self, bert_config: BertConfig, **params: Any):
        super().__init__(bert_config, **params)
        self.enc_mask_ratio = float(self.params["enc_mask_ratio"])
        self.dec_mask_ratio = float(self.params["dec_mask_ratio"])
        self.dec_loss_coef = float(self.params["dec_loss_coef"])
        self.c_head = new_layers(self.lm, int(self.params["n_head_layers"]))

    def collate(self, examples, tokenizer, max_length: int, generator: torch.Generator) -> Batch:
        anchors = [anchor for anchor, _ in examples]
        contexts = [context for _, context in examples]
        enc = self._encode_masked(tokenizer, anchors, max_length, self.enc_mask_ratio, generator)
        dec = self._encode_masked(tokenizer, contexts, max_length, self.dec_mask_ratio, generator)
        return {
            **enc,
            "decoder_input_ids": dec["input_ids"],
            "decoder_attention_mask": dec["attention_mask"],
            "decoder_labels": dec["labels"],
        }

    def decode(self, h_x: Tensor, batch: Batch) -> Tensor:
        """Decoder states d^N (Eq. (9)) from h_x [B, H] and the masked context."""
        embeddings = self.lm.bert.embeddings(input_ids=batch["decoder_input_ids"])
        d0 = replace_first_position(embeddings, h_x)  # Eq. (8)
        return run_layers(self.c_head, self.config, d0, batch["decoder_attention_mask"])

    def compute(self, batch: Batch) -> tuple[Losses, dict[str, Tensor]]:
        hidden = self._encode(batch).last_hidden_state
        mlm, mlm_logits, mlm_targets = masked_lm_loss(self.lm.cls, hidden, batch["labels"])
        h_x = hidden[:, 0]
        decoded = self.decode(h_x, batch)
        ctx, ctx_logits, ctx_targets = masked_lm_loss(self.lm.cls, decoded, batch["decoder_labels"])
        losses = {"loss": mlm + self.dec_loss_coef * ctx, "mlm": mlm, "ctx_mlm": ctx}
        extras = {
            "h_x": h_x,
            "mlm_logits": mlm_logits,
            "mlm_targets": mlm_targets,
            "ctx_logits": ctx_logits,
            "ctx_targets": ctx_targets,
        }
        return losses, extras
