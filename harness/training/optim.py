"""AdamW and the linear warm-up/decay schedule of HF Trainer (what the papers' official code ran)."""

from __future__ import annotations

import torch
from torch import nn

from harness.training.config import LoopConfig


def no_decay(name: str, param: nn.Parameter) -> bool:
    """Biases and norm gains/shifts are not decayed (BERT convention); ndim < 2 catches both."""
    return param.ndim < 2 or name.endswith(".bias") or "LayerNorm" in name or "layer_norm" in name


def build_optimizer(model: nn.Module, config: LoopConfig) -> torch.optim.AdamW:
    decay, plain = [], []
    for name, param in model.named_parameters():
        if param.requires_grad:
            (plain if no_decay(name, param) else decay).append(param)
    groups = [{"params": decay, "weight_decay": config.weight_decay}, {"params": plain, "weight_decay": 0.0}]
    # On a GPU the fused kernel (one launch for every tensor); on a CPU the default, which the committed
    # references were trained with (the fused CPU kernel rounds differently).
    fused = bool(decay or plain) and all(p.is_cuda for p in decay + plain)
    return torch.optim.AdamW(
        groups, lr=config.lr, betas=tuple(config.adam_betas), eps=config.adam_eps, **({"fused": True} if fused else {})
    )


def linear_schedule(optimizer: torch.optim.Optimizer, total: int, warmup: int) -> torch.optim.lr_scheduler.LambdaLR:
    """Linear warm-up from 0 over ``warmup`` steps, then linear decay to 0 at ``total``
    (HF ``get_linear_schedule_with_warmup``)."""

    def factor(step: int) -> float:
        if step < warmup:
            return step / max(1, warmup)
        return max(0.0, (total - step) / max(1, total - warmup))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
