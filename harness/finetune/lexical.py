"""Learned-sparse (SPLADE-max) retriever fine-tuning: LexMAE's three stages (Shen et al., ICLR 2023, §4).

Representation, Eq. (8) (SPLADE-max, Formal et al. 2021a)
    ``v(x) = log(1 + max_t ReLU(S[t, :]))`` with S the masked-LM logits of x [L, |V|] and t
    running over the non-padding positions ([CLS] and [SEP] included, as SPLADE does). The
    saturation ``log(1 + ReLU(.))`` is monotone, so :func:`splade_max` takes the masked max of
    the raw logits first and applies it to the [B, |V|] result: the same values and gradients
    as the literal formula with one [B, L, |V|] tensor instead of three.
Loss
    Stages 1 and 2, Eq. (11)/(12): InfoNCE over each query's positive, its negatives and every
    other passage of the batch (in-batch negatives; :func:`harness.finetune.dense.info_nce_loss`,
    dot product, temperature 1) + FLOPS.
    Stage 3, Eq. (13) (``distill=True``): KL-Div + gamma x InfoNCE + FLOPS, gamma =
    ``contrastive_weight`` = 0.2 (the paper, after SimLM). The KL term compares, over each
    query's own group (positive + negatives), the student's softmax of dot products with the
    softmax of the cross-encoder's scores (``teacher_scores[qid][docid]``, frozen). Its direction
    is SimLM's code (``KLDivLoss(input=log p_student, target=log p_teacher, log_target=True,
    reduction="batchmean")``), i.e. KL(p_teacher || p_student) averaged over queries; the paper's
    "KL-Div(P_enc || P_rk)" lists the arguments in that call's order.
FLOPS regulariser (Paria et al. 2020; Formal et al. 2021b)
    ``FLOPS(R) = sum_j (mean_i |R_ij|)^2`` over the batch's query vectors and, separately, its
    passage vectors (:func:`flops`), weighted ``lambda_q = flops_lambda x query_flops_ratio`` and
    ``lambda_d = flops_lambda``. The paper tunes lambda per stage (0.002 / 0.008 / 0.008); the
    query ratio 0.75 is the LexMAE authors' setting (REFERENCES §1). ``flops_warmup_steps`` > 0
    turns on SPLADE's quadratic warm-up, ``lambda_t = lambda x min(1, (t / T)^2)`` at optimizer
    step t (0-based); the paper does not say it used one, so it is off by default. Under DDP each
    rank regularises its own batch (as SPLADE does) and DDP averages the gradients.
Model and initialisation
    One ``BertForMaskedLM`` shared by queries and passages. Fine-tuning starts from the LexMAE
    pre-trained masked LM: a folder holding a standard Hugging Face ``BertForMaskedLM``
    checkpoint (``config.json`` + ``model.safetensors`` with ``bert.*`` and ``cls.predictions.*``
    weights). A folder with a plain ``BertModel`` (encoder only) is accepted too: the MLM head's
    projection is then the tied word embeddings, and its transform and output bias start fresh
    (seeded). That is NOT the pre-trained LexMAE head, and the stats say so
    (``mlm_head: "initialised"``); see :func:`load_masked_lm`.
Head refit (``fit_head``, off by default)
    Before the first step the MLM head's transform is refitted in closed form so that each token
    predicts itself (:mod:`harness.finetune.head_fit`, on the first 256 positives): for a head
    that pre-training could not train, as in the CPU mini profile. Recorded in the stats.
Sparse start (``start_terms``, off by default)
    The MLM objectives (softmax cross-entropy) are unchanged by adding one constant to every
    output bias, so a head trained briefly, or not at all, can sit anywhere on that free axis: a
    fresh head on MiniLM gives ~23,000 positive max-pooled logits of 30,522 per passage, where a
    long-trained BERT head gives few. With ``start_terms = K`` the bias is shifted once, before the
    first step, by the value that leaves the average training passage (the first 64 in example
    order, at ``max_p_len``) with K non-zero terms (:func:`sparse_start_shift`); the shift is in
    the stats. The MLM predictions are unchanged; only where SPLADE's ReLU cuts moves.
Everything else
    Batches, sampling of positives and negatives (Tevatron's per-epoch rotation), the effective
    batch, negatives across devices, checkpoints every epoch with exact resume, mixed precision and
    DDP work as in :mod:`harness.finetune.dense`, whose helpers are reused. Examples are
    ``(query, positives, negatives)`` or ``(qid, query, positives, negatives)``; stage 3 needs the
    second form and doc ids (``passages``), because the teacher's scores are keyed by ids. Items of
    a group without a teacher score are left out of the pools (counted in the stats).
Output
    ``output_dir`` holds the ``BertForMaskedLM`` weights, the tokenizer, ``harness_lexical.json``
    (representation, lengths, title separator; read by :mod:`harness.retrieval.impact`) and
    ``train_stats.json`` (written last: its presence means the folder is complete).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from harness import SEED
from harness.errors import HarnessError
from harness.finetune.dense import (
    PRECISIONS,
    _optimizer,
    _resolve_precision,
    _say,
    _scheduler,
    gather_with_grad,
    info_nce_loss,
)
from harness.finetune.negatives import sample_group
from harness.pretrain import checkpoint as ckpt
from harness.pretrain import distributed as D
from harness.pretrain.trainer import autocast, seed_everything
from harness.retrieval.encoder import DEFAULT_TITLE_SEPARATOR, passage_text
from harness.numerics import upcast

Logger = Callable[[int, dict[str, float]], None]
TeacherScores = Mapping[str, Mapping[str, float]]
STATS_FILE = "train_stats.json"
SETTINGS_FILE = "harness_lexical.json"
REPRESENTATION = "splade_max"
_IDENTITY_FIELDS = ("queries_per_device", "passages_per_query", "lr", "epochs", "warmup_ratio", "weight_decay",
                    "grad_clip", "max_q_len", "max_p_len", "seed", "flops_lambda", "query_flops_ratio",
                    "flops_warmup_steps", "fit_head", "start_terms", "distill", "contrastive_weight",
                    "negatives_across_devices", "title_separator")


@dataclass(kw_only=True)
class LexicalTrainConfig:
    """Hyper-parameters; defaults are the paper's stage 1 (batch 24 queries x (1 + 15), lr 2e-5, 3 epochs).

    Stage 2: ``flops_lambda=0.008`` on the stage-1 retriever's negatives. Stage 3:
    ``flops_lambda=0.008, distill=True, queries_per_device=16, passages_per_query=24``.
    """

    queries_per_device: int = 24
    passages_per_query: int = 16  # 1 positive + 15 negatives
    lr: float = 2e-5
    epochs: int = 3
    warmup_ratio: float = 0.1  # not given by the paper; HF/Tevatron practice
    weight_decay: float = 0.0
    grad_clip: float | None = 1.0
    max_q_len: int = 32
    max_p_len: int = 144
    seed: int = SEED
    flops_lambda: float = 0.002  # lambda_1; 0.008 for stages 2 and 3
    query_flops_ratio: float = 0.75  # lambda_q = flops_lambda x this
    flops_warmup_steps: int = 0  # 0 = constant lambda; T of SPLADE's quadratic warm-up otherwise
    fit_head: bool = False  # refit the MLM head's transform before step 1 (docstring)
    start_terms: int | None = None  # shift the MLM bias so a passage starts with this many terms (docstring)
    distill: bool = False  # stage 3: KL to the reranker + contrastive_weight x InfoNCE
    contrastive_weight: float = 0.2  # gamma in Eq. (13)
    negatives_across_devices: bool = True
    title_separator: str = DEFAULT_TITLE_SEPARATOR
    precision: str = "fp32"
    checkpoint_every: int = 0
    keep_checkpoints: int = 1
    keep_checkpoints_at_end: bool = False
    stop_after: int | None = None
    log_every: int = 10
    progress: bool = True
    device: str | None = None
    deterministic: bool = True

    def __post_init__(self) -> None:
        def need(ok: bool, problem: str) -> None:
            if not ok:
                raise HarnessError(f"invalid lexical fine-tuning config: {problem}")

        for name in ("queries_per_device", "passages_per_query", "epochs", "max_q_len", "max_p_len", "log_every",
                     "keep_checkpoints"):
            value = getattr(self, name)
            need(isinstance(value, int) and value > 0, f"{name} must be a positive integer, got {value!r}")
        need(self.lr > 0, "lr must be positive")
        need(0.0 <= self.warmup_ratio <= 1.0, "warmup_ratio must be in [0, 1]")
        need(self.weight_decay >= 0, "weight_decay must be >= 0")
        need(self.grad_clip is None or self.grad_clip > 0, "grad_clip must be positive or None")
        need(self.flops_lambda >= 0 and self.query_flops_ratio >= 0, "flops_lambda and query_flops_ratio must be >= 0")
        need(isinstance(self.flops_warmup_steps, int) and self.flops_warmup_steps >= 0,
             "flops_warmup_steps must be an integer >= 0")
        need(self.start_terms is None or (isinstance(self.start_terms, int) and self.start_terms > 0),
             "start_terms must be a positive integer or None")
        need(self.contrastive_weight >= 0, "contrastive_weight must be >= 0")
        need(self.precision in PRECISIONS, f"precision must be one of {', '.join(PRECISIONS)}")
        need(self.checkpoint_every >= 0, "checkpoint_every must be >= 0")
        need(self.stop_after is None or self.stop_after > 0, "stop_after must be positive")

    @property
    def negatives_per_query(self) -> int:
        return self.passages_per_query - 1

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# --- representation and losses ------------------------------------------------------------------


def splade_max(logits: Tensor, attention_mask: Tensor) -> Tensor:
    """Eq. (8): ``max_t log(1 + ReLU(logits[:, t, :]))`` over non-padding positions -> [B, V] float32."""
    if logits.dim() != 3 or attention_mask.shape != logits.shape[:2]:
        raise HarnessError(f"splade_max wants logits [B, L, V] and a mask [B, L], got {tuple(logits.shape)} "
                           f"and {tuple(attention_mask.shape)}")
    keep = attention_mask.bool().unsqueeze(-1)
    # Padding gets -inf, so it never wins the max; ReLU then maps a row with no positive logit to 0.
    # max(dim) keeps only the argmax indices for backward (amax would keep the [B, L, V] input).
    pooled = logits.masked_fill(~keep, float("-inf")).max(dim=1).values
    return torch.log1p(torch.relu(upcast(pooled)))


def flops(reps: Tensor) -> Tensor:
    """FLOPS regulariser: ``sum_j (mean_i |reps_ij|)^2`` (a smooth proxy of the expected posting-list cost)."""
    return upcast(reps).abs().mean(dim=0).pow(2).sum()


def flops_weight(flops_lambda: float, step: int, warmup_steps: int = 0) -> float:
    """lambda at optimizer step ``step`` (0-based): constant, or SPLADE's ``lambda x min(1, (step/T)^2)``."""
    if warmup_steps <= 0:
        return flops_lambda
    return flops_lambda * min(1.0, (step / warmup_steps) ** 2)


