"""Imports only go down: no cycles among modules or among packages, and only the CLI layer imports
``harness.commands``.

Every import statement of ``harness/``, ``leaderboard_app/`` and ``bench/`` counts, wherever it sits:
top level, inside functions and methods (those run later, but still make one package depend on
another), and for the module graph also inside ``if TYPE_CHECKING:`` blocks.
``from harness.x import y`` is an edge to ``harness.x.y`` when that is a module, else to
``harness.x``; a package ``harness.x`` stands for its ``__init__.py``.

Two graphs:

* modules: one node per module; a cycle here is an import-order hazard.
* packages: each subpackage of ``harness`` (``harness.evaluation``, ``harness.retrieval``, ...) is
  one node, each top-level module ``harness/<x>.py`` is its own node, and ``leaderboard_app`` and
  ``bench`` are one node each. Imports under ``if TYPE_CHECKING:`` never run and are left out. A
  cycle here means no package can be understood or tested without the others, even when every
  module-level import is acyclic (in-function imports hid such a cycle for a long time).

Runnable as a script, for quoting in an issue note::

    .venv/bin/python tests/test_import_graph.py

prints both graphs' sizes and every cycle group with the import lines (file:line) inside it, and
exits 1 if there is one or if something below the CLI imports ``harness.commands``.
"""

from __future__ import annotations

import ast
import functools
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "harness"
PACKAGES = (PACKAGE, "leaderboard_app", "bench")  # bench/ is a folder of scripts, not a package: still parsed
CLI_LAYER = ("harness.cli", "harness.__main__", "harness.commands")
COMMANDS = "harness.commands"
SHOWN = 6  # import lines quoted per edge of a cycle

# The packages in layers, bottom first: a package imports only packages of lower layers (its own
# modules aside). docs/architecture.md draws the same list (tests/test_architecture_doc.py checks it).
LAYERS: tuple[tuple[str, ...], ...] = (
    ("harness", "harness.core"),  # the seed, errors, paths, files, processes, statuses
    ("harness.data", "harness.stages"),  # benchmarks and their files; the stage graph and cache
    ("harness.papers", "harness.training"),  # the papers' numbers; the shared training loop
    ("harness.spec", "harness.retrieval"),  # a method's declaration; search and encoding
    ("harness.corpus", "harness.finetune", "harness.pretrain", "harness.records"),
    ("harness.evaluation",),  # measures, comparisons, verdicts
    ("harness.pipelines", "harness.gate"),  # each family's stages in order; grading and the gate
    ("harness.run",),  # one invocation: plan, run, score, record; reproduce
    ("harness.present",),  # what people read: glance, report
    ("harness.commands", "leaderboard_app", "bench"),  # the commands, the Streamlit app, the benchmarks
    ("harness.cli",),  # the argument parser, which dispatches to the commands
    ("harness.__main__",),
)

Graph = dict[str, set[str]]


@dataclass(frozen=True)
class Edge:
    """One import: module `source` imports module `target` at path:line."""

    source: str
    target: str
    path: Path
    line: int
    type_checking: bool  # under ``if TYPE_CHECKING:``: read by type checkers only, never run

    def where(self, root: Path = ROOT) -> str:
        path = self.path.relative_to(root) if self.path.is_relative_to(root) else self.path
        return f"{path}:{self.line}"


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


def _is_type_checking(test: ast.expr) -> bool:
    """``if TYPE_CHECKING:`` or ``if typing.TYPE_CHECKING:``."""
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def import_statements(tree: ast.AST) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import statement anywhere in `tree` (functions and methods included), with whether it
    sits in the body of an ``if TYPE_CHECKING:`` (its ``else:`` runs, so it does not count as one)."""
    stack: list[tuple[ast.AST, bool]] = [(tree, False)]
    while stack:
        node, guarded = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node, guarded
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            stack += [(child, True) for child in node.body] + [(child, guarded) for child in node.orelse]
        else:
            stack += [(child, guarded) for child in ast.iter_child_nodes(node)]


def imported_names(module: str, path: Path, node: ast.Import | ast.ImportFrom) -> Iterator[tuple[str, list[str]]]:
    """(absolute module named, names imported from it) for one import statement of `module`."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            yield alias.name, []
        return
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


def all_modules(root: Path = ROOT, packages: Iterable[str] = PACKAGES) -> dict[str, Path]:
    """:func:`module_names` of each of `packages` that exists under `root`."""
    modules: dict[str, Path] = {}
    for package in packages:
        if (root / package).is_dir():
            modules.update(module_names(root, package))
    return modules


