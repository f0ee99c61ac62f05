"""One owner per question: precision is decided in harness.training.precision (one ``resolve_precision``),
and who a process is (world size, rank, main rank) is harness.core.ranks's to say, so no code sees another
answer because it called another helper (issue 49: two ``resolve_precision`` and four world sizes)."""

from __future__ import annotations

import ast
from collections import defaultdict

from harness.core.paths import PROJECT_ROOT

OWNERS = {
    "resolve_precision": "harness/training/precision.py",
    "world_size": "harness/core/ranks.py",
    "rank": "harness/core/ranks.py",
    "is_main": "harness/core/ranks.py",
}
GONE = ("get_world_size", "get_rank", "_world", "resolved_precision")


def module_functions() -> dict[str, list[str]]:
    """Every module-level function of the package by name, with the files that define one."""
    found: dict[str, list[str]] = defaultdict(list)
    for path in sorted((PROJECT_ROOT / "harness").rglob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                found[node.name].append(str(path.relative_to(PROJECT_ROOT)))
    return found


def test_each_question_has_one_function_in_one_module():
    found = module_functions()
    assert {name: found[name] for name in OWNERS} == {name: [path] for name, path in OWNERS.items()}
    assert {name: found[name] for name in GONE if found[name]} == {}


def test_the_owner_of_ranks_imports_no_torch():
    tree = ast.parse((PROJECT_ROOT / OWNERS["world_size"]).read_text(encoding="utf-8"))
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert not {name for name in imported if name.split(".")[0] == "torch"}
