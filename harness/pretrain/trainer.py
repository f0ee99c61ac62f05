"""Pre-training for every objective, from one CPU to many GPUs, as a task of the one engine.

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
    Global RNGs are seeded, saved and restored by the engine (:mod:`harness.training.engine`),
    so an interrupted run resumed from its checkpoint finishes with bit-identical parameters
    and loss history.

Collate in the background
    A micro-batch's collate (tokenise + mask) is a pure function of its examples and its generator,
    so it may run anywhere: with ``HARNESS_PREFETCH=1`` (the default on CUDA; off on a CPU, where the
    step itself uses the cores) a background thread (:mod:`harness.pretrain.prefetch`) collates step
    ``s + 1``'s micro-batches while step ``s`` computes, at most these two steps in flight; a step
    that opens a new epoch is collated at its turn (the epoch loads on the main thread, with its
    collectives). The batches, losses and weights are the same bit for bit either way, resumes too
    (tests/test_pretrain_prefetch.py); the stage's notes say "collate prefetched in the background".
    The thread is stopped when the run ends or a step raises (a bounded join).

Data contract
    ``examples_fn(epoch, rank, world_size)`` returns the *whole* epoch, identical on every
    rank (a Sequence is used as is, any other iterable is materialised); the trainer does
    the per-rank sharding and checks that all ranks got the same number of examples. Examples
    whose pairs depend on the training step (QC v2's mixed context: one kind per step) offer
    ``at_step(step_in_epoch)``, and each step's share is read through it.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import inspect
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from harness.core.errors import HarnessError
from harness.core.numerics import upcast
from harness.pretrain.prefetch import PREFETCH_ENV, Prefetcher, prefetch_enabled
from harness.training import distributed as D
from harness.training.config import LoopConfig, required, run_control
from harness.training.engine import Logger, Notes, StepContext, Task, run, session

Example = tuple[str, str]
Batch = dict[str, Tensor]  # an objective's collated micro-batch
ExamplesFn = Callable[[int, int, int], Iterable[Example]]


@dataclass(kw_only=True)
class TrainConfig(LoopConfig):
    """Hyper-parameters of one pre-training run (all keyword-only); the shared ones are in LoopConfig.
    What a spec sets comes from its settings (harness.spec.stage_settings.PretrainSettings.trainer_kwargs)."""

    what = "training"
    steps: int
    global_batch: int
    per_device_batch: int
    output_dir: str | Path = run_control()
    warmup_ratio: float = required()
    weight_decay: float = required()
    max_length: int = required()
    grad_clip: float | None = required()  # None: no clipping
    grad_cache_chunk: int | None = required()  # chunk for objectives that cannot accumulate; None = per_device_batch
    precision: str = required()
    log_every: int = run_control()
    checkpoint_every: int = run_control()
    keep_checkpoints: int = run_control(2)
    find_unused_parameters: bool = run_control(True)  # DDP flag: objectives rarely use every BertModel parameter

    def __post_init__(self) -> None:
        super().__post_init__()
        self.output_dir = Path(self.output_dir)

    def check(self) -> None:
        super().check()
        self.need_positive_int("steps", "global_batch", "per_device_batch")
        self.need(self.max_length > 0, "max_length", "must be positive")
        self.need(
            self.grad_cache_chunk is None or self.grad_cache_chunk > 0, "grad_cache_chunk", "must be positive or None"
        )
        self.need(
            self.stop_after is None or 0 < self.stop_after <= self.steps, "stop_after", "must be between 1 and steps"
        )


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
    weight_change: dict[str, Any] | None = None  # harness.training.engine.WeightChange.to_dict(); None: no step taken

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
    """Map the spec's global batch onto ``world_size`` devices holding at most ``per_device_batch``.

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
        return _accumulation_plan(g, p, w, per_rank)
    return _grad_cache_plan(g, p, w, per_rank, grad_cache_chunk, gathers_across_ranks)


def _accumulation_plan(g: int, p: int, w: int, per_rank: int) -> dict[str, Any]:
    """Each rank's share of the global batch ``g`` in accumulated micro-batches of at most ``p``."""
    p = min(p, per_rank)  # more devices than the spec was written for: each holds its share, the batch is kept
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


