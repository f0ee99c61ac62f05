"""coCondenser (Gao & Callan 2022), as specified in the query-as-context paper (v2 §2.3, §3.1).

Inputs: a batch of m pairs {x_i, y_i} (Eq. (1)): two spans of one document, or with
query-as-context a passage and one of its generated queries. Collated as 2m sequences
interleaved ``[x_0, y_0, x_1, y_1, ...]``, each BERT-masked (15 %).

    L_mlm     = - sum_{i in mask_pos} CE(phi(h_i^L), x_i)                                (4)
    L_co      = - log exp(sim(h_x, h_y)/tau) / sum_{h' in B} exp(sim(h_x, h')/tau)       (5)
    L_aux_mlm = - sum_{i in mask_pos} CE(phi(h_i^N), x_i)                                (6)
    L         = L_mlm + L_aux_mlm + L_co                                                 (7)

- h_x = h_0^L(x): last-layer [CLS]; sim = dot product; tau = ``temperature`` (1 by default, as
  the official ``cl_temp``). B = the other 2m - 1 sequences of the batch: the anchor itself is
  excluded (the official code fills the diagonal with -inf), its positive is its pair mate.
  Eq. (5) is written for one x; every one of the 2m sequences is an anchor and the loss is their
  mean (official code).
- Condenser head: N = ``n_head_layers`` (2) fresh ``BertLayer`` over
  [h_0^L ; h_1^M ... h_n^M], M = ``skip_from`` (6 in the paper and official scripts; clamped to
  the number of encoder layers, so a 2-layer tiny model skips from layer 2). phi is the
  encoder's own MLM head for both L_mlm and L_aux_mlm (shared, as in luyug/Condenser), with
  the same mask positions.
- MLM losses are means over masked tokens (the papers write sums).

Deviations / where the paper is silent
- Initialisation: the paper starts from a Condenser checkpoint (head + backbone); here the
  backbone and head start from whatever the caller loads (random for the tiny profile).
- The contrastive loss needs the whole batch, so gradient accumulation would change it
  (``supports_accumulation = False``). ``grad_cache_step`` keeps the loss over the whole batch
  while running the encoder in chunks (Gao et al. 2021, "Scaling deep contrastive learning
  batch size under memory limited setup"; official ``cache_chunk_size``). Unlike the official
  script, which rescales each chunk's MLM mean by chunk size / batch size, the chunks' MLM
  sums are divided by the batch's total masked-token count, so the gradient equals the
  full-batch gradient exactly (tested).
- Under torch.distributed the [CLS] vectors are all-gathered, so negatives span the global
  batch (official behaviour, ``gathers_across_ranks = True``); gradients stay exact (tested
  with 2 gloo ranks against one process).
"""

from __future__ import annotations

import logging
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import Tensor
from transformers import BertConfig

from harness.core import ranks
from harness.core.errors import HarnessError
from harness.core.numerics import upcast
from harness.pretrain.models import count_masked, masked_lm_loss, new_layers, run_layers
from harness.pretrain.objective_params import Param, register_objective
from harness.pretrain.objectives.base import (
    HEAD_LAYERS,
    MASK_RATIO,
    Batch,
    Losses,
    Objective,
)
from harness.pretrain.objectives.gradcache import grad_cache_backward
from harness.spec.kinds import POSITIVE, POSITIVE_WHOLE
from harness.training import distributed as D

log = logging.getLogger(__name__)


def span_contrastive_loss(reps: Tensor, temperature: float = 1.0) -> Tensor:
    """Eq. (5) averaged over all 2m anchors; rows (2i, 2i+1) of ``reps`` [2m, H] are pairs.

    Computed in fp32 even under autocast (dot products of 768-d vectors lose precision in fp16).
    """
    n = reps.shape[0]
    if n < 2 or n % 2:
        raise HarnessError(f"coCondenser needs an even number (>= 2) of spans, got {n}")
    with torch.autocast(reps.device.type, enabled=False):
        sim = upcast(reps) @ upcast(reps).T / temperature
    sim = sim.masked_fill(torch.eye(n, dtype=torch.bool, device=reps.device), float("-inf"))
    target = torch.arange(n, device=reps.device) ^ 1  # 2i <-> 2i+1
    return F.cross_entropy(sim, target)


class _GatherWithGrad(torch.autograd.Function):
    """all_gather whose backward sums every rank's gradient for the local slice.

    Each rank computes the same global loss; summing the ranks' gradients and letting DDP
    average them gives exactly the single-process gradient.
    """

    @staticmethod
    def forward(ctx, local: Tensor) -> Tensor:
        parts = [torch.empty_like(local) for _ in range(ranks.world_size())]
        dist.all_gather(parts, local.contiguous())
        ctx.rank, ctx.n = ranks.rank(), local.shape[0]
        return torch.cat(parts)

    @staticmethod
    def backward(ctx, grad: Tensor) -> Tensor:
        grad = grad.contiguous()
        dist.all_reduce(grad)
        return grad[ctx.rank * ctx.n : (ctx.rank + 1) * ctx.n]


