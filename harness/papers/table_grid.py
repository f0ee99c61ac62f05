"""A table's cells addressed by row and column key, and how findings about them print numbers.

Shared by the consistency checks (:mod:`harness.papers.consistency`) and the text claims
(:mod:`harness.papers.text_claims`).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from harness.papers.registry import load_papers
from harness.papers.schema import PaperInfo, ReportedCell, TableInfo

EPS = 1e-9  # two printed numbers this close are equal


def fmt(x: float) -> str:
    """A computed number without trailing zeros (at most 4 decimals)."""
    return f"{x:.4f}".rstrip("0").rstrip(".")


def cell_text(c: ReportedCell) -> str:
    """A cell as printed, marks included."""
    return "(not legible)" if c.value is None else (c.value or "(blank)") + c.marks


class TableGrid:
    """A table's cells addressed by (row key, column key)."""

    def __init__(self, info: TableInfo, cells: Iterable[ReportedCell]):
        self.info = info
        self.cells = {(c.row_key, c.column_key): c for c in cells}

    def get(self, row: str, col: str) -> ReportedCell | None:
        return self.cells.get((row, col))

    def line(self, axis: str, key: str) -> list[ReportedCell]:
        """The cells of one row ('rows') or one column ('columns') in table order."""
        if axis == "rows":
            return [c for k in self.info.column_keys if (c := self.get(key, k))]
        return [c for k in self.info.row_keys if (c := self.get(k, key))]


def papers_for(cells: list[ReportedCell]) -> list[PaperInfo]:
    """Paper metadata (tables, claims, ...) from the files the cells came from."""
    dirs = {str(Path(c.source).parent) for c in cells if c.source}
    wanted = {c.paper for c in cells}
    papers: list[PaperInfo] = []
    for d in sorted(dirs):
        papers.extend(p for p in load_papers(d) if p.paper in wanted)
    return papers
