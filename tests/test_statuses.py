"""Every status word is declared once (harness/core/statuses.py) and read from there: the gate's failing
sets, the legends and the badge colours derive from the declaration, and no other module writes one."""

from __future__ import annotations

import ast
from pathlib import Path

from harness.core import statuses as S
from harness.evaluation import verdict
from harness.gate.grading import GateRow
from harness.gate.run import GateResult

ROOT = Path(__file__).resolve().parent.parent


def test_the_gate_fails_on_exactly_the_failing_statuses() -> None:
    assert set(S.FAILING) == {
        "FAIL",
        "DIFFERENT-BELOW",
        "DIFFERENT-ABOVE",
        "CORRUPT",
        "DATA-MISMATCH",
        "MISSING",
        "WRONG-REFERENCE",
        "UNREADABLE",
        "ERROR",
        "UNTRAINED",
    }
    assert set(S.STRICT_FAILING) - set(S.FAILING) == {
        "NEAR",
        "UNKNOWN-METHOD",
        "NO-REFERENCE",
        "STALE-REFERENCE",
        "SPEC-CHANGED",
        "IN-PROGRESS",
    }
    for name in S.STATUSES:
        rows = [GateRow(name, "r", "m", "p")]
        assert GateResult(Path("."), rows, []).passed == (name not in S.FAILING), name
        assert GateResult(Path("."), rows, [], strict=True).passed == (name not in S.STRICT_FAILING), name


def test_every_status_has_a_kind_a_meaning_and_a_colour() -> None:
    for name, status in S.STATUSES.items():
        assert status.name == name and status.kind in S.KIND_COLOURS and status.meaning, name
        assert status.colour.startswith("#") and len(status.colour) == 7, name
        assert not (status.strict and status.fails), f"{name}: a failing status fails without --strict too"


def test_counts_follow_the_declaration_order_failures_first() -> None:
    rows = [GateRow(name, "r", "m", "p") for name in reversed(list(S.STATUSES))] + [GateRow("OLD-WORD", "r", "m", "p")]
    assert list(GateResult(Path("."), rows, []).counts()) == [*S.STATUSES, "OLD-WORD"]


def test_the_legend_and_the_worst_verdict_derive_from_the_declaration() -> None:
    assert list(verdict.LEGEND) == list(verdict.VERDICTS)
    assert all(verdict.LEGEND[v] == S.STATUSES[v].meaning for v in verdict.VERDICTS)
    assert set(verdict.WORST_FIRST) == set(verdict.VERDICTS)
    assert verdict.worst([S.REPRODUCED, S.INCONCLUSIVE, S.NOT_COMPARABLE]) == S.INCONCLUSIVE
    assert verdict.worst([S.DIFFERENT_ABOVE, S.DIFFERENT_BELOW]) == S.DIFFERENT_BELOW
    assert verdict.worst([]) == ""


def test_no_module_writes_a_status_word_itself() -> None:
    """A status written as a string elsewhere would escape the legend, the colours and the failing sets."""
    found = []
    for folder in ("harness", "leaderboard_app", "bench"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path == ROOT / "harness" / "core" / "statuses.py":
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in S.STATUSES:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}")
    assert not found, "write the constant of harness/core/statuses.py instead:\n" + "\n".join(found)
