"""Plain masked language modelling (BERT; Eq. (4) of the query-as-context paper, v2 §2.2).

    L_mlm = - sum_{i in mask_pos} CE(phi(h_i^L), x_i)                                    (4)

phi is BERT's MLM head (dense + GELU + LayerNorm, projection tied to the word embeddings).

Implementation notes
- The loss is the *mean* over the masked tokens of the batch (BERT's and every official
  script's convention); Eq. (4) writes a sum, which only rescales the learning rate.
- Logits are computed only at masked positions (see ``harness.pretrain.models``).
- Only ``anchor_text`` of each example is used; 15 % masking with 80/10/10 by default.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from transformers import BertConfig

from harness.pretrain.models import masked_lm_loss
from harness.pretrain.objective_params import register_objective
from harness.pretrain.objectives.base import MASK_RATIO, Batch, Losses, Objective


@register_objective("mlm", losses=("mlm",), params={"mask_ratio": MASK_RATIO})
class MLM(Objective):
    supports_accumulation = True

    def __init__(self, bert_config: BertConfig, **params: Any):
        super().__init__(bert_config, **params)
        self.mask_ratio = float(self.params["mask_ratio"])

    def collate(self, examples, tokenizer, max_length: int, generator: torch.Generator) -> Batch:
        anchors = [anchor for anchor, _ in examples]
        return self._encode_masked(tokenizer, anchors, max_length, self.mask_ratio, generator)

    def compute(self, batch: Batch) -> tuple[Losses, dict[str, Tensor]]:
        hidden = self._encode(batch).last_hidden_state
        mlm, logits, targets = masked_lm_loss(self.lm.cls, hidden, batch["labels"])
        return {"loss": mlm, "mlm": mlm}, {"logits": logits, "targets": targets}
