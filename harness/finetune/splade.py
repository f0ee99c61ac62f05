"""Learned-sparse (SPLADE-max) retriever fine-tuning: LexMAE's three stages (Shen et al., ICLR 2023, §4).

Representation, Eq. (8) (SPLADE-max, Formal et al. 2021a)
    ``v(x) = log(1 + max_t ReLU(S[t, :]))`` with S the masked-LM logits of x [L, |V|]:
    :func:`harness.retrieval.splade_model.splade_max`, which search encodes with too.
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
    (``mlm_head: "initialised"``); see :func:`harness.retrieval.splade_model.load_masked_lm`.
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
    Batches, sampling of positives and negatives (Tevatron's per-epoch rotation) and the effective
    batch are :mod:`harness.finetune.groups`'s; negatives across devices work as in
    :mod:`harness.finetune.dense`; checkpoints every epoch with exact resume, mixed precision and
    DDP are the engine's (:mod:`harness.training.engine`). Examples are
    ``(query, positives, negatives)`` or ``(qid, query, positives, negatives)``; stage 3 needs the
    second form and doc ids (``passages``), because the teacher's scores are keyed by ids. Items of
    a group without a teacher score are left out of the pools (counted in the stats).
Output
    ``output_dir`` holds the ``BertForMaskedLM`` weights, the tokenizer, ``harness_lexical.json``
    (representation, lengths, title separator; read by :mod:`harness.retrieval.impact`) and
    ``train_stats.json``, then ``done.json`` (the finished marker of :mod:`harness.stages.artifacts`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from harness.core.errors import HarnessError
from harness.core.numerics import upcast
from harness.finetune.dense import gather_with_grad, info_nce_loss
from harness.finetune.groups import BiEncoderTrainConfig, GroupTask, TeacherScores, normalise_examples
from harness.finetune.pairwise import INFONCE
from harness.retrieval.splade_model import REPRESENTATION, load_masked_lm, splade_max, write_lexical_settings
from harness.training.config import required
from harness.training.engine import Logger, Notes, StepContext, run, seed_everything, session
from harness.training.finished import fingerprint, finish, finished_stats


@dataclass(kw_only=True)
class SpladeTrainConfig(BiEncoderTrainConfig):
    """Hyper-parameters: a stage's settings (harness.spec.stage_settings.StageSettings.splade_kwargs).

    The paper's stage 1 trains 24 queries x (1 + 15) at lr 2e-5 for 3 epochs with ``flops_lambda=0.002``;
    stage 2 ``flops_lambda=0.008`` on the stage-1 retriever's negatives; stage 3 ``flops_lambda=0.008,
    distill=True`` with 16 queries x 24 passages (baselines/lexmae.yaml). The warm-up ratio (0.1, the
    stage settings' default) is not given by the paper; it is HF/Tevatron practice.
    """

    what = "SPLADE fine-tuning"
    flops_lambda: float = required()  # lambda_1 (on documents)
    query_flops_ratio: float = required()  # lambda_q = flops_lambda x this
    flops_warmup_steps: int = required()  # 0 = constant lambda; T of SPLADE's quadratic warm-up otherwise
    fit_head: bool = required()  # refit the MLM head's transform before step 1 (docstring)
    start_terms: int | None = required()  # shift the MLM bias so a passage starts with this many terms (docstring)
    distill: bool = False  # stage 3: KL to the reranker + contrastive_weight x InfoNCE
    contrastive_weight: float = required()  # gamma in Eq. (13)

    def check(self) -> None:
        super().check()
        self.need(self.flops_lambda >= 0, "flops_lambda", "must be >= 0")
        self.need(self.query_flops_ratio >= 0, "query_flops_ratio", "must be >= 0")
        self.need(
            isinstance(self.flops_warmup_steps, int) and self.flops_warmup_steps >= 0,
            "flops_warmup_steps",
            "must be an integer >= 0",
        )
        self.need(
            self.start_terms is None or (isinstance(self.start_terms, int) and self.start_terms > 0),
            "start_terms",
            "must be a positive integer or None",
        )
        self.need(self.contrastive_weight >= 0, "contrastive_weight", "must be >= 0")
        self.need(self.loss == INFONCE, "loss", f"must be {INFONCE}: learned-sparse fine-tuning has no other loss")


# --- representation and losses ------------------------------------------------------------------


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
    return F.kl_div(
        F.log_softmax(upcast(student), dim=-1),
        F.log_softmax(upcast(teacher), dim=-1),
        reduction="batchmean",
        log_target=True,
    )


def splade_loss(
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
    contrastive = info_nce_loss(
        q_reps if q_all is None else q_all, p_reps if p_all is None else p_all, passages_per_query
    )
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


# --- training -----------------------------------------------------------------------------------


class SpladeTask(GroupTask):
    """One SPLADE step: InfoNCE (+ KL to the teacher) + FLOPS over this rank's groups."""

    name = "finetune splade"
    progress_keys = {"q_nnz": "query_nonzeros", "d_nnz": "doc_nonzeros"}

    def __init__(
        self,
        mlm: nn.Module,
        tokenizer: Any,
        groups: Sequence,
        passages: Mapping[str, Any] | None,
        teacher: TeacherScores | None,
        config: SpladeTrainConfig,
        info: Any,
        notes: Notes,
    ):
        super().__init__(SpladeEncoder(mlm), tokenizer, groups, passages, config, info, "train_splade")
        self.mlm, self.teacher, self.notes = mlm, teacher, notes
        self.across = config.negatives_across_devices and self.world > 1
        self.start_shift: float | None = None
        self.head_fit: dict[str, float] | None = None

    def first_positives(self, n: int) -> list[str]:
        """The first positive of the first ``n`` groups, as text: the sample both start adjustments use."""
        return [self.text(pos[0]) for _, _, pos, _ in self.groups[:n]]

    def on_fresh_start(self, ctx: StepContext) -> None:
        config = self.config
        if config.fit_head:
            self.head_fit = _fit_head(self.mlm, self.tokenizer, self)
            self.notes.say(
                f"MLM head refitted to predict each token from its own hidden state "
                f"({self.head_fit['tokens']} tokens; identity accuracy "
                f"{self.head_fit['identity_accuracy_before']:.2f} -> "
                f"{self.head_fit['identity_accuracy_after']:.2f})"
            )
        if config.start_terms:
            self.start_shift = _shift_to_sparse_start(self.mlm, self.tokenizer, self, ctx.info.device)
            self.notes.say(
                f"MLM bias shifted by {-self.start_shift:+.3f} so a training passage starts with "
                f"~{config.start_terms} terms (the softmax objectives do not see the shift)"
            )

    def step(self, step: int, ctx: StepContext) -> dict[str, Tensor]:
        config = self.config
        batch = self.batch(step)
        q_enc, p_enc = self.encode(batch, ctx)
        teacher_t = None
        if self.teacher is not None:
            teacher_t = torch.tensor(
                [[float(self.teacher[qid][d]) for d in ids] for qid, _, ids in batch],
                dtype=torch.float32,
                device=ctx.info.device,
            )
        lam_d = flops_weight(config.flops_lambda, step, config.flops_warmup_steps)
        with ctx.autocast():
            q_reps, p_reps = ctx.engine(q_enc, p_enc)
        q_all = gather_with_grad(q_reps) if self.across else None
        p_all = gather_with_grad(p_reps) if self.across else None
        parts = splade_loss(
            q_reps,
            p_reps,
            config.passages_per_query,
            lambda_q=lam_d * config.query_flops_ratio,
            lambda_d=lam_d,
            teacher=teacher_t,
            contrastive_weight=config.contrastive_weight,
            q_all=q_all,
            p_all=p_all,
        )
        loss = parts["loss"]
        if self.across:
            # Each rank holds the whole InfoNCE over the gathered batch but only its slice's gradient;
            # DDP averages over ranks, so that term is scaled back up (KL and FLOPS are per rank).
            w = config.contrastive_weight if self.teacher is not None else 1.0
            loss = loss + (self.world - 1) * w * parts["contrastive"]
        ctx.backward(loss)
        with torch.no_grad():
            parts["query_nonzeros"] = (q_reps.detach() > 0).sum(dim=1).double().mean()
            parts["doc_nonzeros"] = (p_reps.detach() > 0).sum(dim=1).double().mean()
        parts["flops_lambda"] = torch.tensor(lam_d, dtype=torch.float64)
        return parts


def train_splade(
    init_model_path: str | Path,
    examples: Sequence[Any],
    config: SpladeTrainConfig,
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
    teacher = teacher_scores if config.distill else None
    started, init, out_dir = time.time(), Path(init_model_path), Path(output_dir)
    notes = Notes("finetune")
    with session(config) as info:
        groups, skipped, dropped = normalise_examples(examples, config.negatives_per_query, teacher)
        if dropped:
            notes.say(f"left out {dropped} positive/negative id(s) that have no teacher score")
        if skipped:
            notes.say(f"skipped {skipped} training example(s) without positives or negatives")
        teacher_items = _teacher_items(teacher, groups)
        digest = fingerprint(str(init.resolve()), config.identity(), groups, teacher_items)
        done = finished_stats(out_dir, digest, "finished model")
        if done is not None:
            return done

        mlm, head, tokenizer = _load_start(init, tokenizer_path, config.seed, notes)
        task = SpladeTask(mlm, tokenizer, groups, passages, teacher, config, info, notes)
        lambda_q = config.flops_lambda * config.query_flops_ratio
        notes.say(_describe_batch(task, config, lambda_q, teacher is not None))
        out = run(task, config, info, out_dir, notes, identity={"fingerprint": digest}, logger=logger)

        history = out.history()
        last_epoch = slice(max(0, out.step - task.steps_per_epoch), out.step)
        stats = task.stats(
            out,
            started,
            model_dir=str(out_dir),
            init_model=str(init),
            mlm_head=head,
            fingerprint=digest,
            representation=REPRESENTATION,
            negatives_across_devices=task.across,
            in_batch_candidates=(task.world if task.across else 1)
            * config.queries_per_device
            * config.passages_per_query,
            distill=teacher is not None,
            flops_lambda_doc=config.flops_lambda,
            flops_lambda_query=lambda_q,
            start_bias_shift=task.start_shift,
            head_fit=task.head_fit,
            skipped_examples=skipped,
            unscored_items_dropped=dropped,
            avg_query_nonzeros=_mean(history.get("query_nonzeros", [])[last_epoch]),
            avg_doc_nonzeros=_mean(history.get("doc_nonzeros", [])[last_epoch]),
            history=history,
        )
        return finish(out_dir, stats, _saver(mlm, tokenizer, out_dir, config), config.keep_checkpoints_at_end)


def _teacher_items(teacher: TeacherScores | None, groups: Sequence[Any]) -> list[Any]:
    """The teacher's scores of the training queries, in a stable order, for the run's fingerprint."""
    if teacher is None:
        return []
    return [
        [qid, sorted((str(d), float(s)) for d, s in teacher.get(qid, {}).items())]
        for qid in sorted({g[0] for g in groups if g[0] is not None})
    ]


def _load_start(init: Path, tokenizer_path: str | Path | None, seed: int, notes: Notes) -> tuple[Any, str, Any]:
    """The masked LM to start from (a fresh MLM head drawn from ``seed`` when it has none), how its head was
    made, and the tokenizer (``tokenizer_path``, else the model's)."""
    from transformers import AutoTokenizer

    seed_everything(seed)  # a fresh MLM head (encoder-only init) is initialised reproducibly
    mlm, head = load_masked_lm(init)
    if head == "initialised":
        notes.say(
            f"{init} has no MLM head: its projection is the tied word embeddings, transform and bias start "
            "fresh (not LexMAE's pre-trained head; export the BertForMaskedLM to use it)"
        )
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_path or init), local_files_only=True)
    except (OSError, ValueError) as exc:
        raise HarnessError(f"cannot load a tokenizer from {tokenizer_path or init}: {exc}") from exc
    return mlm, head, tokenizer


