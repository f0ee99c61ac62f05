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


def world_size(hw: Hardware) -> int:
    """Devices a run trains on here (1 on CPU): the per-device share of a global batch divides by it."""
    return hw.devices if hw.device_type == "cuda" else 1


def declared_present(declared: dict[str, Any] | None, hw: Hardware) -> bool:
    """True when the machine has at least the declared accelerators (or none are declared)."""
    if not declared or declared.get("device_type", "cpu") == "cpu":
        return True
    return hw.device_type == "cuda" and hw.devices >= int(declared.get("devices", 1))
