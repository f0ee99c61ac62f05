"""The functions the modules above the stage graph add to its declarations, registered by import.

harness/stages/graph.py declares which stages have settings lines in the plan (``Stage.details``) and a
projected cost (``Stage.cost`` is :data:`~harness.stages.graph.PROJECTED`), and which families there are;
the functions themselves live where they belong (the plan's in harness/run/plan.py, the projection's in
harness/run/projection.py, each family's pipeline in harness/pipelines/) and register themselves here
with a decorator when their module is imported::

    @registry.details("index", "retrieve")   # (spec, plan entry, hardware) -> settings lines
    @registry.cost("pretrain")               # (spec, plan entry, counted) -> Cost | list[Cost | None] | None
    @registry.pipeline(DENSE)                # (run context, datasets) -> run files per variant and dataset

So every such dependency is an import the import-layer test sees (tests/test_import_graph.py), pointing
down. Whoever looks a function up imports the modules that register it first (harness/run/plan.py and
projection.py define theirs; harness/pipelines/families.py imports every pipeline module), and a
function that was never registered, or one registered for a name that declares none, or twice, fails
loudly with the stage's or family's name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from harness.stages import graph

F = TypeVar("F", bound=Callable[..., Any])


class RegistryError(LookupError):
    """A registration that does not match the graph's declarations: a programming error, not a user's."""


@dataclass
class Registry:
    """The functions of one kind (``what``: "details", "cost", "pipeline"), by stage or family name;
    ``declared`` gives the names the graph says have one (read when called: the graph may grow in a test)."""

    what: str
    of: str  # "stage" or "family": what the names are
    declared: Callable[[], Iterable[str]]
    functions: dict[str, Callable[..., Any]] = field(default_factory=dict)

    def register(self, *names: str) -> Callable[[F], F]:
        """A decorator registering its function under ``names``; the function itself is returned unchanged."""

        def add(function: F) -> F:
            known = set(self.declared())
            for name in names:
                if name not in known:
                    raise RegistryError(
                        f"{_qualname(function)} registers the {self.what} of {self.of} '{name}', which "
                        f"harness/stages/graph.py does not declare as having {self.what}"
                    )
                held = self.functions.get(name)
                if held is not None and _qualname(held) != _qualname(function):  # the same one re-imported is fine
                    raise RegistryError(
                        f"{self.of} '{name}' has two {self.what} functions: {_qualname(held)} and {_qualname(function)}"
                    )
                self.functions[name] = function
            return function

        return add

    def function(self, name: str) -> Callable[..., Any]:
        """The function registered for ``name``; a declared one never registered is an error naming it."""
        if name not in self.functions:
            raise RegistryError(
                f"{self.of} '{name}' declares {self.what} in harness/stages/graph.py, but no function is "
                f"registered for it: the module holding it (decorated @registry.{self.what}('{name}')) was "
                "not imported before the look-up"
            )
        return self.functions[name]

    def missing(self) -> list[str]:
        """The declared names without a registered function."""
        return [name for name in self.declared() if name not in self.functions]

    def undeclared(self) -> list[str]:
        """The registered names the graph no longer declares as having one."""
        known = set(self.declared())
        return [name for name in self.functions if name not in known]


def _qualname(function: Callable[..., Any]) -> str:
    return f"{function.__module__}.{function.__qualname__}"


def _detail_names() -> list[str]:
    return [s.name for s in graph.STAGES.values() if s.details] + [graph.MINING]


def _cost_names() -> list[str]:
    return [s.name for s in graph.STAGES.values() if s.cost == graph.PROJECTED]


DETAILS = Registry("details", "stage", _detail_names)
COSTS = Registry("cost", "stage", _cost_names)
PIPELINES = Registry("pipeline", "family", lambda: list(graph.FAMILIES))
REGISTRIES = (DETAILS, COSTS, PIPELINES)


def details(*stages: str) -> Callable[[F], F]:
    """Register a function as the settings lines of ``stages`` (or of :data:`~harness.stages.graph.MINING`)."""
    return DETAILS.register(*stages)


def cost(*stages: str) -> Callable[[F], F]:
    """Register a function as the projected cost of ``stages`` (declared ``cost=PROJECTED``)."""
    return COSTS.register(*stages)


def pipeline(family: str) -> Callable[[F], F]:
    """Register a function as the pipeline of ``family``."""
    return PIPELINES.register(family)
