"""The pre-training objectives, one module per paper, each registered by its own decorator.

``build_objective("cotmae", bert_config, n_head_layers=1)`` returns a ready ``Objective``; see
``harness.pretrain.objectives.base`` for the contract every objective keeps and
``harness.pretrain.objective_params`` for the registry (a new module here, or in the
``objectives/`` folder beside your own specs, registers itself: nothing to list).
"""

from __future__ import annotations

from typing import Any

from transformers import BertConfig

from harness.pretrain.objective_params import declared, objectives
from harness.pretrain.objectives.base import Objective


def objective_params(name: str) -> dict[str, Any]:
    """The hyper-parameters an objective accepts, with their defaults."""
    return declared(name).defaults()


def objective_class(name: str) -> type[Objective]:
    return declared(name).cls


def build_objective(name: str, bert_config: BertConfig, **params: Any) -> Objective:
    """Instantiate objective ``name``; unknown names or parameters are user errors."""
    return objective_class(name)(bert_config, **params)


__all__ = ["Objective", "build_objective", "objective_class", "objective_params", "objectives"]
