"""Mixed precision: bf16 or fp16 (with loss scaling) on CUDA, bf16 on a CPU whose torch computes bf16; else fp32.

A CPU runs bf16 autocast when torch's oneDNN has bf16 kernels for it (:func:`cpu_bf16`):
matmuls in bf16, reductions, softmax and layer norms in fp32, as on a GPU. fp16 stays CUDA-only
(no loss scaler and no fast kernels on CPU). Whether bf16 is *faster* depends on the CPU and on the
shapes (2.55x fp32 on one AMD CPU's matmuls, 0.6x on one Intel CPU's): no rule here says which; a
profile's ``precision: auto`` measures it (:mod:`harness.training.autoprecision`). The precision
used is what a record states, and a condition of the gate.
"""

from __future__ import annotations

import contextlib
from typing import Callable

import torch


def cpu_bf16() -> bool:
    """Whether torch computes bf16 on this CPU with its own kernels (oneDNN's check; says nothing of speed)."""
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def resolve_precision(requested: str, device: torch.device, say: Callable[[str], None],
                      can_scale_loss: bool = True) -> str:
    """The precision a run can use here; every fallback is said in one line.

    ``can_scale_loss=False``: the step runs its own backward passes without the engine's loss
    scaler (a gradient-caching objective without a ``scaler`` argument), so fp16 is not safe.
    """
    if requested == "fp32":
        return "fp32"
    if device.type != "cuda":
        return _cpu_precision(requested, say)
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
    """Mixed precision for ``precision`` as :func:`resolve_precision` returned it; a no-op for fp32."""
    if precision == "fp32":
        return contextlib.nullcontext()
    dtype = torch.bfloat16 if precision == "bf16" else torch.float16
    return torch.autocast(device_type=device.type, dtype=dtype)


def for_inference(model: torch.nn.Module, precision: str, device: torch.device,
                  say: Callable[[str], None]) -> tuple[torch.nn.Module, str]:
    """(model, precision used) for encoding: on CUDA the weights are cast to fp16/bf16; a CPU keeps
    fp32 weights and runs bf16 autocast where torch computes bf16 (:func:`encode_autocast`), else fp32."""
    if precision == "fp32":
        return model, "fp32"
    if device.type != "cuda":
        return model, resolve_precision(precision, device, say)
    return model.to(torch.float16 if precision == "fp16" else torch.bfloat16), precision


def encode_autocast(precision: str, device: torch.device) -> contextlib.AbstractContextManager:
    """The autocast of an encoding forward pass: bf16 on a CPU; none on CUDA, whose weights are cast."""
    return autocast(precision if device.type == "cpu" else "fp32", device)


def grad_scaler(precision: str) -> torch.amp.GradScaler | None:
    return torch.amp.GradScaler("cuda") if precision == "fp16" else None
