"""The training loop, once: every trainer of the harness supplies a :class:`Task` and calls :func:`run`.

A task owns its model, its data order and the forward/backward of one optimizer step
(:meth:`Task.step`); the engine owns everything around it, in this order each step::

    zero_grad -> task.step (forward + backward, gradients accumulated or cached as it needs)
    -> unscale (fp16) -> clip -> optimizer step -> schedule step -> metrics averaged over ranks
    -> finite check -> checkpoint -> log -> stop_after

Seeding and resume
    Global RNGs (python, numpy, torch: dropout) are seeded with ``seed + rank`` when a run starts
    from step 0, after the task built its model, and saved/restored per rank in checkpoints, so a
    resumed run finishes with bit-identical weights and metrics. A checkpoint is resumed only
    when the run's ``identity`` (a dict of what makes it the same experiment: data fingerprint,
    settings) equals the one it was saved with; the error names what changed.
Checkpoints
    Atomic and written in the background (:mod:`harness.training.checkpoint`: the CPU copy of the
    weights runs alongside the next step's forward and backward, the write after it), every
    ``HARNESS_CHECKPOINT_MINUTES`` of wall-clock time (30; rank 0's clock, told to every rank in the
    step's collective), at ``checkpoint_every`` steps when set, at the task's epoch ends, at
    ``stop_after``, at a preemption and, when the task asks for it (``checkpoint_at_end``), after the
    last step; the last three wait for the write before the loop goes on. ``stop_after`` is an
    absolute step: a run resumed at or past it stops at once.
Weight change
    Every run measures how far its trainable weights moved over the steps it took (:class:`WeightChange`:
    ``||w_end - w_start|| / ||w_start||`` and the largest absolute change), from a CPU copy taken after
    ``on_fresh_start`` (or the resumed checkpoint): a stage that left its weights where they started
    trained nothing, and the gate fails its record (harness.gate.grading.movement_rows). A run whose
    every step would take lr 0 (one step under linear warm-up) is refused before it starts.
Preemption
    SIGTERM, SIGUSR1 or SIGHUP during training (a cluster's preemption notice, ``scancel``, a closed
    terminal) lets the step in flight finish; every rank learns of it in the step's metrics
    collective, so all stop after the same step, save a checkpoint and raise
    :class:`harness.core.procs.Terminated` (the CLI's "interrupted" line, exit 143). The next run
    resumes from that checkpoint. A second signal stops at once (one within 5 s of the first is
    the same notice delivered twice, as SLURM does through the launcher).
Metrics
    ``task.step`` returns scalar tensors (this rank's means); the engine averages them over ranks
    in one collective and adds ``lr`` (of the step just taken) and ``grad_norm`` (when clipping).
    ``logger(step, metrics)`` gets on rank 0, every ``log_every`` steps and at the last one, the
    means over the steps since the previous multiple of ``log_every`` (the same after a resume).
"""

from __future__ import annotations

import contextlib
import math
import os
import random
import signal
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn
from tqdm.auto import tqdm

from harness.core import procs, ranks
from harness.core.errors import HarnessError
from harness.training import checkpoint as ckpt
from harness.training import distributed as D
from harness.training.config import LoopConfig, every_step_at_zero_lr, warmup_steps
from harness.training.optim import build_optimizer, linear_schedule
from harness.training.precision import autocast, device_precision, enable_tf32, grad_scaler

Logger = Callable[[int, dict[str, float]], None]


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


class Notes:
    """What a run changed or noticed: kept for its stats and said on rank 0 as ``<name>: message``."""

    def __init__(self, name: str):
        self.name, self.lines = name, []

    def say(self, message: str) -> None:
        self.lines.append(message)
        if ranks.is_main():
            print(f"{self.name}: {message}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def session(config: LoopConfig) -> Iterator[D.DistInfo]:
    """This process's place in a (possibly distributed) run, with deterministic kernels while inside."""
    info = D.init_distributed(config.device)
    prev = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled())
    if config.deterministic:
        if info.device.type == "cuda":
            os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        yield info
    finally:
        torch.use_deterministic_algorithms(prev[0], warn_only=prev[1])


