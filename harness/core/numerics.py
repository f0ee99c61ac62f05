"""Numeric precision helpers shared by every loss."""

from __future__ import annotations

import torch
from torch import Tensor


def upcast(t: Tensor) -> Tensor:
    """``t`` in at least float32: a loss never runs on half-precision activations (autocast),
    and float64 stays float64, so the equivalence tests can run whole models in float64."""
    return t if t.dtype == torch.float64 else t.float()
