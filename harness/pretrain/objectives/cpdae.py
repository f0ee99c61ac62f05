"""CPDAE: contrastive pre-training of a discriminative autoencoder (Ma et al., CIKM 2022, §3).

No public code exists (REFERENCES.md §1); this follows the paper's equations.

Each passage d_i = ([CLS], w_1 .. w_n) is masked twice (BERT strategy) into d'_i and d''_i.

    h_[CLS] = Encoder(d_i)                                                               (1)
    z       = Decoder(h_[CLS]),  z in R^|V|                                              (2)
    z^_j    = Sigmoid(z_j)                                                               (3)
    L_REC   = - sum_j ( y_j log z^_j + (1 - y_j) log(1 - z^_j) )                         (4)
    L_CL    = - sum_{i=1}^{m} log  exp(-JS(z~'_i, z~''_i))
                               / sum_{k=1}^{2m} 1[k != i] exp(-JS(z~_i, z~_k))           (5)
    L_total = L_REC + L_MLM + lambda L_CL,   lambda = 0.1                                (6)

- Decoder (§3.1.2): two FFN layers with GELU and LayerNorm: Linear(H, H) -> GELU -> LayerNorm
  -> Linear(H, |V|), own weights (not tied; the paper does not tie it).
- y (Eq. (4)): multi-hot set of the passage's tokens ([CLS]/[SEP]/padding excluded), the same
  target for both views; L_REC is computed for all 2m views.
- z~ = z^ / sum(z^): "normalized from z^". Computed in log space (log-sigmoid minus its
  log-sum-exp) so that no probability underflows to 0 inside the logs.
- JS is the standard Jensen-Shannon divergence (Lin 1991, the paper's ref. [12]):
  JS(P, Q) = 1/2 KL(P || M) + 1/2 KL(Q || M), M = (P + Q)/2, natural log. Eq. (7) of the
  paper writes -JS without the 1/2 and the log 2 ("we ignore log 2"), i.e. Eq. (7) = 2(-JS) +
  2 log 2; the tests check this identity. The constant cancels in Eq. (5), the factor 2 would
  act as a temperature of 1/2: the standard definition is used.
- Eq. (5) indexing: the 2m views are laid out [d'_1 .. d'_m, d''_1 .. d''_m]; anchor i is
  d'_i, its positive d''_i = view i + m, and the denominator runs over all other 2m - 1 views
  (positive included, anchor excluded). ``symmetric=True`` also uses every d''_i as an anchor
  (SimCLR style), which the printed sum over i = 1..m does not.
- CPDAE_R (``contrast_on="cls"``): Eq. (5) with -JS(z~_a, z~_b) replaced by the dot product
  h_a . h_b of the [CLS] vectors. The paper gives no similarity for this variant; dot product
  (as the fine-tuned retriever scores) is the choice here.
- MLM (§3.2.3): BERT MLM on both masked views, 15 % masking by default.

Reductions (the paper writes sums; this is a choice that changes the losses' balance):
- L_MLM: mean over masked tokens; L_CL: mean over anchors (Eq. (5)'s sum / m).
- L_REC: ``rec_reduction="sum"`` (default) sums over the vocabulary as printed and averages over
  the 2m views; ``"mean"`` also averages over the vocabulary (torch's BCE default), which
  makes L_REC |V| times smaller.
- ``rec_bias_init`` (default None: the init's zero bias) starts the decoder's output bias at a
  prior log-odds, e.g. log(64 / 30522) ~ -6 for 64-token passages. The paper does not say how
  the decoder is initialised; the mini profile (a pre-trained encoder, 150 steps) needs it, see
  the comment in ``__init__``.

Doubt, recorded: Eq. (4) as printed reads ``(1 - y^j) log z^j``; with that term the loss
would push every z^j to 1 whatever y says. It is read as the standard binary cross entropy
``(1 - y^j) log(1 - z^j)`` ("computed with the cross-entropy function", multi-label).

Batching: L_CL needs the whole batch, so there is no gradient accumulation
(``supports_accumulation = False``); ``grad_cache_step`` runs the encoder in chunks and the
decoder + L_REC + L_CL once over all cached [CLS] vectors (exactly the full-batch gradient).

Under torch.distributed the pool of Eq. (5) is the global batch, as in one process: the [CLS] vectors of
all ranks are all-gathered (backward sums every rank's gradient for the local slice,
``cocondenser.gather_reps``) and laid out [d'_1 .. d'_M, d''_1 .. d''_M] over the M passages of all
ranks; each rank scores its own anchors against all 2M views, so the mean of the ranks' L_CL is the
global L_CL and the averaged gradient the one-process gradient (tested with 2 gloo ranks).

Cost: the pairwise JS needs an [anchors, 2m, |V|] tensor; it is computed in row blocks under
activation checkpointing so memory stays ~ block x 2m x |V|.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint
from transformers import BertConfig

from harness.core import ranks
from harness.core.errors import HarnessError
from harness.core.numerics import upcast
from harness.pretrain import masking
from harness.pretrain.models import count_masked, init_like, masked_lm_loss
from harness.pretrain.objective_params import Param, register_objective
from harness.pretrain.objectives.base import MASK_RATIO, Batch, Losses, Objective
from harness.pretrain.objectives.cocondenser import gather_reps
from harness.pretrain.objectives.gradcache import grad_cache_backward
from harness.spec.kinds import FLAG, NON_NEGATIVE, NUMBER, POSITIVE_WHOLE, one_of
from harness.training import distributed as D

IGNORE_INDEX = -100


class MLPDecoder(nn.Module):
    """§3.1.2: Linear(H, H) -> GELU -> LayerNorm -> Linear(H, |V|)."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.out = nn.Linear(config.hidden_size, config.vocab_size)

    def forward(self, h: Tensor) -> Tensor:
        return self.out(self.norm(F.gelu(self.dense(h))))


