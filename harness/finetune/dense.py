"""Dense retriever fine-tuning, Tevatron v1 style (the recipe behind coCondenser and CoT-MAE rows).

Model
    One BERT encoder shared by queries and passages (Tevatron's default, untied), pooled at
    [CLS] of the last layer (no pooler: its weights are frozen and saved unchanged), scored
    by dot product.
Loss (InfoNCE)
    Each query brings a group of ``passages_per_query`` passages: its positive first, then
    ``passages_per_query - 1`` hard negatives. With Q queries and P passages per group, the
    scores are ``S = q @ p.T / temperature`` (Q x QP) and the loss is the cross entropy of
    each row against column ``i * P`` (:func:`info_nce_loss`): every other passage of the
    batch, the other queries' positives and negatives included, is a negative. Temperature
    is 1 (Tevatron). With ``negatives_across_devices`` (CoT-MAE's ``--negatives_x_device``)
    the representations of all ranks are gathered, so each query is scored against
    ``world_size x Q x P`` passages; the local slice keeps its gradient and the loss is
    multiplied by ``world_size`` because DDP averages gradients over ranks.
Batches
    ``effective_batch = world_size x queries_per_device x passages_per_query`` passages per
    optimizer step, the quantity Tevatron issue #23 shows must be preserved; it is returned
    and written with the model. There is no gradient accumulation: it would shrink the
    in-batch pool and change the loss.
Data and determinism
    ``train_examples`` are ``(query, positives, negatives)``; positives and negatives are
    texts, or doc ids when ``passages`` (id -> text or {"title", "text"}) is given, which
    keeps pools of hundreds of MS MARCO negatives cheap. Epoch ``e`` visits the examples in
    ``randperm`` order from a generator seeded with ``seed + e`` and drops the incomplete
    last global batch; optimizer step ``s`` takes the s-th global batch, rank ``r`` its r-th
    share. Each group draws its positive and negatives for the epoch with Tevatron's rule
    (:func:`harness.finetune.negatives.sample_group`). The data order is therefore a pure
    function of (seed, step) and a resumed run needs only the checkpoint.
Checkpoints
    Written atomically by :mod:`harness.pretrain.checkpoint` at the end of every epoch, every
    ``checkpoint_every`` steps and at ``stop_after``; a new call with the same arguments
    resumes from the newest one and finishes with the same weights as an uninterrupted run
    (RNG states are saved per rank). The finished model is a plain Hugging Face folder in
    ``output_dir`` (weights, tokenizer, ``harness_encoder.json`` for :func:`load_encoder`,
    ``train_stats.json``); calling again on a finished folder returns its stats.
Distributed
    Under torchrun (``WORLD_SIZE`` > 1) the encoder is wrapped in DDP (nccl on CUDA, gloo on
    CPU). Mixed precision (fp16 with loss scaling, bf16) is used on CUDA only.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from harness import SEED
from harness.errors import HarnessError
from harness.finetune.negatives import sample_group
from harness.pretrain import checkpoint as ckpt
from harness.pretrain import distributed as D
from harness.pretrain.trainer import autocast, seed_everything
from harness.numerics import upcast
from harness.retrieval.encoder import (
    DEFAULT_TITLE_SEPARATOR,
    POOLINGS,
    describe_checkpoint,
    load_backbone,
    passage_text,
    pool,
    write_encoder_config,
)

Example = tuple[str, Sequence[str], Sequence[str]]
Logger = Callable[[int, dict[str, float]], None]
PRECISIONS = ("fp32", "fp16", "bf16")
STATS_FILE = "train_stats.json"
# A resumed or cached run must have been made with these settings (and the same data and init).
_IDENTITY_FIELDS = ("queries_per_device", "passages_per_query", "lr", "epochs", "warmup_ratio", "weight_decay",
                    "max_q_len", "max_p_len", "seed", "temperature", "negatives_across_devices", "grad_clip",
                    "pooling", "title_separator")


@dataclass(kw_only=True)
class DenseTrainConfig:
    """Fine-tuning hyper-parameters; defaults are Tevatron v1's coCondenser MS MARCO stage 1 + 15 negatives."""

    queries_per_device: int = 8
    passages_per_query: int = 16  # 1 positive + 15 hard negatives
    lr: float = 5e-6
    epochs: int = 3
    warmup_ratio: float = 0.1
    weight_decay: float = 0.0  # HF TrainingArguments default, which Tevatron kept
    grad_clip: float | None = 1.0  # HF TrainingArguments max_grad_norm default; None = off
    max_q_len: int = 32
    max_p_len: int = 144
    seed: int = SEED
    temperature: float = 1.0
    negatives_across_devices: bool = True
    pooling: str = "cls"
    title_separator: str = DEFAULT_TITLE_SEPARATOR  # for passages given as {"title", "text"}
    precision: str = "fp32"  # fp16 | bf16 need CUDA; CPU runs train in fp32 and say so
    checkpoint_every: int = 0  # steps; 0 = only at epoch ends (and at stop_after)
    keep_checkpoints: int = 1
    keep_checkpoints_at_end: bool = False  # checkpoints hold optimizer state (3x the model): dropped when done
    stop_after: int | None = None  # stop with a checkpoint after this many steps (time-boxed jobs, tests)
    log_every: int = 10
    progress: bool = True
    device: str | None = None  # None = cuda:LOCAL_RANK if available, else cpu
    deterministic: bool = True

    def __post_init__(self) -> None:
        def need(ok: bool, problem: str) -> None:
            if not ok:
                raise HarnessError(f"invalid fine-tuning config: {problem}")

        for name in ("queries_per_device", "passages_per_query", "epochs", "max_q_len", "max_p_len", "log_every",
                     "keep_checkpoints"):
            value = getattr(self, name)
            need(isinstance(value, int) and value > 0, f"{name} must be a positive integer, got {value!r}")
        need(self.lr > 0, "lr must be positive")
        need(0.0 <= self.warmup_ratio <= 1.0, "warmup_ratio must be in [0, 1]")
        need(self.weight_decay >= 0, "weight_decay must be >= 0")
        need(self.temperature > 0, "temperature must be positive")
        need(self.grad_clip is None or self.grad_clip > 0, "grad_clip must be positive or None")
        need(self.pooling in POOLINGS, f"pooling must be one of {', '.join(POOLINGS)}")
        need(self.precision in PRECISIONS, f"precision must be one of {', '.join(PRECISIONS)}")
        need(self.checkpoint_every >= 0, "checkpoint_every must be >= 0")
        need(self.stop_after is None or self.stop_after > 0, "stop_after must be positive")

    @property
    def negatives_per_query(self) -> int:
        return self.passages_per_query - 1

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# --- the model and the loss ---------------------------------------------------------------------