def import_edges(root: Path = ROOT, packages: Iterable[str] = PACKAGES) -> list[Edge]:
    """Every import of one of our modules by another, in file and line order."""
    modules = all_modules(root, packages)
    edges: list[Edge] = []
    for module, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node, guarded in import_statements(tree):
            for target, names in imported_names(module, path, node):
                # `from a.b import c`: the submodule a.b.c if there is one, else a.b itself.
                found = {f"{target}.{name}" for name in names if f"{target}.{name}" in modules}
                if len(found) < len(names) or not names:
                    owner = _owning_module(target, modules)
                    if owner is not None:
                        found.add(owner)
                edges += [Edge(module, t, path, node.lineno, guarded) for t in sorted(found)]
    return sorted(edges, key=lambda e: (str(e.path), e.line, e.target))


@functools.cache
def _project_edges() -> tuple[Edge, ...]:
    """This checkout's imports, parsed once for the tests below."""
    return tuple(import_edges())


def import_graph(root: Path = ROOT, packages: Iterable[str] = PACKAGES, edges: Iterable[Edge] | None = None) -> Graph:
    """module -> the modules it imports (self-imports kept, so they can be reported); `edges`: those
    of :func:`import_edges` if already parsed."""
    graph: Graph = {name: set() for name in all_modules(root, packages)}
    for edge in import_edges(root, packages) if edges is None else edges:
        graph[edge.source].add(edge.target)
    return graph