def bag_of_words(bow_ids: Tensor, vocab_size: int) -> Tensor:
    """Multi-hot y [m, |V|] from token ids [m, L] (-100 = not a text token)."""
    y = torch.zeros(bow_ids.shape[0], vocab_size, device=bow_ids.device)
    valid = bow_ids != IGNORE_INDEX
    rows = torch.arange(bow_ids.shape[0], device=bow_ids.device).unsqueeze(1).expand_as(bow_ids)
    y[rows[valid], bow_ids[valid]] = 1.0
    return y


def reconstruction_loss(z: Tensor, y: Tensor, reduction: str = "sum") -> Tensor:
    """Eq. (3)-(4): binary cross entropy of Sigmoid(z) against y, per view summed over |V|
    (``"sum"``) or averaged (``"mean"``), then averaged over views."""
    bce = F.binary_cross_entropy_with_logits(upcast(z), upcast(y), reduction="none")
    per_view = bce.sum(dim=1) if reduction == "sum" else bce.mean(dim=1)
    return per_view.mean()


def log_word_distribution(z: Tensor) -> Tensor:
    """log z~: the sigmoid outputs of Eq. (3) normalised to sum to 1, in log space."""
    log_sig = F.logsigmoid(upcast(z))
    return log_sig - torch.logsumexp(log_sig, dim=-1, keepdim=True)


def js_divergence(log_p: Tensor, log_q: Tensor) -> Tensor:
    """JS(P, Q) over the last axis (broadcasting), from log-probabilities."""
    log_m = torch.logaddexp(log_p, log_q) - math.log(2.0)
    kl_pm = (log_p.exp() * (log_p - log_m)).sum(-1)
    kl_qm = (log_q.exp() * (log_q - log_m)).sum(-1)
    return 0.5 * (kl_pm + kl_qm)


def _js_block(rows: Tensor, cols: Tensor) -> Tensor:
    return js_divergence(rows.unsqueeze(1), cols.unsqueeze(0))


def pairwise_js(log_rows: Tensor, log_cols: Tensor, block: int = 8) -> Tensor:
    """[R, N] matrix of JS(row_r, col_n), in row blocks (checkpointed when training)."""
    out = []
    for start in range(0, log_rows.shape[0], block):
        rows = log_rows[start : start + block]
        if torch.is_grad_enabled() and (rows.requires_grad or log_cols.requires_grad):
            out.append(checkpoint(_js_block, rows, log_cols, use_reentrant=False))
        else:
            out.append(_js_block(rows, log_cols))
    return torch.cat(out)


