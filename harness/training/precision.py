"""Mixed precision: bf16 or fp16 (with loss scaling) on CUDA only; everything else trains in fp32."""

from __future__ import annotations

import contextlib
from typing import Callable

import torch


def resolve_precision(requested: str, device: torch.device, say: Callable[[str], None],
                      can_scale_loss: bool = True) -> str:
    """The precision a run can use here; every fallback is said in one line.

    ``can_scale_loss=False``: the step runs its own backward passes without the engine's loss
    scaler (a gradient-caching objective without a ``scaler`` argument), so fp16 is not safe.
    """
    if requested == "fp32":
        return "fp32"
    if device.type != "cuda":
        say(f"precision {requested} needs CUDA; training in fp32 on {device.type}")
        return "fp32"
    if requested == "bf16" and not torch.cuda.is_bf16_supported():
        say("this GPU does not support bf16; training in fp32")
        return "fp32"
    if requested == "fp16" and not can_scale_loss:
        fallback = "bf16" if torch.cuda.is_bf16_supported() else "fp32"
        say(f"fp16 needs loss scaling inside this objective's own backward, which it lacks; using {fallback}")
        return fallback
    return requested


def autocast(precision: str, device: torch.device) -> contextlib.AbstractContextManager:
    """Mixed precision on CUDA only; a no-op for fp32 or on CPU."""
    if precision == "fp32" or device.type != "cuda":
        return contextlib.nullcontext()
    dtype = torch.bfloat16 if precision == "bf16" else torch.float16
    return torch.autocast(device_type="cuda", dtype=dtype)


def grad_scaler(precision: str) -> torch.amp.GradScaler | None:
    return torch.amp.GradScaler("cuda") if precision == "fp16" else None
