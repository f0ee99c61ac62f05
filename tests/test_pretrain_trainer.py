"""The shared pre-training loop: batch plans, schedule, determinism, grad-cache path, errors."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_pretrain_toy import TIGHT, ToyContrastive, build, examples_fn_for, make_tokenizer, one_thread, params_of  # noqa: F401 - after the sys.path line above; one_thread is an autouse fixture pytest finds by import
from train_config import tiny_train_config

from harness.core.errors import HarnessError
from harness.pretrain.trainer import TrainConfig, plan_batches, train


@pytest.fixture
def tok(tmp_path):
    return make_tokenizer(tmp_path / "tok")


def cfg(out: Path, **overrides) -> TrainConfig:
    return tiny_train_config(out, **{"steps": 6, "log_every": 2, **overrides})


# --- plan_batches ----------------------------------------------------------------------


def test_plan_accumulation_keeps_global_batch():
    plan = plan_batches(2048, 64, 8, True)
    assert plan["mode"] == "accumulation"
    assert plan["accumulation_steps"] == 4 and plan["per_rank_batch"] == 256
    assert plan["per_device_batch"] * plan["world_size"] * plan["accumulation_steps"] == 2048
    assert "64 per device x 8 device(s) x 4 accumulation" in plan["note"]
    # More devices than the per-device batch was written for: each holds its share, no accumulation.
    wide = plan_batches(32, 32, 2, True)
    assert (wide["per_device_batch"], wide["accumulation_steps"], wide["global_batch"]) == (16, 1, 32)


def test_plan_grad_cache_uses_whole_rank_batch_in_chunks():
    plan = plan_batches(2048, 64, 1, False)
    assert plan["mode"] == "grad_cache" and plan["accumulation_steps"] == 1
    assert plan["per_rank_batch"] == 2048 and plan["grad_cache_chunk"] == 64 and plan["grad_cache_chunks"] == 32
    assert plan["contrastive_batch"] == 2048 and "negatives" not in plan["note"]
    multi = plan_batches(2048, 64, 8, False)
    assert multi["contrastive_batch"] == 256 and "does not gather representations" in multi["note"]
    gathered = plan_batches(2048, 64, 8, False, gathers_across_ranks=True)
    assert gathered["contrastive_batch"] == 2048 and "span all 2048" in gathered["note"]
    assert gathered["per_rank_batch"] == 256 and gathered["grad_cache_chunks"] == 4
    assert plan_batches(8, 64, 1, False, grad_cache_chunk=3)["grad_cache_chunk"] == 3
    # One chunk on one device: the plain full-batch step, which gives the same gradient.
    single = plan_batches(8, 64, 1, False)
    assert single["mode"] == "accumulation" and single["accumulation_steps"] == 1
    assert single["per_rank_batch"] == single["contrastive_batch"] == 8 and "full-batch" in single["note"]
    assert plan_batches(8, 64, 2, False, grad_cache_chunk=4)["mode"] == "grad_cache"  # DDP keeps the gather path


@pytest.mark.parametrize(
    "args, fragment",
    [
        ((100, 64, 1, True), "use per_device_batch 50"),
        ((10, 4, 3, True), "cannot be split evenly over 3"),
        ((10, 4, 3, False), "cannot be split evenly over 3"),
        ((0, 4, 1, True), "global_batch must be a positive integer"),
    ],
)
def test_plan_rejects_impossible_layouts(args, fragment):
    with pytest.raises(HarnessError, match=fragment):
        plan_batches(*args)


# --- the loop ----------------------------------------------------------------------------


def test_train_logs_and_is_deterministic(tok, tmp_path):
    logged = []
    obj = build("toy", tok.vocab_size)
    res = train(obj, examples_fn_for(20), tok, cfg(tmp_path / "a"), logger=lambda s, m: logged.append((s, m)))
    assert res.step == 6 and len(res.loss_history) == 6 and not res.stopped_early
    assert [s for s, _ in logged] == [2, 4, 6]
    assert {"loss", "mlm", "align", "lr", "epoch"} <= set(logged[0][1])
    # the logged loss is the mean over the window of steps since the previous log
    assert logged[1][1]["loss"] == pytest.approx(sum(res.loss_history[2:4]) / 2)
    assert res.metrics_history[0]["lr"] == 0.0 and res.metrics_history[1]["lr"] == pytest.approx(5e-3 / 2)
    assert logged[-1][1]["epoch"] == 2.0  # 20 examples, batch 8: 2 steps per epoch
    assert res.checkpoint is not None and res.checkpoint.name == "step-000000006"

    again = build("toy", tok.vocab_size)
    res2 = train(again, examples_fn_for(20), tok, cfg(tmp_path / "b"))
    assert res2.loss_history == res.loss_history
    for k, v in params_of(obj).items():
        assert torch.equal(v, params_of(again)[k]), k


def test_different_seed_changes_the_run(tok, tmp_path):
    a = train(build("toy", tok.vocab_size), examples_fn_for(20), tok, cfg(tmp_path / "a", steps=3))
    b = train(build("toy", tok.vocab_size), examples_fn_for(20), tok, cfg(tmp_path / "b", steps=3, seed=7))
    assert a.loss_history != b.loss_history


def test_loss_goes_down_on_repeated_data(tok, tmp_path):
    res = train(
        build("toy", tok.vocab_size, dropout=0.0),
        examples_fn_for(8),
        tok,
        cfg(tmp_path, steps=25, lr=1e-2, warmup_ratio=0.1, per_device_batch=8, grad_clip=1.0),
    )
    assert sum(res.loss_history[-5:]) < 0.7 * sum(res.loss_history[:5])
    assert "grad_norm" in res.metrics_history[-1]


class _AccumulatingContrastive(ToyContrastive):
    supports_accumulation = True


def test_grad_cache_path_sees_global_batch_and_matches_full_batch(tok, tmp_path):
    # float64: the two paths group the same sums differently; in float32 Adam's normalisation
    # turns that rounding noise (in near-zero gradients) into lr-sized steps on some CPUs.
    gc = build("contrastive", tok.vocab_size, dropout=0.0, dtype=torch.float64)
    res = train(gc, examples_fn_for(16), tok, cfg(tmp_path / "gc", steps=4, global_batch=8, per_device_batch=2))
    assert gc.calls == [(8, 2)] * 4
    assert res.plan["mode"] == "grad_cache" and res.plan["grad_cache_chunks"] == 4

    torch.manual_seed(0)
    full = _AccumulatingContrastive(gc.bert.config).to(torch.float64)
    ref = train(full, examples_fn_for(16), tok, cfg(tmp_path / "full", steps=4, global_batch=8, per_device_batch=8))
    assert res.loss_history == pytest.approx(ref.loss_history, rel=1e-12)
    a, b = params_of(gc), params_of(full)
    for k in a:
        torch.testing.assert_close(a[k], b[k], **TIGHT)
    moved = max((a[k] - v).abs().max() for k, v in params_of(build("contrastive", tok.vocab_size, 0.0)).items())
    assert moved > 1e-3  # the four steps really changed the weights


def test_mixed_precision_on_cpu_is_bf16_where_native_else_fp32(tok, tmp_path, capsys, monkeypatch):
    from harness.training import precision

    res = train(
        build("toy", tok.vocab_size),
        examples_fn_for(8),
        tok,
        cfg(tmp_path / "fp16", steps=1, warmup_ratio=0.0, precision="fp16"),
    )
    assert res.precision == "fp32" and any("fp16 needs CUDA" in n for n in res.notes)
    monkeypatch.setattr(precision, "cpu_bf16", lambda: False)
    res = train(
        build("toy", tok.vocab_size),
        examples_fn_for(8),
        tok,
        cfg(tmp_path / "none", steps=1, warmup_ratio=0.0, precision="bf16"),
    )
    assert res.precision == "fp32" and any("AVX512-BF16 or AMX" in n for n in res.notes)
    assert "AVX512-BF16 or AMX" in capsys.readouterr().err
    monkeypatch.setattr(precision, "cpu_bf16", lambda: True)
    seen = []
    real = torch.autocast
    monkeypatch.setattr(torch, "autocast", lambda **kw: seen.append(kw) or real(**kw))
    res = train(
        build("toy", tok.vocab_size),
        examples_fn_for(8),
        tok,
        cfg(tmp_path / "amx", steps=1, warmup_ratio=0.0, precision="bf16"),
    )
    assert res.precision == "bf16" and seen and seen[0]["device_type"] == "cpu"
    assert seen[0]["dtype"] is torch.bfloat16 and res.loss_history[0] == res.loss_history[0]  # not NaN


def test_too_few_examples_is_a_clear_error(tok, tmp_path):
    with pytest.raises(HarnessError, match="fewer than one global batch"):
        train(build("toy", tok.vocab_size), examples_fn_for(5), tok, cfg(tmp_path))


def test_non_finite_loss_stops_with_a_clear_error(tok, tmp_path):
    class Exploding(type(build("toy", tok.vocab_size))):
        def forward(self, batch):
            out = super().forward(batch)
            out["loss"] = out["loss"] * float("nan")
            return out

    torch.manual_seed(0)
    obj = Exploding(build("toy", tok.vocab_size).bert.config)
    with pytest.raises(HarnessError, match="loss became nan at step 1"):
        train(obj, examples_fn_for(8), tok, cfg(tmp_path, steps=2))


def test_objective_without_accumulation_needs_grad_cache(tok, tmp_path):
    obj = build("toy", tok.vocab_size)
    obj.supports_accumulation = False
    with pytest.raises(HarnessError, match="no grad_cache_step"):
        train(obj, examples_fn_for(8), tok, cfg(tmp_path))


@pytest.mark.parametrize(
    "overrides, fragment",
    [
        ({"precision": "fp8"}, "precision must be one of"),
        ({"steps": 0}, "steps must be a positive integer"),
        ({"stop_after": 9}, "stop_after must be between"),
        ({"grad_clip": 0.0}, "grad_clip must be positive"),
    ],
)
def test_invalid_config(tmp_path, overrides, fragment):
    with pytest.raises(HarnessError, match=fragment):
        cfg(tmp_path, **overrides)


def test_a_step_s_share_is_read_through_the_examples_at_step():
    """Examples chosen per step (QC v2's mixed context) offer at_step: the trainer reads each step's share
    through it, with the step's index in the epoch."""
    from types import SimpleNamespace

    from harness.pretrain.trainer import _EpochData

    class Stepped(list):
        def at_step(self, step: int) -> list[str]:
            return [f"{x}@{step}" for x in self]

    config = SimpleNamespace(global_batch=4, seed=1)
    data = _EpochData(lambda epoch, rank, world: Stepped(range(8)), config, SimpleNamespace(rank=1, world_size=2))
    data.load(0)
    share = data.rank_share(1, 2)
    assert len(share) == 2 and all(s.endswith("@1") for s in share)
    plain = _EpochData(lambda epoch, rank, world: list(range(8)), config, SimpleNamespace(rank=1, world_size=2))
    plain.load(0)
    assert all(isinstance(x, int) for x in plain.rank_share(1, 2))
