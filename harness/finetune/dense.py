"""Dense retriever fine-tuning, Tevatron v1 style (the recipe behind coCondenser and CoT-MAE rows).

Model
    One BERT encoder shared by queries and passages (Tevatron's default, untied), pooled at
    [CLS] of the last layer (no pooler: its weights are frozen and saved unchanged), scored
    by dot product.
Loss (InfoNCE)
    Each query brings a group of ``passages_per_query`` passages: its positive first, then
    ``passages_per_query - 1`` hard negatives. With Q queries and P passages per group, the
    scores are ``S = q @ p.T / temperature`` (Q x QP) and the loss is the cross entropy of
    each row against column ``i * P`` (:func:`info_nce_loss`): every other passage of the
    batch, the other queries' positives and negatives included, is a negative. Temperature
    is 1 (Tevatron). With ``negatives_across_devices`` (CoT-MAE's ``--negatives_x_device``)
    the representations of all ranks are gathered, so each query is scored against
    ``world_size x Q x P`` passages; the local slice keeps its gradient and the loss is
    multiplied by ``world_size`` because DDP averages gradients over ranks.
Loss (pairwise)
    With ``loss="pairwise"`` (CPDAE's fine-tuning, :mod:`harness.finetune.pairwise`) each query's
    positive is paired with each of its own negatives instead, and nothing is gathered across ranks:
    a pair sees only its two passages.
Batches
    ``effective_batch = world_size x queries_per_device x passages_per_query`` passages per
    optimizer step, the quantity Tevatron issue #23 shows must be preserved; it is returned
    and written with the model. There is no gradient accumulation: it would shrink the
    in-batch pool and change the loss.
Data, checkpoints, distribution
    ``train_examples`` and the data order are :mod:`harness.finetune.groups`'s; the loop,
    checkpoints at every epoch end with exact resume, DDP and mixed precision are the engine's
    (:mod:`harness.training.engine`). The finished model is a plain Hugging Face folder in
    ``output_dir`` (weights, tokenizer, ``harness_encoder.json`` for :func:`load_encoder`,
    ``train_stats.json``, then the ``done.json`` marker); calling again on a finished folder
    returns its stats.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from harness.core import ranks
from harness.core.errors import HarnessError
from harness.core.numerics import upcast
from harness.finetune.groups import BiEncoderTrainConfig, GroupTask, normalise_examples
from harness.finetune.pairwise import PAIRWISE, pairwise_loss
from harness.retrieval.encoder import POOLINGS, describe_checkpoint, load_backbone, pool, write_encoder_config
from harness.training.engine import Logger, Notes, StepContext, run, seed_everything, session
from harness.training.finished import fingerprint, finish, finished_stats

Example = tuple[str, Sequence[str], Sequence[str]]


@dataclass(kw_only=True)
class DenseTrainConfig(BiEncoderTrainConfig):
    """Fine-tuning hyper-parameters: a stage's settings (harness.spec.stage_settings.StageSettings.trainer_kwargs),
    Tevatron v1's CLS pooling and temperature 1."""

    what = "fine-tuning"
    temperature: float = 1.0
    pooling: str = "cls"

    def check(self) -> None:
        super().check()
        self.need(self.temperature > 0, "temperature", "must be positive")
        self.need(self.pooling in POOLINGS, "pooling", f"must be one of {', '.join(POOLINGS)}")


# --- the model and the loss ---------------------------------------------------------------------


def info_nce_loss(q_reps: Tensor, p_reps: Tensor, passages_per_query: int, temperature: float = 1.0) -> Tensor:
    """Mean InfoNCE over queries: row i of ``q @ p.T / temperature`` against column ``i * passages_per_query``.

    ``p_reps`` holds the groups one after another (positive first in each group), so all other
    rows of ``p_reps`` act as negatives for query i: its hard negatives and the in-batch ones.
    """
    if p_reps.shape[0] != q_reps.shape[0] * passages_per_query:
        raise HarnessError(
            f"{p_reps.shape[0]} passage vectors for {q_reps.shape[0]} queries x {passages_per_query} passages"
        )
    scores = (upcast(q_reps) @ upcast(p_reps).T) / temperature
    target = torch.arange(q_reps.shape[0], device=scores.device) * passages_per_query
    return F.cross_entropy(scores, target)


class BiEncoder(nn.Module):
    """One encoder for queries and passages; forward returns pooled (queries, passages)."""

    def __init__(self, encoder: nn.Module, pooling: str = "cls"):
        super().__init__()
        self.encoder, self.pooling = encoder, pooling

    def embed(self, batch: Mapping[str, Tensor]) -> Tensor:
        # Pooled in float32 under bf16/fp16 autocast (a no-op in fp32), as the retrieval encoder pools:
        # the vectors and the scores of the loss never depend on the autocast's list of fp32 ops.
        hidden = upcast(self.encoder(**batch).last_hidden_state)
        return pool(hidden, batch["attention_mask"], self.pooling, normalize=False)

    def forward(self, queries: Mapping[str, Tensor], passages: Mapping[str, Tensor]) -> tuple[Tensor, Tensor]:
        # One forward call for both sides, so DDP sees each shared weight's gradient once.
        return self.embed(queries), self.embed(passages)


