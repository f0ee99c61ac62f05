"""The printed name of the system a reported cell (or a comparison made against one) belongs to.

The gate's ``against`` column, the report and the leaderboard all label a cell this way.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from typing import Any

from harness.papers.citation import table_citation
from harness.papers.registry import paper_key


def _norm(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def system_axes(cells: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str], str]:
    """(paper, table) -> "rows" or "columns": the axis that names the systems.

    Systems run across ("columns") when every row holds one benchmark and the rows hold
    different ones (a BEIR table lists datasets down); otherwise rows name the systems.
    """
    rows_of: dict[tuple[str, str], dict[str, set[str]]] = {}
    for c in cells:
        if c.get("benchmark"):
            table = rows_of.setdefault((paper_key(c), str(c.get("table"))), {})
            table.setdefault(str(c.get("row")), set()).add(str(c["benchmark"]))
    out = {}
    for key, rows in rows_of.items():
        one_each = all(len(b) == 1 for b in rows.values())
        out[key] = "columns" if one_each and len(set().union(*rows.values())) > 1 else "rows"
    return out


def system_label(comp: Mapping[str, Any], axes: Mapping[tuple[str, str], str] | None = None) -> str:
    """The printed name of the system a cell belongs to: its row, or its column when the
    table lists datasets down (``axes`` from ``system_axes``; else guessed from the cell)."""
    row, col, bench = str(comp.get("row") or ""), str(comp.get("column") or ""), str(comp.get("benchmark") or "")
    axis = (axes or {}).get((paper_key(comp), str(comp.get("table"))))
    if axis:
        return col if axis == "columns" else row
    r, b = _norm(row), _norm(bench)
    if (
        col
        and r
        and b
        and (
            r == b or r in b or b in r or r.startswith("average") or difflib.SequenceMatcher(None, r, b).ratio() >= 0.8
        )
    ):
        return col
    return row


def source_label(comp: Mapping[str, Any], axes: Mapping[tuple[str, str], str] | None = None) -> str:
    """'Wu et al. 2023 (QC v2), Table 1 · system': where the number a comparison is made against was printed."""
    return f"{table_citation(paper_key(comp), str(comp.get('table', '')))} · {system_label(comp, axes)}".strip()
