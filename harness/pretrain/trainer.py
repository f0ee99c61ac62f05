"""The one pre-training loop for every objective, from one CPU to many GPUs.

``train(objective, examples_fn, tokenizer, config)`` runs AdamW with a linear warm-up and
decay (the schedule of HF Trainer, which the official coCondenser / CoT-MAE / LexMAE code
used) for ``config.steps`` optimizer steps of ``config.global_batch`` (anchor, context)
pairs, and resumes automatically from the newest checkpoint in ``config.output_dir``.

Batches
    The global batch is what the papers specify and what is preserved on any hardware
    (:func:`plan_batches`). An objective with ``supports_accumulation = True`` sees
    micro-batches of ``per_device_batch`` and gradients are accumulated over
    ``global_batch / (per_device_batch * world_size)`` of them (DDP averages over ranks).
    A contrastive objective (``supports_accumulation = False``, coCondenser) would change
    its loss if the batch were split, so each rank's whole share of the global batch goes
    through ``objective.grad_cache_step(batch, chunk)``, which back-propagates in chunks of
    ``grad_cache_chunk`` (default ``per_device_batch``). That path bypasses DDP: the
    trainer broadcasts rank 0's weights at the start and averages gradients over ranks
    itself after each step. Whether the in-batch negatives span the global batch is up to
    the objective: one that all-gathers representations inside ``grad_cache_step`` (and
    scales its cached gradients by the world size, since gradients are averaged) declares
    ``gathers_across_ranks = True``; otherwise, with N ranks, negatives come from the
    rank's ``global_batch / N`` examples (exactly the global batch on one device).

Determinism
    Epoch ``e``'s example order is ``randperm(N)`` from a generator seeded with
    ``seed + e``; optimizer step ``s`` takes slice ``s`` of it and rank ``r`` takes the
    r-th contiguous share. Each micro-batch's collate generator (masking) is seeded from
    (seed, step, global micro-batch index), so masks do not depend on how many ranks
    there are, and resuming needs no data-loader state: the checkpoint's step is enough.
    Global RNGs (python, numpy, torch: dropout) are seeded with ``seed + rank`` at the
    start and saved/restored per rank in checkpoints, so an interrupted run resumed from
    its checkpoint finishes with bit-identical parameters and loss history.

Data contract
    ``examples_fn(epoch, rank, world_size)`` returns the *whole* epoch, identical on every
    rank (a Sequence is used as is, any other iterable is materialised); the trainer does
    the per-rank sharding and checks that all ranks got the same number of examples.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import inspect
import math
import os
import random
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np
import torch
from torch import nn

from harness import SEED
from harness.errors import HarnessError
from harness.pretrain import checkpoint as ckpt
from harness.pretrain import distributed as D
from harness.numerics import upcast

Example = tuple[str, str]
ExamplesFn = Callable[[int, int, int], Iterable[Example]]
Logger = Callable[[int, dict[str, float]], None]
PRECISIONS = ("fp32", "bf16", "fp16")
# Changing these mid-run would make the resumed run a different experiment.
_MUST_MATCH_ON_RESUME = (
    "steps", "global_batch", "lr", "warmup_ratio", "weight_decay", "max_length", "seed", "grad_clip",
)  # fmt: skip


@dataclass(kw_only=True)
class TrainConfig:
    """Hyper-parameters of one pre-training run (all keyword-only)."""

    steps: int
    global_batch: int
    per_device_batch: int
    lr: float
    warmup_ratio: float = 0.1
    weight_decay: float = 0.01
    max_length: int = 128
    grad_clip: float | None = None  # max grad norm; None = no clipping (LexMAE)
    precision: str = "fp32"  # fp32 | bf16 | fp16; mixed precision needs CUDA
    grad_cache_chunk: int | None = None  # chunk for objectives that cannot accumulate; None = per_device_batch
    seed: int = SEED
    log_every: int = 10
    checkpoint_every: int = 0  # 0 = only at the end (and at stop_after)
    output_dir: str | Path
    keep_checkpoints: int = 2
    stop_after: int | None = None  # stop (with a checkpoint) after this step: time-boxed jobs, tests
    device: str | None = None  # None = cuda:LOCAL_RANK if available else cpu
    progress: bool = True  # tqdm bar on rank 0
    deterministic: bool = True  # torch.use_deterministic_algorithms(warn_only=True) during training
    find_unused_parameters: bool = True  # DDP flag: objectives rarely use every BertModel parameter
    adam_betas: tuple[float, float] = (0.9, 0.999)
    adam_eps: float = 1e-8

    def __post_init__(self) -> None:
        def need(ok: bool, problem: str) -> None:
            if not ok:
                raise HarnessError(f"invalid training config: {problem}")

        for name in ("steps", "global_batch", "per_device_batch", "log_every", "keep_checkpoints"):
            need(isinstance(getattr(self, name), int) and getattr(self, name) > 0, f"{name} must be a positive integer")
        need(self.lr > 0, "lr must be positive")
        need(0.0 <= self.warmup_ratio <= 1.0, "warmup_ratio must be in [0, 1]")
        need(self.weight_decay >= 0, "weight_decay must be >= 0")
        need(self.max_length > 0, "max_length must be positive")
        need(self.grad_clip is None or self.grad_clip > 0, "grad_clip must be positive or None (off)")
        need(self.precision in PRECISIONS, f"precision must be one of {', '.join(PRECISIONS)}, got {self.precision!r}")
        need(self.grad_cache_chunk is None or self.grad_cache_chunk > 0, "grad_cache_chunk must be positive or None")
        need(self.checkpoint_every >= 0, "checkpoint_every must be >= 0 (0 = only at the end)")
        need(
            self.stop_after is None or 0 < self.stop_after <= self.steps,
            "stop_after must be between 1 and steps",
        )
        self.output_dir = Path(self.output_dir)

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["output_dir"] = str(self.output_dir)
        out["adam_betas"] = list(self.adam_betas)
        return out


@dataclass
class TrainResult:
    """What a (possibly resumed) run produced; histories cover all steps since step 1."""

    step: int  # optimizer steps completed
    loss_history: list[float]  # mean loss over the global batch, one per step
    metrics_history: list[dict[str, float]]  # loss components + lr, one per step
    plan: dict[str, Any]
    output_dir: Path
    checkpoint: Path | None  # newest checkpoint folder
    resumed_from: int | None = None  # step of the checkpoint this call started from
    stopped_early: bool = False  # stop_after reached before `steps`
    precision: str = "fp32"  # precision actually used
    notes: list[str] = field(default_factory=list)  # what the trainer changed or noticed

    @property
    def final_loss(self) -> float | None:
        return self.loss_history[-1] if self.loss_history else None


# --- batch plan ----------------------------------------------------------------------


def _divisors_at_most(n: int, limit: int) -> int:
    return max(d for d in range(1, min(n, limit) + 1) if n % d == 0)


def plan_batches(
    global_batch: int,
    per_device_batch: int,
    world_size: int,
    supports_accumulation: bool,
    grad_cache_chunk: int | None = None,
    gathers_across_ranks: bool = False,
) -> dict[str, Any]:
    """Map the spec's global batch onto ``world_size`` devices holding ``per_device_batch``.

    Returns a dict with ``mode`` ("accumulation" | "grad_cache"), ``global_batch``,
    ``world_size``, ``per_device_batch``, ``per_rank_batch`` (examples per rank per step),
    ``accumulation_steps``, ``grad_cache_chunk``, ``grad_cache_chunks``,
    ``contrastive_batch`` (in-batch pool of a contrastive loss, grad-cache mode) and
    ``note`` (one line for the dry run). ``gathers_across_ranks``: the objective's
    grad-cache step all-gathers representations (class attribute of the same name), so its
    in-batch pool is the global batch. Raises HarnessError when the numbers do not fit.
    """
    sizes = {"global_batch": global_batch, "per_device_batch": per_device_batch, "world_size": world_size}
    for name, value in sizes.items():
        if not isinstance(value, int) or value <= 0:
            raise HarnessError(f"{name} must be a positive integer, got {value!r}")
    g, p, w = global_batch, per_device_batch, world_size
    if g % w:
        raise HarnessError(
            f"global batch {g} cannot be split evenly over {w} devices; use a device count that divides {g}"
        )
    per_rank = g // w
    if supports_accumulation:
        if per_rank % p:
            best = _divisors_at_most(per_rank, p)
            raise HarnessError(
                f"global batch {g} is not a multiple of per-device batch {p} x {w} device(s) = {p * w}; "
                f"use per_device_batch {best} (the largest divisor of {per_rank} that fits)"
            )
        accum = per_rank // p
        note = f"global batch {g} = {p} per device x {w} device(s) x {accum} accumulation step(s)"
        return {
            "mode": "accumulation",
            "global_batch": g,
            "world_size": w,
            "per_device_batch": p,
            "per_rank_batch": per_rank,
            "accumulation_steps": accum,
            "grad_cache_chunk": None,
            "grad_cache_chunks": None,
            "contrastive_batch": None,
            "note": note,
        }
    chunk = min(grad_cache_chunk or p, per_rank)
    n_chunks = math.ceil(per_rank / chunk)
    if n_chunks == 1 and w == 1:
        # The whole contrastive batch fits in one pass: gradient caching would only repeat the
        # forward pass, so take the plain full-batch step (the same gradient).
        return {
            "mode": "accumulation", "global_batch": g, "world_size": 1, "per_device_batch": g, "per_rank_batch": g,
            "accumulation_steps": 1, "grad_cache_chunk": None, "grad_cache_chunks": None, "contrastive_batch": g,
            "note": f"global batch {g} in one full-batch step on 1 device (the contrastive loss sees all {g}; "
                    "no gradient caching needed)",
        }
    note = (
        f"global batch {g} = {per_rank} per rank x {w} rank(s), no accumulation (the contrastive loss needs the "
        f"whole batch): gradient caching runs each rank's {per_rank} examples in {n_chunks} chunk(s) of {chunk}"
    )
    pool = g if gathers_across_ranks or w == 1 else per_rank
    if w > 1 and gathers_across_ranks:
        note += f"; representations are gathered across ranks, so in-batch negatives span all {g}"
    elif w > 1:
        note += (
            f"; in-batch negatives come from each rank's {per_rank} examples, not the global {g} "
            "(this objective does not gather representations across ranks)"
        )
    return {
        "mode": "grad_cache",
        "global_batch": g,
        "world_size": w,
        "per_device_batch": chunk,
        "per_rank_batch": per_rank,
        "accumulation_steps": 1,
        "grad_cache_chunk": chunk,
        "grad_cache_chunks": n_chunks,
        "contrastive_batch": pool,
        "note": note,
    }


# --- optimisation pieces -------------------------------------------------------------


def _no_decay(name: str, param: nn.Parameter) -> bool:
    # Biases and LayerNorm gains/shifts are not decayed (BERT convention); ndim < 2 catches both.
    return param.ndim < 2 or name.endswith(".bias") or "LayerNorm" in name or "layer_norm" in name


def build_optimizer(model: nn.Module, config: TrainConfig) -> torch.optim.AdamW:
    decay, no_decay = [], []
    for name, param in model.named_parameters():
        if param.requires_grad:
            (no_decay if _no_decay(name, param) else decay).append(param)
    groups = [
        {"params": decay, "weight_decay": config.weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=config.lr, betas=config.adam_betas, eps=config.adam_eps)


def warmup_steps(config: TrainConfig) -> int:
    # HF Trainer's ceil(steps * ratio), minus float noise (120000 * 0.1 is 12000.000000000002).
    return math.ceil(round(config.steps * config.warmup_ratio, 6))


def build_scheduler(optimizer: torch.optim.Optimizer, config: TrainConfig) -> torch.optim.lr_scheduler.LambdaLR:
    """Linear warm-up from 0 over ceil(warmup_ratio * steps), then linear decay to 0."""
    total, warm = config.steps, warmup_steps(config)

    def factor(step: int) -> float:
        if step < warm:
            return step / max(1, warm)
        return max(0.0, (total - step) / max(1, total - warm))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def micro_generator(seed: int, step_index: int, micro_index: int) -> torch.Generator:
    """The collate generator of one micro-batch: a pure function of its place in the run."""
    digest = hashlib.sha256(f"{seed}/{step_index}/{micro_index}".encode()).digest()
    return torch.Generator().manual_seed(int.from_bytes(digest[:8], "little") & (2**63 - 1))


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


# --- helpers -------------------------------------------------------------------------


def _say(message: str, notes: list[str]) -> None:
    notes.append(message)
    if D.is_main():
        print(f"pretrain: {message}", file=sys.stderr, flush=True)


def _accepts(fn: Callable[..., Any], name: str) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


def _resolve_precision(requested: str, device: torch.device, grad_cache: Callable | None, notes: list[str]) -> str:
    if requested == "fp32":
        return "fp32"
    if device.type != "cuda":
        _say(f"precision {requested} needs CUDA; running on {device.type}, so training in fp32", notes)
        return "fp32"
    if requested == "bf16" and not torch.cuda.is_bf16_supported():
        _say("precision bf16 is not supported by this GPU; training in fp32", notes)
        return "fp32"
    if requested == "fp16" and grad_cache is not None and not _accepts(grad_cache, "scaler"):
        # The grad-cache path runs its own backward, so it cannot scale the loss for fp16.
        fallback = "bf16" if torch.cuda.is_bf16_supported() else "fp32"
        _say(f"fp16 needs loss scaling inside grad_cache_step, which this objective lacks; using {fallback}", notes)
        return fallback
    return requested


def autocast(precision: str, device: torch.device) -> contextlib.AbstractContextManager:
    """Mixed precision on CUDA only; a no-op for fp32 or on CPU (shared with fine-tuning)."""
    if precision == "fp32" or device.type != "cuda":
        return contextlib.nullcontext()
    dtype = torch.bfloat16 if precision == "bf16" else torch.float16
    return torch.autocast(device_type="cuda", dtype=dtype)


def _to_device(batch: dict[str, Any], device: torch.device) -> dict[str, Any]:
    return {k: v.to(device, non_blocking=True) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}


def _scalars(out: dict[str, Any]) -> dict[str, torch.Tensor]:
    """The scalar entries of an objective's output, detached, as float64 tensors."""
    if not isinstance(out, dict) or "loss" not in out:
        raise HarnessError("objective returned no 'loss': forward/grad_cache_step must return a dict with 'loss'")
    found = {}
    for key, value in out.items():
        if isinstance(value, torch.Tensor) and value.numel() == 1:
            found[key] = value.detach().reshape(()).double()
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            found[key] = torch.tensor(float(value), dtype=torch.float64)
    return found


