"""The pre-training objectives, one module per paper, each registered by its own decorator.

``build_objective("cotmae", bert_config, n_head_layers=1)`` returns a ready ``Objective``; see
``harness.pretrain.objectives.base`` for the contract every objective keeps and
``harness.pretrain.objective_params`` for the declaration. :func:`objectives` finds them: every
module of this package, and every ``*.py`` in the ``objectives/`` folder beside your own specs
(``$HARNESS_SPECS_DIR/objectives/``, docs/adding-a-method.md), so nothing lists them by hand.
Importing this package imports no torch; :func:`objectives` does (only a spec that names an
objective pays for it).
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.core.errors import HarnessError, UnknownNameError
from harness.core.paths import specs_dir
from harness.pretrain.objective_params import (
    REGISTRY,
    USER_FOLDER,
    Declared,
    param_problems,
)

if TYPE_CHECKING:
    from transformers import BertConfig

    from harness.pretrain.objectives.base import Objective

_BUILTINS_LOADED: list[bool] = []


def _load_builtins() -> None:
    for module in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{module.name}")


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

    if not _BUILTINS_LOADED:
        _load_builtins()
        _BUILTINS_LOADED.append(True)
    folder = specs_dir() / USER_FOLDER
    if folder.is_dir():
        _load_user_folder(folder)  # every call: a module added since is picked up
    return dict(REGISTRY)


def declared(name: str) -> Declared:
    """Objective ``name``; an unknown name is a user error with a did-you-mean."""
    known = objectives()
    if name not in known:
        raise UnknownNameError("objective", name, list(known))
    return known[name]


def objective_problems(name: str, params: dict[str, Any]) -> list[tuple[str, str]]:
    """(parameter, problem) of ``params`` for objective ``name`` (harness.pretrain.objective_params)."""
    return param_problems(declared(name), params)


def objective_params(name: str) -> dict[str, Any]:
    """The hyper-parameters an objective accepts, with their defaults."""
    return declared(name).defaults()


def objective_class(name: str) -> type[Objective]:
    return declared(name).cls


def build_objective(name: str, bert_config: BertConfig, **params: Any) -> Objective:
    """Instantiate objective ``name``; unknown names or parameters are user errors."""
    return objective_class(name)(bert_config, **params)


__all__ = ["build_objective", "declared", "objective_class", "objective_params", "objective_problems", "objectives"]
