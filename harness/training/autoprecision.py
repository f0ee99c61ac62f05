"""``precision: auto`` on a CPU: bf16 autocast or fp32, decided by timing both here, at the profile's shapes.

Whether bf16 autocast is faster than fp32 on a CPU depends on the CPU and on the shapes: on one AMD
EPYC (AVX512-BF16, no AMX) it ran a 4608x384 @ 384x1536 matmul 2.55x faster, yet a tiny-profile run
took 24.0 s against fp32's 14.6 s; on one Intel CPU (family 6 model 207) bf16 ran at 0.6x. Machines
of one kind differ from day to day, so no rule keyed on CPU flags can say: :func:`choose` times a
matmul, one encoder forward and one training step (forward and backward) at the profile's shapes in
both precisions (a few seconds) and keeps bf16 where its training step is at least
:data:`BF16_MIN_SPEEDUP` times faster. The training step decides because ``auto`` sets the training
stages' precision, and the forward alone misleads there: on the AMD machine, at the tiny profile's
shapes, bf16 ran the forward 2.5x faster and the forward with its backward 0.93x (2026-11-26, busy). The answer is cached per CPU identity
(model, family/model/stepping, the features the kernels dispatch on, torch's thread count and
version) and shapes, as a small JSON under the cache folder, so a machine measures once.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from harness.core.fsutil import atomic_write_text
from harness.core.hardware import cpu_identity

# bf16 must beat fp32 by this much: a smaller gain is within a short measurement's noise on a shared
# machine, and does not pay for a run that differs from the fp32 references (harness.gate.grading).
BF16_MIN_SPEEDUP = 1.2
# A measurement begun while the 1-minute load average is at least this (another process keeping a core
# busy) decides the run at hand but is not cached: a skewed answer is not kept for every later run.
BUSY_LOAD = 1.0
# Each pair of timings alternates fp32 and bf16 this many times after a warm-up of each (best kept):
# alternating, a machine whose load changes during the measurement slows both sides alike.
REPEATS = 3


@dataclass(frozen=True)
class Shapes:
    """What the profile's encoder computes on: a BERT encoder's dimensions and a batch of sequences."""

    layers: int
    hidden: int
    heads: int
    intermediate: int
    batch: int
    seq_len: int
    vocab: int = 30522

    @classmethod
    def from_config(cls, config: Mapping[str, Any], batch: int, seq_len: int) -> Shapes:
        """A BERT encoder as its Hugging Face ``config.json`` states it, at ``batch`` sequences of ``seq_len``."""
        return cls(
            layers=config["num_hidden_layers"],
            hidden=config["hidden_size"],
            heads=config["num_attention_heads"],
            intermediate=config["intermediate_size"],
            batch=batch,
            seq_len=seq_len,
            vocab=config["vocab_size"],
        )

    def describe(self) -> str:
        return f"{self.layers} layers x {self.hidden} hidden, batch {self.batch} x {self.seq_len} tokens"


@dataclass(frozen=True)
class Measurement:
    """Seconds of one matmul, one encoder forward and one training step (forward + backward), in fp32
    and under bf16 autocast (best repetition each)."""

    matmul_fp32: float
    matmul_bf16: float
    forward_fp32: float
    forward_bf16: float
    step_fp32: float
    step_bf16: float

    @property
    def speedup(self) -> float:
        """fp32 time over bf16 time of the training step, which decides (> 1: bf16 faster)."""
        return self.step_fp32 / max(1e-12, self.step_bf16)

    def ratios(self) -> str:
        """fp32 / bf16 of each timing, e.g. 'matmul 2.55x, forward 1.64x, step 1.38x'."""
        return ", ".join(
            f"{name} {getattr(self, name + '_fp32') / max(1e-12, getattr(self, name + '_bf16')):.2f}x"
            for name in ("matmul", "forward", "step")
        )


@dataclass(frozen=True)
class Choice:
    """What ``auto`` resolved to, and from where: measured here now, or read from this machine's cache."""

    precision: str
    measurement: Measurement | None  # None: nothing was measured (torch has no bf16 kernels for this CPU)
    cached: bool
    path: Path | None
    busy_load: float | None = None  # the load average that kept a fresh measurement out of the cache

    def line(self, shapes: Shapes) -> str:
        """The one line a run prints."""
        if self.measurement is None:
            return "precision auto: fp32 (torch computes no bf16 on this CPU; nothing measured)"
        when = f"measured earlier on this CPU: {self.path}" if self.cached else "measured now"
        if self.busy_load is not None:
            when += f", not cached: the machine was busy (load average {self.busy_load:.1f})"
        return (
            f"precision auto: {self.precision} -- bf16 autocast vs fp32 at {shapes.describe()}: "
            f"{self.measurement.ratios()} ({when}; bf16 where the training step is >= {BF16_MIN_SPEEDUP}x)"
        )

    @property
    def speedup(self) -> float | None:
        return None if self.measurement is None else self.measurement.speedup


