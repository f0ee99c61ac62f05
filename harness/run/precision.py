"""What a run's ``precision: auto`` resolves to: the ``--precision`` flag, else fp32 on a GPU profile,
else bf16 or fp32 as measured on this CPU at the profile's shapes (harness.training.autoprecision).

The resolved precision goes on the spec (``MethodSpec.precision``), from which every stage's settings,
cache key and trainer read it (harness.spec.stage_settings.resolved_precision); the spec's config keeps
``auto``, so its hash is the same whatever this machine chose, and the gate compares the precision
each stage used instead (harness.gate.grading.precision_difference).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, Callable

from harness.core.errors import HarnessError
from harness.core.paths import cache_dir
from harness.spec.block_settings import TokenizerSettings
from harness.spec.method import MethodSpec
from harness.spec.stage_settings import AUTO, PretrainSettings, StageSettings, finetune_settings
from harness.stages.checkpoints import resolve_checkpoint
from harness.training.autoprecision import Shapes, choose

FLAG_CHOICES = ("fp32", "bf16")
FINETUNE_STAGES = ("retriever1", "retriever2", "retriever3")


def pretrains(spec: MethodSpec) -> bool:
    return isinstance(spec.get("pretrain"), dict) and spec.get("pretrain.objective") not in (None, "none")


def finetune_stages(spec: MethodSpec) -> list[str]:
    """The fine-tuning stages the spec names (its ``stages:`` list says finetune_r1, ...)."""
    named = set(spec.get("stages") or [])
    return [f"retriever{n}" for n in (1, 2, 3) if f"finetune_r{n}" in named]


def declares_auto(spec: MethodSpec) -> bool:
    """Whether a training stage of the spec says ``precision: auto`` (stated, or by default)."""
    stated = [PretrainSettings.values(spec).get("precision", "fp32")] if pretrains(spec) else []
    stated += [finetune_settings(spec, stage).get("precision", "fp32") for stage in finetune_stages(spec)]
    return AUTO in stated


def _architecture(spec: MethodSpec) -> dict[str, Any]:
    """The encoder the spec trains, as a Hugging Face ``config.json`` states it: its init checkpoint's."""
    model = spec.get("model") or {}
    if model.get("init", "scratch") == "scratch":
        vocab = TokenizerSettings.from_spec(spec).vocab_size if spec.get("tokenizer.from") == "wordpiece" else 30522
        return {"num_hidden_layers": model["layers"], "hidden_size": model["hidden"],
                "num_attention_heads": model["heads"], "intermediate_size": model["intermediate"], "vocab_size": vocab}
    return json.loads((Path(resolve_checkpoint(model["init"], "init checkpoint")) / "config.json").read_text())


def profile_shapes(spec: MethodSpec) -> Shapes:
    """The encoder of the spec at its first training stage's batch: pre-training's per-device batch of
    ``max_length`` tokens, else retriever 1's passages per step of ``max_p_len`` tokens."""
    arch = _architecture(spec)
    if pretrains(spec):
        pre = PretrainSettings.from_spec(spec)
        return Shapes.from_config(arch, batch=pre.per_device_batch, seq_len=pre.max_length)
    stage = StageSettings.from_spec(spec, (finetune_stages(spec) or ["retriever1"])[0])
    return Shapes.from_config(arch, batch=stage.global_queries * stage.passages_per_query, seq_len=stage.max_p_len)


def resolve_precision(spec: MethodSpec, flag: str | None = None, say: Callable[[str], None] = print,
                      save: bool = True) -> MethodSpec:
    """``spec`` with what its ``auto`` precision resolves to here (and how), said in one line; a spec
    without ``auto`` is returned as it is (the flag then changes nothing, and says so). ``save=False``
    (a dry-run): a measurement is not cached."""
    if flag is not None and flag not in FLAG_CHOICES:
        raise HarnessError(f"--precision {flag}: choose one of {', '.join(FLAG_CHOICES)}")
    if not declares_auto(spec):
        if flag is not None:
            say(f"precision: --precision {flag} ignored: {spec.name} [{spec.profile}] states its precision")
        return spec
    if flag is not None:
        say(f"precision auto: {flag} (--precision {flag}; nothing measured)")
        return dataclasses.replace(spec, precision=flag, precision_source="flag")
    if (spec.get("hardware") or {}).get("device_type", "cpu") != "cpu":
        say("precision auto: fp32 (a GPU profile runs auto in fp32; its paper's precision is stated where it has one)")
        return dataclasses.replace(spec, precision="fp32", precision_source="spec")
    shapes = profile_shapes(spec)
    choice = choose(shapes, cache_dir() / "precision", save=save)
    say(choice.line(shapes))
    return dataclasses.replace(spec, precision=choice.precision, precision_source="measured")
