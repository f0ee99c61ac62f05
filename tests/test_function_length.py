"""No function in harness/ or leaderboard_app/ runs over 80 lines: a longer one does several jobs.

Length is ``end_lineno - lineno + 1`` of the ``def`` (decorators not counted). argparse ``add_parser``
functions are excepted: they are one flat list of option declarations, not logic. ``ALLOWED`` names the
functions not yet split (none today); it only shrinks.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("harness", "leaderboard_app")
LIMIT = 80
# (path, function) pairs not yet split.
ALLOWED: set[tuple[str, str]] = set()


def long_functions(source: str, limit: int = LIMIT) -> list[tuple[str, int]]:
    """(name, length) of every function in ``source`` longer than ``limit`` lines, argparse ``add_parser`` excepted."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or node.name == "add_parser":
            continue
        length = (node.end_lineno or node.lineno) - node.lineno + 1
        if length > limit:
            found.append((node.name, length))
    return found


def test_the_rule_measures_defs_and_excepts_add_parser() -> None:
    body = "".join(f"    x{i} = {i}\n" for i in range(4))
    method = "".join("    " + line for line in (body + body).splitlines(keepends=True))
    source = f"def short():\n{body}\ndef add_parser(sub):\n{body}{body}\nclass K:\n    def method(self):\n{method}"
    assert long_functions(source, limit=5) == [("method", 9)]
    assert long_functions(source, limit=9) == []


def test_no_function_over_80_lines() -> None:
    found = {}
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            for name, length in long_functions(path.read_text(encoding="utf-8")):
                found[(rel, name)] = length
    over = [f"{rel} {name}: {n} lines" for (rel, name), n in sorted(found.items()) if (rel, name) not in ALLOWED]
    assert not over, f"functions over {LIMIT} lines (split them by job):\n" + "\n".join(over)
    stale = sorted(f"{rel} {name}" for rel, name in ALLOWED if (rel, name) not in found)
    assert not stale, "allowlisted functions that are now short enough (drop them from ALLOWED):\n" + "\n".join(stale)