def info_nce_loss(q_reps: Tensor, p_reps: Tensor, passages_per_query: int, temperature: float = 1.0) -> Tensor:
    """Mean InfoNCE over queries: row i of ``q @ p.T / temperature`` against column ``i * passages_per_query``.

    ``p_reps`` holds the groups one after another (positive first in each group), so all other
    rows of ``p_reps`` act as negatives for query i: its hard negatives and the in-batch ones.
    """
    if p_reps.shape[0] != q_reps.shape[0] * passages_per_query:
        raise HarnessError(
            f"{p_reps.shape[0]} passage vectors for {q_reps.shape[0]} queries x {passages_per_query} passages"
        )
    scores = (upcast(q_reps) @ upcast(p_reps).T) / temperature
    target = torch.arange(q_reps.shape[0], device=scores.device) * passages_per_query
    return F.cross_entropy(scores, target)


class BiEncoder(nn.Module):
    """One encoder for queries and passages; forward returns pooled (queries, passages)."""

    def __init__(self, encoder: nn.Module, pooling: str = "cls"):
        super().__init__()
        self.encoder, self.pooling = encoder, pooling

    def embed(self, batch: Mapping[str, Tensor]) -> Tensor:
        hidden = self.encoder(**batch).last_hidden_state
        return pool(hidden, batch["attention_mask"], self.pooling, normalize=False)

    def forward(self, queries: Mapping[str, Tensor], passages: Mapping[str, Tensor]) -> tuple[Tensor, Tensor]:
        # One forward call for both sides, so DDP sees each shared weight's gradient once.
        return self.embed(queries), self.embed(passages)


