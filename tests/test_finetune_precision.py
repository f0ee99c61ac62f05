"""Fine-tuning at the official precision (issue 59 item 2): the paper profiles state fp16 fine-tuning
(keyed as pre-training's precision is), the CPU profiles keep fp32, the fp16 loss scaler behaves as the
engine uses it, and TF32 is switched on for CUDA only."""

from __future__ import annotations

import pytest
import torch

from harness.core.hardware import Hardware
from harness.run.plan import precision_line
from harness.spec.method import load_method
from harness.spec.stage_settings import StageSettings, finetune_stages
from harness.training import precision as P

TRAINED = ("cocondenser", "cocondenser_qc", "cotmae", "cotmae_qc", "cpdae", "lexmae")


@pytest.mark.parametrize("method", TRAINED)
def test_paper_profiles_fine_tune_in_fp16_and_cpu_profiles_stay_fp32(method: str) -> None:
    paper = load_method(method, "paper")
    stages = finetune_stages(paper)
    assert stages and {StageSettings.from_spec(paper, s).precision for s in stages} == {"fp16"}
    cpu = load_method(method, "tiny")
    assert StageSettings.from_spec(cpu, "retriever1").precision in ("fp32", P.AUTO)


def test_fp16_on_a_faked_card_keeps_fp16_or_falls_back_by_the_card(monkeypatch: pytest.MonkeyPatch) -> None:
    cuda, said = torch.device("cuda"), []
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    assert P.device_precision("fp16", cuda, said.append) == "fp16"  # the official --fp16, with its scaler
    assert P.device_precision("fp16", cuda, said.append, can_scale_loss=False) == "bf16"
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)  # a V100
    assert P.device_precision("fp16", cuda, said.append) == "fp16"
    assert P.device_precision("bf16", cuda, said.append) == "fp32"
    assert P.device_precision("fp16", cuda, said.append, can_scale_loss=False) == "fp32"
    assert P.device_precision("fp16", torch.device("cpu"), said.append) == "fp32"
    assert len(said) == 4  # every fallback said in one line
    assert P.grad_scaler("bf16") is None and P.grad_scaler("fp32") is None


def _step(scaler: torch.amp.GradScaler, weight: torch.nn.Parameter, grad_value: float) -> None:
    """One optimiser step as harness.training.engine runs it: scaled backward, unscale, clip, step, update."""
    opt = torch.optim.SGD([weight], lr=1.0)
    opt.zero_grad()
    scaler.scale((weight * grad_value).sum()).backward()
    scaler.unscale_(opt)
    torch.nn.utils.clip_grad_norm_([weight], 1e9)
    scaler.step(opt)
    scaler.update()


def test_the_fp16_scaler_steps_on_true_gradients_and_skips_an_overflow() -> None:
    scaler = P.grad_scaler("fp16", "cpu")
    assert scaler is not None
    weight = torch.nn.Parameter(torch.zeros(3))
    start = scaler.get_scale()
    _step(scaler, weight, 0.5)
    assert torch.allclose(weight.detach(), torch.full((3,), -0.5))  # unscaled before the step
    _step(scaler, weight, float("inf"))
    assert torch.allclose(weight.detach(), torch.full((3,), -0.5))  # the overflowing step is skipped
    assert scaler.get_scale() == start / 2  # and the scale backs off


def test_tf32_is_set_on_cuda_only() -> None:
    before = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    try:
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
        assert P.enable_tf32(torch.device("cpu")) is False
        assert (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32) == (False, False)
        assert P.enable_tf32(torch.device("cuda")) is True
        assert (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32) == (True, True)
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before


def test_the_plan_says_how_a_gpu_trains_and_a_cpu_line_is_unchanged() -> None:
    gpu = Hardware("cuda", 8, ("NVIDIA H200",), 16)
    assert precision_line("fp16", "spec", gpu) == "precision: fp16 (stated) with loss scaling; TF32 for fp32 matmuls"
    assert precision_line("fp32", "spec", gpu) == "precision: fp32 (stated); TF32 for fp32 matmuls"
    assert precision_line("fp32", "spec", Hardware("cpu", 1, (), 2)) == "precision: fp32 (stated)"
