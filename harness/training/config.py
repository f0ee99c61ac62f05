"""The hyper-parameters every training loop shares, declared once with their defaults and checks."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from harness.core.errors import HarnessError
from harness.core.seeds import DEFAULT_SEED

PRECISIONS = ("fp32", "bf16", "fp16")


class ConfigError(HarnessError):
    """A trainer config out of range: every failed check as (field, problem), so spec validation can
    point at the spec key each field comes from."""

    def __init__(self, what: str, problems: list[tuple[str, str]]):
        self.problems = problems
        super().__init__(f"invalid {what} config: " + "; ".join(problem for _, problem in problems))


def warmup_steps(total: int, ratio: float) -> int:
    """HF Trainer's ceil(total x ratio), minus float noise (120000 x 0.1 is 12000.000000000002)."""
    return math.ceil(round(total * ratio, 6))


def every_step_at_zero_lr(total: int, ratio: float) -> bool:
    """Whether linear warm-up (:func:`harness.training.optim.linear_schedule`) leaves all ``total``
    steps at lr 0. Warm-up starts at 0, so the first step of a warmed-up run takes lr 0 and every later
    step more: only a one-step run with any warm-up trains nothing (a rehearsal's single step under
    warmup_ratio 0.1 did, and its four dense methods came out identical)."""
    return total == 1 and warmup_steps(total, ratio) >= 1


def run_control(default: Any = dataclasses.MISSING) -> Any:
    """A field that decides how a run is carried out (logging, checkpoints, device, progress), never what it
    trains: it is left out of the run's identity (:meth:`LoopConfig.identity`), so changing it neither
    invalidates a finished model nor refuses a resume. Without ``default`` the field is required."""
    return field(default=default, metadata={"run_control": True})


def required() -> Any:
    """A field re-declared without a default (an inherited one included): a trainer config built from a
    spec's typed settings (harness.spec.stage_settings ``trainer_kwargs``) takes every value they set from
    them, so no default is declared twice and none can differ from the spec's."""
    return field()


@dataclass(kw_only=True)
class LoopConfig:
    """Optimiser, schedule, precision, checkpoints and logging of one training run.

    A trainer's config subclasses this, adds its own fields, re-declares the ones a spec sets as
    :func:`required` (their defaults are the spec settings'), and adds its range checks in :meth:`check`. Building a config raises :class:`ConfigError` with all of them,
    so spec validation builds the configs a run would build rather than repeating their ranges.
    """

    what: ClassVar[str] = "training"  # names the config in error messages

    lr: float
    warmup_ratio: float = 0.1  # linear warm-up over ceil(ratio x total steps), then linear decay to 0
    weight_decay: float = 0.0  # never on biases and norms
    grad_clip: float | None = 1.0  # max grad norm; None = no clipping
    adam_betas: tuple[float, float] = (0.9, 0.999)
    adam_eps: float = 1e-8
    seed: int = DEFAULT_SEED
    precision: str = "fp32"  # fp16 | bf16 need CUDA; CPU runs train in fp32 and say so
    checkpoint_every: int = run_control(0)  # steps; 0 = only at the loop's own points (epoch ends, stop_after)
    keep_checkpoints: int = run_control(1)
    stop_after: int | None = run_control(None)  # stop with a checkpoint after this absolute step (time-boxed jobs)
    log_every: int = run_control(10)
    progress: bool = run_control(True)
    device: str | None = run_control(None)  # None = cuda:LOCAL_RANK if available, else cpu
    deterministic: bool = True  # torch.use_deterministic_algorithms(warn_only=True) while training

    def __post_init__(self) -> None:
        self._found: list[tuple[str, str]] = []
        self.check()
        found = self._found
        del self._found  # not a setting: to_dict and equality see the fields only
        if found:
            raise ConfigError(self.what, found)

    def check(self) -> None:
        """The range checks (``need``); a subclass adds its own after ``super().check()``."""
        for name in ("log_every", "keep_checkpoints"):
            self.need_positive_int(name)
        self.need(self.lr > 0, "lr", "must be positive")
        self.need(0.0 <= self.warmup_ratio <= 1.0, "warmup_ratio", "must be in [0, 1]")
        self.need(self.weight_decay >= 0, "weight_decay", "must be >= 0")
        self.need(self.grad_clip is None or self.grad_clip > 0, "grad_clip", "must be positive or None (off)")
        # `auto` (a spec's) is resolved by the run before a trainer is built (harness.training.precision.resolve_precision)
        self.need(
            self.precision in PRECISIONS,
            "precision",
            f"must be one of {', '.join(PRECISIONS)}, "
            f"got {self.precision!r}"
            + (" (auto is resolved by `run` before training)" if self.precision == "auto" else ""),
        )
        self.need(self.checkpoint_every >= 0, "checkpoint_every", "must be >= 0")
        self.need(self.stop_after is None or self.stop_after > 0, "stop_after", "must be positive")

    def need(self, ok: bool, key: str, rule: str) -> None:
        """Record that field ``key`` breaks ``rule`` (``must be positive``) unless ``ok``."""
        if not ok:
            self._found.append((key, f"{key} {rule}"))

    def need_positive_int(self, *names: str) -> None:
        for name in names:
            value = getattr(self, name)
            self.need(
                isinstance(value, int) and not isinstance(value, bool) and value > 0,
                name,
                f"must be a positive integer, got {value!r}",
            )

    def identity(self) -> dict[str, Any]:
        """Every field but the run controls (:func:`run_control`): what makes two runs the same experiment,
        so a finished model or a checkpoint is reused only when all of it matches."""
        controls = {f.name for f in dataclasses.fields(self) if f.metadata.get("run_control")}
        return {k: v for k, v in self.to_dict().items() if k not in controls}

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        for key, value in out.items():
            if isinstance(value, Path):
                out[key] = str(value)
            elif isinstance(value, tuple):
                out[key] = list(value)
        return out