def gather_with_grad(local: Tensor) -> Tensor:
    """All ranks' rows concatenated in rank order; only this rank's rows carry a gradient."""
    import torch.distributed as dist

    parts = [torch.empty_like(local) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, local.detach().contiguous())
    parts[dist.get_rank()] = local
    return torch.cat(parts, dim=0)


# --- data ---------------------------------------------------------------------------------------


class _Groups:
    """The training groups, with this run's per-epoch sampling of positives and negatives."""

    def __init__(self, examples: Sequence[Example], passages: Mapping[str, Any] | None, config: DenseTrainConfig):
        self.examples, self.passages, self.config = examples, passages, config

    def text(self, item: Any) -> str:
        if self.passages is None:
            return passage_text(item, self.config.title_separator)
        try:
            return passage_text(self.passages[item], self.config.title_separator)
        except KeyError:
            raise HarnessError(f"training passage id {item!r} is not in the passages given to train_dense") from None

    def group(self, index: int, epoch: int) -> tuple[str, list[str]]:
        """(query, [positive, negative_1, ..., negative_{P-1}]) of example ``index`` in ``epoch``."""
        query, pos, negs = self.examples[index]
        key = str(index)
        positive = sample_group(list(pos), 1, self.config.seed, f"pos/{key}", epoch)[0] if len(pos) > 1 else pos[0]
        chosen = sample_group(list(negs), self.config.negatives_per_query, self.config.seed, key, epoch)
        return query, [self.text(positive)] + [self.text(n) for n in chosen]


def _check_examples(examples: Sequence[Example], config: DenseTrainConfig) -> tuple[list[Example], int]:
    kept, skipped = [], 0
    for n, ex in enumerate(examples):
        if not (isinstance(ex, (tuple, list)) and len(ex) == 3):
            raise HarnessError(f"training example {n} is not (query, positives, negatives): {str(ex)[:80]}")
        query, pos, negs = ex
        if isinstance(pos, str) or isinstance(negs, str):
            raise HarnessError(f"training example {n}: positives and negatives must be lists, not strings")
        if not pos or (config.negatives_per_query > 0 and not negs):
            skipped += 1
            continue
        kept.append((query, list(pos), list(negs)))
    return kept, skipped


def _fingerprint(examples: Sequence[Example], init: str, config: DenseTrainConfig) -> str:
    """What makes two runs the same experiment: data, initial model and the identity settings."""
    h = hashlib.sha256()
    settings = {k: getattr(config, k) for k in _IDENTITY_FIELDS}
    h.update(json.dumps({"init": init, "settings": settings}, sort_keys=True).encode())
    for query, pos, negs in examples:
        h.update(json.dumps([query, pos, negs], ensure_ascii=False).encode())
    return h.hexdigest()[:16]


# --- the training loop --------------------------------------------------------------------------