def _grad_cache_plan(
    g: int, p: int, w: int, per_rank: int, grad_cache_chunk: int | None, gathers: bool
) -> dict[str, Any]:
    """Each rank's share of ``g`` in one step (the contrastive loss needs the whole batch), run in gradient-
    cache chunks; the plain full-batch step when one chunk on one device holds it all."""
    chunk = min(grad_cache_chunk or p, per_rank)
    n_chunks = math.ceil(per_rank / chunk)
    if n_chunks == 1 and w == 1:
        # The whole contrastive batch fits in one pass: gradient caching would only repeat the
        # forward pass, so take the plain full-batch step (the same gradient).
        return {
            "mode": "accumulation",
            "global_batch": g,
            "world_size": 1,
            "per_device_batch": g,
            "per_rank_batch": g,
            "accumulation_steps": 1,
            "grad_cache_chunk": None,
            "grad_cache_chunks": None,
            "contrastive_batch": g,
            "note": f"global batch {g} in one full-batch step on 1 device (the contrastive loss sees all {g}; "
            "no gradient caching needed)",
        }
    note = (
        f"global batch {g} = {per_rank} per rank x {w} rank(s), no accumulation (the contrastive loss needs the "
        f"whole batch): gradient caching runs each rank's {per_rank} examples in {n_chunks} chunk(s) of {chunk}"
    )
    pool = g if gathers or w == 1 else per_rank
    if w > 1 and gathers:
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


# --- data ----------------------------------------------------------------------------


def micro_generator(seed: int, step_index: int, micro_index: int) -> torch.Generator:
    """The collate generator of one micro-batch: a pure function of its place in the run."""
    digest = hashlib.sha256(f"{seed}/{step_index}/{micro_index}".encode()).digest()
    return torch.Generator().manual_seed(int.from_bytes(digest[:8], "little") & (2**63 - 1))


def _accepts(fn: Callable[..., Any], name: str) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


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
        at_step = getattr(self.examples, "at_step", None)  # examples chosen per step (the data contract above)
        examples = at_step(batch_in_epoch) if at_step is not None else self.examples
        return [examples[i] for i in self.order[start : start + per_rank]]


# --- the task --------------------------------------------------------------------------


