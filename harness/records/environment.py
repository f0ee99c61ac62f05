"""Where a run ran, as its record keeps it: the git commit (and whether the tree was dirty), the versions
of the packages that decide its numbers, and the hardware (CPU model and features, memory, CUDA devices,
torch's threads and kernels)."""

from __future__ import annotations

import contextlib
import importlib.metadata as md
import os
import platform
import subprocess
import sys
from typing import Any

from harness import __version__
from harness.core.hardware import cpu_identity, total_memory_gib
from harness.core.paths import PROJECT_ROOT

# The packages whose versions decide a run's numbers (a record keeps each one installed).
KEY_PACKAGES = (
    "torch",
    "transformers",
    "sentence-transformers",
    "faiss-cpu",
    "pyserini",
    "ir-measures",
    "pytrec-eval-terrier",
    "mlflow",
    "nltk",
    "tokenizers",
    "numpy",
)


def git_commit() -> dict[str, Any]:
    """The checkout's commit and whether tracked files differ from it (None each where git cannot say)."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=10
        ).stdout.strip()

    try:
        return {
            "commit": git("rev-parse", "HEAD") or None,
            "dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
        }
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}


def package_versions() -> dict[str, str]:
    """The harness's, Python's and every installed one of :data:`KEY_PACKAGES`'s version."""
    versions = {"harness": __version__, "python": platform.python_version()}
    for name in KEY_PACKAGES:
        with contextlib.suppress(md.PackageNotFoundError):
            versions[name] = md.version(name)
    return versions


def hardware() -> dict[str, Any]:
    """The machine: platform, CPUs, memory, CPU model and features; CUDA devices and torch's threads and
    kernels only when the run imported torch."""
    info: dict[str, Any] = {"platform": platform.platform(), "machine": platform.machine(), "cpus": os.cpu_count()}
    if (memory := total_memory_gib()) is not None:
        info["memory_gib"] = round(memory, 1)
    info.update(cpu_identity())
    if "torch" in sys.modules:
        torch = sys.modules["torch"]
        info["cuda_devices"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        # Which kernels ran: the float summation order, hence the last bits, follow them.
        info["torch_threads"] = torch.get_num_threads()
        with contextlib.suppress(AttributeError, RuntimeError):
            info["torch_cpu_capability"] = torch.backends.cpu.get_cpu_capability()
    return info
