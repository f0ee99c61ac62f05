"""Typed spec blocks: the pre-training block and a fine-tuning stage's settings, defaults declared once.

A fine-tuning stage (``retriever1`` / ``retriever2`` / ``retriever3``) reads the finetune block's
scalar keys overridden by its own block (:func:`finetune_settings`); pre-training reads the
``pretrain`` block. :class:`StageSettings` and :class:`PretrainSettings` are those blocks with
every value checked against its type and every absent key at its default, so no pipeline writes
``or 32`` again; :mod:`harness.spec_keys` derives the keys a spec may state from their fields.
A stage's cache key is still the spec's own values (``raw``), so a default never moves a key.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Mapping

from harness.errors import HarnessError
from harness.kinds import FLAG, MAPPING, NUMBER, POSITIVE, POSITIVE_WHOLE, TEXT, WHOLE, Kind, example_text, one_of

NEGATIVE_DEPTH = 200  # hard negatives come from this many top-ranked passages unless a stage says otherwise


def mine_depth(spec: Any) -> int:
    """``finetune.mine.depth``: how many top results of the training queries mining keeps."""
    return int((spec.get("finetune.mine") or {}).get("depth", NEGATIVE_DEPTH))


def finetune_settings(spec: Any, stage: str) -> dict[str, Any]:
    """Shared fine-tuning keys overridden by the stage's own block (retriever1/2/3), as the spec states them."""
    ft = dict(spec.get("finetune") or {})
    shared = {k: v for k, v in ft.items() if not isinstance(v, dict)}
    return {**shared, **(ft.get(stage) or {})}


def _key(meaning: str, default: Any = dataclasses.MISSING, kind: Kind = NUMBER, nullable: bool = False,
         example: Any = None) -> Any:
    """A typed setting: ``kind`` is its type (and its range where no trainer config checks that);
    ``example`` is shown with a problem when the default cannot serve as one."""
    return field(default=default, metadata={"meaning": meaning, "kind": kind, "nullable": nullable,
                                            "example": example})


# What a pre-training pair holds next to its passage (harness.corpus.pairs reads these).
PAIR_KINDS = ("span", "qc", "mixed", "single")


class Settings:
    """A typed spec block: each field is a ``_key`` (meaning, default, kind, null allowed)."""

    @classmethod
    def meanings(cls) -> dict[str, str]:
        return {f.name: f.metadata["meaning"] for f in dataclasses.fields(cls)}  # type: ignore[arg-type]

    @classmethod
    def problems(cls, values: Mapping[str, Any]) -> list[tuple[str, str]]:
        """(key, problem) for each missing required key and each value not of its declared kind:
        ``('steps', "'four hundred' is not a whole number (e.g. steps: 400)")``."""
        found = []
        for f in dataclasses.fields(cls):  # type: ignore[arg-type]
            value = values.get(f.name)
            if value is None:
                if f.default is dataclasses.MISSING and not (f.name in values and f.metadata["nullable"]):
                    found.append((f.name, f"is required ({f.metadata['meaning']}; e.g. {f.name}: "
                                          f"{example_text(cls.example(f.name))})"))
                continue
            problem = f.metadata["kind"].problem(value)
            if problem:
                found.append((f.name, f"{problem} (e.g. {f.name}: {example_text(cls.example(f.name))})"))
        return found

    @classmethod
    def example(cls, name: str) -> Any:
        """A right value for setting ``name``: its declared example, else its default, else its kind's."""
        f = next(f for f in dataclasses.fields(cls) if f.name == name)  # type: ignore[arg-type]
        if f.metadata["example"] is not None:
            return f.metadata["example"]
        return f.default if f.default not in (None, dataclasses.MISSING) else f.metadata["kind"].example

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any], where: str) -> Any:
        """The block's settings; a missing required key or a value of the wrong kind names ``where``.key
        (all of them: spec validation has reported them before a run starts, so this is the last guard)."""
        problems = cls.problems(values)
        if problems:
            raise HarnessError("; ".join(f"{where}.{key}: {problem}" for key, problem in problems))
        kwargs: dict[str, Any] = {}
        for f in dataclasses.fields(cls):  # type: ignore[arg-type]
            value = values.get(f.name)
            if value is not None or (f.name in values and f.metadata["nullable"]):
                kwargs[f.name] = value  # an explicit null on a nullable key: off; elsewhere null is the default
        return cls(**kwargs)