def group_scores(q_reps: Tensor, p_reps: Tensor, passages_per_query: int) -> Tensor:
    """[Q, P]: query i against its own group ``p_reps[i*P : (i+1)*P]`` (positive first)."""
    groups = upcast(p_reps).view(q_reps.shape[0], passages_per_query, -1)
    return torch.einsum("qv,qpv->qp", upcast(q_reps), groups)


def distill_loss(student: Tensor, teacher: Tensor) -> Tensor:
    """KL(softmax(teacher) || softmax(student)) per query row, averaged over rows (SimLM's KLDivLoss call)."""
    return F.kl_div(F.log_softmax(upcast(student), dim=-1), F.log_softmax(upcast(teacher), dim=-1),
                    reduction="batchmean", log_target=True)


def lexical_loss(
    q_reps: Tensor,
    p_reps: Tensor,
    passages_per_query: int,
    *,
    lambda_q: float,
    lambda_d: float,
    teacher: Tensor | None = None,
    contrastive_weight: float = 0.2,
    q_all: Tensor | None = None,
    p_all: Tensor | None = None,
) -> dict[str, Tensor]:
    """The loss of one step and its parts (all scalar tensors).

    ``q_reps``/``p_reps`` are this rank's vectors; ``q_all``/``p_all`` (gathered over ranks) when
    given are the InfoNCE candidates. With ``teacher`` [Q, P]: ``loss = KL + contrastive_weight x
    InfoNCE + FLOPS`` (Eq. 13), else ``loss = InfoNCE + FLOPS`` (Eq. 11/12).
    """
    contrastive = info_nce_loss(q_reps if q_all is None else q_all, p_reps if p_all is None else p_all,
                                passages_per_query)
    flops_q, flops_d = flops(q_reps), flops(p_reps)
    regulariser = lambda_q * flops_q + lambda_d * flops_d
    parts = {"contrastive": contrastive, "flops_q": flops_q, "flops_d": flops_d}
    if teacher is None:
        parts["loss"] = contrastive + regulariser
    else:
        kl = distill_loss(group_scores(q_reps, p_reps, passages_per_query), teacher)
        parts["kl"] = kl
        parts["loss"] = kl + contrastive_weight * contrastive + regulariser
    return parts


