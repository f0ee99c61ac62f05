"""Mixed precision: bf16 or fp16 (with loss scaling) on CUDA, bf16 on a CPU with native bf16; else fp32.

A CPU runs bf16 autocast when it has bf16 instructions (AVX512-BF16, or AMX tiles; :func:`cpu_bf16`
reads them at run time): matmuls in bf16, reductions, softmax and layer norms in fp32, as on a GPU.
fp16 stays CUDA-only (no loss scaler and no fast kernels on CPU). Whether bf16 is *faster* depends
on the CPU: with AMX the matmuls run on tiles; with AVX512-BF16 alone they were measured slower
than fp32 (``bench/bench_precision.py``), which is said in one line, and why the profiles that run on
such CPUs declare fp32. The precision used is what a record states, and a condition of the gate.
"""

from __future__ import annotations

import contextlib
import functools
from pathlib import Path
from typing import Callable

import torch


@functools.lru_cache(maxsize=1)
def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags (Linux /proc/cpuinfo; empty elsewhere)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def cpu_bf16() -> str | None:
    """"amx" or "avx512_bf16" when this CPU computes bf16 natively (and torch can use it), else None."""
    flags = cpu_flags()
    native = "amx" if "amx_bf16" in flags else "avx512_bf16" if "avx512_bf16" in flags else None
    if native is None:
        return None
    try:
        return native if torch.ops.mkldnn._is_mkldnn_bf16_supported() else None
    except (AttributeError, RuntimeError):
        return None


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
    native = cpu_bf16()
    if native is None:
        say("precision bf16 needs a CPU with AVX512-BF16 or AMX; fp32 on this CPU")
        return "fp32"
    if native != "amx":
        say("bf16 on this CPU (AVX512-BF16 without AMX) was measured slower than fp32 (bench/bench_precision.py)")
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
    fp32 weights and runs bf16 autocast where it has native bf16 (:func:`encode_autocast`), else fp32."""
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