def _scheduler(optimizer: torch.optim.Optimizer, total: int, warmup: int) -> torch.optim.lr_scheduler.LambdaLR:
    """Linear warm-up from 0, then linear decay to 0 at ``total`` (HF ``get_linear_schedule_with_warmup``)."""

    def factor(step: int) -> float:
        if step < warmup:
            return step / max(1, warmup)
        return max(0.0, (total - step) / max(1, total - warmup))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def _optimizer(model: nn.Module, config: DenseTrainConfig) -> torch.optim.AdamW:
    decay, no_decay = [], []
    for name, param in model.named_parameters():
        if param.requires_grad:
            (no_decay if param.ndim < 2 or "LayerNorm" in name else decay).append(param)
    groups = [{"params": decay, "weight_decay": config.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=config.lr, eps=1e-8)


def _say(message: str, notes: list[str]) -> None:
    notes.append(message)
    if D.is_main():
        print(f"finetune: {message}", file=sys.stderr, flush=True)


def _resolve_precision(requested: str, device: torch.device, notes: list[str]) -> str:
    if requested != "fp32" and device.type != "cuda":
        _say(f"precision {requested} needs CUDA; training in fp32 on {device.type}", notes)
        return "fp32"
    if requested == "bf16" and not torch.cuda.is_bf16_supported():
        _say("this GPU does not support bf16; training in fp32", notes)
        return "fp32"
    return requested


def train_dense(
    init_model_path: str | Path,
    train_examples: Sequence[Example],
    config: DenseTrainConfig,
    output_dir: str | Path,
    logger: Logger | None = None,
    *,
    passages: Mapping[str, Any] | None = None,
    tokenizer_path: str | Path | None = None,
) -> dict[str, Any]:
    """Fine-tune the encoder at ``init_model_path`` and save it to ``output_dir``; returns the run's stats.

    ``logger(step, metrics)`` is called on rank 0 every ``log_every`` steps with the mean loss
    since the last call, the learning rate and the epoch. See the module docstring for the rest.
    """
    info = D.init_distributed(config.device)
    prev = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled())
    if config.deterministic:
        if info.device.type == "cuda":
            os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        return _train(Path(init_model_path), train_examples, config, Path(output_dir), logger, passages,
                      tokenizer_path, info)
    finally:
        torch.use_deterministic_algorithms(prev[0], warn_only=prev[1])


