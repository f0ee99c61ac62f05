"""What a run and each of its stages train and encode in: the one place precision is decided.

The run: a spec's ``precision: auto`` resolves once per run (:func:`resolve_precision`) to the
``--precision`` flag, else fp32 on a GPU profile, else bf16 or fp32 as this CPU measures them at the
profile's shapes (:func:`measured_precision`; the timing and its cache are
:mod:`harness.training.autoprecision`'s, the spec's facts -- whether it says ``auto``, its shapes --
:mod:`harness.spec.stage_settings`'s). The resolved precision goes
on the spec (``MethodSpec.precision``, with ``precision_source`` saying how), from which each training
stage's settings, cache key and trainer read it (:func:`stage_precision`) and each encoding stage its
precision (:func:`encode_precision`); the spec's config keeps ``auto``, so its hash is the same whatever
this machine chose, and the gate compares the precision each stage used instead
(harness.gate.grading.precision_difference).

The device: a stage's precision becomes what this device computes (:func:`device_precision`): bf16 or
fp16 (with loss scaling) on CUDA, bf16 autocast on a CPU whose torch computes bf16 (:func:`cpu_bf16`:
matmuls in bf16, reductions, softmax and layer norms in fp32, as on a GPU); else fp32. fp16 stays
CUDA-only (no loss scaler and no fast kernels on CPU). Whether bf16 is *faster* depends on the CPU and on
the shapes (2.55x fp32 on one AMD CPU's matmuls, 0.6x on one Intel CPU's): no rule here says which; that
is what ``auto`` measures. The precision used is what a record states, and a condition of the gate.

torch is imported where a function needs it, so the spec layer reads this module without loading torch.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from harness.core.errors import HarnessError
from harness.core.paths import cache_dir
from harness.core.text_table import reflow
from harness.training.autoprecision import Choice, Shapes, choose

if TYPE_CHECKING:
    import torch

# `auto`: on a CPU profile, bf16 autocast where it measures faster than fp32 here, else fp32; a GPU
# profile's `auto` is fp32 (`run --precision` overrides either). A stage's cache key holds the precision
# `auto` resolved to (MethodSpec.precision), never `auto`.
AUTO = "auto"
PRECISION_MEANING = (
    "training precision: auto (CPU: bf16 where measured faster here, else fp32; GPU: fp32), "
    "fp32, fp16 (CUDA) or bf16 (CUDA, or a CPU whose torch computes bf16)"
)
FLAG_CHOICES = ("fp32", "bf16")  # what `run --precision` may set `auto` to


def _say(line: str) -> None:
    print(reflow(line))  # the run's output width (a measurement's line is longer than a screen)


def resolve_precision(spec: Any, flag: str | None = None, say: Callable[[str], None] = _say, save: bool = True) -> Any:
    """``spec`` (a MethodSpec) with what its ``auto`` precision resolves to here (and how), said in one
    line; a spec without ``auto`` is returned as it is (the flag then changes nothing, and says so).
    ``save=False`` (a dry-run): a measurement is not cached."""
    if flag is not None and flag not in FLAG_CHOICES:
        raise HarnessError(f"--precision {flag}: choose one of {', '.join(FLAG_CHOICES)}")
    if not spec.declares_auto_precision():
        if flag is not None:
            say(f"precision: --precision {flag} ignored: {spec.name} [{spec.profile}] states its precision")
        return spec
    if flag is not None:
        say(f"precision auto: {flag} (--precision {flag}; nothing measured)")
        return dataclasses.replace(spec, precision=flag, precision_source="flag")
    if (spec.get("hardware") or {}).get("device_type", "cpu") != "cpu":
        say("precision auto: fp32 (a GPU profile runs auto in fp32; its paper's precision is stated where it has one)")
        return dataclasses.replace(spec, precision="fp32", precision_source="spec")
    return dataclasses.replace(
        spec, precision=measured_precision(spec.precision_shapes(), say, save), precision_source="measured"
    )


def measured_precision(shapes: Shapes, say: Callable[[str], None] = _say, save: bool = True) -> str:
    """bf16 or fp32 at ``shapes`` on this CPU, said in one line: fp32 without measuring where torch computes
    no bf16 here, else what the (cached) measurement says (:func:`harness.training.autoprecision.choose`)."""
    choice = choose(shapes, cache_dir() / "precision", save=save) if cpu_bf16() else Choice("fp32", None, False, None)
    say(choice.line(shapes))
    return choice.precision


def stage_precision(settings: Any, spec: Any) -> Any:
    """A training stage's ``settings`` with ``precision: auto`` replaced by what this run resolved it to
    (the spec's ``precision``), so keys and trainers see a concrete precision; unchanged where nothing
    was resolved."""
    chosen = getattr(spec, "precision", None)
    return dataclasses.replace(settings, precision=chosen) if settings.precision == AUTO and chosen else settings


def encode_precision(spec: Any) -> str:
    """The precision a run encodes in: what its ``precision: auto`` resolved to (bf16 where this CPU
    measured bf16 faster, or ``--precision``), so one run computes in one precision; fp32 otherwise
    (a stated precision is the training's). On CUDA an fp32 run encodes under fp16 autocast
    (:func:`cuda_encode_precision`), as the official CoT-MAE scripts do (``--fp16``, per-device batch 2048)."""
    return (
        spec.precision if getattr(spec, "precision_source", None) in ("measured", "flag") and spec.precision else "fp32"
    )


def cpu_bf16() -> bool:
    """Whether torch computes bf16 on this CPU with its own kernels (oneDNN's check; says nothing of speed)."""
    import torch

    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def device_precision(
    requested: str, device: torch.device, say: Callable[[str], None], can_scale_loss: bool = True
) -> str:
    """The precision a stage can use on ``device``; every fallback is said in one line.

    ``can_scale_loss=False``: the step runs its own backward passes without the engine's loss
    scaler (a gradient-caching objective without a ``scaler`` argument), so fp16 is not safe.
    """
    if requested == "fp32":
        return "fp32"
    if device.type != "cuda":
        return _cpu_precision(requested, say)
    import torch

    if requested == "bf16" and not torch.cuda.is_bf16_supported():
        say("this GPU does not support bf16; training in fp32")
        return "fp32"
    if requested == "fp16" and not can_scale_loss:
        fallback = "bf16" if torch.cuda.is_bf16_supported() else "fp32"
        say(f"fp16 needs loss scaling inside this objective's own backward, which it lacks; using {fallback}")
        return fallback
    return requested


def _cpu_precision(requested: str, say: Callable[[str], None]) -> str:
    if requested == "fp16":
        say("precision fp16 needs CUDA; training in fp32 on cpu")
        return "fp32"
    if not cpu_bf16():
        say("precision bf16 needs a CPU whose torch computes bf16 (oneDNN: AVX512-BF16 or AMX); fp32 on this CPU")
        return "fp32"
    return "bf16"


def autocast(precision: str, device: torch.device) -> contextlib.AbstractContextManager:
    """Mixed precision for ``precision`` as :func:`device_precision` returned it; a no-op for fp32."""
    if precision == "fp32":
        return contextlib.nullcontext()
    import torch

    dtype = torch.bfloat16 if precision == "bf16" else torch.float16
    return torch.autocast(device_type=device.type, dtype=dtype)


def for_inference(
    model: torch.nn.Module, precision: str, device: torch.device, say: Callable[[str], None]
) -> tuple[torch.nn.Module, str]:
    """(model, precision used) for encoding: the weights stay fp32 and the forward runs under autocast
    (:func:`encode_autocast`): fp16/bf16 on CUDA, as the official CoT-MAE/Tevatron encoding's ``--fp16``
    (torch.cuda.amp over fp32 weights); bf16 on a CPU where torch computes bf16, else fp32."""
    if precision == "fp32":
        return model, "fp32"
    if device.type != "cuda":
        return model, device_precision(precision, device, say)
    return model, precision


def encode_autocast(precision: str, device: torch.device) -> contextlib.AbstractContextManager:
    """The autocast of an encoding forward pass (a no-op for fp32)."""
    return autocast(precision, device)


def cuda_encode_precision(requested: str, device: torch.device) -> str:
    """What an encoding stage computes in: fp16 autocast on CUDA where the run asks fp32 (what the
    official CoT-MAE scripts encode with: ``--fp16`` at per-device batch 2048), else ``requested``; a CPU
    is unchanged. Not part of a stage's key (the record states it): the vectors differ from fp32 ones
    within fp16 rounding."""
    return "fp16" if device.type == "cuda" and requested == "fp32" else requested


def grad_scaler(precision: str, device_type: str = "cuda") -> torch.amp.GradScaler | None:
    """The loss scaler of an fp16 stage (fp16 gradients underflow without it, as the official scripts'
    ``--fp16`` scales them); None for bf16 and fp32. ``device_type``: CUDA in a run (fp16 is CUDA-only,
    :func:`device_precision`); a test drives the same scaler logic on a CPU."""
    if precision != "fp16":
        return None
    import torch

    return torch.amp.GradScaler(device_type)


def enable_tf32(device: torch.device) -> bool:
    """Let fp32 matmuls and convolutions use TF32 tensor cores on CUDA (Ampere or newer; PyTorch leaves
    matmuls in full fp32 by default), so what runs in fp32 on a GPU (the loss, an fp32 stage) is not
    several times slower than the card allows; a CPU is left as it is. True where it was set."""
    if device.type != "cuda":
        return False
    import torch

    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    return True