@dataclass
class StepContext:
    """What a task's step works with: the (DDP-wrapped) model, the device and the precision."""

    model: nn.Module  # the task's model, unwrapped
    engine: nn.Module  # what to call for forward: DDP-wrapped when the task uses DDP
    info: D.DistInfo
    precision: str
    scaler: torch.amp.GradScaler | None
    params: list[nn.Parameter]

    def autocast(self) -> contextlib.AbstractContextManager:
        return autocast(self.precision, self.info.device)

    def backward(self, loss: Tensor) -> None:
        (self.scaler.scale(loss) if self.scaler is not None else loss).backward()

    def to_device(self, batch: dict[str, Any]) -> dict[str, Any]:
        return {k: v.to(self.info.device, non_blocking=True) if isinstance(v, Tensor) else v for k, v in batch.items()}


class Task:
    """One trainer's part: subclass, set ``model`` and ``total_steps``, implement :meth:`step`."""

    name = "train"  # progress bar and message prefix
    model: nn.Module
    total_steps: int
    uses_ddp = True  # False: the step syncs gradients itself (gradient caching); the engine syncs the start
    find_unused_parameters = False
    can_scale_loss = True  # False: the step runs backward passes the engine's fp16 scaler cannot reach
    checkpoint_at_end = False  # True when nothing else marks the finished run (pre-training)
    progress_keys: dict[str, str] = {}  # extra progress-bar fields: label -> metric

    def step(self, step: int, ctx: StepContext) -> dict[str, Tensor]:
        """Forward and backward of optimizer step ``step`` (0-based); this rank's scalar metrics, "loss" first."""
        raise NotImplementedError

    def on_fresh_start(self, ctx: StepContext) -> None:
        """Called once, after seeding, when the run starts from step 0 (not on resume)."""

    def epoch_end(self, step: int) -> bool:
        """Whether ``step`` steps complete an epoch (a checkpoint is written there)."""
        return False

    def epoch(self, step: int) -> float:
        """The epoch reported with the logs after ``step`` steps."""
        return 0.0

    def state(self) -> dict[str, Any]:
        """Extra state a resumed run needs (beyond the step), saved in every checkpoint."""
        return {}

    def load_state(self, state: dict[str, Any]) -> None:
        pass


@dataclass
class WeightChange:
    """How far a run moved its trainable weights: ``relative`` = ||w_end - w_start|| / ||w_start||
    over all of them (L2, float64 sums), ``max_abs`` the largest change of one weight, over the steps
    from ``since_step`` (0, or the step a resumed run started from) to ``steps``."""

    relative: float
    max_abs: float
    parameters: int
    since_step: int
    steps: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "relative": self.relative,
            "max_abs": self.max_abs,
            "parameters": self.parameters,
            "since_step": self.since_step,
            "steps": self.steps,
        }


class WeightSnapshot:
    """A CPU copy of the trainable weights (bert-base: ~0.4 GiB), to measure the run's change against."""

    def __init__(self, params: list[nn.Parameter], step: int):
        self.start = [p.detach().to("cpu", dtype=torch.float32, copy=True) for p in params]
        self.step = step

    def change(self, params: list[nn.Parameter], step: int) -> WeightChange:
        moved = norm = 0.0
        biggest = 0.0
        for start, p in zip(self.start, params):
            delta = p.detach().to("cpu", dtype=torch.float32) - start
            moved += float(delta.double().pow(2).sum())
            norm += float(start.double().pow(2).sum())
            if delta.numel():
                biggest = max(biggest, float(delta.abs().max()))
        relative = math.sqrt(moved) / math.sqrt(norm) if norm > 0 else (math.inf if moved > 0 else 0.0)
        return WeightChange(relative, biggest, sum(s.numel() for s in self.start), self.step, step)


@dataclass
class LoopResult:
    """What a (possibly resumed) run produced; ``metrics`` covers every step since step 1."""

    step: int
    metrics: list[dict[str, float]]
    precision: str
    notes: Notes
    checkpoint: Path | None = None  # newest checkpoint folder
    resumed_from: int | None = None
    stopped_early: bool = False
    weight_change: WeightChange | None = None  # None when this call took no step (a finished run resumed)

    @property
    def loss_history(self) -> list[float]:
        return [m["loss"] for m in self.metrics]

    def history(self) -> dict[str, list[float]]:
        """Per metric, its value at every step (the keys of the first step, in its order)."""
        keys = list(self.metrics[0]) if self.metrics else []
        return {k: [m[k] for m in self.metrics if k in m] for k in keys}