CALIBRATION_PASSAGES = 64


@torch.no_grad()
def sparse_start_shift(mlm: nn.Module, batch: Mapping[str, Tensor], terms: int) -> float:
    """The constant c such that ``bias - c`` leaves ``batch``'s passages with ``terms`` non-zeros on average.

    SPLADE's weight of term v is non-zero iff its max-pooled logit is > 0, so c is the
    (1 - terms / |V|) quantile of the batch's max-pooled logits (ties aside).
    """
    was_training = mlm.training
    mlm.eval()
    logits = mlm(**batch).logits
    mlm.train(was_training)
    keep = batch["attention_mask"].bool().unsqueeze(-1)
    pooled = upcast(logits.masked_fill(~keep, float("-inf")).max(dim=1).values).flatten()
    vocab = logits.shape[-1]
    if not 0 < terms < vocab:
        raise HarnessError(f"start_terms must be between 1 and the vocabulary size {vocab - 1}, got {terms}")
    top = pooled.topk(terms * logits.shape[0] + 1).values  # k = terms x passages values lie above the cut
    return float((top[-2] + top[-1]) / 2)


class SpladeEncoder(nn.Module):
    """A masked LM whose output is the SPLADE-max vector; forward returns (queries, passages)."""

    def __init__(self, mlm: nn.Module):
        super().__init__()
        self.mlm = mlm

    def embed(self, batch: Mapping[str, Tensor]) -> Tensor:
        logits = self.mlm(**batch).logits
        return splade_max(logits, batch["attention_mask"])

    def forward(self, queries: Mapping[str, Tensor], passages: Mapping[str, Tensor]) -> tuple[Tensor, Tensor]:
        return self.embed(queries), self.embed(passages)  # one call: DDP sees each weight's gradient once