def package_node(module: str) -> str:
    """The package-graph node of a module: ``harness.<x>`` for a subpackage's modules and for a
    top-level module alike (``harness.retrieval.dense`` -> ``harness.retrieval``, ``harness.spec.method``
    -> itself), ``harness`` for its ``__init__``, the first part for anything else (``leaderboard_app``)."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == PACKAGE else parts[0]


def package_graph(
    edges: Iterable[Edge], modules: Iterable[str] = ()
) -> tuple[Graph, dict[tuple[str, str], list[Edge]]]:
    """(node -> nodes it imports, (node, node) -> the import lines behind that edge); imports within
    one node and imports under ``if TYPE_CHECKING:`` are left out. `modules` adds nodes that import nothing."""
    graph: Graph = {package_node(m): set() for m in modules}
    lines: dict[tuple[str, str], list[Edge]] = {}
    for edge in edges:
        a, b = package_node(edge.source), package_node(edge.target)
        graph.setdefault(a, set())
        graph.setdefault(b, set())
        if a == b or edge.type_checking:
            continue
        graph[a].add(b)
        lines.setdefault((a, b), []).append(edge)
    return graph, lines


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


def commands_importers(edges: Iterable[Edge]) -> list[Edge]:
    """Imports of ``harness.commands`` by modules below the CLI layer (``if TYPE_CHECKING:`` ones too)."""
    return [
        e
        for e in edges
        if (e.target == COMMANDS or e.target.startswith(COMMANDS + ".")) and not _in_cli_layer(e.source)
    ]


def _describe(group: list[str], graph: Mapping[str, set[str]]) -> str:
    members = set(group)
    edges = [f"    {a} -> {b}" for a in group for b in sorted(graph[a] & members)]
    return "\n".join([f"  {{{', '.join(group)}}}", *edges])


def _describe_packages(
    group: list[str], graph: Mapping[str, set[str]], lines: Mapping[tuple[str, str], list[Edge]], root: Path = ROOT
) -> str:
    """The group's nodes, then each edge inside it with the import lines that make it: removing every
    line of one edge on each of its cycles breaks the group."""
    members = set(group)
    out = [f"  {{{', '.join(group)}}}"]
    for a in group:
        for b in sorted(graph[a] & members):
            where = list(dict.fromkeys(e.where(root) for e in lines[a, b]))
            more = f" (+{len(where) - SHOWN} more)" if len(where) > SHOWN else ""
            out.append(f"    {a} -> {b}: " + ", ".join(where[:SHOWN]) + more)
    return "\n".join(out)


def _write(root: Path, files: Mapping[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")


def test_cycle_detection_finds_a_known_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}}
    assert cycle_groups(graph) == [["a", "b", "c"], ["e"]]


def test_edges_follow_the_import_rules(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "harness/__init__.py": "",
            "harness/b.py": "",
            "harness/a.py": "from . import b\nfrom .sub import c\nfrom harness.sub import thing\n",
            "harness/sub/__init__.py": "from ..a import x\n",
            "harness/sub/c.py": (
                "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from harness.a import y\n"
                "def f():\n    import harness.b\n    import os\n"
            ),
        },
    )
    assert import_graph(tmp_path) == {
        "harness": set(),
        "harness.a": {"harness.b", "harness.sub.c", "harness.sub"},
        "harness.b": set(),
        "harness.sub": {"harness.a"},
        "harness.sub.c": {"harness.a", "harness.b"},
    }
    assert cycle_groups(import_graph(tmp_path)) == [["harness.a", "harness.sub", "harness.sub.c"]]


def test_package_graph_counts_function_imports_but_not_type_checking_ones(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "harness/__init__.py": "",
            "harness/top.py": "from harness.low.deep import x\n",
            "harness/low/__init__.py": "",
            "harness/low/deep.py": (
                "import typing\nfrom harness.low import sibling\nif typing.TYPE_CHECKING:\n"
                "    from harness import top\nelse:\n    pass\n"
                "class A:\n    def f(self):\n        if True:\n            from harness.high import y\n"
            ),
            "harness/low/sibling.py": "",
            "harness/high/__init__.py": "from harness.low import deep\n",
            "harness/commands/__init__.py": "",
            "harness/commands/run.py": "from harness.high import y\n",
            "leaderboard_app/__init__.py": "",
            "leaderboard_app/tables.py": "def f():\n    from harness.commands.run import z\n",
        },
    )
    edges = import_edges(tmp_path)
    graph, lines = package_graph(edges, all_modules(tmp_path))
    assert graph == {
        "harness": set(),
        "harness.top": {"harness.low"},
        "harness.low": {"harness.high"},
        "harness.high": {"harness.low"},
        "harness.commands": {"harness.high"},
        "leaderboard_app": {"harness.commands"},
    }
    assert [e.where(tmp_path) for e in lines["harness.low", "harness.high"]] == ["harness/low/deep.py:10"]
    assert cycle_groups(graph) == [["harness.high", "harness.low"]]
    assert "harness.top" not in graph["harness.low"]  # only under TYPE_CHECKING
    assert [e.where(tmp_path) for e in commands_importers(edges)] == ["leaderboard_app/tables.py:2"]


def test_no_import_cycles() -> None:
    graph = import_graph(edges=_project_edges())
    groups = cycle_groups(graph)
    assert not groups, "module import cycles:\n" + "\n".join(_describe(g, graph) for g in groups)


def test_no_package_cycles() -> None:
    graph, lines = package_graph(_project_edges(), all_modules())
    groups = cycle_groups(graph)
    assert not groups, "package import cycles (in-function imports included):\n" + "\n".join(
        _describe_packages(g, graph, lines) for g in groups
    )


def layer_of(node: str) -> int | None:
    return next((i for i, layer in enumerate(LAYERS) if node in layer), None)


def upward_edges(edges: Iterable[Edge], modules: Iterable[str] = ()) -> list[str]:
    """Each package edge that does not point to a lower layer (sideways or up), with its import lines,
    and each package the layers do not place."""
    graph, lines = package_graph(edges, modules)
    found = [
        f"{node}: in no layer of LAYERS (tests/test_import_graph.py): place it"
        for node in sorted(graph)
        if layer_of(node) is None
    ]
    for (a, b), where in sorted(lines.items()):
        la, lb = layer_of(a), layer_of(b)
        if la is not None and lb is not None and lb >= la:
            found.append(f"{a} (layer {la}) imports {b} (layer {lb}): " + ", ".join(e.where() for e in where[:SHOWN]))
    return found


def test_imports_point_down_the_layers() -> None:
    found = upward_edges(_project_edges(), all_modules())
    assert not found, "imports that do not point down a layer:\n" + "\n".join(f"  {line}" for line in found)


def test_only_the_cli_layer_imports_commands() -> None:
    found = commands_importers(_project_edges())
    assert not found, "below the CLI, imports of harness.commands:\n" + "\n".join(
        f"  {e.where()}: {e.source} imports {e.target}" for e in found
    )


def main() -> int:
    edges = import_edges()
    graph = import_graph(edges=edges)
    groups = cycle_groups(graph)
    print(
        f"modules of {', '.join(PACKAGES)}: {len(graph)} modules, {sum(map(len, graph.values()))} edges, "
        f"{len(groups)} cycle group(s)"
    )
    for group in groups:
        print(_describe(group, graph))
    packages, lines = package_graph(edges, all_modules())
    package_groups = cycle_groups(packages)
    print(
        f"packages of {', '.join(PACKAGES)}: {len(packages)} nodes, {len(lines)} edges "
        f"({sum(map(len, lines.values()))} import lines), {len(package_groups)} cycle group(s)"
    )
    for group in package_groups:
        print(_describe_packages(group, packages, lines))
    upward = commands_importers(edges)
    for e in upward:
        print(f"  below the CLI: {e.where()}: {e.source} imports {e.target}")
    layering = upward_edges(edges, all_modules())
    for line in layering:
        print(f"  not down a layer: {line}")
    return 1 if groups or package_groups or upward or layering else 0


if __name__ == "__main__":
    sys.exit(main())
