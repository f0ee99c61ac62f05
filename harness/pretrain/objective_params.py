"""What each pre-training objective accepts: its parameters, their kinds and defaults, declared once.

An objective checks the parameters it is built with against this (harness.pretrain.objectives.base),
and spec validation checks a spec's ``pretrain.objective_params`` against it before any stage runs,
so a mask ratio of 1.5 or ``n_head_layers: two`` fails in the first second instead of when
pre-training starts, after the corpus stages. Torch-free: validation need not load the models.
tests/test_spec_values.py keeps the names and defaults equal to the objectives' constructors.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from harness.kinds import FLAG, NON_NEGATIVE, NUMBER, POSITIVE, POSITIVE_WHOLE, RATIO, Kind, example_text, one_of


@dataclass(frozen=True)
class Param:
    kind: Kind
    default: Any
    meaning: str
    nullable: bool = False


_MASK = Param(RATIO, 0.15, "MLM masking ratio")
_HEAD = Param(POSITIVE_WHOLE, 2, "layers of the decoder / Condenser head")

OBJECTIVES: dict[str, dict[str, Param]] = {
    "mlm": {"mask_ratio": _MASK},
    "cocondenser": {
        "mask_ratio": _MASK,
        "n_head_layers": _HEAD,
        "skip_from": Param(POSITIVE_WHOLE, 6, "encoder layer the Condenser head reads (clamped to the encoder's)"),
        "temperature": Param(POSITIVE, 1.0, "contrastive softmax temperature"),
    },
    "cotmae": {
        "enc_mask_ratio": Param(RATIO, 0.30, "encoder masking ratio"),
        "dec_mask_ratio": Param(RATIO, 0.45, "decoder masking ratio"),
        "n_head_layers": _HEAD,
        "dec_loss_coef": Param(NON_NEGATIVE, 1.0, "decoder loss weight"),
    },
    "cpdae": {
        "mask_ratio": _MASK,
        "cl_lambda": Param(NON_NEGATIVE, 0.1, "contrastive loss weight"),
        "contrast_on": Param(one_of("words", "cls"), "words", "words (CPDAE) | cls (CPDAE_R)"),
        "rec_reduction": Param(one_of("sum", "mean"), "sum", "sum | mean over the vocabulary of the reconstruction loss"),
        "symmetric": Param(FLAG, False, "contrast both views against each other"),
        "js_block": Param(POSITIVE_WHOLE, 8, "rows per block of the Jensen-Shannon contrast"),
        "rec_bias_init": Param(NUMBER, None, "initial bias of the bag-of-words decoder, null for 0", nullable=True),
    },
    "lexmae": {
        "enc_mask_ratio": Param(RATIO, 0.30, "encoder masking ratio"),
        "dec_mask_ratio": Param(RATIO, 0.50, "decoder masking ratio: the decoder's total (alpha + beta)"),
        "n_head_layers": _HEAD,
    },
}
NONE = "none"  # pretrain.objective: none = no pre-training (the control)

# Checks across parameters: (objective, the key a problem is about, problem(params) or None).
_JOINT: tuple[tuple[str, str, Callable[[dict[str, Any]], str | None]], ...] = (
    ("lexmae", "dec_mask_ratio", lambda p: None if p["dec_mask_ratio"] >= p["enc_mask_ratio"] else
     f"{p['dec_mask_ratio']!r} is the decoder's total (alpha + beta) and must be >= enc_mask_ratio "
     f"({p['enc_mask_ratio']!r})"),
)


def param_problems(objective: str, params: dict[str, Any]) -> list[tuple[str, str]]:
    """(parameter, problem) for each parameter ``objective`` does not take and each value not of its kind;
    joint checks run over the declared defaults overridden by ``params``. ``objective`` must be known."""
    declared = OBJECTIVES[objective]
    found = []
    for key, value in params.items():
        if key not in declared:
            takes = ", ".join(f"{k}={example_text(p.default)}" for k, p in declared.items())
            found.append((key, f"objective {objective} has no parameter '{key}' (it takes: {takes})"))
            continue
        param = declared[key]
        if value is None and param.nullable:
            continue
        problem = param.kind.problem(value)
        if problem:
            example = param.default if param.default is not None else param.kind.example
            found.append((key, f"{problem} ({param.meaning}; e.g. {key}: {example_text(example)})"))
    if not found:  # a joint check needs every value of its kind
        merged = {**{k: p.default for k, p in declared.items()}, **params}
        found += [(key, problem) for name, key, check in _JOINT if name == objective
                  for problem in [check(merged)] if problem]
    return found