# --- loading ------------------------------------------------------------------------------------


def load_masked_lm(path: str | Path, allow_new_head: bool = True) -> tuple[Any, str]:
    """(BertForMaskedLM, head status) from a local folder; status is "loaded" or "initialised".

    A folder without MLM-head weights (a plain ``BertModel`` export) gets the head's projection
    from the tied word embeddings and a fresh transform and bias (seed them before calling);
    ``allow_new_head=False`` refuses that (encoding a trained retriever must never do it). Any
    missing encoder weight is an error.
    """
    from transformers import AutoConfig, BertForMaskedLM
    from transformers.utils import logging as hf_logging

    path = Path(path)
    if not (path / "config.json").is_file():
        raise HarnessError(f"{path} holds no Hugging Face model (config.json missing)")
    config = AutoConfig.from_pretrained(str(path), local_files_only=True)
    if config.model_type != "bert":
        raise HarnessError(f"{path}: the lexical retriever needs a BERT masked LM, found model_type {config.model_type!r}")
    before = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # the expected "missing cls.predictions.*" report is not news
    try:
        model, info = BertForMaskedLM.from_pretrained(str(path), local_files_only=True, output_loading_info=True)
    except (OSError, ValueError) as exc:
        raise HarnessError(f"cannot load a masked LM from {path}: {exc}") from exc
    finally:
        hf_logging.set_verbosity(before)
    missing = set(info.get("missing_keys", ()))
    encoder_missing = sorted(k for k in missing if not k.startswith("cls."))
    if encoder_missing:
        raise HarnessError(f"{path}: {len(encoder_missing)} encoder weight(s) missing (e.g. "
                           f"{', '.join(encoder_missing[:3])}); not a trained BERT checkpoint")
    head_missing = sorted(k for k in missing if k.startswith("cls.") and k != "cls.predictions.decoder.weight")
    if not head_missing:
        return model, "loaded"
    if not allow_new_head:
        raise HarnessError(f"{path} has no MLM head weights ({', '.join(head_missing[:3])} ...): it is not a "
                           "trained lexical retriever")
    word = model.bert.embeddings.word_embeddings.weight
    if model.cls.predictions.decoder.weight.data_ptr() != word.data_ptr():
        model.cls.predictions.decoder.weight = word  # config.tie_word_embeddings=False would leave it random
    return model, "initialised"


# --- data ---------------------------------------------------------------------------------------

Group = tuple[str | None, str, list[Any], list[Any]]


def _check_examples(examples: Sequence[Any], config: LexicalTrainConfig,
                    teacher: TeacherScores | None) -> tuple[list[Group], int, int]:
    """Normalised (qid, query, positives, negatives); skipped groups; items dropped for lack of a teacher score."""
    kept: list[Group] = []
    skipped = dropped = 0
    for n, ex in enumerate(examples):
        if not (isinstance(ex, (tuple, list)) and len(ex) in (3, 4)):
            raise HarnessError(f"training example {n} is not (query, positives, negatives) or "
                               f"(qid, query, positives, negatives): {str(ex)[:80]}")
        qid, query, pos, negs = ex if len(ex) == 4 else (None, *ex)
        if isinstance(pos, str) or isinstance(negs, str):
            raise HarnessError(f"training example {n}: positives and negatives must be lists, not strings")
        pos, negs = list(pos), list(negs)
        if teacher is not None:
            if qid is None:
                raise HarnessError("distillation needs examples as (qid, query, positives, negatives): the "
                                   "teacher's scores are keyed by query id")
            scored = teacher.get(str(qid), {})
            n_before = len(pos) + len(negs)
            pos = [d for d in pos if d in scored]
            negs = [d for d in negs if d in scored]
            dropped += n_before - len(pos) - len(negs)
        if not pos or (config.negatives_per_query > 0 and not negs):
            skipped += 1
            continue
        kept.append((None if qid is None else str(qid), query, pos, negs))
    return kept, skipped, dropped


