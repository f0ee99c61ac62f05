"""Every card checked before the first stage (harness/run/device_check.py): a CUDA-declared paper run refuses
on a machine without a usable GPU unless asked for the CPU, and a card the installed torch has no kernels for
refuses with one line naming the requirement set that supports it."""

from __future__ import annotations

import pytest

from harness.cli import main
from harness.run import device_check as D
from harness.spec.method import load_method

CUDA13_ARCHES = ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120", "compute_120"]


@pytest.fixture
def v100_under_cuda13(monkeypatch):
    """torch as PyPI's CUDA 13 build would report a V100 (sm_70)."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i=0: "Tesla V100-SXM2-32GB")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda i=0: (7, 0))
    monkeypatch.setattr(torch.cuda, "get_arch_list", lambda: list(CUDA13_ARCHES))
    monkeypatch.setattr(torch.version, "cuda", "13.0")


def test_a_v100_under_the_cuda13_build_refuses_in_one_line_naming_the_cuda126_set(v100_under_cuda13):
    spec = load_method("cotmae", "paper")
    with pytest.raises(D.HarnessError) as err:
        D.require(spec, allow_cpu=False)
    line = str(err.value)
    assert "\n" not in line and "sm_70" in line and "V100" in line
    assert D.CUDA126_SET in line and "bash setup.sh --cuda" in line
    # --allow-cpu does not excuse a card that is present but cannot run
    assert D.problem(spec, True, D.cards()) == line


@pytest.mark.parametrize(
    ("capability", "arches", "ok"),
    [
        ((8, 0), CUDA13_ARCHES, True),
        ((8, 6), CUDA13_ARCHES, True),  # sm_80 code runs on sm_86
        ((9, 0), CUDA13_ARCHES, True),
        ((12, 1), CUDA13_ARCHES, True),  # sm_120 cubin, same major
        ((7, 0), ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"], True),  # cu126
        ((7, 0), CUDA13_ARCHES, False),
        ((10, 0), ["sm_75", "sm_80", "sm_90"], False),  # no sm_10x cubin, no PTX
        ((10, 0), ["sm_90", "compute_90"], True),  # PTX the driver compiles
    ],
)
def test_a_card_is_supported_by_a_same_major_cubin_or_older_ptx(capability, arches, ok):
    assert D.supported(capability, tuple(arches)) is ok


def test_the_set_for_each_card_generation():
    assert D.requirement_set((7, 0)) == D.CUDA126_SET
    assert D.requirement_set((6, 0)) == D.CUDA126_SET
    assert D.requirement_set((7, 5)) == D.CUDA13_SET
    assert D.requirement_set((9, 0)) == D.CUDA13_SET
    assert D.requirement_set((3, 7)) is None


def test_cpu_profiles_and_present_cards_pass():
    card = D.Card("NVIDIA A100", (8, 0), tuple(CUDA13_ARCHES), "2.13.0", "13.0")
    assert D.problem(load_method("cotmae", "paper"), False, [card]) is None
    assert D.problem(load_method("cotmae", "tiny"), False, []) is None  # declares the CPU
    assert D.problem(load_method("bm25", "paper"), False, []) is None  # a CPU method's paper profile


class StageStarted(Exception):
    """Raised where the run would start its first stage."""


def test_a_cuda_paper_run_on_this_cpu_refuses_before_the_first_stage_in_one_line(mirror, monkeypatch, capsys):
    """With every input present (the fixture mirror's data; the data preflight passes, as the --allow-cpu run
    shows by reaching its first stage) the run refuses in one line, before any stage and before the data
    preflight; with --allow-cpu it goes on to its first stage."""
    from harness.run import runner

    def first_stage(spec):
        raise StageStarted

    monkeypatch.setattr(D, "cards", lambda: [])  # this machine, whatever torch it has
    monkeypatch.setattr(runner, "pipeline_for", first_stage)
    monkeypatch.setattr(runner, "resolve_precision", lambda spec, precision, save: spec)
    assert main(["run", "--method", "cotmae", "--profile", "paper"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "torch sees no usable GPU" in err[0] and "--allow-cpu" in err[0], err
    assert "16 x V100" in err[0]

    with pytest.raises(StageStarted):
        main(["run", "--method", "cotmae", "--profile", "paper", "--allow-cpu"])
