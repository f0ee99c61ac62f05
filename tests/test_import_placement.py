"""Imports sit at the top of a module, except where start-up time says otherwise.

An import inside a function is kept only when what it loads costs every command start-up time:
a package of ``SLOW`` (measured here: ``python -c "import X"`` on this project's 2-core machine), or a
module of ours that imports one of them at its top. Imports guarded by ``try:`` (optional packages)
and the only statement of a block are left as they are. docs/architecture.md states the rule.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OURS = ("harness", "leaderboard_app")
# Seconds to import, measured alone: torch 1.27, mlflow 1.26, nltk 1.29, transformers 0.71, pyserini's
# Lucene searcher 5.7 (it starts the JVM), pandas 0.25, altair 0.23, faiss 0.18; numpy (0.10), tqdm (0.08)
# and the standard library are below the 0.15 s line.
SLOW = {
    "torch",
    "transformers",
    "mlflow",
    "nltk",
    "pandas",
    "altair",
    "faiss",
    "streamlit",
    "sentence_transformers",
    "pyserini",
    "jnius",
}


def modules() -> dict[str, Path]:
    found = {}
    for package in OURS:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


MODULES = modules()


@functools.cache
def tree(module: str) -> ast.Module:
    return ast.parse(MODULES[module].read_text(encoding="utf-8"))


def target(module: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")
    if MODULES[module].name != "__init__.py":
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def named(module: str, node: ast.Import | ast.ImportFrom) -> list[str]:
    """The dotted modules an import statement loads (``from a.b import c``: a.b.c when that is ours)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = target(module, node)
    return [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]


def ours(name: str) -> str | None:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def top_level(module: str) -> list[ast.Import | ast.ImportFrom]:
    """Imports that run when the module loads: module level, in if/try blocks, not under TYPE_CHECKING."""
    found: list[ast.Import | ast.ImportFrom] = []
    stack = list(tree(module).body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        elif isinstance(node, ast.If) and "TYPE_CHECKING" not in ast.unparse(node.test):
            stack += node.body + node.orelse
        elif isinstance(node, ast.If):
            stack += node.orelse
        elif isinstance(node, ast.Try):
            stack += node.body + node.orelse + node.finalbody + [s for h in node.handlers for s in h.body]
    return found


@functools.cache
def slow(module: str) -> frozenset[str]:
    """The SLOW packages loading `module` (ours) imports: at its top, through its packages' __init__s too."""
    found: set[str] = set()
    parents = [".".join(module.split(".")[:i]) for i in range(1, module.count(".") + 1)]
    for parent in parents:
        if parent in MODULES:
            found |= slow(parent)
    for node in top_level(module):
        for name in named(module, node):
            own = ours(name)
            if own is None:
                found |= {part for part in name.split(".") if part in SLOW}
            elif own != module:
                found |= slow(own)
    return frozenset(found)


def deferred_without_reason() -> list[str]:
    """`file:line: import` for each in-function import that loads nothing slow."""
    found = []
    for module in MODULES:
        guarded: set[int] = set()
        for node in ast.walk(tree(module)):
            if isinstance(node, ast.Try):
                guarded |= {id(s) for s in node.body}
            for block in (getattr(node, f, None) for f in ("body", "orelse", "finalbody")):
                if (
                    isinstance(block, list)
                    and block
                    and all(isinstance(s, (ast.Import, ast.ImportFrom)) for s in block)
                ):
                    guarded |= {id(s) for s in block}  # a block of imports only: moving them would empty it
        for function in ast.walk(tree(module)):
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(function):
                if not isinstance(node, (ast.Import, ast.ImportFrom)) or id(node) in guarded:
                    continue
                loads: set[str] = set()
                for name in named(module, node):
                    own = ours(name)
                    loads |= set(slow(own)) if own else {p for p in name.split(".") if p in SLOW}
                if not loads:
                    path = MODULES[module].relative_to(ROOT)
                    found.append(f"{path}:{node.lineno}: {ast.unparse(node)}")
    return sorted(set(found))


def test_imports_inside_functions_load_something_slow() -> None:
    found = deferred_without_reason()
    assert not found, (
        "imports inside functions that cost no start-up time: move them to the module's top "
        "(tests/test_import_placement.py says when an import may stay inside):\n"
        + "\n".join(f"  {line}" for line in found)
    )


def test_a_slow_import_is_found_through_our_modules() -> None:
    assert "torch" in slow("harness.training.engine")  # imports torch at its top
    assert not slow("harness.core.errors")
