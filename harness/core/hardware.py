"""Detect the hardware present and map a spec's declared hardware onto it."""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path
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


def planned_world_size(hw: Hardware, declared: dict[str, Any] | None = None) -> int:
    """Processes the run trains on together: the launcher's ``WORLD_SIZE`` inside a launched run; in a
    plan, what ``run`` would start (its flags, else :func:`default_processes`). A global batch is
    shared over these, never over the GPUs merely present."""
    for name in ("WORLD_SIZE", PLANNED_WORLD):
        raw = os.environ.get(name, "")
        if raw.isdigit() and int(raw) >= 1:
            return int(raw)
    return default_processes(hw, declared)


def total_memory_gib(meminfo: Path = Path("/proc/meminfo")) -> float | None:
    """The machine's physical memory in GiB (/proc/meminfo; elsewhere sysconf where it answers; else None):
    what a dry-run sets each stage's projected peak memory against."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / 2**20
    with contextlib.suppress(AttributeError, ValueError, OSError):
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return None


# CPU features that change which matmul kernels run (oneDNN / MKL dispatch on them).
CPU_FEATURES = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile")


def cpu_identity(cpuinfo: Path = Path("/proc/cpuinfo")) -> dict[str, Any]:
    """The CPU model and the instruction-set features the math libraries dispatch on (Linux)."""
    with contextlib.suppress(OSError):
        text = cpuinfo.read_text(encoding="utf-8", errors="replace")
        fields = dict(line.split(":", 1) for line in text.split("\n\n", 1)[0].splitlines() if ":" in line)
        fields = {k.strip(): v.strip() for k, v in fields.items()}
        flags = set(fields.get("flags", "").split())
        # Cloud CPUs often report a generic name ("Intel(R) Xeon(R) Processor"): keep family/model/stepping.
        numbers = "/".join(fields.get(k, "?") for k in ("cpu family", "model", "stepping"))
        return {
            "cpu_model": f"{fields.get('model name', '')} ({numbers})",
            "cpu_features": [f for f in CPU_FEATURES if f in flags],
        }
    return {}
