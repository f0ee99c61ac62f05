"""The pre-training objectives, one module per paper, and their registry.

``build_objective("cotmae", bert_config, n_head_layers=1)`` returns a ready ``Objective``;
see ``harness.pretrain.objectives.base`` for the contract every objective keeps.
"""

from __future__ import annotations

import inspect
from typing import Any

from transformers import BertConfig

from harness.errors import HarnessError, UnknownNameError
from harness.pretrain.objectives.base import Objective
from harness.pretrain.objectives.cocondenser import CoCondenser
from harness.pretrain.objectives.cotmae import CoTMAE
from harness.pretrain.objectives.cpdae import CPDAE
from harness.pretrain.objectives.lexmae import LexMAE
from harness.pretrain.objectives.mlm import MLM

OBJECTIVES: dict[str, type[Objective]] = {
    cls.name: cls for cls in (MLM, CoCondenser, CoTMAE, CPDAE, LexMAE)
}


def objective_params(name: str) -> dict[str, Any]:
    """The hyper-parameters an objective accepts, with their defaults."""
    cls = _lookup(name)
    signature = inspect.signature(cls.__init__)
    return {
        key: p.default
        for key, p in signature.parameters.items()
        if key not in ("self", "bert_config")
    }


def build_objective(name: str, bert_config: BertConfig, **params: Any) -> Objective:
    """Instantiate objective ``name``; unknown names or parameters are user errors."""
    cls = _lookup(name)
    known = objective_params(name)
    unknown = sorted(set(params) - set(known))
    if unknown:
        raise HarnessError(
            f"objective '{name}' has no parameter(s) {', '.join(unknown)}; "
            f"it accepts: {', '.join(f'{k}={v!r}' for k, v in known.items())}"
        )
    return cls(bert_config, **params)


def _lookup(name: str) -> type[Objective]:
    if name not in OBJECTIVES:
        raise UnknownNameError("objective", name, list(OBJECTIVES))
    return OBJECTIVES[name]


__all__ = ["OBJECTIVES", "Objective", "build_objective", "objective_params"]
