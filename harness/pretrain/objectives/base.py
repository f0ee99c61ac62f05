"""The contract every pre-training objective keeps (the trainer and data pipeline rely on it).

An ``Objective`` is an ``nn.Module`` holding a BERT encoder (``BertForMaskedLM``: backbone plus
tied MLM head) and whatever heads/decoders its paper adds:

- ``collate(examples, tokenizer, max_length, generator) -> batch``: ``examples`` are
  ``(anchor_text, context_text)`` pairs; all masking draws from ``generator`` (deterministic
  per seed). Batches are CPU tensors; the trainer moves them.
- ``forward(batch) -> {"loss": total, <component>: value, ...}``.
- ``compute(batch) -> (losses, extras)``: the same plus intermediate tensors (representations,
  logits at masked positions) so tests can recompute each loss from the paper's formula.
- ``encoder() -> BertModel``: the backbone exported as a plain HF BERT (heads/decoders dropped).
- ``masked_lm() -> BertForMaskedLM``: backbone + encoder MLM head (lexical fine-tuning such as
  LexMAE's SPLADE-style retriever needs the LM head).
- ``supports_accumulation``: False when the loss needs the whole batch at once (contrastive);
  such an objective provides ``grad_cache_step(batch, chunk_size, scaler=None) -> losses``,
  which runs its own backward (see ``gradcache``).
- ``gathers_across_ranks``: True when in-batch negatives are all-gathered over DDP ranks.
- ``params``: the objective's hyper-parameters: its declared defaults overridden by the spec's.

Each objective class is registered with its parameters by
:func:`harness.pretrain.objective_params.register_objective`.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch
from torch import Tensor, nn
from transformers import BertConfig, BertForMaskedLM, BertModel

from harness.core.errors import HarnessError
from harness.pretrain import masking
from harness.pretrain.models import new_masked_lm
from harness.pretrain.objective_params import Param, registered, resolve_params
from harness.spec.kinds import POSITIVE_WHOLE, RATIO

# Parameters several objectives declare alike.
MASK_RATIO = Param(RATIO, 0.15, "MLM masking ratio")
HEAD_LAYERS = Param(POSITIVE_WHOLE, 2, "layers of the decoder / Condenser head")

Batch = dict[str, Tensor]
Losses = dict[str, Tensor]


class Objective(nn.Module):
    name: ClassVar[str] = ""
    supports_accumulation: ClassVar[bool] = True
    gathers_across_ranks: ClassVar[bool] = False

    def __init__(self, bert_config: BertConfig, **params: Any):
        super().__init__()
        # The declared defaults overridden by `params`, each checked against its declared kind
        # (harness.pretrain.objective_params): the declaration spec validation checks a spec against.
        self.params: dict[str, Any] = resolve_params(registered(self.name), params)
        self.lm: BertForMaskedLM = new_masked_lm(bert_config)

    @property
    def config(self) -> BertConfig:
        return self.lm.config

    def encoder(self) -> BertModel:
        return self.lm.bert

    def masked_lm(self) -> BertForMaskedLM:
        return self.lm

    def forward(self, batch: Batch) -> Losses:
        return self.compute(batch)[0]

    def compute(self, batch: Batch) -> tuple[Losses, dict[str, Tensor]]:
        raise NotImplementedError

    def collate(
        self,
        examples: list[tuple[str, str]],
        tokenizer,
        max_length: int,
        generator: torch.Generator,
    ) -> Batch:
        raise NotImplementedError

    # -- helpers shared by the subclasses -------------------------------------------------

    def _encode_masked(
        self, tokenizer, texts: list[str], max_length: int, ratio: float, generator: torch.Generator
    ) -> dict[str, Tensor]:
        """Tokenise ``texts`` and BERT-mask them: input_ids, attention_mask, labels."""
        enc = self._tokenize(tokenizer, texts, max_length)
        ids, labels = masking.mask_tokens(
            enc["input_ids"],
            enc["special_mask"],
            ratio,
            generator,
            tokenizer.mask_token_id,
            masking.random_token_ids(tokenizer),
        )
        return {"input_ids": ids, "attention_mask": enc["attention_mask"], "labels": labels}

    def _tokenize(self, tokenizer, texts: list[str], max_length: int) -> dict[str, Tensor]:
        if not texts:
            raise HarnessError(f"{self.name}: cannot collate an empty batch")
        if len(tokenizer) > self.config.vocab_size:
            raise HarnessError(
                f"{self.name}: the tokenizer has {len(tokenizer)} tokens but the model's "
                f"vocab_size is {self.config.vocab_size}; set vocab_size >= {len(tokenizer)}"
            )
        return masking.tokenize(tokenizer, texts, max_length)

    def _encode(self, batch: Batch, prefix: str = "", **kwargs: Any):
        return self.lm.bert(
            input_ids=batch[prefix + "input_ids"],
            attention_mask=batch[prefix + "attention_mask"],
            **kwargs,
        )