def gather_reps(reps: Tensor) -> Tensor:
    """The global batch of [CLS] vectors (local ones keep their graph); identity off DDP."""
    return _GatherWithGrad.apply(reps) if D.active() else reps


def _gather_keep_local(local: Tensor) -> Tensor:
    """All ranks' vectors with this rank's slot being ``local`` itself (its gradient stays
    local: the grad-cache path averages gradients over ranks afterwards)."""
    if not D.active():
        return local
    parts = [torch.empty_like(local) for _ in range(ranks.world_size())]
    dist.all_gather(parts, local.detach().contiguous())
    parts[ranks.rank()] = local
    return torch.cat(parts)


def _rows(batch: Batch, rows: slice) -> Batch:
    return {key: value[rows] for key, value in batch.items()}


@register_objective(
    "cocondenser",
    losses=("mlm", "aux_mlm", "contrastive"),
    params={
        "mask_ratio": MASK_RATIO,
        "n_head_layers": HEAD_LAYERS,
        "skip_from": Param(POSITIVE_WHOLE, 6, "encoder layer the Condenser head reads (clamped to the encoder's)"),
        "temperature": Param(POSITIVE, 1.0, "contrastive softmax temperature"),
    },
)
class CoCondenser(Objective):
    supports_accumulation = False
    gathers_across_ranks = True

    def __init__(self, bert_config: BertConfig, **params: Any):
        super().__init__(bert_config, **params)
        self.mask_ratio = float(self.params["mask_ratio"])
        self.temperature = float(self.params["temperature"])
        skip_from = int(self.params["skip_from"])
        self.skip_layer = min(skip_from, bert_config.num_hidden_layers)
        if self.skip_layer != skip_from:
            log.info("coCondenser: skip_from %s clamped to %s layers", skip_from, self.skip_layer)
        self.c_head = new_layers(self.lm, int(self.params["n_head_layers"]))

    def collate(self, examples, tokenizer, max_length: int, generator: torch.Generator) -> Batch:
        texts = [text for anchor, context in examples for text in (anchor, context)]
        return self._encode_masked(tokenizer, texts, max_length, self.mask_ratio, generator)

    def _parts(self, batch: Batch, reduction: str) -> tuple[Tensor, Tensor, Tensor, dict]:
        """Encoder MLM, head MLM and the [CLS] vectors of one (sub-)batch."""
        hidden_states = self._encode(batch, output_hidden_states=True).hidden_states
        last = hidden_states[-1]
        head_in = torch.cat([last[:, :1], hidden_states[self.skip_layer][:, 1:]], dim=1)
        head_out = run_layers(self.c_head, self.config, head_in, batch["attention_mask"])
        labels = batch["labels"]
        mlm, mlm_logits, targets = masked_lm_loss(self.lm.cls, last, labels, reduction)
        aux, aux_logits, _ = masked_lm_loss(self.lm.cls, head_out, labels, reduction)
        extras = {"mlm_logits": mlm_logits, "aux_logits": aux_logits, "targets": targets}
        return mlm, aux, last[:, 0], extras

    def compute(self, batch: Batch) -> tuple[Losses, dict[str, Tensor]]:
        mlm, aux, reps, extras = self._parts(batch, "mean")
        co = span_contrastive_loss(gather_reps(reps), self.temperature)
        losses = {"loss": mlm + aux + co, "mlm": mlm, "aux_mlm": aux, "contrastive": co}
        return losses, {**extras, "cls": reps}

    def grad_cache_step(self, batch: Batch, chunk_size: int, scaler=None) -> dict[str, Tensor]:
        """Backward of Eq. (7) over the whole batch with the encoder run ``chunk_size`` rows at a
        time (see ``gradcache``); calls ``.backward`` itself and returns detached values.

        Under torch.distributed the [CLS] vectors of all ranks form the negatives; the cached
        gradient is multiplied by the world size because the caller averages gradients over
        ranks (this path bypasses DDP). ``scaler``: a ``torch.amp.GradScaler`` for fp16.
        """
        n = batch["input_ids"].shape[0]
        total_masked = max(count_masked(batch["labels"]), 1)

        def represent(rows: slice) -> Tensor:
            return self._encode(_rows(batch, rows)).last_hidden_state[:, 0]

        def global_part(reps: Tensor):
            co = span_contrastive_loss(_gather_keep_local(reps), self.temperature)
            return co, {"contrastive": co}

        def local_part(rows: slice):
            mlm, aux, reps, _ = self._parts(_rows(batch, rows), "sum")
            mlm, aux = mlm / total_masked, aux / total_masked
            return mlm + aux, {"mlm": mlm, "aux_mlm": aux}, reps

        out = grad_cache_backward(
            n,
            chunk_size,
            batch["input_ids"].device,
            represent,
            global_part,
            local_part,
            scaler=scaler,
            rep_grad_scale=float(ranks.world_size() if D.active() else 1),
        )
        return {"loss": out["mlm"] + out["aux_mlm"] + out["contrastive"], **out}
