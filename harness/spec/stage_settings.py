"""The training blocks of a spec, typed (harness.spec.settings), defaults declared once: pre-training,
a fine-tuning stage (its negative_depth is also how deep mining searches) and the stage-3 teacher.

A fine-tuning stage (``retriever1`` / ``retriever2`` / ``retriever3``) reads the finetune block's
scalar keys overridden by its own block (:func:`finetune_settings`); pre-training reads the
``pretrain`` block. Each class is its block with every value checked against its type and every
absent key at its default, so no pipeline writes ``or 32`` again, and the trainer configs built
from them (``trainer_kwargs``) declare no default of their own for what a spec sets;
:mod:`harness.spec.keys` derives the keys a spec may state from their fields, and a stage's cache key
is derived from them too (:meth:`harness.spec.settings.Settings.key`).
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.core.errors import HarnessError
from harness.spec.block_settings import TokenizerSettings
from harness.spec.kinds import FLAG, MAPPING, NUMBER, POSITIVE, POSITIVE_WHOLE, TEXT, WHOLE, one_of
from harness.spec.settings import BlockSettings, Settings, setting
from harness.stages.checkpoints import resolve_checkpoint
from harness.training.autoprecision import Shapes
from harness.training.precision import AUTO, PRECISION_MEANING, stage_precision

# Hard negatives come from this many top-ranked passages unless a stage says otherwise; mining searches the
# training queries to the depth of the stage that trains on the mined run (harness.pipelines.chain).
NEGATIVE_DEPTH = 200
# What a pre-training pair holds next to its passage (harness.corpus.pairs reads these).
PAIR_KINDS = ("span", "qc", "mixed", "single")
# Stage 3's teachers (harness.pipelines.learned_sparse); any other `reranker` value names a checkpoint.
TINY_RERANKER = "tiny-cross-encoder"
CONFIGURED_RERANKER = "configured-checkpoint"
BI_ENCODER_TEACHER = "bi-encoder"
# A dense fine-tuning stage's loss (harness.finetune.dense: InfoNCE; harness.finetune.pairwise: CPDAE's).
INFONCE, PAIRWISE = "infonce", "pairwise"
LOSSES = (INFONCE, PAIRWISE)


# Training precision (`auto`, fp32, fp16, bf16) is decided in harness.training.precision; a stage's
# cache key holds the precision `auto` resolved to (MethodSpec.precision), never `auto`.


def checkable(settings: Any) -> Any:
    """``settings`` with ``auto`` as fp32, for the trainer configs' range checks before a run resolves it
    (``auto`` resolves to fp32 or bf16, each valid wherever the other is)."""
    return dataclasses.replace(settings, precision="fp32") if settings.precision == AUTO else settings


def precision_source(spec: Any, stage: str) -> str:
    """How ``stage``'s precision (pretrain, retriever1..3) was chosen, for its record: "measured" or
    "flag" where it says ``auto`` (MethodSpec.precision_source), else "spec" (stated)."""
    block = (spec.get("pretrain") or {}) if stage == "pretrain" else finetune_settings(spec, stage)
    if block.get("precision", "fp32") != AUTO:
        return "spec"
    return getattr(spec, "precision_source", None) or "spec"


SCORING = ("teacher_scores",)  # the stage where stage 3's teacher scores the mined candidates


def finetune_settings(spec: Any, stage: str) -> dict[str, Any]:
    """Shared fine-tuning keys overridden by the stage's own block (retriever1/2/3), as the spec states them."""
    ft = dict(spec.get("finetune") or {})
    shared = {k: v for k, v in ft.items() if not isinstance(v, dict)}
    return {**shared, **(ft.get(stage) or {})}