def view_contrastive_loss(sim: Tensor, anchors: Tensor) -> Tensor:
    """Eq. (5) with a generic similarity: ``sim`` [R, 2m] holds rows for the views ``anchors``
    [R] (indices into 2m); positive of view a is a + m (mod 2m); the anchor itself is left out.
    Mean over anchors."""
    n = sim.shape[1]
    half = n // 2
    self_mask = torch.zeros_like(sim, dtype=torch.bool)
    self_mask[torch.arange(len(anchors), device=sim.device), anchors] = True
    logits = upcast(sim).masked_fill(self_mask, float("-inf"))
    return F.cross_entropy(logits, (anchors + half) % n)


def global_views(h: Tensor) -> tuple[Tensor, Tensor]:
    """The views of every rank laid out as one process lays out its batch, [d'_1 .. d'_M, d''_1 .. d''_M]
    (M passages over all ranks, each rank's in rank order), and the rows of this rank's 2m views in it,
    in ``h``'s order. One process: ``h`` itself and ``0 .. 2m-1``. Every rank holds the same m."""
    n = h.shape[0]
    rows = torch.arange(n, device=h.device)
    world = ranks.world_size() if D.active() else 1
    if world == 1:
        return h, rows
    gathered = gather_reps(h)  # [rank 0: d' d'', rank 1: d' d'', ...]
    m, total = n // 2, world * (n // 2)
    pool = gathered.view(world, 2, m, -1).transpose(0, 1).reshape(2 * total, -1)
    start = ranks.rank() * m
    mine = torch.cat([rows[:m] + start, rows[:m] + total + start])
    return pool, mine


