"""Numbers the papers state in their text (``claims:`` in a registry file), recounted or recomputed
from their own tables: "better on 11 of 14 datasets", "+2.1 points over ...".

Each claim's ``check`` is one of: ``difference`` (a - b is the stated number, to 0.05),
``greater`` (a > b), ``equals`` (a prints the number), ``count_greater`` (a beats b on that many
of ``over``) and ``count_best`` (``target`` is best, ties included, on that many of ``over``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from harness.papers.schema import PaperInfo, ReportedCell
from harness.papers.table_grid import EPS, TableGrid, cell_text, fmt, papers_for


@dataclass(frozen=True)
class ClaimResult:
    """One claim rechecked: ok, mismatch (the tables say otherwise) or unverifiable."""

    paper: str
    claim_id: str
    text: str
    status: str  # ok | mismatch | unverifiable
    stated: Any
    found: Any
    detail: str
    cells: tuple[str, ...]


def evaluate_claims(cells: list[ReportedCell], papers: list[PaperInfo] | None = None) -> list[ClaimResult]:
    """Recount/recompute every recorded claim from the given cells."""
    papers = papers if papers is not None else papers_for(cells)
    by_table: dict[tuple[str, str], list[ReportedCell]] = defaultdict(list)
    for c in cells:
        by_table[(c.paper, c.table)].append(c)
    infos = {(p.paper, t.label): t for p in papers for t in p.tables}
    results = []
    for p in papers:
        for claim in p.claims:
            chk = claim["check"]
            target = (chk.get("paper") or p.paper, chk["table"])
            info = infos.get(target)
            if info is None:
                results.append(
                    ClaimResult(
                        p.paper,
                        claim["id"],
                        claim["text"],
                        "unverifiable",
                        claim.get("number"),
                        None,
                        f"{target[0]} {target[1]} is not among the checked cells",
                        (),
                    )
                )
                continue
            grid = TableGrid(info, by_table.get(target, []))
            results.append(_evaluate(p.paper, claim, chk, grid, target))
    return results


def _evaluate(
    paper: str, claim: dict[str, Any], chk: dict[str, Any], grid: TableGrid, target: tuple[str, str]
) -> ClaimResult:
    kind, stated = chk["kind"], claim.get("number")
    src = f"{target[0]} {target[1]}"

    def result(status: str, found: Any, detail: str, cells: Iterable[ReportedCell]) -> ClaimResult:
        return ClaimResult(
            paper, claim["id"], claim["text"], status, stated, found, detail, tuple(c.cell_id for c in cells)
        )

    if kind in ("difference", "greater", "equals"):
        return _evaluate_pair(kind, stated, chk, grid, src, result)

    axis = chk["axis"]  # a, b, target are keys on this axis; 'over' runs along the other
    other = "columns" if axis == "rows" else "rows"

    def cell(key: str, over_key: str) -> ReportedCell | None:
        return grid.get(key, over_key) if axis == "rows" else grid.get(over_key, key)

    used, hits, skipped = [], [], []
    if kind == "count_greater":
        for o in chk["over"]:
            ca, cb = cell(chk["a"], o), cell(chk["b"], o)
            if ca is None or cb is None or ca.number is None or cb.number is None:
                skipped.append(o)
                continue
            used += [ca, cb]
            if ca.number > cb.number + EPS:
                hits.append(o)
        misses = [o for o in chk["over"] if o not in hits and o not in skipped]
        detail = f"{src}: {chk['a']} > {chk['b']} on {len(hits)} of {len(chk['over']) - len(skipped)} {other}"
    else:  # count_best
        keys_on_axis = chk.get("among") or (grid.info.row_keys if axis == "rows" else grid.info.column_keys)
        for o in chk["over"]:
            mine = cell(chk["target"], o)
            rivals = [x for k in keys_on_axis if (x := cell(k, o)) is not None and x.number is not None]
            if mine is None or mine.number is None or not rivals:
                skipped.append(o)
                continue
            used += rivals
            if mine.number >= max(x.number for x in rivals) - EPS:
                hits.append(o)
        misses = [o for o in chk["over"] if o not in hits and o not in skipped]
        detail = f"{src}: {chk['target']} is best (ties included) on {len(hits)} of {len(chk['over']) - len(skipped)} {other}"
    if misses:
        detail += f"; not on: {', '.join(misses)}"
    if skipped:
        detail += f"; unreadable: {', '.join(skipped)}"
    status = "ok" if len(hits) == stated else ("unverifiable" if skipped else "mismatch")
    return result(status, len(hits), detail, used)


def _evaluate_pair(
    kind: str, stated: Any, chk: dict[str, Any], grid: TableGrid, src: str, result: Callable[..., ClaimResult]
) -> ClaimResult:
    """A claim about one cell (equals) or two (greater, difference), graded through ``result``."""
    refs = [chk["a"]] + ([chk["b"]] if kind != "equals" else [])
    found_cells = [grid.get(r, c) for r, c in refs]
    if any(c is None or c.number is None for c in found_cells):
        shown = ", ".join(f"{r}/{c}={cell_text(x) if x else 'missing'}" for (r, c), x in zip(refs, found_cells))
        return result("unverifiable", None, f"{src}: {shown}", [c for c in found_cells if c])
    a = found_cells[0].number
    if kind == "equals":
        ok = abs(a - stated) <= EPS
        return result(
            "ok" if ok else "mismatch",
            a,
            f"{src} {refs[0][0]} / {refs[0][1]} prints {found_cells[0].value}",
            found_cells,
        )
    b = found_cells[1].number
    if kind == "greater":
        ok = a > b + EPS
        rel = ">" if a > b + EPS else ("=" if abs(a - b) <= EPS else "<")
        return result(
            "ok" if ok else "mismatch",
            f"{fmt(a)} {rel} {fmt(b)}",
            f"{src}: {refs[0][0]} / {refs[0][1]} = {found_cells[0].value} vs {refs[1][0]} / {refs[1][1]} = {found_cells[1].value}",
            found_cells,
        )
    diff = a - b
    ok = abs(diff - stated) <= 0.05 + EPS  # printed to 0.1 pp
    return result(
        "ok" if ok else "mismatch",
        round(diff, 4),
        f"{src}: {found_cells[0].value} - {found_cells[1].value} = {fmt(diff)}",
        found_cells,
    )