@dataclass(frozen=True)
class PretrainSettings(BlockSettings):
    """The ``pretrain`` block of a spec whose objective is not ``none``. Ranges that the pre-training
    trainer's config checks (harness.pretrain.trainer.TrainConfig) are not repeated here."""

    block = ("pretrain",)
    reads = ("pretrain",)

    objective: str = setting(
        "pre-training objective (harness/pretrain/objectives), or none", kind=TEXT, example="cotmae"
    )
    global_batch: int = setting("examples per optimiser step, over all devices", kind=WHOLE, example=256)
    per_device_batch: int = setting("examples per device and forward pass", kind=WHOLE, example=32)
    lr: float = setting("peak learning rate", kind=NUMBER, example=1e-4)
    context: str = setting("span | qc | mixed | single: what is paired with a passage", "span", one_of(*PAIR_KINDS))
    steps: int | None = setting("optimiser steps", None, WHOLE, nullable=True)
    # not a trainer setting (steps are derived from it), so its range is declared here
    epochs: float | None = setting(
        "passes over the passages when steps is not set", None, POSITIVE, nullable=True, example=1
    )
    grad_cache_chunk: int | None = setting(
        "gradient-caching chunk for losses over the whole batch", None, WHOLE, nullable=True, example=32
    )
    warmup_ratio: float = setting("share of the steps with linear learning-rate warm-up", 0.1, NUMBER)
    weight_decay: float = setting("AdamW weight decay", 0.01, NUMBER)
    grad_clip: float | None = setting("gradient-norm clip, null for none", None, NUMBER, nullable=True, example=1.0)
    max_length: int = setting("input length in tokens", 144, WHOLE)
    precision: str = setting(PRECISION_MEANING, "fp32", TEXT)
    log_every: int = setting("steps between logged losses", 10, WHOLE, keyed=False)
    checkpoint_every: int = setting(
        "steps between resumable checkpoints besides the wall-clock ones (HARNESS_CHECKPOINT_MINUTES, 30) "
        "and the stage's end; 0 for none",
        0,
        WHOLE,
        keyed=False,
    )
    objective_params: dict | None = setting("the objective's hyper-parameters", None, MAPPING, nullable=True)

    @classmethod
    def from_spec(cls, spec: Any) -> PretrainSettings:
        """The block's settings, ``precision: auto`` resolved where the run resolved it (harness.training.precision.stage_precision)."""
        return stage_precision(cls.as_stated(spec), spec)

    @classmethod
    def as_stated(cls, spec: Any) -> PretrainSettings:
        """The block's settings with ``precision`` as the spec states it (``auto`` kept): what the
        projection prices before, or apart from, a run resolving it."""
        return super().from_spec(spec)

    def total_steps(self, n_examples: int) -> int:
        """``steps``, or ``epochs`` over ``n_examples`` in global batches."""
        if self.steps:
            return self.steps
        if self.epochs:
            return max(1, math.ceil(self.epochs * n_examples / self.global_batch))
        raise HarnessError("pretrain needs `steps` or `epochs` in the spec")

    def trainer_kwargs(self, steps: int) -> dict[str, Any]:
        """The pre-training trainer's settings (harness.pretrain.trainer.TrainConfig) for ``steps`` steps."""
        return {
            "steps": steps,
            "global_batch": self.global_batch,
            "per_device_batch": self.per_device_batch,
            "lr": self.lr,
            "warmup_ratio": self.warmup_ratio,
            "weight_decay": self.weight_decay,
            "max_length": self.max_length,
            "grad_clip": self.grad_clip,
            "precision": self.precision,
            "grad_cache_chunk": self.grad_cache_chunk,
            "log_every": self.log_every,
            "checkpoint_every": self.checkpoint_every,
        }