def run(
    task: Task,
    config: LoopConfig,
    info: D.DistInfo,
    out_dir: Path,
    notes: Notes,
    *,
    identity: dict[str, Any],
    layout: dict[str, Any] | None = None,
    logger: Logger | None = None,
) -> LoopResult:
    """Train ``task.model`` for ``task.total_steps`` optimizer steps; resume from ``out_dir``'s checkpoints.

    ``identity``: what must equal the checkpoint's for a resume (else an error naming what changed).
    ``layout``: how the run is laid out on devices; a resume with another layout is allowed and noted.
    """
    total = task.total_steps
    if every_step_at_zero_lr(total, config.warmup_ratio):
        raise HarnessError(
            f"{task.name}: warmup_ratio {config.warmup_ratio} leaves its only step at lr 0 (linear "
            f"warm-up starts at 0), so it would train nothing; set warmup_ratio 0 for a one-step "
            "stage, or train more steps"
        )
    precision = device_precision(config.precision, info.device, notes.say, task.can_scale_loss)
    tf32 = enable_tf32(info.device)
    model = task.model.to(info.device)
    model.train()
    optimizer = build_optimizer(model, config)
    scheduler = linear_schedule(optimizer, total, warmup_steps(total, config.warmup_ratio))
    scaler = grad_scaler(precision)
    if info.device.type == "cuda":  # what makes the GPU step fast, said once in the stage's notes
        attention = {getattr(getattr(m, "config", None), "_attn_implementation", None) for m in model.modules()}
        notes.say(
            f"on {torch.cuda.get_device_name(info.device)}: {precision}"
            f"{' with loss scaling' if scaler is not None else ''}{', TF32 for fp32 matmuls' if tf32 else ''}, "
            f"{'fused' if optimizer.defaults.get('fused') else 'foreach'} AdamW, attention "
            f"{'/'.join(sorted(a for a in attention if a)) or 'eager'}, {info.world_size} process(es)"
        )
    layout = {"world_size": info.world_size, **(layout or {})}

    if info.is_main:
        out_dir.mkdir(parents=True, exist_ok=True)
        ckpt.remove_partial(out_dir)
    D.barrier()
    latest = D.broadcast_object(str(ckpt.latest_checkpoint(out_dir) or "") if info.is_main else None)
    params = [p for p in model.parameters() if p.requires_grad]
    ctx = StepContext(model, model, info, precision, scaler, params)
    result = LoopResult(step=0, metrics=[], precision=precision, notes=notes)
    if latest:
        saved = ckpt.read_state(latest)
        _check_identity(saved.get("identity"), identity, latest)
        state, rng_ok = ckpt.load_checkpoint(
            latest, model=model, optimizer=optimizer, scheduler=scheduler, scaler=scaler, device=info.device
        )
        result.step = result.resumed_from = state["step"]
        result.metrics = list(state["metrics"])
        result.checkpoint = Path(latest)
        task.load_state(state.get("task") or {})
        notes.say(f"resuming from {latest} (step {result.step} of {total})")
        if state.get("layout") != layout:
            notes.say(
                f"the checkpoint was made with layout {state.get('layout')}, this run has {layout}: "
                "the resumed run is not bit-identical to an uninterrupted one"
            )
        if not rng_ok:
            seed_everything(config.seed + info.rank + 7919 * result.step)
            notes.say(f"rank {info.rank} has no saved RNG state; re-seeded")
    else:
        seed_everything(config.seed + info.rank)
        task.on_fresh_start(ctx)

    if task.uses_ddp:
        ctx.engine = D.wrap_ddp(model, info, task.find_unused_parameters)
    else:
        D.broadcast_module(model)  # the step syncs gradients itself: sync the start by hand
    snapshot = WeightSnapshot(params, result.step) if result.step < total else None
    _loop(task, config, ctx, optimizer, scheduler, out_dir, notes, identity, layout, logger, result)
    if snapshot is not None and result.step > snapshot.step:
        result.weight_change = snapshot.change(params, result.step)
    return result


