"""The pre-training objectives' registry: each objective declares its name and parameters once.

An objective module registers its class with :func:`register_objective`, naming its parameters
(kind, default, meaning) and the checks across them::

    @register_objective("cotmae", losses=("mlm", "ctx_mlm"),
                        params={"enc_mask_ratio": Param(RATIO, 0.30, "encoder masking ratio"), ...})
    class CoTMAE(Objective): ...

That declaration is all there is: ``losses`` are the components its forward returns beside
``loss`` (logged each step; the contract tests loop over the registry and check them); the objective is built with its defaults overridden by the
spec's ``pretrain.objective_params`` (harness.pretrain.objectives.base), spec validation checks
a spec against it before any stage runs (harness.spec_values), the plan and the docs list it.

Where objectives come from (:func:`objectives`): every module of ``harness/pretrain/objectives/``,
and every ``*.py`` in the ``objectives/`` folder beside your own specs (``$HARNESS_SPECS_DIR/
objectives/``, see docs/adding-a-method.md), so a new objective needs no edit to the harness.
This module imports no torch itself; loading the objectives does, so only a spec that names an
objective pays for it.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from harness.errors import HarnessError, UnknownNameError
from harness.kinds import Kind, example_text

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


_REGISTRY: dict[str, Declared] = {}
_LOADED: set[str] = set()  # built-ins once, and each user folder once


def register_objective(name: str, losses: tuple[str, ...], params: dict[str, Param],
                       checks: tuple[JointCheck, ...] = ()) -> Callable[[type], type]:
    """Class decorator: declare objective ``name`` with its parameters (see the module docstring)."""

    def register(cls: type) -> type:
        known = _REGISTRY.get(name)
        if known is not None and known.module != cls.__module__:
            raise HarnessError(f"objective '{name}' is registered twice: by {known.module} and by {cls.__module__}; "
                               "rename one of them")
        cls.name = name
        _REGISTRY[name] = Declared(name, cls, tuple(losses), dict(params), tuple(checks), cls.__module__)
        return cls

    return register


def _load_builtins() -> None:
    import harness.pretrain.objectives as package

    for module in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"{package.__name__}.{module.name}")


def _load_user_folder(folder: Path) -> None:
    """Import each module of a user's objectives folder (once per file), so its decorators register."""
    for path in sorted(folder.glob("*.py")):
        name = f"harness_user_objectives.{path.stem}"
        if name in sys.modules and getattr(sys.modules[name], "__file__", None) == str(path):
            continue
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise HarnessError(f"{path}: not an importable Python module")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except HarnessError:
            raise
        except Exception as exc:  # a user's module: say which file failed, and how
            del sys.modules[name]
            raise HarnessError(f"{path}: importing this objective module failed: {type(exc).__name__}: {exc}") from exc


def objectives() -> dict[str, Declared]:
    """Every registered objective (the harness's own and the user's), by name."""
    from harness.paths import specs_dir

    if "builtin" not in _LOADED:
        _load_builtins()
        _LOADED.add("builtin")
    folder = specs_dir() / USER_FOLDER
    if folder.is_dir():
        _load_user_folder(folder)  # not cached by folder: a module added since is picked up
    return dict(_REGISTRY)


def declared(name: str) -> Declared:
    """Objective ``name``; an unknown name is a user error with a did-you-mean."""
    known = objectives()
    if name not in known:
        raise UnknownNameError("objective", name, list(known))
    return known[name]


def param_problems(objective: str, params: dict[str, Any]) -> list[tuple[str, str]]:
    """(parameter, problem) for each parameter ``objective`` does not take and each value not of its kind;
    joint checks run over the declared defaults overridden by ``params``. ``objective`` must be known."""
    decl = declared(objective)
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


def resolve_params(objective: str, params: dict[str, Any]) -> dict[str, Any]:
    """The declared defaults overridden by ``params``; any problem is a :class:`HarnessError`."""
    problems = param_problems(objective, params)
    if problems:
        raise HarnessError(f"objective {objective}: " + "; ".join(f"{k}: {p}" for k, p in problems))
    return {**declared(objective).defaults(), **params}
