"""The pre-training tests' TrainConfig: a tiny fp32 run without a progress bar (tests/test_pretrain_*.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.pretrain.trainer import TrainConfig


def tiny_train_config(out: Path, **settings: Any) -> TrainConfig:
    """4 steps of 8 examples (4 a device), lr 5e-3 after a quarter of warm-up, 32 tokens, no checkpoints;
    ``settings`` override any field."""
    base: dict[str, Any] = dict(
        steps=4,
        global_batch=8,
        per_device_batch=4,
        lr=5e-3,
        warmup_ratio=0.25,
        max_length=32,
        log_every=1,
        checkpoint_every=0,
        progress=False,
        output_dir=out,
        weight_decay=0.01,
        grad_clip=None,
        grad_cache_chunk=None,
        precision="fp32",
    )
    return TrainConfig(**{**base, **settings})