class _Groups:
    """Per-epoch sampling of each example's positive and negatives (dense.py's rule), as ids and texts."""

    def __init__(self, examples: Sequence[Group], passages: Mapping[str, Any] | None, config: LexicalTrainConfig):
        self.examples, self.passages, self.config = examples, passages, config

    def text(self, item: Any) -> str:
        if self.passages is None:
            return passage_text(item, self.config.title_separator)
        try:
            return passage_text(self.passages[item], self.config.title_separator)
        except KeyError:
            raise HarnessError(f"training passage id {item!r} is not in the passages given to train_lexical") from None

    def group(self, index: int, epoch: int) -> tuple[str | None, str, list[Any]]:
        qid, query, pos, negs = self.examples[index]
        key = str(index)
        positive = sample_group(pos, 1, self.config.seed, f"pos/{key}", epoch)[0] if len(pos) > 1 else pos[0]
        chosen = sample_group(negs, self.config.negatives_per_query, self.config.seed, key, epoch)
        return qid, query, [positive, *chosen]


def _fingerprint(examples: Sequence[Group], init: str, config: LexicalTrainConfig,
                 teacher: TeacherScores | None) -> str:
    h = hashlib.sha256()
    settings = {k: getattr(config, k) for k in _IDENTITY_FIELDS}
    h.update(json.dumps({"init": init, "settings": settings}, sort_keys=True).encode())
    for ex in examples:
        h.update(json.dumps(ex, ensure_ascii=False, default=str).encode())
    if teacher is not None:
        for qid in sorted({ex[0] for ex in examples if ex[0] is not None}):
            h.update(json.dumps([qid, sorted((str(d), float(s)) for d, s in teacher.get(qid, {}).items())]).encode())
    return h.hexdigest()[:16]


# --- training -----------------------------------------------------------------------------------


def train_lexical(
    init_model_path: str | Path,
    examples: Sequence[Any],
    config: LexicalTrainConfig,
    output_dir: str | Path,
    logger: Logger | None = None,
    *,
    passages: Mapping[str, Any] | None = None,
    teacher_scores: TeacherScores | None = None,
    tokenizer_path: str | Path | None = None,
) -> dict[str, Any]:
    """Fine-tune the masked LM at ``init_model_path`` as a SPLADE-max retriever into ``output_dir``.

    ``logger(step, metrics)`` gets, on rank 0 every ``log_every`` steps, the window means of the
    loss and its parts, the average non-zeros of query and passage vectors, lr and epoch.
    Returns the stats (also in ``train_stats.json``); see the module docstring.
    """
    if config.distill and teacher_scores is None:
        raise HarnessError("distill=True (stage 3) needs teacher_scores: the reranker's score per (qid, docid)")
    if config.distill and passages is None:
        raise HarnessError("distill=True needs doc ids in the examples and passages= (id -> text) to look them up")
    info = D.init_distributed(config.device)
    prev = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled())
    if config.deterministic:
        if info.device.type == "cuda":
            os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        return _train(Path(init_model_path), examples, config, Path(output_dir), logger, passages,
                      teacher_scores if config.distill else None, tokenizer_path, info)
    finally:
        torch.use_deterministic_algorithms(prev[0], warn_only=prev[1])


def _positives(examples: Sequence[Group], passages: Mapping[str, Any] | None, config: LexicalTrainConfig,
               n: int) -> list[str]:
    """The first positive of the first ``n`` examples, as text: the sample both start adjustments use."""
    texts = _Groups(examples, passages, config)
    return [texts.text(pos[0]) for _, _, pos, _ in examples[:n]]


def _fit_head(mlm: nn.Module, tokenizer: Any, examples: Sequence[Group], passages: Mapping[str, Any] | None,
              config: LexicalTrainConfig) -> dict[str, float]:
    from harness.finetune.head_fit import FIT_PASSAGES, fit_head_to_identity

    return fit_head_to_identity(mlm, tokenizer, _positives(examples, passages, config, FIT_PASSAGES),
                                config.max_p_len)