def _check_identity(saved: dict[str, Any] | None, identity: dict[str, Any], path: str) -> None:
    if saved is None:
        raise HarnessError(
            f"cannot resume from {path}: it was written by an older version of the harness "
            f"(before the training engine); delete {Path(path).parent} to train this stage afresh "
            "(a run with --force does)"
        )
    changed = [
        f"{k}: {saved.get(k)!r} -> {identity.get(k)!r}"
        for k in sorted(set(saved) | set(identity))
        if saved.get(k) != identity.get(k)
    ]
    if changed:
        raise HarnessError(
            f"cannot resume from {path}: the run's data or settings changed ({'; '.join(changed)}); "
            "restore them or use a new output directory"
        )


def _loop(
    task: Task,
    config: LoopConfig,
    ctx: StepContext,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    out_dir: Path,
    notes: Notes,
    identity: dict[str, Any],
    layout: dict[str, Any],
    logger: Logger | None,
    result: LoopResult,
) -> None:

    total, info, scaler = task.total_steps, ctx.info, ctx.scaler
    step = result.step
    result.stopped_early = config.stop_after is not None and config.stop_after <= step < total
    bar = tqdm(
        total=total,
        initial=step,
        desc=task.name,
        unit="step",
        dynamic_ncols=True,
        disable=not (config.progress and info.is_main),
    )
    writer = ckpt.CheckpointWriter(info.world_size, info.rank)
    interval_s = ckpt.checkpoint_minutes() * 60.0
    last_save = time.monotonic()
    with _stop_requests() as asked, contextlib.closing(bar), _finishing(writer):
        while step < total and not result.stopped_early:
            optimizer.zero_grad(set_to_none=True)
            # rank 0's clock decides, carried in the step's collective, so every rank saves the same step
            due = info.is_main and interval_s > 0 and time.monotonic() - last_save >= interval_s
            local, grad_norm, lr = _update(task, step, ctx, config, optimizer, scheduler, writer, asked, due)
            step += 1
            metrics, preempted, timely = _step_metrics(local, task.name, step, lr, grad_norm, result.checkpoint)
            result.metrics.append(metrics)
            result.step = step
            shown = {"loss": f"{metrics['loss']:.4f}", "lr": f"{lr:.2e}"}
            shown.update({label: f"{metrics[key]:.0f}" for label, key in task.progress_keys.items() if key in metrics})
            bar.set_postfix(shown, refresh=False)
            bar.update(1)

            stop_here = config.stop_after is not None and step >= config.stop_after and step < total
            periodic = bool(config.checkpoint_every) and step % config.checkpoint_every == 0
            final = preempted or stop_here or (step == total and task.checkpoint_at_end)
            if final or (step < total and (periodic or timely or task.epoch_end(step))):
                trainer_state = {
                    "step": step,
                    "identity": identity,
                    "layout": layout,
                    "config": config.to_dict(),
                    "precision": ctx.precision,
                    "metrics": result.metrics,
                    "task": task.state(),
                }
                result.checkpoint = writer.save(
                    out_dir, step, model=ctx.model, optimizer=optimizer, scheduler=scheduler, scaler=scaler,
                    trainer_state=trainer_state, keep=config.keep_checkpoints,
                )  # fmt: skip
                last_save = time.monotonic()
                if final:  # the run stops here: the checkpoint must be on disk on every rank first
                    writer.wait()
                    D.barrier()
            if logger is not None and info.is_main and (step % config.log_every == 0 or step == total or stop_here):
                logger(step, _window_means(result.metrics, step, config.log_every, lr, task.epoch(step)))
            if stop_here:
                result.stopped_early = True
                notes.say(f"stopped after step {step} as asked (stop_after); run again to resume")
            if preempted:
                notes.say(f"stopped by a signal after step {step}; checkpoint {result.checkpoint}; run again to resume")
                raise procs.Terminated(asked[0] if asked else signal.SIGTERM)


