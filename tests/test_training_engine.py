"""The one training engine: optimiser groups, the schedule, and the loop's contract with a task
(seeding, exact resume, identity check, stop_after, checkpoints, metrics, logging)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_pretrain_toy import build, make_tokenizer

from harness.core.errors import HarnessError
from harness.training import checkpoint as ckpt
from harness.training.config import LoopConfig, every_step_at_zero_lr, warmup_steps
from harness.training.engine import Notes, StepContext, Task, run, session
from harness.training.optim import build_optimizer, linear_schedule

# --- optimiser and schedule ------------------------------------------------------------


def test_no_weight_decay_on_bias_and_layernorm(tmp_path):
    obj = build("toy", make_tokenizer(tmp_path / "tok").vocab_size)
    opt = build_optimizer(obj, LoopConfig(lr=1e-3, weight_decay=0.01))
    names = {id(p): n for n, p in obj.named_parameters()}
    decayed = [names[id(p)] for p in opt.param_groups[0]["params"]]
    plain = [names[id(p)] for p in opt.param_groups[1]["params"]]
    assert opt.param_groups[0]["weight_decay"] == 0.01 and opt.param_groups[1]["weight_decay"] == 0.0
    assert any("LayerNorm.weight" in n for n in plain) and all("bias" not in n for n in decayed)
    assert all("LayerNorm" not in n for n in decayed) and "head.weight" in decayed
    assert len(decayed) + len(plain) == len(list(obj.parameters()))


def test_t5_layer_norms_and_relative_attention_bias_get_the_right_groups():
    from transformers import T5Config, T5ForConditionalGeneration

    model = T5ForConditionalGeneration(
        T5Config(vocab_size=20, d_model=8, d_kv=4, d_ff=16, num_layers=1, num_decoder_layers=1, num_heads=2)
    )
    opt = build_optimizer(model, LoopConfig(lr=1e-3, weight_decay=0.01))
    names = {id(p): n for n, p in model.named_parameters()}
    plain = {names[id(p)] for p in opt.param_groups[1]["params"]}
    assert plain == {n for n, _ in model.named_parameters() if "layer_norm" in n}  # T5 has no biases


def test_linear_warmup_then_decay():
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.AdamW([p], lr=1.0)
    sched = linear_schedule(opt, 10, warmup_steps(10, 0.2))
    lrs = []
    for _ in range(10):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert lrs[:3] == [0.0, 0.5, 1.0]
    assert lrs[2:] == sorted(lrs[2:], reverse=True) and lrs[-1] == pytest.approx(1 / 8)
    assert warmup_steps(120000, 0.1) == 12000  # no float-noise extra step
    assert warmup_steps(30, 0.1) == 3 and warmup_steps(70, 0.1) == 7  # 30 x 0.1 = 3.0000000000000004
    assert warmup_steps(7, 0.1) == 1 and warmup_steps(40, 0.0) == 0


# --- the loop, with a minimal task --------------------------------------------------------


class Regression(Task):
    """Least squares on a fixed random problem, with dropout so the RNG stream matters."""

    name = "toy regression"

    def __init__(self, steps: int = 6, epoch_steps: int = 2):
        torch.manual_seed(0)
        self.model = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.5), nn.Linear(8, 1))
        self.total_steps, self.epoch_steps = steps, epoch_steps
        self.x = torch.randn(32, 4, generator=torch.Generator().manual_seed(1))
        self.y = self.x.sum(dim=1, keepdim=True)
        self.fresh_starts = 0

    def on_fresh_start(self, ctx: StepContext) -> None:
        self.fresh_starts += 1

    def step(self, step: int, ctx: StepContext) -> dict[str, torch.Tensor]:
        rows = slice(8 * (step % 4), 8 * (step % 4) + 8)
        loss = ((ctx.engine(self.x[rows]) - self.y[rows]) ** 2).mean()
        ctx.backward(loss)
        return {"loss": loss, "abs_error": (ctx.engine(self.x[rows]) - self.y[rows]).abs().mean()}

    def epoch_end(self, step: int) -> bool:
        return step % self.epoch_steps == 0


def _run(task: Task, out: Path, **overrides):
    config = LoopConfig(**{"lr": 1e-2, "progress": False, "log_every": 2, **overrides})
    logged: list[tuple[int, dict[str, float]]] = []
    with session(config) as info:
        result = run(
            task,
            config,
            info,
            out,
            Notes("test"),
            identity={"data": "toy"},
            logger=lambda step, metrics: logged.append((step, metrics)),
        )
    return result, logged


def test_metrics_lr_grad_norm_and_log_windows(tmp_path):
    result, logged = _run(Regression(steps=5), tmp_path / "run")
    assert result.step == 5 and len(result.metrics) == 5 and not result.stopped_early
    assert list(result.metrics[0])[:2] == ["loss", "abs_error"]
    assert {"lr", "grad_norm"} <= set(result.metrics[0]) and result.metrics[0]["lr"] == 0.0  # warm-up starts at 0
    assert [s for s, _ in logged] == [2, 4, 5]
    assert logged[1][1]["loss"] == pytest.approx((result.loss_history[2] + result.loss_history[3]) / 2)
    assert result.history()["loss"] == result.loss_history


def test_resume_is_bit_identical_and_fresh_start_hook_runs_once(tmp_path):
    whole_task = Regression()
    whole, _ = _run(whole_task, tmp_path / "whole")
    first_task = Regression()
    first, _ = _run(first_task, tmp_path / "split", stop_after=3)
    assert first.stopped_early and first.step == 3 and first.checkpoint.name == ckpt.step_dirname(3)
    again, _ = _run(Regression(), tmp_path / "split", stop_after=3)  # stop_after is an absolute step
    assert again.stopped_early and again.step == 3 and again.resumed_from == 3
    resumed_task = Regression()
    resumed, _ = _run(resumed_task, tmp_path / "split")
    assert resumed.resumed_from == 3 and resumed.metrics == whole.metrics
    assert first_task.fresh_starts == 1 and resumed_task.fresh_starts == 0
    for a, b in zip(whole_task.model.parameters(), resumed_task.model.parameters()):
        assert torch.equal(a, b)


def test_checkpoints_at_epoch_ends_not_after_the_last_step_unless_asked(tmp_path):
    _run(Regression(steps=6, epoch_steps=2), tmp_path / "a", keep_checkpoints=5)
    assert [s for s, _ in ckpt.list_checkpoints(tmp_path / "a")] == [2, 4]
    task = Regression(steps=6, epoch_steps=100)
    task.checkpoint_at_end = True
    _run(task, tmp_path / "b", keep_checkpoints=5)
    assert [s for s, _ in ckpt.list_checkpoints(tmp_path / "b")] == [6]


def test_resume_with_another_identity_names_what_changed(tmp_path):
    _run(Regression(), tmp_path / "run", stop_after=2)
    config = LoopConfig(lr=1e-2, progress=False)
    with (
        session(config) as info,
        pytest.raises(HarnessError, match=r"data or settings changed \(data: 'toy' -> 'other'\)"),
    ):
        run(Regression(), config, info, tmp_path / "run", Notes("test"), identity={"data": "other"})


def test_a_checkpoint_from_before_the_engine_is_refused_with_what_to_do(tmp_path):
    import json

    _run(Regression(), tmp_path / "run", stop_after=2)
    state_file = ckpt.latest_checkpoint(tmp_path / "run") / ckpt.STATE_FILE
    state = json.loads(state_file.read_text())
    del state["identity"]
    state_file.write_text(json.dumps(state))
    config = LoopConfig(lr=1e-2, progress=False)
    with session(config) as info, pytest.raises(HarnessError, match="older version of the harness.*delete"):
        run(Regression(), config, info, tmp_path / "run", Notes("test"), identity={"data": "toy"})


def test_a_non_finite_loss_stops_with_the_last_good_checkpoint(tmp_path):
    class Exploding(Regression):
        def step(self, step, ctx):
            out = super().step(step, ctx)
            return {**out, "loss": out["loss"] * (float("nan") if step == 3 else 1.0)}

    with pytest.raises(HarnessError, match=r"loss became nan at step 4.*last good checkpoint is .*step-0+2"):
        _run(Exploding(), tmp_path / "run")


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGUSR1"])
def test_a_preemption_signal_checkpoints_after_the_step_and_the_next_run_resumes_it(tmp_path, signame):
    """A cluster's SIGTERM / SIGUSR1 mid-training: the step finishes, a checkpoint is saved (no
    epoch end or periodic checkpoint is due), the run stops with Terminated (the CLI's exit 143),
    and the next run resumes there and ends bit-identical to an uninterrupted run."""
    import os
    import signal

    from harness.core.procs import Terminated

    class Preempted(Regression):
        def step(self, step, ctx):
            if step == 2:  # the signal arrives while step 3 is computed
                os.kill(os.getpid(), getattr(signal, signame))
            return super().step(step, ctx)

    whole_task = Regression(steps=6, epoch_steps=100)
    whole, _ = _run(whole_task, tmp_path / "whole")
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(Terminated):
        _run(Preempted(steps=6, epoch_steps=100), tmp_path / "run")
    assert signal.getsignal(signal.SIGTERM) is before  # the training's handlers are gone again
    assert [s for s, _ in ckpt.list_checkpoints(tmp_path / "run")] == [3]
    resumed_task = Regression(steps=6, epoch_steps=100)
    resumed, _ = _run(resumed_task, tmp_path / "run")
    assert resumed.resumed_from == 3 and resumed.metrics == whole.metrics
    for a, b in zip(whole_task.model.parameters(), resumed_task.model.parameters()):
        assert torch.equal(a, b)


def test_periodic_checkpoints_every_n_steps(tmp_path):
    _run(Regression(steps=6, epoch_steps=100), tmp_path / "run", checkpoint_every=2, keep_checkpoints=5)
    assert [s for s, _ in ckpt.list_checkpoints(tmp_path / "run")] == [2, 4]


def test_checkpoints_by_wall_clock_interval_without_a_step_setting(tmp_path, monkeypatch):
    """No ``checkpoint_every``: a save every HARNESS_CHECKPOINT_MINUTES (here: every step is past it), none
    at the default 30 minutes in a short run; a resumed run still ends where an uninterrupted one does."""
    _run(Regression(steps=6, epoch_steps=100), tmp_path / "quiet", keep_checkpoints=5)
    assert ckpt.list_checkpoints(tmp_path / "quiet") == []
    monkeypatch.setenv(ckpt.MINUTES_ENV, "1e-9")
    _run(Regression(steps=6, epoch_steps=100), tmp_path / "clock", keep_checkpoints=3)
    assert [s for s, _ in ckpt.list_checkpoints(tmp_path / "clock")] == [3, 4, 5]  # the last 3 kept
    monkeypatch.setenv(ckpt.MINUTES_ENV, "soon")
    with pytest.raises(HarnessError, match="HARNESS_CHECKPOINT_MINUTES"):
        ckpt.checkpoint_minutes()


def test_a_background_save_writes_the_state_of_its_step_not_a_later_one(tmp_path):
    """A save holds the weights as they were: once ``before_update`` returns, the next optimizer step may
    change them, and the state being appended to, without changing what is written."""
    model = nn.Linear(3, 2)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1)
    scheduler = linear_schedule(optimizer, 10, 0)
    writer = ckpt.CheckpointWriter()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    state = {"step": 1, "metrics": [1.0]}
    final = writer.save(
        tmp_path, 1, model=model, optimizer=optimizer, scheduler=scheduler, scaler=None, trainer_state=state
    )
    state["metrics"].append(2.0)
    writer.before_update()
    with torch.no_grad():
        model.weight.add_(1.0)
    writer.wait()
    saved = torch.load(final / "model.pt", weights_only=True)
    assert all(torch.equal(saved[k], before[k]) for k in before)
    assert ckpt.read_state(final)["metrics"] == [1.0]
    assert [p.name for p in final.iterdir() if p.name.endswith(".part")] == []


def test_invalid_shared_settings_are_one_clear_error():
    with pytest.raises(HarnessError, match="invalid training config: warmup_ratio must be in"):
        LoopConfig(lr=1e-3, warmup_ratio=2.0)
    with pytest.raises(HarnessError, match="precision must be one of"):
        LoopConfig(lr=1e-3, precision="int8")


# --- a run that would train nothing, and how far a run moved its weights ----------------------------


def test_a_one_step_run_under_warm_up_is_refused_before_it_starts(tmp_path):
    assert every_step_at_zero_lr(1, 0.1) and every_step_at_zero_lr(1, 0.05)
    assert not every_step_at_zero_lr(1, 0.0) and not every_step_at_zero_lr(2, 1.0)
    assert not every_step_at_zero_lr(10, 0.1)
    with pytest.raises(
        HarnessError,
        match=r"toy regression: warmup_ratio 0.1 leaves its only step at lr 0.*"
        r"set warmup_ratio 0",
    ):
        _run(Regression(steps=1), tmp_path / "warm", warmup_ratio=0.1)
    result, _ = _run(Regression(steps=1), tmp_path / "cold", warmup_ratio=0.0)
    assert result.metrics[0]["lr"] == 1e-2  # the one step at the peak lr
    assert result.weight_change.relative > 0 and result.weight_change.steps == 1


def test_the_weight_change_is_measured_over_the_run(tmp_path):
    task = Regression(steps=4)
    start = [p.detach().clone() for p in task.model.parameters()]
    result, _ = _run(task, tmp_path / "run")
    change = result.weight_change
    moved = torch.cat([(p.detach() - s).flatten() for p, s in zip(task.model.parameters(), start)])
    norm = torch.cat([s.flatten() for s in start]).norm()
    assert change.relative == pytest.approx(float(moved.norm() / norm), rel=1e-5)
    assert change.max_abs == pytest.approx(float(moved.abs().max()), rel=1e-6)
    assert (change.parameters, change.since_step, change.steps) == (sum(s.numel() for s in start), 0, 4)
    # a resumed run measures from where it resumed; a finished one, resumed, took no step
    _run(Regression(steps=4), tmp_path / "split", stop_after=2)
    resumed, _ = _run(Regression(steps=4), tmp_path / "split")
    assert (resumed.weight_change.since_step, resumed.weight_change.steps) == (2, 4)


def test_a_run_without_gradient_reports_no_weight_change(tmp_path):
    class Frozen(Regression):
        def step(self, step, ctx):
            out = super().step(step, ctx)
            for p in ctx.params:  # what a loss detached from the weights leaves: no gradient anywhere
                p.grad = torch.zeros_like(p)
            return out

    result, _ = _run(Frozen(steps=3), tmp_path / "run")
    assert result.weight_change.relative == 0 and result.weight_change.max_abs == 0
