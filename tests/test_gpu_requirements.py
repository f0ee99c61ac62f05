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
CU126 = "requirements-cuda126.txt"


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
    assert ". ./cuda-set.sh" in text and "if ! cuda_set; then" in text  # the GPU set: chosen by cuda-set.sh


def test_the_cuda126_set_is_the_cpu_set_with_pytorch_s_cu126_torch():
    """The V100's set: every package but torch pinned as in requirements.txt (and so as in the CUDA 13 set),
    torch 2.13.0+cu126 from PyTorch's own index (PyPI has no cu126 build)."""
    cpu, cu13, cu126 = (pins(ROOT / name) for name in ("requirements.txt", "requirements-cuda.txt", CU126))
    assert "--extra-index-url https://download.pytorch.org/whl/cu126" in cu126
    assert "torch==2.13.0+cu126" in cu126 or any(p.startswith("torch==2.13.0+cu126 --hash=sha256:") for p in cu126)
    rest = [p for p in cu126 if not p.startswith(("torch==", "--extra-index-url"))]
    assert rest == [p for p in cpu if not p.startswith("torch==")]
    assert rest == [p for p in cu13 if not p.startswith((*GPU_ONLY, "torch=="))]
    text = (ROOT / CU126).read_text()
    assert "--hash=sha256:" in text or "HASH NOT FILLED IN" in text  # never a made-up hash, and never silently


def fake_nvidia_smi(tmp_path: Path, cap: str, driver: str) -> dict[str, str]:
    """A PATH whose nvidia-smi answers the two queries cuda-set.sh makes, as a card of `cap` would."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    smi = bin_dir / "nvidia-smi"
    smi.write_text(
        f'#!/bin/sh\ncase "$*" in *compute_cap*) echo {cap};; *driver_version*) echo {driver};; *) exit 9;; esac\n'
    )
    smi.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}


@pytest.mark.parametrize(
    ("cap", "driver", "chosen"),
    [
        ("7.0", "580.65.06", CU126),  # the papers' V100: no kernels in CUDA 13.0
        ("8.0", "580.65.06", "requirements-cuda.txt"),
        ("9.0", "580.65.06", "requirements-cuda.txt"),
        ("9.0", "550.54.15", CU126),  # Hopper on a driver older than CUDA 13.0's minimum
    ],
)
def test_setup_s_cuda_set_follows_the_card_and_driver(tmp_path, cap, driver, chosen):
    done = subprocess.run(
        ["bash", str(ROOT / "cuda-set.sh")], env=fake_nvidia_smi(tmp_path, cap, driver), capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{chosen} -- compute capability {cap}, driver {driver}")


@pytest.mark.parametrize(("cap", "driver"), [("3.7", "580.65.06"), ("10.0", "550.54.15"), ("8.0", "470.1")])
def test_no_cuda_set_fits_says_why_in_one_line(tmp_path, cap, driver):
    done = subprocess.run(
        ["bash", str(ROOT / "cuda-set.sh")], env=fake_nvidia_smi(tmp_path, cap, driver), capture_output=True, text=True
    )
    assert done.returncode == 1 and done.stdout == ""
    assert len(done.stderr.splitlines()) == 1 and done.stderr.startswith("no CUDA set fits -- ")


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