def _update(
    task: Task,
    step: int,
    ctx: StepContext,
    config: LoopConfig,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    writer: ckpt.CheckpointWriter,
    asked: list[int],
    due: bool,
) -> tuple[dict[str, torch.Tensor], float | None, float]:
    """One optimiser update: the task's forward and backward (its local metrics, with this rank's stop
    request and rank 0's "save due" riding along), clipping, the step; returns the local metrics, the
    gradient norm before clipping (None without clipping) and the learning rate the step used. ``asked`` (the
    signals received) is read after the forward and backward: a signal during them stops after this step."""
    scaler = ctx.scaler
    local = task.step(step, ctx)
    local[_STOP] = torch.tensor(1.0 if asked else 0.0)
    local[_DUE] = torch.tensor(1.0 if due else 0.0)
    writer.before_update()  # a save's copy of the weights ran alongside this forward and backward
    if scaler is not None:
        scaler.unscale_(optimizer)
    grad_norm = None
    if config.grad_clip is not None:
        grad_norm = float(torch.nn.utils.clip_grad_norm_(ctx.params, config.grad_clip))
    if scaler is not None:
        scaler.step(optimizer)
        scaler.update()
    else:
        optimizer.step()
    lr = float(optimizer.param_groups[0]["lr"])
    scheduler.step()
    return local, grad_norm, lr


def _step_metrics(
    local: dict[str, torch.Tensor], name: str, step: int, lr: float, grad_norm: float | None, last: Any
) -> tuple[dict[str, float], bool, bool]:
    """The step's metrics reduced over the ranks, whether any rank was asked to stop, and whether a timed
    save is due; a loss that is not finite stops the run, naming ``last`` (the last good checkpoint)."""
    metrics = _reduce(local)
    preempted = metrics.pop(_STOP) > 0  # some rank was asked to stop: all stop after this step
    timely = metrics.pop(_DUE) > 0
    if not math.isfinite(metrics["loss"]):
        raise HarnessError(
            f"the {name} loss became {metrics['loss']} at step {step}; lower lr, "
            f"enable grad_clip or use fp32/bf16 (the last good checkpoint is {last})"
        )
    metrics["lr"] = lr
    if grad_norm is not None:
        metrics["grad_norm"] = grad_norm
    return metrics, preempted, timely


def _window_means(history: list[dict[str, float]], step: int, every: int, lr: float, epoch: Any) -> dict[str, float]:
    """The means of the metrics over the logging window that ends at ``step`` (the lr and epoch as they are)."""
    window = history[((step - 1) // every) * every : step]
    logged = {k: float(np.mean([m[k] for m in window if k in m])) for k in history[-1] if k != "lr"}
    logged.update(lr=lr, epoch=epoch)
    return logged


_STOP = "_stop_requested"  # the metrics key that carries a rank's stop request through the step's collective
_ONE_NOTICE_S = 5.0  # signals this close together are one preemption notice delivered twice
_DUE = "_checkpoint_due"  # the metrics key that carries rank 0's "the wall-clock interval is over"


@contextlib.contextmanager
def _finishing(writer: ckpt.CheckpointWriter) -> Iterator[None]:
    """Leave the loop only once the checkpoint being written is on disk on every rank; a failure inside
    the loop is raised as it is (the writer's own error, if any, is then dropped with the thread)."""
    try:
        yield
    except BaseException:
        with contextlib.suppress(Exception):
            writer.wait()
        raise
    writer.wait()
    D.barrier()


@contextlib.contextmanager
def _stop_requests() -> Iterator[list[int]]:
    """The signals received during training (see Preemption in the module docstring); a second one
    raises at once, unless it comes within :data:`_ONE_NOTICE_S` of the first: SLURM signals the
    launcher and the workers, and the launcher passes its signal on, so one notice arrives twice.
    Outside the main thread (no handlers there) nothing is caught."""
    asked: list[int] = []
    first: list[float] = []

    def handler(signum: int, _frame: object) -> None:
        if asked:
            if time.monotonic() - first[0] < _ONE_NOTICE_S:
                return
            raise procs.Terminated(signum)
        asked.append(signum)
        first.append(time.monotonic())

    preemption = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGUSR1", "SIGHUP") if hasattr(signal, name))
    with procs.signal_handlers(preemption, handler):
        yield asked


def _reduce(local: dict[str, Tensor]) -> dict[str, float]:
    """This rank's scalar metrics averaged over ranks, in one collective for all keys ("loss" first)."""
    if "loss" not in local:
        raise HarnessError("a training step returned no 'loss'")
    keys = ["loss", *sorted(k for k in local if k != "loss")]
    stacked = torch.stack([local[k].detach().reshape(()).double().cpu() for k in keys])
    return dict(zip(keys, (float(v) for v in D.all_reduce_mean(stacked).tolist())))
