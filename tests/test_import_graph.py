"""The import graph of ``harness/`` has no cycles, and only the CLI layer imports ``harness.commands``.

Every import of a ``harness`` module counts: top-level, inside functions, and inside
``if TYPE_CHECKING:`` blocks. ``from harness.x import y`` is an edge to ``harness.x.y`` when that
is a module, else to ``harness.x``; a package ``harness.x`` stands for its ``__init__.py``.

Runnable as a script, for quoting in an issue note::

    .venv/bin/python tests/test_import_graph.py

prints the number of modules and edges and every cycle group, and exits 1 if there is one.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "harness"
CLI_LAYER = ("harness.cli", "harness.__main__", "harness.commands")

Graph = dict[str, set[str]]


def module_names(root: Path = ROOT, package: str = PACKAGE) -> dict[str, Path]:
    """Every module under ``root/package`` by dotted name; a package's name maps to its ``__init__.py``."""
    modules: dict[str, Path] = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def _resolve_relative(module: str, path: Path, level: int, target: str | None) -> str:
    """The absolute name that ``from <level dots><target> import ...`` in `module` refers to."""
    base = module.split(".")
    if not _is_package(path):
        base = base[:-1]  # a plain module's level-1 anchor is its own package
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join(base + ([target] if target else []))


def imported_names(module: str, path: Path) -> Iterator[tuple[str, list[str]]]:
    """(absolute module named, names imported from it) for every import statement anywhere in the file."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, []
        elif isinstance(node, ast.ImportFrom):
            target = node.module
            if node.level:
                target = _resolve_relative(module, path, node.level, node.module)
            if target:
                yield target, [alias.name for alias in node.names]


def _owning_module(name: str, modules: Mapping[str, Path]) -> str | None:
    """The longest prefix of dotted `name` that is a module of ours (``harness.x.y.Z`` -> ``harness.x.y``)."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in modules:
            return candidate
        parts.pop()
    return None


def import_graph(root: Path = ROOT, package: str = PACKAGE) -> Graph:
    """module -> the modules of `package` it imports (self-imports kept, so they can be reported)."""
    modules = module_names(root, package)
    graph: Graph = {name: set() for name in modules}
    for module, path in modules.items():
        for target, names in imported_names(module, path):
            if target != package and not target.startswith(package + "."):
                continue
            # `from a.b import c`: the submodule a.b.c if there is one, else a.b itself.
            submodules = [f"{target}.{name}" for name in names if f"{target}.{name}" in modules]
            plain = [name for name in names if f"{target}.{name}" not in modules]
            if submodules:
                graph[module].update(submodules)
            if plain or not names:
                owner = _owning_module(target, modules)
                if owner is not None:
                    graph[module].add(owner)
    return graph


def strongly_connected_components(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative (no recursion limit); each component sorted, components in finishing order."""
    index: dict[str, int] = {}
    lowlink: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    counter = 0

    for start in sorted(graph):
        if start in index:
            continue
        work: list[tuple[str, Iterator[str]]] = []
        index[start] = lowlink[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        work.append((start, iter(sorted(graph.get(start, ())))))
        while work:
            node, successors = work[-1]
            advanced = False
            for succ in successors:
                if succ not in index:
                    index[succ] = lowlink[succ] = counter
                    counter += 1
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(sorted(graph.get(succ, ())))))
                    advanced = True
                    break
                if succ in on_stack:
                    lowlink[node] = min(lowlink[node], index[succ])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                lowlink[parent] = min(lowlink[parent], lowlink[node])
            if lowlink[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                components.append(sorted(component))
    return components


def cycle_groups(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """Components with more than one module, plus single modules that import themselves."""
    groups = [c for c in strongly_connected_components(graph) if len(c) > 1 or c[0] in graph.get(c[0], ())]
    return sorted(groups)


def _in_cli_layer(module: str) -> bool:
    return any(module == top or module.startswith(top + ".") for top in CLI_LAYER)


def commands_importers(graph: Mapping[str, set[str]]) -> dict[str, list[str]]:
    """Modules below the CLI layer that import something from ``harness.commands``."""
    found: dict[str, list[str]] = {}
    for module, targets in graph.items():
        if _in_cli_layer(module):
            continue
        bad = sorted(t for t in targets if t == "harness.commands" or t.startswith("harness.commands."))
        if bad:
            found[module] = bad
    return found


def _describe(group: list[str], graph: Mapping[str, set[str]]) -> str:
    members = set(group)
    edges = [f"    {a} -> {b}" for a in group for b in sorted(graph[a] & members)]
    return "\n".join([f"  {{{', '.join(group)}}}", *edges])


def test_cycle_detection_finds_a_known_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}}
    assert cycle_groups(graph) == [["a", "b", "c"], ["e"]]


def test_edges_follow_the_import_rules(tmp_path: Path) -> None:
    files = {
        "harness/__init__.py": "",
        "harness/b.py": "",
        "harness/a.py": "from . import b\nfrom .sub import c\nfrom harness.sub import thing\n",
        "harness/sub/__init__.py": "from ..a import x\n",
        "harness/sub/c.py": ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from harness.a import y\n"
                             "def f():\n    import harness.b\n    import os\n"),
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    assert import_graph(tmp_path) == {
        "harness": set(),
        "harness.a": {"harness.b", "harness.sub.c", "harness.sub"},
        "harness.b": set(),
        "harness.sub": {"harness.a"},
        "harness.sub.c": {"harness.a", "harness.b"},
    }
    assert cycle_groups(import_graph(tmp_path)) == [["harness.a", "harness.sub", "harness.sub.c"]]


def test_no_import_cycles() -> None:
    graph = import_graph()
    groups = cycle_groups(graph)
    assert not groups, "import cycles in harness/:\n" + "\n".join(_describe(g, graph) for g in groups)


def test_only_the_cli_layer_imports_commands() -> None:
    found = commands_importers(import_graph())
    assert not found, "modules below the CLI import harness.commands: " + repr(found)


def main() -> int:
    graph = import_graph()
    groups = cycle_groups(graph)
    edges = sum(len(targets) for targets in graph.values())
    print(f"{len(graph)} modules, {edges} edges, {len(groups)} cycle group(s)")
    for group in groups:
        print(_describe(group, graph))
    upward = commands_importers(graph)
    for module, targets in sorted(upward.items()):
        print(f"  below the CLI: {module} imports {', '.join(targets)}")
    return 1 if groups or upward else 0


if __name__ == "__main__":
    sys.exit(main())