class _EpochData:
    """The current epoch's examples and permutation; reloaded when the epoch changes."""

    def __init__(self, examples_fn: ExamplesFn, config: TrainConfig, info: D.DistInfo):
        self.fn, self.config, self.info = examples_fn, config, info
        self.epoch = -1
        self.examples: Sequence[Example] = ()
        self.order: list[int] = []
        self.steps_per_epoch = 0

    def load(self, epoch: int) -> None:
        examples = self.fn(epoch, self.info.rank, self.info.world_size)
        if not isinstance(examples, Sequence):
            examples = list(examples)
        n = len(examples)
        if D.all_reduce_max(n) != n or D.all_reduce_min(n) != n:
            raise HarnessError(
                "examples_fn returned different numbers of examples on different ranks; it must return the "
                "whole epoch on every rank (the trainer shards the global batch itself)"
            )
        if n < self.config.global_batch:
            raise HarnessError(
                f"epoch {epoch} has {n} training examples, fewer than one global batch ({self.config.global_batch}); "
                "lower global_batch or add data"
            )
        perm = torch.randperm(n, generator=torch.Generator().manual_seed(self.config.seed + epoch))
        self.epoch, self.examples, self.order = epoch, examples, perm.tolist()
        self.steps_per_epoch = n // self.config.global_batch  # the incomplete last batch is dropped

    def rank_share(self, batch_in_epoch: int, per_rank: int) -> list[Example]:
        start = batch_in_epoch * self.config.global_batch + self.info.rank * per_rank
        return [self.examples[i] for i in self.order[start : start + per_rank]]


