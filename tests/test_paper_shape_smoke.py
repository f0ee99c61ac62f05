"""The paper-shape path (bert-base: 12 x 768, 144 tokens, every paper-profile objective, DDP)
runs on CPU at a reduced batch, so it is exercised without a GPU (bench/paper_shape_smoke.py
runs the same code on CUDA in bf16 and fp16 with timings)."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import pytest

from harness.spec.method import load_method, pretraining_methods

BENCH = Path(__file__).resolve().parents[1] / "bench" / "paper_shape_smoke.py"


@pytest.fixture(scope="module")
def smoke():
    spec = importlib.util.spec_from_file_location("paper_shape_smoke", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks itself up there
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_every_paper_objective_steps_at_bert_base_shape_on_cpu(smoke):
    rows = smoke.run_smoke("cpu", batch=2, steps=1)
    objectives = {load_method(m, "paper").get("pretrain.objective") for m in pretraining_methods("paper")}
    assert {r.objective for r in rows} == objectives and len(objectives) == len(smoke.SPECS)
    for r in rows:
        assert math.isfinite(r.loss) and r.tflop_per_step > 0.05, r  # bert-base at 2 x 144 tokens: > 0.05 TFLOP
        assert r.max_length == 144


@pytest.mark.slow
@pytest.mark.alone  # two ranks
def test_one_ddp_step_through_the_harness_wrapper_on_cpu(smoke):
    assert math.isfinite(smoke.ddp_step("cpu", batch=2))


def test_the_smoke_runs_one_spec_per_paper_objective(smoke):
    """SPECS derives from the specs: a new pre-training method's objective joins the smoke without an edit here."""
    objective = {m: load_method(m, "paper").get("pretrain.objective") for m in pretraining_methods("paper")}
    assert sorted(objective[m] for m in smoke.SPECS) == sorted(set(objective.values()))