def _shift_to_sparse_start(mlm: nn.Module, tokenizer: Any, examples: Sequence[Group],
                           passages: Mapping[str, Any] | None, config: LexicalTrainConfig,
                           device: torch.device) -> float:
    """Shift the MLM output bias by :func:`sparse_start_shift` of the first positives (same on every rank)."""
    sample = _positives(examples, passages, config, CALIBRATION_PASSAGES)
    enc = tokenizer(sample, padding=True, truncation=True, max_length=config.max_p_len, return_tensors="pt")
    shift = sparse_start_shift(mlm, {k: v.to(device) for k, v in enc.items()}, config.start_terms)
    bias = mlm.get_output_embeddings().bias  # BERT ties cls.predictions.bias to the decoder's bias
    with torch.no_grad():
        bias.sub_(shift)
    return shift


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _train(init: Path, raw_examples: Sequence[Any], config: LexicalTrainConfig, out_dir: Path,
           logger: Logger | None, passages: Mapping[str, Any] | None, teacher: TeacherScores | None,
           tokenizer_path: str | Path | None, info: D.DistInfo) -> dict[str, Any]:
    from transformers import AutoTokenizer

    started = time.time()
    notes: list[str] = []
    examples, skipped, dropped = _check_examples(raw_examples, config, teacher)
    if dropped:
        _say(f"left out {dropped} positive/negative id(s) that have no teacher score", notes)
    if skipped:
        _say(f"skipped {skipped} training example(s) without positives or negatives", notes)
    world, q_per, p_per = info.world_size, config.queries_per_device, config.passages_per_query
    global_queries = world * q_per
    steps_per_epoch = len(examples) // global_queries
    if steps_per_epoch == 0:
        raise HarnessError(
            f"{len(examples)} usable training example(s), fewer than one global batch of {global_queries} queries "
            f"({world} device(s) x {q_per}); lower queries_per_device or add training data"
        )
    total_steps = steps_per_epoch * config.epochs
    fingerprint = _fingerprint(examples, str(init.resolve()), config, teacher)

    stats_file = out_dir / STATS_FILE
    if stats_file.is_file():
        done = json.loads(stats_file.read_text(encoding="utf-8"))
        if done.get("fingerprint") == fingerprint:
            done["cached"] = True
            return done
        raise HarnessError(f"{out_dir} already holds a finished model trained with other data or settings; "
                           "use a new output directory (or delete that one)")

    seed_everything(config.seed)  # a fresh MLM head (encoder-only init) is initialised reproducibly
    mlm, head = load_masked_lm(init)
    if head == "initialised":
        _say(f"{init} has no MLM head: its projection is the tied word embeddings, transform and bias start "
             "fresh (not LexMAE's pre-trained head; export the BertForMaskedLM to use it)", notes)
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_path or init), local_files_only=True)
    except (OSError, ValueError) as exc:
        raise HarnessError(f"cannot load a tokenizer from {tokenizer_path or init}: {exc}") from exc
    model = SpladeEncoder(mlm).to(info.device)
    model.train()
    precision = _resolve_precision(config.precision, info.device, notes)
    optimizer = _optimizer(model, config)  # type: ignore[arg-type]  # reads only config.weight_decay
    scheduler = _scheduler(optimizer, total_steps, math.ceil(total_steps * config.warmup_ratio))
    scaler = torch.amp.GradScaler("cuda") if precision == "fp16" else None

    if info.is_main:
        out_dir.mkdir(parents=True, exist_ok=True)
        ckpt.remove_partial(out_dir)
    D.barrier()
    latest = D.broadcast_object(str(ckpt.latest_checkpoint(out_dir) or "") if info.is_main else None)
    step, resumed_from, start_shift, head_fit = 0, None, None, None
    history: dict[str, list[float]] = {k: [] for k in ("loss", "contrastive", "kl", "flops_q", "flops_d",
                                                       "query_nonzeros", "doc_nonzeros")}
    if latest:
        saved = ckpt.read_state(latest)
        if saved.get("fingerprint") != fingerprint:
            raise HarnessError(f"cannot resume from {latest}: it was made with other data, initial model or "
                               "settings; restore them or use a new output directory")
        state, rng_ok = ckpt.load_checkpoint(latest, model=model, optimizer=optimizer, scheduler=scheduler,
                                             scaler=scaler, device=info.device)
        step, resumed_from = state["step"], state["step"]
        history = {k: list(v) for k, v in state["history"].items()}
        _say(f"resuming from {latest} (step {step} of {total_steps})", notes)
        if state.get("world_size") != world:
            _say(f"the checkpoint was made with {state.get('world_size')} device(s), this run has {world}", notes)
        if not rng_ok:
            seed_everything(config.seed + info.rank + 7919 * step)
    else:
        seed_everything(config.seed + info.rank)
        if config.fit_head:
            head_fit = _fit_head(mlm, tokenizer, examples, passages, config)
            _say(f"MLM head refitted to predict each token from its own hidden state ({head_fit['tokens']} tokens; "
                 f"identity accuracy {head_fit['identity_accuracy_before']:.2f} -> "
                 f"{head_fit['identity_accuracy_after']:.2f})", notes)
        if config.start_terms:
            start_shift = _shift_to_sparse_start(mlm, tokenizer, examples, passages, config, info.device)
            _say(f"MLM bias shifted by {-start_shift:+.3f} so a training passage starts with ~{config.start_terms} "
                 "terms (the softmax objectives do not see the shift)", notes)

    engine = D.wrap_ddp(model, info, find_unused_parameters=False)
    params = [p for p in model.parameters() if p.requires_grad]
    groups = _Groups(examples, passages, config)
    across = config.negatives_across_devices and world > 1
    effective_batch = world * q_per * p_per
    lambda_q_full = config.flops_lambda * config.query_flops_ratio
    _say(f"effective batch {effective_batch} passages = {world} device(s) x {q_per} queries x {p_per} passages; "
         f"FLOPS lambda_d {config.flops_lambda:g}, lambda_q {lambda_q_full:g}"
         + (f", quadratic warm-up over {config.flops_warmup_steps} steps" if config.flops_warmup_steps else "")
         + (f"; distillation KL + {config.contrastive_weight:g} x InfoNCE" if teacher is not None else "")
         + f"; {steps_per_epoch} steps/epoch x {config.epochs} epochs", notes)

    from tqdm.auto import tqdm

    bar = tqdm(total=total_steps, initial=step, desc="finetune lexical", unit="step", dynamic_ncols=True,
               disable=not (config.progress and info.is_main))
    order_epoch, order = -1, []
    stopped_early, last_logged = False, step
    try:
        while step < total_steps:
            epoch, in_epoch = divmod(step, steps_per_epoch)
            if epoch != order_epoch:
                gen = torch.Generator().manual_seed(config.seed + epoch)
                order, order_epoch = torch.randperm(len(examples), generator=gen).tolist(), epoch
            first = in_epoch * global_queries + info.rank * q_per
            batch = [groups.group(i, epoch) for i in order[first : first + q_per]]
            q_enc = tokenizer([q for _, q, _ in batch], padding=True, truncation=True, max_length=config.max_q_len,
                              return_tensors="pt")
            p_enc = tokenizer([groups.text(d) for _, _, ids in batch for d in ids], padding=True, truncation=True,
                              max_length=config.max_p_len, return_tensors="pt")
            q_enc = {k: v.to(info.device) for k, v in q_enc.items()}
            p_enc = {k: v.to(info.device) for k, v in p_enc.items()}
            teacher_t = None
            if teacher is not None:
                teacher_t = torch.tensor([[float(teacher[qid][d]) for d in ids] for qid, _, ids in batch],
                                         dtype=torch.float32, device=info.device)
            lam_d = flops_weight(config.flops_lambda, step, config.flops_warmup_steps)
            lam_q = lam_d * config.query_flops_ratio

            optimizer.zero_grad(set_to_none=True)
            with autocast(precision, info.device):
                q_reps, p_reps = engine(q_enc, p_enc)
            q_all = gather_with_grad(q_reps) if across else None
            p_all = gather_with_grad(p_reps) if across else None
            parts = lexical_loss(q_reps, p_reps, p_per, lambda_q=lam_q, lambda_d=lam_d, teacher=teacher_t,
                                 contrastive_weight=config.contrastive_weight, q_all=q_all, p_all=p_all)
            loss = parts["loss"]
            if across:
                # Each rank holds the whole InfoNCE over the gathered batch but only its slice's gradient;
                # DDP averages over ranks, so that term is scaled back up (KL and FLOPS are per rank).
                w = config.contrastive_weight if teacher is not None else 1.0
                loss = loss + (world - 1) * w * parts["contrastive"]
            (scaler.scale(loss) if scaler is not None else loss).backward()
            if scaler is not None:
                scaler.unscale_(optimizer)
            if config.grad_clip is not None:
                torch.nn.utils.clip_grad_norm_(params, config.grad_clip)
            if scaler is not None:
                scaler.step(optimizer)
                scaler.update()
            else:
                optimizer.step()
            lr = float(optimizer.param_groups[0]["lr"])
            scheduler.step()
            step += 1

            with torch.no_grad():
                measured = {k: v.detach().double() for k, v in parts.items()}
                measured["query_nonzeros"] = (q_reps.detach() > 0).sum(dim=1).double().mean()
                measured["doc_nonzeros"] = (p_reps.detach() > 0).sum(dim=1).double().mean()
                means = D.all_reduce_mean(torch.stack(list(measured.values())).cpu())  # one collective per step
            for key, value in zip(measured, means.tolist()):
                history[key].append(float(value))
            if not math.isfinite(history["loss"][-1]):
                raise HarnessError(f"the lexical fine-tuning loss became {history['loss'][-1]} at step {step}; "
                                   "lower lr or flops_lambda, or use fp32/bf16")
            bar.set_postfix(loss=f"{history['loss'][-1]:.4f}", q_nnz=f"{history['query_nonzeros'][-1]:.0f}",
                            d_nnz=f"{history['doc_nonzeros'][-1]:.0f}", refresh=False)
            bar.update(1)

            stop_here = config.stop_after is not None and step >= config.stop_after and step < total_steps
            epoch_end = step % steps_per_epoch == 0
            periodic = config.checkpoint_every and step % config.checkpoint_every == 0
            if (epoch_end or periodic or stop_here) and step < total_steps:
                ckpt.save_checkpoint(
                    out_dir, step, model=model, optimizer=optimizer, scheduler=scheduler, scaler=scaler,
                    keep=config.keep_checkpoints,
                    trainer_state={"step": step, "epoch": epoch, "world_size": world, "fingerprint": fingerprint,
                                   "config": config.to_dict(), "precision": precision, "history": history},
                )
            if logger is not None and info.is_main and (step % config.log_every == 0 or step == total_steps or stop_here):
                metrics = {k: _mean(v[last_logged:step]) for k, v in history.items() if v}
                logger(step, {**{k: v for k, v in metrics.items() if v is not None}, "lr": lr,
                              "flops_lambda": lam_d, "epoch": step / steps_per_epoch})
                last_logged = step
            if stop_here:
                stopped_early = True
                _say(f"stopped after step {step} as asked (stop_after); call again to resume", notes)
                break
    finally:
        bar.close()

    loss_history = history["loss"]
    last_epoch = slice(max(0, len(loss_history) - steps_per_epoch), len(loss_history))
    stats: dict[str, Any] = {
        "model_dir": str(out_dir),
        "init_model": str(init),
        "mlm_head": head,
        "fingerprint": fingerprint,
        "representation": REPRESENTATION,
        "world_size": world,
        "queries_per_device": q_per,
        "passages_per_query": p_per,
        "negatives_per_query": config.negatives_per_query,
        "effective_batch": effective_batch,
        "negatives_across_devices": across,
        "in_batch_candidates": (world if across else 1) * q_per * p_per,
        "distill": teacher is not None,
        "flops_lambda_doc": config.flops_lambda,
        "start_bias_shift": start_shift,
        "head_fit": head_fit,
        "flops_lambda_query": lambda_q_full,
        "examples": len(examples),
        "skipped_examples": skipped,
        "unscored_items_dropped": dropped,
        "steps": step,
        "total_steps": total_steps,
        "steps_per_epoch": steps_per_epoch,
        "epochs": config.epochs,
        "first_loss": loss_history[0] if loss_history else None,
        "final_loss": loss_history[-1] if loss_history else None,
        "epoch_losses": [_mean(loss_history[e * steps_per_epoch : (e + 1) * steps_per_epoch])
                         for e in range(len(loss_history) // steps_per_epoch)],
        "avg_query_nonzeros": _mean(history["query_nonzeros"][last_epoch]),
        "avg_doc_nonzeros": _mean(history["doc_nonzeros"][last_epoch]),
        "loss_history": loss_history,
        "history": history,
        "precision": precision,
        "device": str(info.device),
        "resumed_from": resumed_from,
        "stopped_early": stopped_early,
        "seconds": time.time() - started,
        "config": config.to_dict(),
        "notes": notes,
        "cached": False,
    }
    if stopped_early:
        return stats
    if info.is_main:
        mlm.save_pretrained(str(out_dir))
        tokenizer.save_pretrained(str(out_dir))
        write_lexical_settings(out_dir, query_max_length=config.max_q_len, passage_max_length=config.max_p_len,
                               title_separator=config.title_separator, trained_by="harness.finetune.lexical")
        if not config.keep_checkpoints_at_end:
            shutil.rmtree(ckpt.checkpoint_root(out_dir), ignore_errors=True)
        tmp = out_dir / (STATS_FILE + ".tmp")
        tmp.write_text(json.dumps(stats, indent=1, default=str) + "\n", encoding="utf-8")
        tmp.replace(stats_file)
    D.barrier()
    return stats


def write_lexical_settings(folder: str | Path, **settings: Any) -> Path:
    """``harness_lexical.json``: how :mod:`harness.retrieval.impact` encodes with this model."""
    path = Path(folder) / SETTINGS_FILE
    payload = {"representation": REPRESENTATION, **settings}
    path.write_text(json.dumps(payload, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return path


def read_lexical_settings(folder: str | Path) -> dict[str, Any]:
    """The folder's ``harness_lexical.json`` (empty dict when absent: a SPLADE checkpoint from elsewhere)."""
    path = Path(folder) / SETTINGS_FILE
    if not path.is_file():
        return {}
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise HarnessError(f"{path} is not valid JSON ({exc.msg}); delete it or retrain") from exc

