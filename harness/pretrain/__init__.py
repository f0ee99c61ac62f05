"""Pre-training: the objectives (``objectives/``), their trainer and the exported encoder.

``objective_params.py`` is the objectives' registry (each declares its name and parameters once);
``models.py`` and ``masking.py`` the model pieces and BERT masking they share; ``trainer.py`` runs any
objective as a task of the one engine (:mod:`harness.training.engine`, which owns checkpoints, resume and
DDP), with ``prefetch.py`` collating the next step's micro-batches in a background thread; ``export.py`` writes the pre-trained encoder as a plain Hugging Face BERT folder.

Public entry points (imported lazily so ``import harness.pretrain`` stays cheap):
``train``, ``TrainConfig``, ``TrainResult``, ``plan_batches`` (trainer.py) and
``export_encoder`` (export.py).
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "train": "harness.pretrain.trainer",
    "TrainConfig": "harness.pretrain.trainer",
    "TrainResult": "harness.pretrain.trainer",
    "plan_batches": "harness.pretrain.trainer",
    "export_encoder": "harness.pretrain.export",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'harness.pretrain' has no attribute {name!r}")
