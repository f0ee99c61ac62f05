"""Before the first stage: the card the run will compute on, checked as preflight checks the data.

A paper profile that declares CUDA refuses on a machine where torch sees no usable GPU (it would
otherwise start its days of stages on the CPU) unless the user asks for the CPU (``run --allow-cpu``).
A card torch's build has no kernels for (a V100, sm_70, under PyPI's CUDA 13 torch) fails at its
first kernel, hours in, after the CPU stages: it refuses now, naming the requirement set that
supports it (:func:`requirement_set`, the choice ``setup.sh --cuda`` makes with cuda-set.sh).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.core.errors import HarnessError

CUDA13_SET = "requirements-cuda.txt"  # PyPI's torch 2.13.0: CUDA 13.0, Turing (sm_75) or newer
CUDA126_SET = "requirements-cuda126.txt"  # download.pytorch.org's torch 2.13.0+cu126: sm_50 .. sm_90
ALLOW_CPU_FLAG = "--allow-cpu"


@dataclass(frozen=True)
class Card:
    """What torch reports of one GPU and of its own build."""

    name: str
    capability: tuple[int, int]
    arch_list: tuple[str, ...]  # torch.cuda.get_arch_list(): "sm_75", ..., "compute_120" (PTX)
    torch_version: str
    torch_cuda: str | None


def requirement_set(capability: tuple[int, int]) -> str | None:
    """The project's requirement set whose torch has kernels for a card of this compute capability
    (None: neither; CUDA 12.6 begins at Maxwell, sm_50)."""
    if capability >= (7, 5):
        return CUDA13_SET
    if capability >= (5, 0):
        return CUDA126_SET
    return None


def supported(capability: tuple[int, int], arch_list: tuple[str, ...]) -> bool:
    """Whether the build runs on the card: a cubin of the same major at or below its minor (sm_86 runs
    sm_80 code), or PTX (``compute_XY``) at or below its capability, which the driver compiles."""
    for arch in arch_list:
        kind, _, digits = arch.partition("_")
        if not digits.isdigit() or len(digits) < 2:
            continue
        built = (int(digits[:-1]), int(digits[-1]))
        if kind == "sm" and built[0] == capability[0] and built[1] <= capability[1]:
            return True
        if kind == "compute" and built <= capability:
            return True
    return False


def cards() -> list[Card]:
    """Every GPU torch sees (empty: no CUDA build, no driver, or no card)."""
    try:
        import torch
    except ImportError:
        return []
    if not torch.cuda.is_available():
        return []
    arch = tuple(torch.cuda.get_arch_list())
    found = []
    for i in range(torch.cuda.device_count()):
        major, minor = torch.cuda.get_device_capability(i)
        found.append(Card(torch.cuda.get_device_name(i), (major, minor), arch, torch.__version__, torch.version.cuda))
    return found


def problem(spec: Any, allow_cpu: bool, found: list[Card]) -> str | None:
    """The one line a run of `spec` refuses to start with on these cards (None: it may start)."""
    declared = spec.get("hardware") or {}
    if declared.get("device_type", "cpu") != "cuda":
        return None
    want = f"{declared.get('devices')} x {declared.get('gpu') or 'GPU'}"
    if not found:
        if spec.profile != "paper" or allow_cpu:
            return None
        return (
            f"{spec.name} [paper]: declares {want} (CUDA) but torch sees no usable GPU on this machine; "
            f"run it on the GPU node (set up with `bash setup.sh --cuda`), or pass {ALLOW_CPU_FLAG} to run it "
            "on this CPU (weeks at paper scale)"
        )
    for card in found:
        if supported(card.capability, card.arch_list):
            continue
        sm = f"sm_{card.capability[0]}{card.capability[1]}"
        fits = requirement_set(card.capability)
        fix = f"install {fits} (`bash setup.sh --cuda` picks it for this card)" if fits else "no set supports it"
        return (
            f"{spec.name} [{spec.profile}]: {card.name} ({sm}) has no kernels in this torch {card.torch_version} "
            f"(CUDA {card.torch_cuda}; built for {' '.join(card.arch_list) or 'no GPU'}); {fix}"
        )
    return None


def require(spec: Any, allow_cpu: bool, found: list[Card] | None = None) -> None:
    """Raise the one-line refusal (exit 2) when the run cannot compute where its profile says."""
    line = problem(spec, allow_cpu, cards() if found is None else found)
    if line:
        raise HarnessError(line)
