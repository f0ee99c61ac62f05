"""Training on (query, positive, negatives) groups: what dense, SPLADE and cross-encoder fine-tuning share.

Examples are ``(query, positives, negatives)`` or ``(qid, query, positives, negatives)``; items
are texts, or doc ids looked up in ``passages`` (id -> text or {"title", "text"}), which keeps
pools of hundreds of MS MARCO negatives cheap. Epoch ``e`` visits the examples in ``randperm``
order from a generator seeded with ``seed + e`` and drops the incomplete last global batch;
optimizer step ``s`` takes the s-th global batch, rank ``r`` its r-th share. Each group draws its
positive and negatives for the epoch with Tevatron's rule
(:func:`harness.finetune.negatives.sample_group`), so the data order is a pure function of
(seed, step) and a resumed run needs only the checkpoint.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from harness.core.errors import HarnessError
from harness.finetune.negatives import sample_group
from harness.finetune.pairwise import INFONCE, LOSSES
from harness.retrieval.encoder import DEFAULT_TITLE_SEPARATOR, passage_text
from harness.training.config import LoopConfig, required, run_control
from harness.training.distributed import DistInfo
from harness.training.engine import LoopResult, StepContext, Task

Group = tuple[str | None, str, list[Any], list[Any]]  # (qid or None, query, positives, negatives)
TeacherScores = Mapping[str, Mapping[str, float]]


@dataclass(kw_only=True)
class GroupTrainConfig(LoopConfig):
    """Batches of ``queries_per_device`` groups of ``passages_per_query`` (1 positive + negatives).
    What a spec sets comes from its settings (harness.spec.stage_settings: StageSettings, RerankerTrainSettings)."""

    queries_per_device: int = required()
    passages_per_query: int = required()  # 1 positive + hard negatives
    epochs: int = required()
    warmup_ratio: float = required()
    weight_decay: float = required()
    grad_clip: float | None = required()
    title_separator: str = DEFAULT_TITLE_SEPARATOR  # for passages given as {"title", "text"}
    keep_checkpoints_at_end: bool = run_control(
        False
    )  # checkpoints hold optimizer state (3x the model): dropped when done

    def check(self) -> None:
        super().check()
        self.need_positive_int("queries_per_device", "passages_per_query", "epochs")

    @property
    def negatives_per_query(self) -> int:
        return self.passages_per_query - 1


@dataclass(kw_only=True)
class BiEncoderTrainConfig(GroupTrainConfig):
    """Queries and passages encoded apart (dense and SPLADE retrievers)."""

    max_q_len: int = required()
    max_p_len: int = required()
    precision: str = required()
    checkpoint_every: int = run_control()  # the stage's setting: a preempted fine-tuning loses at most this many steps
    negatives_across_devices: bool = True  # CoT-MAE's --negatives_x_device: gather passages of all ranks
    loss: str = required()  # infonce | pairwise (harness.finetune.pairwise; the spec's finetune.loss)

    def check(self) -> None:
        super().check()
        self.need_positive_int("max_q_len", "max_p_len")
        self.need(self.loss in LOSSES, "loss", f"must be one of {', '.join(LOSSES)}, got {self.loss!r}")

    def identity(self) -> dict[str, Any]:
        # `loss` came after models were trained: InfoNCE, the one loss then, keeps their identity, so a
        # finished InfoNCE model and its resume checkpoints stay valid; any other loss is part of it.
        out = super().identity()
        if out.get("loss") == INFONCE:
            del out["loss"]
        return out


def normalise_examples(
    examples: Sequence[Any], negatives_per_query: int, teacher: TeacherScores | None = None
) -> tuple[list[Group], int, int]:
    """(groups as (qid, query, positives, negatives), groups skipped for lack of a positive or a negative,
    items left out for lack of a teacher score)."""
    kept: list[Group] = []
    skipped = dropped = 0
    for n, ex in enumerate(examples):
        if not (isinstance(ex, (tuple, list)) and len(ex) in (3, 4)):
            raise HarnessError(
                f"training example {n} is not (query, positives, negatives) or "
                f"(qid, query, positives, negatives): {str(ex)[:80]}"
            )
        qid, query, pos, negs = ex if len(ex) == 4 else (None, *ex)
        if isinstance(pos, str) or isinstance(negs, str):
            raise HarnessError(f"training example {n}: positives and negatives must be lists, not strings")
        pos, negs = list(pos), list(negs)
        if teacher is not None:
            if qid is None:
                raise HarnessError(
                    "distillation needs examples as (qid, query, positives, negatives): the "
                    "teacher's scores are keyed by query id"
                )
            scored = teacher.get(str(qid), {})
            n_before = len(pos) + len(negs)
            pos = [d for d in pos if d in scored]
            negs = [d for d in negs if d in scored]
            dropped += n_before - len(pos) - len(negs)
        if not pos or (negatives_per_query > 0 and not negs):
            skipped += 1
            continue
        kept.append((None if qid is None else str(qid), query, pos, negs))
    return kept, skipped, dropped


class GroupTask(Task):
    """The data side of group training: the epoch order, this rank's groups of a step, their texts."""

    def __init__(
        self,
        model: torch.nn.Module,
        tokenizer: Any,
        groups: Sequence[Group],
        passages: Mapping[str, Any] | None,
        config: GroupTrainConfig,
        info: DistInfo,
        who: str,
    ):
        self.model, self.tokenizer, self.groups, self.passages = model, tokenizer, groups, passages
        self.config, self.who = config, who
        self.rank, self.world = info.rank, info.world_size
        global_queries = self.world * config.queries_per_device
        self.steps_per_epoch = len(groups) // global_queries
        if self.steps_per_epoch == 0:
            raise HarnessError(
                f"{len(groups)} usable training example(s), fewer than one global batch of {global_queries} queries "
                f"({self.world} device(s) x {config.queries_per_device}); lower queries_per_device or add training data"
            )
        self.total_steps = self.steps_per_epoch * config.epochs
        self._order_epoch, self._order = -1, []

    def text(self, item: Any) -> str:
        if self.passages is None:
            return passage_text(item, self.config.title_separator)
        try:
            return passage_text(self.passages[item], self.config.title_separator)
        except KeyError:
            raise HarnessError(f"training passage id {item!r} is not in the passages given to {self.who}") from None

    def items(self, index: int, epoch: int) -> list[Any]:
        """[positive, negative_1, ..., negative_{P-1}] of group ``index`` in ``epoch``."""
        _, _, pos, negs = self.groups[index]
        seed, key = self.config.seed, str(index)
        positive = sample_group(pos, 1, seed, f"pos/{key}", epoch)[0] if len(pos) > 1 else pos[0]
        return [positive, *sample_group(negs, self.config.negatives_per_query, seed, key, epoch)]

    def batch(self, step: int) -> list[tuple[str | None, str, list[Any]]]:
        """This rank's (qid, query, items) of optimizer step ``step``."""
        epoch, in_epoch = divmod(step, self.steps_per_epoch)
        if epoch != self._order_epoch:
            gen = torch.Generator().manual_seed(self.config.seed + epoch)
            self._order, self._order_epoch = torch.randperm(len(self.groups), generator=gen).tolist(), epoch
        q_per = self.config.queries_per_device
        first = (in_epoch * self.world + self.rank) * q_per
        return [
            (self.groups[i][0], self.groups[i][1], self.items(i, epoch)) for i in self._order[first : first + q_per]
        ]

    def encode(
        self, batch: list[tuple[str | None, str, list[Any]]], ctx: StepContext
    ) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        """Queries and their groups' passages, tokenized apart (bi-encoders)."""
        config, tokenizer = self.config, self.tokenizer
        q_enc = tokenizer(
            [q for _, q, _ in batch], padding=True, truncation=True, max_length=config.max_q_len, return_tensors="pt"
        )
        p_enc = tokenizer(
            [self.text(d) for _, _, ids in batch for d in ids],
            padding=True,
            truncation=True,
            max_length=config.max_p_len,
            return_tensors="pt",
        )
        return ctx.to_device(dict(q_enc)), ctx.to_device(dict(p_enc))

    def epoch_end(self, step: int) -> bool:
        return step % self.steps_per_epoch == 0

    def epoch(self, step: int) -> float:
        return step / self.steps_per_epoch

    def figures(self) -> dict[str, Any]:
        """The data and batch figures every group trainer reports."""
        return {
            "examples": len(self.groups),
            "steps_per_epoch": self.steps_per_epoch,
            "total_steps": self.total_steps,
            "epochs": self.config.epochs,
            "world_size": self.world,
            "queries_per_device": self.config.queries_per_device,
            "passages_per_query": self.config.passages_per_query,
            "negatives_per_query": self.config.negatives_per_query,
            "effective_batch": self.world * self.config.queries_per_device * self.config.passages_per_query,
        }

    def stats(self, out: LoopResult, started: float, **extra: Any) -> dict[str, Any]:
        """The stats of a run (``extra`` first): figures, losses, where and how it ran."""
        losses = out.loss_history
        return {
            **extra,
            **self.figures(),
            "steps": out.step,
            "first_loss": losses[0] if losses else None,
            "final_loss": losses[-1] if losses else None,
            "epoch_losses": epoch_losses(losses, self.steps_per_epoch),
            "loss_history": losses,
            "precision": out.precision,
            "device": str(next(self.model.parameters()).device),
            "resumed_from": out.resumed_from,
            "stopped_early": out.stopped_early,
            "seconds": time.time() - started,
            "config": self.config.to_dict(),
            "notes": out.notes.lines,
            "weight_change": out.weight_change.to_dict() if out.weight_change else None,
            "cached": False,
        }


def epoch_losses(losses: Sequence[float], steps_per_epoch: int) -> list[float]:
    return [
        sum(losses[e * steps_per_epoch : (e + 1) * steps_per_epoch]) / steps_per_epoch
        for e in range(len(losses) // steps_per_epoch)
    ]
