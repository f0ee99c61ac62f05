"""Test isolation: every test writes runs, caches and MLflow data into its own tmp folders."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(autouse=True)
def isolated_dirs(tmp_path, monkeypatch):
    """Never touch the repository's runs/ or cache/ from a test."""
    monkeypatch.setenv("HARNESS_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    return tmp_path


@pytest.fixture(autouse=True)
def fp32_measures_faster(monkeypatch):
    """``precision: auto`` measures fp32 faster: a test run resolves as the fp32 references were recorded,
    whatever this busy machine's timing says (tests/test_precision_auto.py patches the measurement itself)."""
    from harness.training import autoprecision

    slow_bf16 = autoprecision.Measurement(
        matmul_fp32=1.0, matmul_bf16=2.0, forward_fp32=1.0, forward_bf16=2.0, step_fp32=1.0, step_bf16=2.0
    )
    monkeypatch.setattr(autoprecision, "measure", lambda shapes: slow_bf16)
    return slow_bf16


@pytest.fixture
def one_thread():
    """One intra-op thread: tiny tensors on a busy 2-core machine are faster and steadier, and runs
    compared bit for bit must use the same thread count (sums can regroup)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def sharp_evidence(monkeypatch):
    """sigma_rep evidence as ten paper-scale seeds would give it (SD 0.15 on 9 df) for MS MARCO dev's
    measures. On file there is no same-recipe evidence (harness/evaluation/margins.py: recipe-changing
    re-runs are drift, not seed noise), so this adds to it rather than hiding any; one set of runs."""
    from harness.evaluation import margins

    extra = tuple(
        margins.Evidence("msmarco-dev", m, 0.15**2, 9, "test: ten paper-scale seeds", "test: ten seeds")
        for m in ("RR@10", "R@50", "R@1000")
    )
    on_file = margins.all_evidence()
    monkeypatch.setattr(margins, "all_evidence", lambda: on_file + extra)


MSMARCO_MIRROR = Path(__file__).parent / "fixtures" / "msmarco_mirror"


@pytest.fixture
def mirror(tmp_path, monkeypatch) -> Iterator[Path]:
    """A private copy of the fixture MS MARCO mirror (tests/fixtures/msmarco_mirror), set as HARNESS_DATA_MIRROR."""
    from harness.data import download
    from harness.data.catalog import get_benchmark
    from harness.data.setting import PASSAGES_ENV

    copy = tmp_path / "mirror"
    shutil.copytree(MSMARCO_MIRROR, copy)
    monkeypatch.setenv(download.MIRROR_ENV, str(copy))
    monkeypatch.delenv(PASSAGES_ENV, raising=False)
    get_benchmark.cache_clear()
    yield copy
    get_benchmark.cache_clear()