class PretrainTask(Task):
    """One optimizer step of an objective: accumulated micro-batches, or one gradient-cached batch."""

    name = "pretrain"
    checkpoint_at_end = True  # pre-training has no finished-folder marker of its own

    def __init__(
        self,
        objective: nn.Module,
        examples_fn: ExamplesFn,
        tokenizer: Any,
        config: TrainConfig,
        plan: dict[str, Any],
        info: D.DistInfo,
        prefetch: bool = False,
    ):
        self.model, self.tokenizer, self.config, self.plan = objective, tokenizer, config, plan
        self.total_steps = config.steps
        # The grad-cache path runs its own backward passes and syncs gradients itself.
        self.uses_ddp = bool(getattr(objective, "supports_accumulation", True))
        self.find_unused_parameters = config.find_unused_parameters
        self.data = _EpochData(examples_fn, config, info)
        self.current_epoch, self.epoch_start = 0, 0
        self.prefetch = Prefetcher() if prefetch else None
        self._ahead: dict[int, list[Future[Batch]]] = {}  # step -> its micro-batches, collating in the background
        self.last_step = min(config.steps, config.stop_after or config.steps)  # no step past it is collated

    def state(self) -> dict[str, Any]:
        return {"epoch": self.current_epoch, "epoch_start_step": self.epoch_start, "plan": self.plan}

    def load_state(self, state: dict[str, Any]) -> None:
        self.current_epoch, self.epoch_start = state["epoch"], state["epoch_start_step"]

    def epoch(self, step: int) -> float:
        return float(self.current_epoch)

    def step(self, step: int, ctx: StepContext) -> dict[str, Tensor]:
        if self.data.epoch != self.current_epoch:
            self.data.load(self.current_epoch)
        if step - self.epoch_start >= self.data.steps_per_epoch:
            self.current_epoch, self.epoch_start = self.current_epoch + 1, step
            self.data.load(self.current_epoch)
        batches = self._batches(step, ctx.info.rank)
        if self.plan["mode"] == "accumulation":  # also a contrastive batch that fits in one pass
            sums = self._accumulate(batches, ctx)
        else:
            sums = self._grad_cache(batches, ctx)
            D.all_reduce_gradients(ctx.params)
        return {key: torch.stack(values).mean() for key, values in sums.items()}

    def _micro_batches(self, step: int, rank: int) -> list[tuple[list[Example], int]]:
        """Step ``step``'s micro-batches on ``rank`` (examples, global micro-batch index) in the current epoch:
        ``accumulation_steps`` slices of the rank's share, or the whole share for gradient caching."""
        share = self.data.rank_share(step - self.epoch_start, self.plan["per_rank_batch"])
        if self.plan["mode"] != "accumulation":
            return [(share, rank)]
        accum, size = self.plan["accumulation_steps"], self.plan["per_device_batch"]
        return [(share[m * size : (m + 1) * size], rank * accum + m) for m in range(accum)]

    def _collate(self, micro: list[Example], step: int, index: int) -> Batch:
        generator = micro_generator(self.config.seed, step, index)
        return self.model.collate(micro, self.tokenizer, self.config.max_length, generator)

    def _submit(self, step: int, rank: int) -> list[Future[Batch]]:
        assert self.prefetch is not None
        return [
            self.prefetch.submit(functools.partial(self._collate, micro, step, index))
            for micro, index in self._micro_batches(step, rank)
        ]

    def _batches(self, step: int, rank: int) -> Iterator[Batch]:
        """The step's collated micro-batches, in order. With a prefetcher, this step's come from the
        background thread (submitted one step ago when the step is in the same epoch) and the next step's
        are submitted before this one computes; a collate is a pure function of (examples, seed, step,
        index), so the batches are the ones collated here would be."""
        if self.prefetch is None:
            for micro, index in self._micro_batches(step, rank):
                yield self._collate(micro, step, index)
            return
        futures = self._ahead.pop(step, None) or self._submit(step, rank)
        for stale in self._ahead.values():  # at most this step and the next in flight
            for future in stale:
                future.cancel()
        self._ahead.clear()
        nxt = step + 1
        if nxt < self.last_step and nxt - self.epoch_start < self.data.steps_per_epoch:
            self._ahead[nxt] = self._submit(nxt, rank)  # a new epoch loads on the main thread, at its step
        for future in futures:
            yield future.result()

    def close(self) -> None:
        """Stop the background collate (after the run, or when a step raised)."""
        if self.prefetch is not None:
            self._ahead.clear()
            self.prefetch.close()  # cancels what has not started

    def _accumulate(self, batches: Iterator[Batch], ctx: StepContext) -> dict[str, list[Tensor]]:
        """Forward/backward ``accumulation_steps`` micro-batches; DDP syncs on the last one."""
        accum = self.plan["accumulation_steps"]
        sums: dict[str, list[Tensor]] = {}
        for m, collated in enumerate(batches):
            batch = ctx.to_device(collated)
            last = m == accum - 1
            sync = contextlib.nullcontext() if last or ctx.engine is ctx.model else ctx.engine.no_sync()
            with sync:
                with ctx.autocast():
                    out = ctx.engine(batch)
                ctx.backward(upcast(out["loss"]) / accum)
            for key, value in _scalars(out).items():
                sums.setdefault(key, []).append(value)
        return sums

    def _grad_cache(self, batches: Iterator[Batch], ctx: StepContext) -> dict[str, list[Tensor]]:
        """The rank's whole share in one contrastive batch, back-propagated chunk by chunk."""
        (collated,) = list(batches)
        batch = ctx.to_device(collated)
        kwargs = {"scaler": ctx.scaler} if ctx.scaler is not None else {}
        with ctx.autocast():
            out = self.model.grad_cache_step(batch, self.plan["grad_cache_chunk"], **kwargs)
        return {key: [value] for key, value in _scalars(out).items()}


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
    with session(config) as info:
        notes = Notes("pretrain")
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
        notes.say(plan["note"])
        prefetch = prefetch_enabled(info.device)
        if prefetch:
            notes.say(
                f"collate prefetched in the background: the next step's micro-batches are tokenised and masked "
                f"while this step runs ({PREFETCH_ENV}=0 turns it off)"
            )
        task = PretrainTask(objective, examples_fn, tokenizer, config, plan, info, prefetch)
        task.can_scale_loss = grad_cache is None or _accepts(grad_cache, "scaler")
        # changing any of it mid-run would make the resumed run a different experiment
        identity = {**config.identity(), "objective": type(objective).__name__}
        with contextlib.closing(task):  # a step that raises (or a signal) stops the background collate
            out = run(
                task,
                config,
                info,
                Path(config.output_dir),
                notes,
                identity=identity,
                layout={"per_device_batch": plan["per_device_batch"]},
                logger=logger,
            )
    return TrainResult(
        step=out.step,
        loss_history=out.loss_history,
        metrics_history=list(out.metrics),
        plan=plan,
        output_dir=Path(config.output_dir),
        checkpoint=out.checkpoint,
        resumed_from=out.resumed_from,
        stopped_early=out.stopped_early,
        precision=out.precision,
        notes=out.notes.lines,
        weight_change=out.weight_change.to_dict() if out.weight_change else None,
    )