def _best_pair(fp32: Callable[[], Any], bf16: Callable[[], Any]) -> tuple[float, float]:
    """Best seconds of each of two calls, timed in turn REPEATS times after one warm-up call each."""
    fp32(), bf16()
    best = [float("inf"), float("inf")]
    for _ in range(REPEATS):
        for i, fn in enumerate((fp32, bf16)):
            started = time.perf_counter()
            fn()
            best[i] = min(best[i], time.perf_counter() - started)
    return best[0], best[1]


def measure(shapes: Shapes) -> Measurement:
    """Time a (batch x seq) x hidden @ hidden x intermediate matmul, one forward pass of a randomly
    initialised BERT encoder of ``shapes`` and one forward + backward of it, each in fp32 and under
    CPU bf16 autocast (the loss in fp32, as the objectives compute theirs)."""
    import torch
    from transformers import BertConfig, BertModel

    def autocast(precision: str, device: torch.device) -> contextlib.AbstractContextManager:
        # what harness.training.precision.autocast runs on a CPU (this module is below it)
        return torch.autocast("cpu", dtype=torch.bfloat16) if precision == "bf16" else contextlib.nullcontext()

    cpu = torch.device("cpu")
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(shapes.batch * shapes.seq_len, shapes.hidden, generator=gen)
    b = torch.randn(shapes.hidden, shapes.intermediate, generator=gen)
    config = BertConfig(
        vocab_size=shapes.vocab,
        hidden_size=shapes.hidden,
        num_hidden_layers=shapes.layers,
        num_attention_heads=shapes.heads,
        intermediate_size=shapes.intermediate,
        max_position_embeddings=max(512, shapes.seq_len),
    )
    model = BertModel(config, add_pooling_layer=False)
    ids = torch.randint(0, shapes.vocab, (shapes.batch, shapes.seq_len), generator=gen)

    def matmul(precision: str) -> Callable[[], Any]:
        def run() -> None:  # ten in a row: one matmul at the tiny shapes takes well under a millisecond
            with torch.inference_mode(), autocast(precision, cpu):
                for _ in range(10):
                    a @ b

        return run

    def forward(precision: str) -> Callable[[], Any]:
        def run() -> None:
            with torch.inference_mode(), autocast(precision, cpu):
                model(input_ids=ids)

        return run

    def step(precision: str) -> Callable[[], Any]:
        def run() -> None:
            with autocast(precision, cpu):
                hidden = model(input_ids=ids).last_hidden_state
            hidden.float().square().mean().backward()
            model.zero_grad(set_to_none=True)

        return run

    pairs = [_best_pair(kind("fp32"), kind("bf16")) for kind in (matmul, forward, step)]
    return Measurement(*(round(t, 6) for pair in pairs for t in pair))


def identity(shapes: Shapes) -> dict[str, Any]:
    """What the answer depends on: the CPU, torch's threads and version, and the shapes."""
    import torch

    return {
        **cpu_identity(),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "shapes": asdict(shapes),
    }


def choose(
    shapes: Shapes, folder: Path, measure_fn: Callable[[Shapes], Measurement] | None = None, save: bool = True
) -> Choice:
    """bf16 or fp32 for ``shapes`` on this CPU: the cached answer under ``folder``, else measured now
    (``measure_fn``, :func:`measure` by default) and cached there unless ``save`` is False (a dry-run
    writes nothing). Asked only where torch computes bf16 here (harness.training.precision.measured_precision)."""
    ident = identity(shapes)
    digest = hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:16]
    path = folder / f"{digest}.json"
    if path.exists():
        try:
            saved = Measurement(**json.loads(path.read_text(encoding="utf-8"))["measurement"])
            return Choice(_decide(saved.speedup), saved, True, path)
        except (ValueError, KeyError, TypeError):
            pass  # a damaged file: measured again and rewritten
    load = machine_load()
    started = time.perf_counter()
    found = (measure_fn or measure)(shapes)
    seconds = round(time.perf_counter() - started, 1)
    if not save or load >= BUSY_LOAD:
        return Choice(_decide(found.speedup), found, False, None, load if save else None)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(
        path,
        json.dumps(
            {
                "identity": ident,
                "measurement": asdict(found),
                "speedup": round(found.speedup, 3),
                "choice": _decide(found.speedup),
                "seconds": seconds,
                "measured": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            },
            indent=1,
        )
        + "\n",
    )
    return Choice(_decide(found.speedup), found, False, path)


def machine_load() -> float:
    """The 1-minute load average (0 where the system gives none)."""
    try:
        return os.getloadavg()[0]
    except OSError:
        return 0.0


def _decide(speedup: float) -> str:
    return "bf16" if speedup >= BF16_MIN_SPEEDUP else "fp32"