@dataclass(frozen=True)
class StageSettings(Settings):
    """What one fine-tuning stage trains with (the learned-sparse keys are read by LexMAE's stages only)."""

    reads = ("retriever1", "retriever2", "retriever3")

    lr: float = setting("peak learning rate", kind=NUMBER, example=2e-5)
    # the trainer's queries per device are derived from it (at least 1), so its range is declared here
    global_queries: int = setting(
        "training queries per optimiser step, over all devices", kind=POSITIVE_WHOLE, example=64
    )
    passages_per_query: int = setting("passages per query group: 1 positive + hard negatives", kind=WHOLE, example=16)
    epochs: int = setting("passes over the training queries", kind=WHOLE, example=3)
    max_q_len: int = setting("query length in tokens", 32, WHOLE)
    max_p_len: int = setting("passage length in tokens", 144, WHOLE)
    warmup_ratio: float = setting("share of the steps with linear learning-rate warm-up", 0.1, NUMBER)
    weight_decay: float = setting("AdamW weight decay", 0.0, NUMBER)
    negative_depth: int = setting(
        "hard negatives are drawn from this many top-ranked passages", NEGATIVE_DEPTH, POSITIVE_WHOLE
    )
    grad_clip: float | None = setting("gradient-norm clip, null for none", 1.0, NUMBER, nullable=True)
    precision: str = setting(PRECISION_MEANING, "fp32", TEXT)
    loss: str = setting(
        "fine-tuning loss: infonce (softmax over the group and the batch) or pairwise (CPDAE's: each "
        "positive against each of its own negatives, harness/finetune/pairwise.py; dense only)",
        INFONCE,
        one_of(*LOSSES),
        later=True,
    )
    flops_lambda: float = setting("FLOPS regulariser weight on documents (learned-sparse)", 0.002, NUMBER)
    query_flops_ratio: float = setting(
        "query FLOPS weight as a multiple of flops_lambda (learned-sparse)", 0.75, NUMBER
    )
    flops_warmup_steps: int = setting(
        "steps of SPLADE's quadratic FLOPS-weight warm-up, 0 for none (learned-sparse)", 0, WHOLE
    )
    fit_head: bool = setting(
        "refit the MLM head's transform in closed form to predict each token from its own "
        "hidden state before the first step (learned-sparse)",
        False,
        FLAG,
    )
    start_terms: int | None = setting(
        "shift the MLM output bias so a training passage starts with this many "
        "non-zero terms (learned-sparse; null = the head as loaded)",
        None,
        WHOLE,
        nullable=True,
        example=300,
    )
    contrastive_weight: float = setting(
        "InfoNCE weight next to the distillation loss (learned-sparse stage 3)", 0.2, NUMBER
    )
    representation: str = setting(
        "sparse representation; only splade-max is implemented", "splade-max", one_of("splade-max")
    )
    checkpoint_every: int = setting(
        "steps between resumable checkpoints (besides epoch ends; a preempted run also saves one when it stops)",
        1000,
        WHOLE,
        keyed=False,
    )

    @classmethod
    def from_spec(cls, spec: Any, stage: str) -> StageSettings:
        """The stage's settings; a missing required key or a value of the wrong type names file and key path."""
        settings = cls.from_mapping(
            finetune_settings(spec, stage), f"{getattr(spec, 'path', 'spec')}: finetune.{stage}"
        )
        return stage_precision(settings, spec)

    def trainer_kwargs(self, world_size: int) -> dict[str, Any]:
        """The bi-encoder trainer settings (harness.finetune.groups.BiEncoderTrainConfig) of this stage,
        the global batch shared over ``world_size`` devices."""
        return {
            "queries_per_device": max(1, self.global_queries // world_size),
            "passages_per_query": self.passages_per_query,
            "lr": self.lr,
            "epochs": self.epochs,
            "warmup_ratio": self.warmup_ratio,
            "weight_decay": self.weight_decay,
            "grad_clip": self.grad_clip,
            "max_q_len": self.max_q_len,
            "max_p_len": self.max_p_len,
            "precision": self.precision,
            "checkpoint_every": self.checkpoint_every,
            "loss": self.loss,
        }

    def splade_kwargs(self, world_size: int) -> dict[str, Any]:
        """The SPLADE trainer's settings (harness.finetune.splade.SpladeTrainConfig) but ``distill``, which
        is the stage's (retriever 3 distils)."""
        return {
            **self.trainer_kwargs(world_size),
            "flops_lambda": self.flops_lambda,
            "query_flops_ratio": self.query_flops_ratio,
            "flops_warmup_steps": self.flops_warmup_steps,
            "fit_head": self.fit_head,
            "start_terms": self.start_terms,
            "contrastive_weight": self.contrastive_weight,
        }


@dataclass(frozen=True)
class RerankerTrainSettings(Settings):
    """``finetune.retriever3.reranker_train``: the tiny cross-encoder teacher's training. Ranges are
    its trainer config's (harness.finetune.reranker.RerankerTrainConfig); the run controls that every
    trainer shares (title separator, logging, progress, device) keep the trainer's own unless stated."""

    reads = ("reranker",)

    queries_per_device: int = setting("queries per device and step", 8, WHOLE)
    passages_per_query: int = setting("passages per query group: 1 positive + BM25 negatives", 8, WHOLE)
    lr: float = setting("peak learning rate", 1e-4, NUMBER)
    epochs: int = setting("passes over the training queries", 2, WHOLE)
    warmup_ratio: float = setting("share of the steps with linear learning-rate warm-up", 0.1, NUMBER)
    weight_decay: float = setting("AdamW weight decay", 0.01, NUMBER)
    grad_clip: float | None = setting("gradient-norm clip, null for none", 1.0, NUMBER, nullable=True)
    max_length: int = setting("query + passage length in tokens (capped at the encoder's positions)", 192, WHOLE)
    title_separator: str | None = setting("text between a passage's title and body", None, TEXT, example=" - ")
    log_every: int | None = setting("steps between logged losses", None, WHOLE, example=10, keyed=False)
    progress: bool | None = setting("show a progress bar", None, FLAG, keyed=False)
    device: str | None = setting("torch device, null for the default", None, TEXT, example="cuda:0", keyed=False)

    def trainer_kwargs(self) -> dict[str, Any]:
        """RerankerTrainConfig's settings but the seed (the harness's): a run control the spec leaves
        unstated is left to the trainer."""
        controls = {k: getattr(self, k) for k in ("title_separator", "log_every", "progress", "device")}
        return {
            "queries_per_device": self.queries_per_device,
            "passages_per_query": self.passages_per_query,
            "lr": self.lr,
            "epochs": self.epochs,
            "warmup_ratio": self.warmup_ratio,
            "weight_decay": self.weight_decay,
            "grad_clip": self.grad_clip,
            "max_length": self.max_length,
            **{k: v for k, v in controls.items() if v is not None},
        }


@dataclass(frozen=True)
class RerankerSettings(BlockSettings):
    """Stage 3's teacher, in ``finetune.retriever3`` (a scalar key may be set for every stage on the
    finetune block, as the stage's own keys)."""

    block = ("finetune", "retriever3")
    reads = ("reranker", "teacher_scores")

    reranker: str = setting(
        f"stage-3 teacher: {CONFIGURED_RERANKER} | {TINY_RERANKER} | {BI_ENCODER_TEACHER} | a checkpoint",
        CONFIGURED_RERANKER,
        TEXT,
        stages=SCORING,
    )
    reranker_checkpoint: str | None = setting(
        "checkpoint of a configured-checkpoint or bi-encoder teacher",
        None,
        TEXT,
        example="all-minilm-l6-v2",
        stages=SCORING,
    )
    # Not keyed: the scores' key already holds the teacher folder's content (harness.pipelines.context.input_key).
    reranker_sha256: str | None = setting(
        "sha256 of a checkpoint teacher's weights (harness.stages.checkpoints.weights_sha256: `sha256sum` of its "
        "one weights file): the run stops when the folder holds other weights; unset, the run states its teacher "
        "as unidentified, so no cell of a named teacher is graded against it",
        None,
        TEXT,
        nullable=True,
        example="<64 hex digits>",
        keyed=False,
        stages=SCORING,
    )
    teacher_scale: float = setting("bi-encoder teacher logits = teacher_scale x cosine", 20.0, POSITIVE, stages=SCORING)
    teacher_max_length: int = setting(
        "bi-encoder teacher passage length in tokens", 128, POSITIVE_WHOLE, stages=SCORING
    )
    teacher_positives: int | None = setting(
        "positives per query the teacher scores (default: epochs)", None, POSITIVE_WHOLE, stages=SCORING
    )
    teacher_negatives: int | None = setting(
        "negatives per query the teacher scores (default: epochs x (passages_per_query - 1))",
        None,
        POSITIVE_WHOLE,
        stages=SCORING,
    )
    # its settings are RerankerTrainSettings', keyed by the reranker stage
    reranker_train: dict | None = setting(
        "training of the tiny cross-encoder teacher", None, MAPPING, keys=RerankerTrainSettings, stages=("reranker",)
    )

    @classmethod
    def values(cls, spec: Any) -> Mapping[str, Any]:
        return finetune_settings(spec, "retriever3")

    def scored(self, stage: StageSettings) -> tuple[int, int]:
        """(positives, negatives) per query the teacher scores: unless stated, what retriever 3's training
        draws over its epochs (one positive and ``passages_per_query - 1`` negatives a query and epoch)."""
        return (
            self.teacher_positives or stage.epochs,
            self.teacher_negatives or stage.epochs * (stage.passages_per_query - 1),
        )

    def train(self) -> RerankerTrainSettings:
        """The tiny cross-encoder's training settings."""
        return RerankerTrainSettings.from_mapping(self.reranker_train or {}, "finetune.retriever3.reranker_train")


# What a spec says of its precision, for harness.training.precision.resolve_precision (through MethodSpec).


def pretrains(spec: Any) -> bool:
    return isinstance(spec.get("pretrain"), dict) and spec.get("pretrain.objective") not in (None, "none")


def finetune_stages(spec: Any) -> list[str]:
    """The fine-tuning stages the spec names (its ``stages:`` list says finetune_r1, ...)."""
    named = set(spec.get("stages") or [])
    return [f"retriever{n}" for n in (1, 2, 3) if f"finetune_r{n}" in named]


def declares_auto(spec: Any) -> bool:
    """Whether a training stage of the spec says ``precision: auto`` (stated, or by default)."""
    stated = [PretrainSettings.values(spec).get("precision", "fp32")] if pretrains(spec) else []
    stated += [finetune_settings(spec, stage).get("precision", "fp32") for stage in finetune_stages(spec)]
    return AUTO in stated


def _architecture(spec: Any) -> dict[str, Any]:
    """The encoder the spec trains, as a Hugging Face ``config.json`` states it: its init checkpoint's."""
    model = spec.get("model") or {}
    if model.get("init", "scratch") == "scratch":
        vocab = TokenizerSettings.from_spec(spec).vocab_size if spec.get("tokenizer.from") == "wordpiece" else 30522
        return {
            "num_hidden_layers": model["layers"],
            "hidden_size": model["hidden"],
            "num_attention_heads": model["heads"],
            "intermediate_size": model["intermediate"],
            "vocab_size": vocab,
        }
    config: dict[str, Any] = json.loads(
        (Path(resolve_checkpoint(model["init"], "init checkpoint")) / "config.json").read_text()
    )
    return config


def precision_shapes(spec: Any) -> Shapes:
    """The encoder of the spec at its first training stage's batch, where ``auto`` measures: pre-training's
    per-device batch of ``max_length`` tokens, else retriever 1's passages per step of ``max_p_len`` tokens."""
    arch = _architecture(spec)
    if pretrains(spec):
        pre = PretrainSettings.from_spec(spec)
        return Shapes.from_config(arch, batch=pre.per_device_batch, seq_len=pre.max_length)
    stage = StageSettings.from_spec(spec, (finetune_stages(spec) or ["retriever1"])[0])
    return Shapes.from_config(arch, batch=stage.global_queries * stage.passages_per_query, seq_len=stage.max_p_len)