@dataclass(frozen=True)
class PretrainSettings(Settings):
    """The ``pretrain`` block of a spec whose objective is not ``none``. Ranges that the pre-training
    trainer's config checks (harness.pretrain.trainer.TrainConfig) are not repeated here."""

    objective: str = _key("pre-training objective (harness/pretrain/objectives), or none", kind=TEXT,
                          example="cotmae")
    global_batch: int = _key("examples per optimiser step, over all devices", kind=WHOLE, example=256)
    per_device_batch: int = _key("examples per device and forward pass", kind=WHOLE, example=32)
    lr: float = _key("peak learning rate", kind=NUMBER, example=1e-4)
    context: str = _key("span | qc | mixed | single: what is paired with a passage", "span", one_of(*PAIR_KINDS))
    steps: int | None = _key("optimiser steps", None, WHOLE, nullable=True)
    # not a trainer setting (steps are derived from it), so its range is declared here
    epochs: float | None = _key("passes over the passages when steps is not set", None, POSITIVE, nullable=True,
                                example=1)
    grad_cache_chunk: int | None = _key("gradient-caching chunk for losses over the whole batch", None, WHOLE,
                                        nullable=True, example=32)
    warmup_ratio: float = _key("share of the steps with linear learning-rate warm-up", 0.1, NUMBER)
    weight_decay: float = _key("AdamW weight decay", 0.01, NUMBER)
    grad_clip: float | None = _key("gradient-norm clip, null for none", None, NUMBER, nullable=True, example=1.0)
    max_length: int = _key("input length in tokens", 144, WHOLE)
    precision: str = _key("fp32 | fp16 | bf16", "fp32", TEXT)
    log_every: int = _key("steps between logged losses", 10, WHOLE)
    checkpoint_every: int = _key("steps between resumable checkpoints", 50, WHOLE)
    objective_params: dict | None = _key("the objective's hyper-parameters", None, MAPPING, nullable=True)

    @classmethod
    def from_spec(cls, spec: Any) -> "PretrainSettings":
        return cls.from_mapping(spec.get("pretrain") or {}, f"{getattr(spec, 'path', 'spec')}: pretrain")

    def total_steps(self, n_examples: int) -> int:
        """``steps``, or ``epochs`` over ``n_examples`` in global batches."""
        if self.steps:
            return self.steps
        if self.epochs:
            return max(1, math.ceil(self.epochs * n_examples / self.global_batch))
        raise HarnessError("pretrain needs `steps` or `epochs` in the spec")


@dataclass(frozen=True)
class StageSettings(Settings):
    """What one fine-tuning stage trains with (the learned-sparse keys are read by LexMAE's stages only)."""

    lr: float = _key("peak learning rate", kind=NUMBER, example=2e-5)
    # the trainer's queries per device are derived from it (at least 1), so its range is declared here
    global_queries: int = _key("training queries per optimiser step, over all devices", kind=POSITIVE_WHOLE,
                               example=64)
    passages_per_query: int = _key("passages per query group: 1 positive + hard negatives", kind=WHOLE, example=16)
    epochs: int = _key("passes over the training queries", kind=WHOLE, example=3)
    max_q_len: int = _key("query length in tokens", 32, WHOLE)
    max_p_len: int = _key("passage length in tokens", 144, WHOLE)
    warmup_ratio: float = _key("share of the steps with linear learning-rate warm-up", 0.1, NUMBER)
    weight_decay: float = _key("AdamW weight decay", 0.0, NUMBER)
    negative_depth: int = _key("hard negatives are drawn from this many top-ranked passages", NEGATIVE_DEPTH,
                               POSITIVE_WHOLE)
    grad_clip: float | None = _key("gradient-norm clip, null for none", 1.0, NUMBER, nullable=True)
    precision: str = _key("training precision: fp32, or fp16 / bf16 on CUDA", "fp32", TEXT)
    flops_lambda: float = _key("FLOPS regulariser weight on documents (learned-sparse)", 0.002, NUMBER)
    query_flops_ratio: float = _key("query FLOPS weight as a multiple of flops_lambda (learned-sparse)", 0.75, NUMBER)
    flops_warmup_steps: int = _key("steps of SPLADE's quadratic FLOPS-weight warm-up, 0 for none (learned-sparse)",
                                   0, WHOLE)
    fit_head: bool = _key("refit the MLM head's transform in closed form to predict each token from its own hidden "
                          "state before the first step (learned-sparse)", False, FLAG)
    start_terms: int | None = _key("shift the MLM output bias so a training passage starts with this many non-zero "
                                   "terms (learned-sparse; null = the head as loaded)", None, WHOLE, nullable=True,
                                   example=300)
    contrastive_weight: float = _key("InfoNCE weight next to the distillation loss (learned-sparse stage 3)", 0.2,
                                     NUMBER)
    representation: str = _key("sparse representation; only splade-max is implemented", "splade-max",
                               one_of("splade-max"))

    @classmethod
    def from_spec(cls, spec: Any, stage: str) -> "StageSettings":
        """The stage's settings; a missing required key or a value of the wrong type names file and key path."""
        return cls.from_mapping(finetune_settings(spec, stage), f"{getattr(spec, 'path', 'spec')}: finetune.{stage}")

    def trainer_kwargs(self, world_size: int) -> dict[str, Any]:
        """The bi-encoder trainer settings (harness.finetune.groups.BiEncoderTrainConfig) of this stage,
        the global batch shared over ``world_size`` devices."""
        return {"queries_per_device": max(1, self.global_queries // world_size),
                "passages_per_query": self.passages_per_query, "lr": self.lr, "epochs": self.epochs,
                "warmup_ratio": self.warmup_ratio, "weight_decay": self.weight_decay, "grad_clip": self.grad_clip,
                "max_q_len": self.max_q_len, "max_p_len": self.max_p_len, "precision": self.precision}

    @staticmethod
    def raw(spec: Any, stage: str, keys: tuple[str, ...]) -> dict[str, Any]:
        """The stage's values as the spec states them (None when absent): what its cache key covers."""
        merged = finetune_settings(spec, stage)
        return {k: merged.get(k) for k in keys}
