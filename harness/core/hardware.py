"""Detect the hardware present and map a spec's declared hardware onto it."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Hardware:
    device_type: str  # "cuda" or "cpu"
    devices: int
    names: tuple[str, ...]
    cpus: int

    def describe(self) -> str:
        if self.device_type == "cuda":
            return f"{self.devices} x {self.names[0] if self.names else 'GPU'}"
        return f"CPU ({self.cpus} cores)"


def detect() -> Hardware:
    cpus = os.cpu_count() or 1
    try:
        import torch

        if torch.cuda.is_available():
            n = torch.cuda.device_count()
            return Hardware("cuda", n, tuple(torch.cuda.get_device_name(i) for i in range(n)), cpus)
    except ImportError:
        pass
    return Hardware("cpu", 1, (), cpus)


def default_processes(hw: Hardware, declared: dict[str, Any] | None) -> int:
    """Processes ``run`` starts on this node when not told: every GPU present up to the declared
    count (all of them when none is declared); one on a CPU machine or for a CPU profile."""
    if hw.device_type != "cuda" or (declared or {}).get("device_type") == "cpu":
        return 1
    wanted = int((declared or {}).get("devices") or hw.devices)
    return max(1, min(hw.devices, wanted))


PLANNED_WORLD = "HARNESS_PLANNED_WORLD_SIZE"  # set by `run --dry-run --nproc-per-node N --nnodes M`


def world_size(hw: Hardware, declared: dict[str, Any] | None = None) -> int:
    """Processes the run trains on together: the launcher's ``WORLD_SIZE`` inside a launched run; in a
    plan, what ``run`` would start (its flags, else :func:`default_processes`). A global batch is
    shared over these, never over the GPUs merely present."""
    for name in ("WORLD_SIZE", PLANNED_WORLD):
        raw = os.environ.get(name, "")
        if raw.isdigit() and int(raw) >= 1:
            return int(raw)
    return default_processes(hw, declared)