# --- the loop ------------------------------------------------------------------------


def train(
    objective: nn.Module,
    examples_fn: ExamplesFn,
    tokenizer: Any,
    config: TrainConfig,
    logger: Logger | None = None,
) -> TrainResult:
    """Train ``objective`` in place; resume from ``config.output_dir`` when it has a checkpoint.

    ``logger(step, metrics)`` is called on rank 0 every ``log_every`` steps (and at the
    last step) with the loss and its components averaged over the steps since the previous
    multiple of ``log_every``, plus ``lr`` (the rate of the step just taken) and ``epoch``.
    """
    info = D.init_distributed(config.device)
    prev = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled())
    if config.deterministic:
        if info.device.type == "cuda":
            os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        return _train(objective, examples_fn, tokenizer, config, logger, info)
    finally:
        torch.use_deterministic_algorithms(prev[0], warn_only=prev[1])


def _train(
    objective: nn.Module,
    examples_fn: ExamplesFn,
    tokenizer: Any,
    config: TrainConfig,
    logger: Logger | None,
    info: D.DistInfo,
) -> TrainResult:
    notes: list[str] = []
    supports_acc = bool(getattr(objective, "supports_accumulation", True))
    grad_cache = None if supports_acc else getattr(objective, "grad_cache_step", None)
    if not supports_acc and not callable(grad_cache):
        raise HarnessError(f"{type(objective).__name__} cannot accumulate gradients but has no grad_cache_step")
    plan = plan_batches(
        config.global_batch,
        config.per_device_batch,
        info.world_size,
        supports_acc,
        config.grad_cache_chunk,
        gathers_across_ranks=bool(getattr(objective, "gathers_across_ranks", False)),
    )
    _say(plan["note"], notes)
    precision = _resolve_precision(config.precision, info.device, grad_cache, notes)

    model = objective.to(info.device)
    model.train()
    optimizer = build_optimizer(model, config)
    scheduler = build_scheduler(optimizer, config)
    scaler = torch.amp.GradScaler("cuda") if precision == "fp16" else None

    out_dir = Path(config.output_dir)
    if info.is_main:
        out_dir.mkdir(parents=True, exist_ok=True)
        ckpt.remove_partial(out_dir)
    D.barrier()
    latest = D.broadcast_object(str(ckpt.latest_checkpoint(out_dir) or "") if info.is_main else None)

    step, epoch, epoch_start = 0, 0, 0
    loss_history: list[float] = []
    metrics_history: list[dict[str, float]] = []
    resumed_from = None
    if latest:
        saved = ckpt.read_state(latest)
        _check_resume(saved, config, type(model).__name__, latest)
        state, rng_ok = ckpt.load_checkpoint(
            latest, model=model, optimizer=optimizer, scheduler=scheduler, scaler=scaler, device=info.device
        )
        step, epoch, epoch_start = state["step"], state["epoch"], state["epoch_start_step"]
        loss_history, metrics_history = state["loss_history"], state["metrics_history"]
        resumed_from = step
        _say(f"resuming from {latest} (step {step} of {config.steps})", notes)
        old_layout = (state.get("world_size"), state.get("plan", {}).get("per_device_batch"))
        if old_layout != (info.world_size, plan["per_device_batch"]):
            _say("the device layout differs from the checkpoint's: the resumed run is not bit-identical", notes)
        if not rng_ok:
            seed_everything(config.seed + info.rank + 7919 * step)
            _say(f"rank {info.rank} has no saved RNG state; re-seeded", notes)
    else:
        seed_everything(config.seed + info.rank)

    if supports_acc:
        engine = D.wrap_ddp(model, info, config.find_unused_parameters)
    else:
        D.broadcast_module(model)  # the grad-cache path bypasses DDP: sync the start by hand
        engine = model
    params = [p for p in model.parameters() if p.requires_grad]

    # stop_after is an absolute step: a run resumed at or past it does nothing more.
    stopped_early = config.stop_after is not None and config.stop_after <= step < config.steps
    data = _EpochData(examples_fn, config, info)
    if step < config.steps and not stopped_early:
        data.load(epoch)

    from tqdm.auto import tqdm

    bar = tqdm(
        total=config.steps,
        initial=step,
        desc="pretrain",
        unit="step",
        disable=not (config.progress and info.is_main),
        dynamic_ncols=True,
    )
    last_checkpoint = Path(latest) if latest else None
    try:
        while step < config.steps and not stopped_early:
            if step - epoch_start >= data.steps_per_epoch:
                epoch, epoch_start = epoch + 1, step
                data.load(epoch)
            share = data.rank_share(step - epoch_start, plan["per_rank_batch"])
            optimizer.zero_grad(set_to_none=True)
            if plan["mode"] == "accumulation":  # also a contrastive batch that fits in one pass
                sums = _accumulate(engine, model, share, step, tokenizer, config, plan, info, precision, scaler)
            else:
                sums = _grad_cache(model, share, step, tokenizer, config, plan, info, precision, scaler)
                D.all_reduce_gradients(params)
            grad_norm = None
            if config.grad_clip is not None:
                if scaler is not None:
                    scaler.unscale_(optimizer)
                grad_norm = float(torch.nn.utils.clip_grad_norm_(params, config.grad_clip))
            if scaler is not None:
                scaler.step(optimizer)
                scaler.update()
            else:
                optimizer.step()
            lr = float(optimizer.param_groups[0]["lr"])
            scheduler.step()
            step += 1

            metrics = _reduce(sums)
            if not math.isfinite(metrics["loss"]):
                raise HarnessError(
                    f"the loss became {metrics['loss']} at step {step}; lower lr, enable grad_clip or use "
                    f"fp32/bf16 (the last good checkpoint is {last_checkpoint})"
                )
            metrics["lr"] = lr
            if grad_norm is not None:
                metrics["grad_norm"] = grad_norm
            loss_history.append(metrics["loss"])
            metrics_history.append(metrics)
            bar.set_postfix(loss=f"{metrics['loss']:.4f}", lr=f"{lr:.2e}", refresh=False)
            bar.update(1)

            stop_here = config.stop_after is not None and step >= config.stop_after and step < config.steps
            periodic = config.checkpoint_every and step % config.checkpoint_every == 0
            if periodic or step == config.steps or stop_here:
                trainer_state = {
                    "step": step,
                    "epoch": epoch,
                    "epoch_start_step": epoch_start,
                    "world_size": info.world_size,
                    "objective": type(model).__name__,
                    "config": config.to_dict(),
                    "plan": plan,
                    "precision": precision,
                    "loss_history": loss_history,
                    "metrics_history": metrics_history,
                }
                last_checkpoint = ckpt.save_checkpoint(
                    out_dir,
                    step,
                    model=model,
                    optimizer=optimizer,
                    scheduler=scheduler,
                    scaler=scaler,
                    trainer_state=trainer_state,
                    keep=config.keep_checkpoints,
                )
            log_now = step % config.log_every == 0 or step == config.steps or stop_here
            if logger is not None and info.is_main and log_now:
                # Window = the steps since the previous multiple of log_every (same after a resume).
                window = metrics_history[((step - 1) // config.log_every) * config.log_every : step]
                logged = {k: float(np.mean([m[k] for m in window if k in m])) for k in metrics if k != "lr"}
                logged.update(lr=lr, epoch=float(epoch))
                logger(step, logged)
            if stop_here:
                stopped_early = True
                _say(f"stopped after step {step} as asked (stop_after); run again to resume", notes)
                break
    finally:
        bar.close()

    return TrainResult(
        step=step,
        loss_history=list(loss_history),
        metrics_history=list(metrics_history),
        plan=plan,
        output_dir=out_dir,
        checkpoint=last_checkpoint,
        resumed_from=resumed_from,
        stopped_early=stopped_early,
        precision=precision,
        notes=notes,
    )


def _check_resume(saved: dict[str, Any], config: TrainConfig, objective_name: str, path: str) -> None:
    old = saved.get("config", {})
    now = config.to_dict()
    changed = [f"{k}: {old.get(k)!r} -> {now[k]!r}" for k in _MUST_MATCH_ON_RESUME if old.get(k) != now[k]]
    if saved.get("objective") not in (None, objective_name):
        changed.append(f"objective: {saved.get('objective')} -> {objective_name}")
    if changed:
        raise HarnessError(
            f"cannot resume from {path}: the run's settings changed ({'; '.join(changed)}); "
            "restore them or use a new output directory"
        )


def _accumulate(
    engine: nn.Module,
    model: nn.Module,
    share: list[Example],
    step_index: int,
    tokenizer: Any,
    config: TrainConfig,
    plan: dict[str, Any],
    info: D.DistInfo,
    precision: str,
    scaler: Any,
) -> dict[str, list[torch.Tensor]]:
    """Forward/backward ``accumulation_steps`` micro-batches; DDP syncs on the last one."""
    accum, size = plan["accumulation_steps"], plan["per_device_batch"]
    sums: dict[str, list[torch.Tensor]] = {}
    for m in range(accum):
        micro = share[m * size : (m + 1) * size]
        generator = micro_generator(config.seed, step_index, info.rank * accum + m)
        batch = _to_device(model.collate(micro, tokenizer, config.max_length, generator), info.device)
        last = m == accum - 1
        sync = contextlib.nullcontext() if last or engine is model else engine.no_sync()
        with sync:
            with autocast(precision, info.device):
                out = engine(batch)
            loss = upcast(out["loss"]) / accum
            (scaler.scale(loss) if scaler is not None else loss).backward()
        for key, value in _scalars(out).items():
            sums.setdefault(key, []).append(value)
    return sums


def _grad_cache(
    model: nn.Module,
    share: list[Example],
    step_index: int,
    tokenizer: Any,
    config: TrainConfig,
    plan: dict[str, Any],
    info: D.DistInfo,
    precision: str,
    scaler: Any,
) -> dict[str, list[torch.Tensor]]:
    """The rank's whole share in one contrastive batch, back-propagated chunk by chunk."""
    generator = micro_generator(config.seed, step_index, info.rank)
    batch = _to_device(model.collate(share, tokenizer, config.max_length, generator), info.device)
    kwargs = {"scaler": scaler} if scaler is not None else {}
    with autocast(precision, info.device):
        out = model.grad_cache_step(batch, plan["grad_cache_chunk"], **kwargs)
    return {key: [value] for key, value in _scalars(out).items()}


def _reduce(sums: dict[str, list[torch.Tensor]]) -> dict[str, float]:
    """Mean over micro-batches, then over ranks, in one collective for all keys."""
    keys = sorted(sums)
    local = torch.stack([torch.stack(sums[k]).mean() for k in keys])
    reduced = D.all_reduce_mean(local)
    return dict(zip(keys, (float(v) for v in reduced.tolist())))