@register_objective(
    "cpdae",
    losses=("mlm", "rec", "contrastive"),
    params={
        "mask_ratio": MASK_RATIO,
        "cl_lambda": Param(NON_NEGATIVE, 0.1, "contrastive loss weight"),
        "contrast_on": Param(one_of("words", "cls"), "words", "words (CPDAE) | cls (CPDAE_R)"),
        "rec_reduction": Param(
            one_of("sum", "mean"), "sum", "sum | mean over the vocabulary of the reconstruction loss"
        ),
        "symmetric": Param(FLAG, False, "contrast both views against each other"),
        "js_block": Param(POSITIVE_WHOLE, 8, "rows per block of the Jensen-Shannon contrast"),
        "rec_bias_init": Param(NUMBER, None, "initial bias of the bag-of-words decoder, null for 0", nullable=True),
    },
)
class CPDAE(Objective):
    supports_accumulation = False  # L_CL contrasts the views of the whole batch: grad cache
    gathers_across_ranks = True  # Eq. (5)'s pool is the global batch (see Under torch.distributed)

    def __init__(self, bert_config: BertConfig, **params: Any):
        super().__init__(bert_config, **params)
        self.mask_ratio = float(self.params["mask_ratio"])
        self.cl_lambda = float(self.params["cl_lambda"])
        self.contrast_on = self.params["contrast_on"]
        self.rec_reduction = self.params["rec_reduction"]
        self.symmetric = bool(self.params["symmetric"])
        self.js_block = int(self.params["js_block"])
        self.decoder = init_like(self.lm, MLPDecoder(bert_config))
        rec_bias_init = self.params["rec_bias_init"]
        if rec_bias_init is not None:
            # A fresh decoder starts at sigmoid(0) = 0.5 for all |V| words, so the summed L_REC's first
            # gradient is "every word is absent" for every passage alike; from a pre-trained encoder at
            # a small lr that shared direction collapses [CLS] before the head learns the prior.
            # Starting the bias at the prior log-odds (a passage holds ~k of |V| words) removes it.
            with torch.no_grad():
                self.decoder.out.bias.fill_(float(rec_bias_init))

    def collate(self, examples, tokenizer, max_length: int, generator: torch.Generator) -> Batch:
        texts = [anchor for anchor, _ in examples]
        enc = self._tokenize(tokenizer, texts, max_length)
        random_ids = masking.random_token_ids(tokenizer)
        views = [
            masking.mask_tokens(
                enc["input_ids"],
                enc["special_mask"],
                self.mask_ratio,
                generator,
                tokenizer.mask_token_id,
                random_ids,
            )
            for _ in range(2)
        ]
        return {
            "input_ids": torch.cat([ids for ids, _ in views]),
            "attention_mask": enc["attention_mask"].repeat(2, 1),
            "labels": torch.cat([labels for _, labels in views]),
            "bow_ids": enc["input_ids"].masked_fill(enc["special_mask"], IGNORE_INDEX),
        }

    def _views_part(self, h: Tensor, bow_ids: Tensor) -> tuple[Tensor, Tensor, dict[str, Tensor]]:
        """L_REC of this rank's 2m views and L_CL of its anchors against the global pool (everything
        that needs the whole batch)."""
        n = h.shape[0]
        if n < 4 or n % 2:
            raise HarnessError(f"CPDAE needs >= 2 passages (2 views each), got {n} sequences")
        pool, mine = global_views(h)  # all ranks' 2M views; rows `mine` are this rank's, in h's order
        z_pool = self.decoder(pool)  # Eq. (2)
        z = z_pool[mine] if pool is not h else z_pool
        y = bag_of_words(bow_ids, self.config.vocab_size).repeat(2, 1)
        rec = reconstruction_loss(z, y, self.rec_reduction)
        anchors = mine if self.symmetric else mine[: n // 2]
        if self.contrast_on == "words":
            log_dist = log_word_distribution(z_pool)
            sim = -pairwise_js(log_dist[anchors], log_dist, self.js_block)
        else:
            with torch.autocast(h.device.type, enabled=False):
                sim = upcast(pool[anchors]) @ upcast(pool).T
        cl = view_contrastive_loss(sim, anchors)
        return rec, cl, {"z": z, "y": y, "sim": sim}

    def compute(self, batch: Batch) -> tuple[Losses, dict[str, Tensor]]:
        hidden = self._encode(batch).last_hidden_state
        mlm, mlm_logits, targets = masked_lm_loss(self.lm.cls, hidden, batch["labels"])
        h = hidden[:, 0]
        rec, cl, extras = self._views_part(h, batch["bow_ids"])
        losses = {"loss": rec + mlm + self.cl_lambda * cl, "mlm": mlm, "rec": rec, "contrastive": cl}
        return losses, {**extras, "h": h, "mlm_logits": mlm_logits, "targets": targets}

    def grad_cache_step(self, batch: Batch, chunk_size: int, scaler=None) -> dict[str, Tensor]:
        """Eq. (6) over the whole batch with the encoder run ``chunk_size`` views at a time (see
        ``gradcache``): the decoder, L_REC and L_CL run once on all 2m cached [CLS] vectors.
        Calls ``.backward`` itself; returns detached values. Under torch.distributed the pool is
        all ranks' views (:func:`global_views`); its backward already sums the ranks' gradients for
        this rank's views, so the cached gradient needs no scaling."""
        rows_keys = ("input_ids", "attention_mask", "labels")
        n = batch["input_ids"].shape[0]
        total_masked = max(count_masked(batch["labels"]), 1)

        def rows_of(rows: slice) -> Batch:
            return {key: batch[key][rows] for key in rows_keys}

        def represent(rows: slice) -> Tensor:
            return self._encode(rows_of(rows)).last_hidden_state[:, 0]

        def global_part(h: Tensor):
            rec, cl, _ = self._views_part(h, batch["bow_ids"])
            return rec + self.cl_lambda * cl, {"rec": rec, "contrastive": cl}

        def local_part(rows: slice):
            part = rows_of(rows)
            hidden = self._encode(part).last_hidden_state
            mlm, _, _ = masked_lm_loss(self.lm.cls, hidden, part["labels"], "sum")
            mlm = mlm / total_masked
            return mlm, {"mlm": mlm}, hidden[:, 0]

        out = grad_cache_backward(
            n, chunk_size, batch["input_ids"].device, represent, global_part, local_part, scaler=scaler
        )
        return {"loss": out["rec"] + out["mlm"] + self.cl_lambda * out["contrastive"], **out}