def gather_with_grad(local: Tensor) -> Tensor:
    """All ranks' rows concatenated in rank order; only this rank's rows carry a gradient."""
    import torch.distributed as dist

    parts = [torch.empty_like(local) for _ in range(ranks.world_size())]
    dist.all_gather(parts, local.detach().contiguous())
    parts[ranks.rank()] = local
    return torch.cat(parts, dim=0)


class DenseTask(GroupTask):
    """One InfoNCE step over this rank's groups (optionally against every rank's passages), or one
    pairwise step over each query's own group (``config.loss``)."""

    name = "finetune"

    def __init__(
        self,
        model: BiEncoder,
        tokenizer: Any,
        groups: Sequence,
        passages: Mapping[str, Any] | None,
        config: DenseTrainConfig,
        info: Any,
    ):
        super().__init__(model, tokenizer, groups, passages, config, info, "train_dense")
        self.pairwise = config.loss == PAIRWISE
        # a pair's loss reads its own two passages only: no other rank's passages to gather
        self.across = config.negatives_across_devices and self.world > 1 and not self.pairwise

    def step(self, step: int, ctx: StepContext) -> dict[str, Tensor]:
        q_enc, p_enc = self.encode(self.batch(step), ctx)
        with ctx.autocast():
            q_reps, p_reps = ctx.engine(q_enc, p_enc)
        if self.across:
            q_reps, p_reps = gather_with_grad(q_reps), gather_with_grad(p_reps)
        if self.pairwise:
            loss = pairwise_loss(q_reps, p_reps, self.config.passages_per_query)
        else:
            loss = info_nce_loss(q_reps, p_reps, self.config.passages_per_query, self.config.temperature)
        # DDP averages gradients over ranks; with gathered negatives each rank holds the full loss.
        ctx.backward(loss * self.world if self.across else loss)
        return {"loss": loss}


def train_dense(
    init_model_path: str | Path,
    train_examples: Sequence[Example],
    config: DenseTrainConfig,
    output_dir: str | Path,
    logger: Logger | None = None,
    *,
    passages: Mapping[str, Any] | None = None,
    tokenizer_path: str | Path | None = None,
) -> dict[str, Any]:
    """Fine-tune the encoder at ``init_model_path`` and save it to ``output_dir``; returns the run's stats.

    ``logger(step, metrics)`` is called on rank 0 every ``log_every`` steps with the mean loss
    since the last call, the learning rate and the epoch. See the module docstring for the rest.
    """
    started, init, out_dir = time.time(), Path(init_model_path), Path(output_dir)
    notes = Notes("finetune")
    with session(config) as info:
        groups, skipped, _ = normalise_examples(train_examples, config.negatives_per_query)
        if skipped:
            notes.say(f"skipped {skipped} training example(s) without positives or negatives")
        digest = fingerprint(str(init.resolve()), config.identity(), groups)
        done = finished_stats(out_dir, digest, "finished model")
        if done is not None:
            return done

        spec = describe_checkpoint(init)
        seed_everything(config.seed)  # a pooler missing from a masked-LM checkpoint is initialised reproducibly
        backbone, tokenizer = load_backbone(spec.model_dir, tokenizer_path)
        for name, param in backbone.named_parameters():
            if name.startswith("pooler."):
                param.requires_grad_(False)  # CLS/mean pooling never uses it; frozen so DDP has no unused weights
        task = DenseTask(BiEncoder(backbone, config.pooling), tokenizer, groups, passages, config, info)
        figures = task.figures()
        candidates = (
            config.passages_per_query
            if task.pairwise
            else (task.world if task.across else 1) * config.queries_per_device * config.passages_per_query
        )
        scored = f"{config.negatives_per_query} pairs" if task.pairwise else f"{candidates} passages"
        notes.say(
            f"effective batch {figures['effective_batch']} passages = {task.world} device(s) x "
            f"{config.queries_per_device} queries x {config.passages_per_query} passages (1 positive + "
            f"{config.negatives_per_query} negatives); {config.loss} loss: each query is scored against {scored}; "
            f"{task.steps_per_epoch} steps/epoch x {config.epochs} epochs"
        )
        out = run(task, config, info, out_dir, notes, identity={"fingerprint": digest}, logger=logger)

        stats = task.stats(
            out,
            started,
            model_dir=str(out_dir),
            init_model=str(init),
            fingerprint=digest,
            negatives_across_devices=task.across,
            in_batch_candidates=candidates,
            skipped_examples=skipped,
        )

        def save() -> None:
            backbone.save_pretrained(str(out_dir))
            tokenizer.save_pretrained(str(out_dir))
            write_encoder_config(
                out_dir,
                pooling=config.pooling,
                normalize=False,
                similarity="dot",
                query_max_length=config.max_q_len,
                passage_max_length=config.max_p_len,
                title_separator=config.title_separator,
                trained_by="harness.finetune.dense",
            )

        return finish(out_dir, stats, save, config.keep_checkpoints_at_end)