def _train(
    init: Path,
    train_examples: Sequence[Example],
    config: DenseTrainConfig,
    out_dir: Path,
    logger: Logger | None,
    passages: Mapping[str, Any] | None,
    tokenizer_path: str | Path | None,
    info: D.DistInfo,
) -> dict[str, Any]:
    started = time.time()
    notes: list[str] = []
    examples, skipped = _check_examples(train_examples, config)
    if skipped:
        _say(f"skipped {skipped} training example(s) without positives or negatives", notes)
    world, q_per, p_per = info.world_size, config.queries_per_device, config.passages_per_query
    global_queries = world * q_per
    steps_per_epoch = len(examples) // global_queries
    if steps_per_epoch == 0:
        raise HarnessError(
            f"{len(examples)} usable training example(s), fewer than one global batch of {global_queries} queries "
            f"({world} device(s) x {q_per}); lower queries_per_device or add training data"
        )
    total_steps = steps_per_epoch * config.epochs
    fingerprint = _fingerprint(examples, str(init.resolve()), config)

    stats_file = out_dir / STATS_FILE
    if stats_file.is_file():
        done = json.loads(stats_file.read_text(encoding="utf-8"))
        if done.get("fingerprint") == fingerprint:
            done["cached"] = True
            return done
        raise HarnessError(
            f"{out_dir} already holds a finished model trained with other data or settings; "
            "use a new output directory (or delete that one)"
        )

    spec = describe_checkpoint(init)
    seed_everything(config.seed)  # a pooler missing from a masked-LM checkpoint is initialised reproducibly
    backbone, tokenizer = load_backbone(spec.model_dir, tokenizer_path)
    for name, param in backbone.named_parameters():
        if name.startswith("pooler."):
            param.requires_grad_(False)  # CLS/mean pooling never uses it; frozen so DDP has no unused weights
    model = BiEncoder(backbone, config.pooling).to(info.device)
    model.train()
    precision = _resolve_precision(config.precision, info.device, notes)
    optimizer = _optimizer(model, config)
    scheduler = _scheduler(optimizer, total_steps, math.ceil(total_steps * config.warmup_ratio))
    scaler = torch.amp.GradScaler("cuda") if precision == "fp16" else None

    if info.is_main:
        out_dir.mkdir(parents=True, exist_ok=True)
        ckpt.remove_partial(out_dir)
    D.barrier()
    latest = D.broadcast_object(str(ckpt.latest_checkpoint(out_dir) or "") if info.is_main else None)
    step, resumed_from = 0, None
    loss_history: list[float] = []
    if latest:
        saved = ckpt.read_state(latest)
        if saved.get("fingerprint") != fingerprint:
            raise HarnessError(
                f"cannot resume from {latest}: it was made with other data, initial model or settings; "
                "restore them or use a new output directory"
            )
        state, rng_ok = ckpt.load_checkpoint(latest, model=model, optimizer=optimizer, scheduler=scheduler,
                                             scaler=scaler, device=info.device)
        step, loss_history, resumed_from = state["step"], list(state["loss_history"]), state["step"]
        _say(f"resuming from {latest} (step {step} of {total_steps})", notes)
        if state.get("world_size") != world:
            _say(f"the checkpoint was made with {state.get('world_size')} device(s), this run has {world}: "
                 "the effective batch and data shares differ from the interrupted run", notes)
        if not rng_ok:
            seed_everything(config.seed + info.rank + 7919 * step)
    else:
        seed_everything(config.seed + info.rank)

    engine = D.wrap_ddp(model, info, find_unused_parameters=False)
    params = [p for p in model.parameters() if p.requires_grad]
    groups = _Groups(examples, passages, config)
    across = config.negatives_across_devices and world > 1
    effective_batch = world * q_per * p_per
    _say(f"effective batch {effective_batch} passages = {world} device(s) x {q_per} queries x {p_per} passages "
         f"(1 positive + {config.negatives_per_query} negatives); each query is scored against "
         f"{(world if across else 1) * q_per * p_per} passages; {steps_per_epoch} steps/epoch x {config.epochs} epochs",
         notes)

    from tqdm.auto import tqdm

    bar = tqdm(total=total_steps, initial=step, desc="finetune", unit="step", dynamic_ncols=True,
               disable=not (config.progress and info.is_main))
    order_epoch, order = -1, []
    stopped_early, last_logged = False, step
    try:
        while step < total_steps:
            epoch, in_epoch = divmod(step, steps_per_epoch)
            if epoch != order_epoch:
                gen = torch.Generator().manual_seed(config.seed + epoch)
                order, order_epoch = torch.randperm(len(examples), generator=gen).tolist(), epoch
            first = in_epoch * global_queries + info.rank * q_per
            batch = [groups.group(i, epoch) for i in order[first : first + q_per]]
            q_enc = tokenizer([q for q, _ in batch], padding=True, truncation=True, max_length=config.max_q_len,
                              return_tensors="pt")
            p_enc = tokenizer([p for _, ps in batch for p in ps], padding=True, truncation=True,
                              max_length=config.max_p_len, return_tensors="pt")
            q_enc = {k: v.to(info.device) for k, v in q_enc.items()}
            p_enc = {k: v.to(info.device) for k, v in p_enc.items()}

            optimizer.zero_grad(set_to_none=True)
            with autocast(precision, info.device):
                q_reps, p_reps = engine(q_enc, p_enc)
            if across:
                q_reps, p_reps = gather_with_grad(q_reps), gather_with_grad(p_reps)
            loss = info_nce_loss(q_reps, p_reps, p_per, config.temperature)
            # DDP averages gradients over ranks; with gathered negatives each rank holds the full loss.
            scaled = loss * world if across else loss
            (scaler.scale(scaled) if scaler is not None else scaled).backward()
            if scaler is not None:
                scaler.unscale_(optimizer)
            if config.grad_clip is not None:
                torch.nn.utils.clip_grad_norm_(params, config.grad_clip)
            if scaler is not None:
                scaler.step(optimizer)
                scaler.update()
            else:
                optimizer.step()
            lr = float(optimizer.param_groups[0]["lr"])
            scheduler.step()
            step += 1

            value = float(D.all_reduce_mean(loss.detach().double().cpu()).item())
            if not math.isfinite(value):
                raise HarnessError(f"the fine-tuning loss became {value} at step {step}; lower lr or use fp32/bf16")
            loss_history.append(value)
            bar.set_postfix(loss=f"{value:.4f}", lr=f"{lr:.2e}", refresh=False)
            bar.update(1)

            stop_here = config.stop_after is not None and step >= config.stop_after and step < total_steps
            epoch_end = step % steps_per_epoch == 0
            periodic = config.checkpoint_every and step % config.checkpoint_every == 0
            # No checkpoint at the last step: the finished model is saved right after the loop.
            if (epoch_end or periodic or stop_here) and step < total_steps:
                ckpt.save_checkpoint(
                    out_dir, step, model=model, optimizer=optimizer, scheduler=scheduler, scaler=scaler,
                    keep=config.keep_checkpoints,
                    trainer_state={"step": step, "epoch": epoch, "world_size": world, "fingerprint": fingerprint,
                                   "config": config.to_dict(), "precision": precision, "loss_history": loss_history},
                )
            if logger is not None and info.is_main and (step % config.log_every == 0 or step == total_steps or stop_here):
                window = loss_history[last_logged:step]
                logger(step, {"loss": sum(window) / len(window), "lr": lr, "epoch": step / steps_per_epoch})
                last_logged = step
            if stop_here:
                stopped_early = True
                _say(f"stopped after step {step} as asked (stop_after); call again to resume", notes)
                break
    finally:
        bar.close()

    epoch_losses = [
        sum(loss_history[e * steps_per_epoch : (e + 1) * steps_per_epoch]) / steps_per_epoch
        for e in range(len(loss_history) // steps_per_epoch)
    ]
    stats: dict[str, Any] = {
        "model_dir": str(out_dir),
        "init_model": str(init),
        "fingerprint": fingerprint,
        "world_size": world,
        "queries_per_device": q_per,
        "passages_per_query": p_per,
        "negatives_per_query": config.negatives_per_query,
        "effective_batch": effective_batch,
        "negatives_across_devices": across,
        "in_batch_candidates": (world if across else 1) * q_per * p_per,
        "examples": len(examples),
        "skipped_examples": skipped,
        "steps": step,
        "total_steps": total_steps,
        "steps_per_epoch": steps_per_epoch,
        "epochs": config.epochs,
        "first_loss": loss_history[0] if loss_history else None,
        "final_loss": loss_history[-1] if loss_history else None,
        "epoch_losses": epoch_losses,
        "loss_history": loss_history,
        "precision": precision,
        "device": str(info.device),
        "resumed_from": resumed_from,
        "stopped_early": stopped_early,
        "seconds": time.time() - started,
        "config": config.to_dict(),
        "notes": notes,
        "cached": False,
    }
    if stopped_early:
        return stats
    if info.is_main:
        backbone.save_pretrained(str(out_dir))
        tokenizer.save_pretrained(str(out_dir))
        write_encoder_config(out_dir, pooling=config.pooling, normalize=False, similarity="dot",
                             query_max_length=config.max_q_len, passage_max_length=config.max_p_len,
                             title_separator=config.title_separator, trained_by="harness.finetune.dense")
        if not config.keep_checkpoints_at_end:
            shutil.rmtree(ckpt.checkpoint_root(out_dir), ignore_errors=True)
        tmp = out_dir / (STATS_FILE + ".tmp")
        tmp.write_text(json.dumps(stats, indent=1, default=str) + "\n", encoding="utf-8")
        tmp.replace(stats_file)  # written last: its presence means the folder is complete
    D.barrier()
    return stats