def _describe_batch(task: SpladeTask, config: SpladeTrainConfig, lambda_q: float, distill: bool) -> str:
    """The one note saying what a step sees: the effective batch, the FLOPS weights, the loss and the epochs."""
    figures = task.figures()
    return (
        f"effective batch {figures['effective_batch']} passages = {task.world} device(s) x "
        f"{config.queries_per_device} queries x {config.passages_per_query} passages; "
        f"FLOPS lambda_d {config.flops_lambda:g}, lambda_q {lambda_q:g}"
        + (f", quadratic warm-up over {config.flops_warmup_steps} steps" if config.flops_warmup_steps else "")
        + (f"; distillation KL + {config.contrastive_weight:g} x InfoNCE" if distill else "")
        + f"; {task.steps_per_epoch} steps/epoch x {config.epochs} epochs"
    )


def _saver(mlm: Any, tokenizer: Any, out_dir: Path, config: SpladeTrainConfig) -> Callable[[], None]:
    """Saves the fine-tuned model, its tokenizer and the lexical settings a retriever reads them with."""

    def save() -> None:
        mlm.save_pretrained(str(out_dir))
        tokenizer.save_pretrained(str(out_dir))
        write_lexical_settings(
            out_dir,
            query_max_length=config.max_q_len,
            passage_max_length=config.max_p_len,
            title_separator=config.title_separator,
            trained_by="harness.finetune.splade",
        )

    return save


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _fit_head(mlm: nn.Module, tokenizer: Any, task: SpladeTask) -> dict[str, float]:
    from harness.finetune.head_fit import FIT_PASSAGES, fit_head_to_identity

    return fit_head_to_identity(mlm, tokenizer, task.first_positives(FIT_PASSAGES), task.config.max_p_len)


def _shift_to_sparse_start(mlm: nn.Module, tokenizer: Any, task: SpladeTask, device: torch.device) -> float:
    """Shift the MLM output bias by :func:`sparse_start_shift` of the first positives (same on every rank)."""
    config = task.config
    sample = task.first_positives(CALIBRATION_PASSAGES)
    enc = tokenizer(sample, padding=True, truncation=True, max_length=config.max_p_len, return_tensors="pt")
    shift = sparse_start_shift(mlm, {k: v.to(device) for k, v in enc.items()}, config.start_terms)
    bias = mlm.get_output_embeddings().bias  # BERT ties cls.predictions.bias to the decoder's bias
    with torch.no_grad():
        bias.sub_(shift)
    return shift
