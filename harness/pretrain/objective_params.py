"""The pre-training objectives' registry: each objective declares its name and parameters once.

An objective module registers its class with :func:`register_objective`, naming its parameters
(kind, default, meaning) and the checks across them::

    @register_objective("cotmae", losses=("mlm", "ctx_mlm"),
                        params={"enc_mask_ratio": Param(RATIO, 0.30, "encoder masking ratio"), ...})
    class CoTMAE(Objective): ...

That declaration is all there is: ``losses`` are the components its forward returns beside
``loss`` (logged each step; the contract tests loop over the registry and check them); the objective is built with its defaults overridden by the
spec's ``pretrain.objective_params`` (harness.pretrain.objectives.base), spec validation checks
a spec against it before any stage runs (harness.run.validation), the plan and the docs list it.

Where objectives come from (``harness.pretrain.objectives.objectives()``, which imports them): every
module of ``harness/pretrain/objectives/``,
and every ``*.py`` in the ``objectives/`` folder beside your own specs (``$HARNESS_SPECS_DIR/
objectives/``, see docs/adding-a-method.md), so a new objective needs no edit to the harness.
This module is the registry's leaf: it imports no objective and no torch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from harness.core.errors import HarnessError, UnknownNameError
from harness.spec.kinds import Kind, example_text

NONE = "none"  # pretrain.objective: none = no pre-training (the control)
USER_FOLDER = "objectives"  # beside the specs (HARNESS_SPECS_DIR): a user's own objective modules


@dataclass(frozen=True)
class Param:
    kind: Kind
    default: Any
    meaning: str
    nullable: bool = False


# A check across parameters: (the key a problem is about, problem(params with defaults) or None).
JointCheck = tuple[str, Callable[[dict[str, Any]], "str | None"]]


@dataclass(frozen=True)
class Declared:
    """One registered objective: its class, loss components, parameters, joint checks, its module."""

    name: str
    cls: type
    losses: tuple[str, ...]
    params: dict[str, Param]
    checks: tuple[JointCheck, ...] = ()
    module: str = field(default="")

    def defaults(self) -> dict[str, Any]:
        return {key: p.default for key, p in self.params.items()}


REGISTRY: dict[str, Declared] = {}  # filled by register_objective as the modules are imported


def register_objective(
    name: str, losses: tuple[str, ...], params: dict[str, Param], checks: tuple[JointCheck, ...] = ()
) -> Callable[[type], type]:
    """Class decorator: declare objective ``name`` with its parameters (see the module docstring)."""

    def register(cls: type) -> type:
        known = REGISTRY.get(name)
        if known is not None and known.module != cls.__module__:
            raise HarnessError(
                f"objective '{name}' is registered twice: by {known.module} and by {cls.__module__}; rename one of them"
            )
        cls.name = name
        REGISTRY[name] = Declared(name, cls, tuple(losses), dict(params), tuple(checks), cls.__module__)
        return cls

    return register


def registered(name: str) -> Declared:
    """The declaration of an objective whose module is imported (its class is being built)."""
    if name not in REGISTRY:
        raise HarnessError(f"objective '{name}' is not registered: decorate its class with register_objective")
    return REGISTRY[name]


def param_problems(decl: Declared, params: dict[str, Any]) -> list[tuple[str, str]]:
    """(parameter, problem) for each parameter the objective does not take and each value not of its kind;
    joint checks run over the declared defaults overridden by ``params``."""
    objective = decl.name
    found = []
    for key, value in params.items():
        if key not in decl.params:
            close = UnknownNameError("parameter", key, list(decl.params)).suggestions
            hint = f"did you mean {close[0]}?; " if close else ""
            takes = ", ".join(f"{k}={example_text(p.default)}" for k, p in decl.params.items())
            found.append((key, f"objective {objective} has no parameter '{key}' ({hint}it takes: {takes})"))
            continue
        param = decl.params[key]
        if value is None and param.nullable:
            continue
        problem = param.kind.problem(value)
        if problem:
            example = param.default if param.default is not None else param.kind.example
            found.append((key, f"{problem} ({param.meaning}; e.g. {key}: {example_text(example)})"))
    if not found:  # a joint check needs every value of its kind
        merged = {**decl.defaults(), **params}
        found += [(key, problem) for key, check in decl.checks for problem in [check(merged)] if problem]
    return found


def resolve_params(decl: Declared, params: dict[str, Any]) -> dict[str, Any]:
    """The declared defaults overridden by ``params``; any problem is a :class:`HarnessError`."""
    problems = param_problems(decl, params)
    if problems:
        raise HarnessError(f"objective {decl.name}: " + "; ".join(f"{k}: {p}" for k, p in problems))
    return {**decl.defaults(), **params}
