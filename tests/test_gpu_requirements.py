"""The GPU set (requirements-cuda.txt, `bash setup.sh --cuda`): the CPU set with the CUDA build of the same torch,
and a set that pip's resolver resolves against PyPI without a GPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PYPI = "https://pypi.org/simple"
GPU_ONLY = ("cuda-toolkit", "nvidia-", "triton")


def pins(path: Path) -> list[str]:
    return [line.strip() for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")]


def test_the_gpu_set_is_the_cpu_set_plus_torch_s_cuda_runtime():
    cpu, gpu = pins(ROOT / "requirements.txt"), pins(ROOT / "requirements-cuda.txt")
    assert "torch==2.13.0" in cpu and "torch==2.13.0" in gpu
    assert [p for p in gpu if not p.startswith(GPU_ONLY)] == cpu
    assert any(p.startswith("cuda-toolkit[") and p.endswith("==13.0.3") for p in gpu)


def test_setup_says_which_set_it_installs_and_keeps_the_cpu_set_by_default():
    text = (ROOT / "setup.sh").read_text()
    assert "reqs=requirements.txt" in text and "--cuda" in text and "nvidia-smi -L" in text
    assert 'echo "setup: Python set: CPU ($reqs)' in text and 'echo "setup: Python set: GPU ($reqs' in text


def pypi_reachable() -> bool:
    try:
        with urllib.request.urlopen(f"{PYPI}/pip/", timeout=10):
            return True
    except OSError:
        return False


@pytest.mark.slow
def test_the_gpu_set_resolves_with_pip_against_pypi(tmp_path):
    """pip's resolver (the newest pip, in a throwaway venv: it reads PyPI's metadata files instead of downloading
    the wheels) over the CUDA torch and its runtime pins, as on a Linux x86_64 CPython 3.11 GPU node; nothing is
    installed. The rest of the GPU set is the CPU set, which every set-up resolves. Measured at about 3 minutes
    (28 s for the throwaway pip, 2 min 32 s for the resolution) on this machine's network."""
    if not pypi_reachable():
        pytest.skip(f"{PYPI} is not reachable from here: the GPU set's resolution cannot be checked")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}  # this machine's wheel folders out
    venv = tmp_path / "pip"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = str(venv / "bin" / "python")
    pip = [sys.executable, "-m", "pip", "--isolated", "--python", py, "install", "-q", "--index-url", PYPI, "pip"]
    subprocess.run(pip, env=env, check=True, timeout=600)
    gpu = [p for p in pins(ROOT / "requirements-cuda.txt") if p.startswith((*GPU_ONLY, "torch=="))]
    (tmp_path / "gpu.txt").write_text("\n".join(gpu) + "\n")
    report = tmp_path / "report.json"
    cmd = [py, "-m", "pip", "install", "--isolated", "--no-cache-dir", "--dry-run", "--ignore-installed", "--quiet"]
    cmd += ["--index-url", PYPI, "--report", str(report), "-r", str(tmp_path / "gpu.txt")]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    installed = {i["metadata"]["name"].lower(): i for i in json.loads(report.read_text())["install"]}
    torch = installed["torch"]
    assert torch["metadata"]["version"] == "2.13.0"  # PyPI's build, not a +cpu one
    assert any("cuda-toolkit" in req for req in torch["metadata"].get("requires_dist", []))
    assert "nvidia-cudnn-cu13" in installed
