"""Internal consistency of the papers' reported numbers (findings, not errors).

``check_papers(cells)`` looks for:

- ``beir_average`` / ``derived_count``: a printed average (BEIR-14, LexMAE's BEIR-12) or a
  printed "BEST ON" count that the table's own cells do not give back;
- ``bold_not_best`` / ``best_not_bold`` / ``bold_tie`` / ``bold_outside_groups``: bold marks
  against the values, in the comparison groups each table declares in its YAML
  (``bold_groups``); ``underline_*`` likewise for "second best is underlined";
- ``claim_mismatch`` / ``claim_unverifiable``: numbers stated in the text (``claims:``)
  recounted or recomputed from the tables (:mod:`harness.papers.text_claims`);
- ``version_mismatch`` / ``version_rows``: one paper's versions disagreeing on the same
  row and column (tables linked by ``counterparts``), and rows only one version prints;
- ``version_text_difference``: text differences recorded between versions;
- ``within_paper_mismatch``: the same run (method or system, benchmark, measure,
  conditions) printed with different values in two tables of one paper;
- ``cross_paper_mismatch``: the same harness method and conditions printed differently by
  two different papers (e.g. BM25 baselines copied from different sources);
- ``extraction_doubt`` and ``known_issue``: what the YAML files record by hand.

Cells carrying a cell-level doubt are left out of bold comparisons (their doubt is reported).
Numbers are compared in their printed unit; a printed average may differ from the mean of
the printed (rounded) cells by at most one unit of its last digit.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from typing import Any

from harness.core.points import reported_text
from harness.papers.registry import load_registry
from harness.papers.schema import PaperInfo, ReportedCell, TableInfo, canonical_label
from harness.papers.table_grid import EPS, TableGrid, cell_text, fmt, papers_for
from harness.papers.text_claims import evaluate_claims

# Conditions that say where a number comes from, not what was run: ignored when matching.
_PROVENANCE_CONDITIONS = {"cited", "reproduction_by_authors", "runs_averaged"}


@dataclass(frozen=True)
class Inconsistency:
    """One finding about the papers' own numbers: its kind, what it says and the cells it concerns."""

    paper: str
    table: str | None
    kind: str
    message: str
    cells: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["cells"] = list(self.cells)
        return out


# ------------------------------------------------------------------------- derived rows


def _decimals(value: str) -> int:
    return len(value.split(".")[1]) if "." in value else 0


def _check_derived(paper: PaperInfo, grid: TableGrid) -> list[Inconsistency]:
    out = []
    info = grid.info
    for rkey, spec in info.derived.items():
        for ckey in info.column_keys:
            printed = grid.get(rkey, ckey)
            if printed is None or printed.number is None:
                continue
            parts = [grid.get(r, ckey) for r in spec["over"]]
            if spec["kind"] == "mean":
                nums = [p.number for p in parts if p is not None and p.number is not None]
                if len(nums) != len(spec["over"]):
                    continue
                mean = sum(nums) / len(nums)
                unit = 10 ** -_decimals(printed.value or "0")
                if abs(mean - printed.number) > unit + EPS:
                    out.append(
                        Inconsistency(
                            paper.paper,
                            info.label,
                            "beir_average",
                            f"{info.label} {rkey} / {ckey}: printed {printed.value}, but the mean of the "
                            f"{len(nums)} printed cells is {fmt(mean)}",
                            (printed.cell_id,) + tuple(p.cell_id for p in parts if p),
                        )
                    )
            else:  # count_best: how many rows this column is best (ties count) on
                wins, involved = 0, []
                for r in spec["over"]:
                    row = [c for c in grid.line("rows", r) if c.number is not None]
                    mine = grid.get(r, ckey)
                    if mine is None or mine.number is None or not row:
                        continue
                    if mine.number >= max(c.number for c in row) - EPS:
                        wins += 1
                        involved.append(mine.cell_id)
                if abs(wins - printed.number) > EPS:
                    out.append(
                        Inconsistency(
                            paper.paper,
                            info.label,
                            "derived_count",
                            f"{info.label} {rkey} / {ckey}: printed {printed.value}, but {ckey} is best "
                            f"(ties included) on {wins} of the {len(spec['over'])} rows by the printed values",
                            (printed.cell_id,) + tuple(involved),
                        )
                    )
    return out


# ------------------------------------------------------------------------------- bold


def _groups(grid: TableGrid) -> tuple[list[tuple[str, list[ReportedCell]]], list[ReportedCell]]:
    """Comparison groups of the table and the bold cells that fall outside every group."""
    info, spec = grid.info, grid.info.bold_groups or {}
    by = spec.get("by", "column")
    lines = info.column_keys if by == "column" else info.row_keys
    others = info.row_keys if by == "column" else info.column_keys
    exclude = set(spec.get("exclude") or [])
    partitions = spec.get("within") or [[k for k in others if k not in exclude]]
    inside = {k for part in partitions for k in part}
    groups, outside = [], []
    for key in lines:
        for part in partitions:
            cells = [grid.get(o, key) if by == "column" else grid.get(key, o) for o in part]
            name = f"{key}" + (f" among {', '.join(part)}" if spec.get("within") else "")
            groups.append((name, [c for c in cells if c is not None]))
        for o in others:
            c = grid.get(o, key) if by == "column" else grid.get(key, o)
            if c is not None and o not in inside and c.bold:
                outside.append(c)
    return groups, outside


def _check_marks(paper: PaperInfo, grid: TableGrid) -> list[Inconsistency]:
    """The bold / underline marks of each comparison group against its best and second-best numbers."""
    info = grid.info
    if info.bold_groups is None:
        return []
    by = info.bold_groups.get("by", "column")

    def names(cells: Iterable[ReportedCell]) -> str:
        # Within a group only the other axis varies: name cells by it.
        return ", ".join(f"'{c.row_key if by == 'column' else c.column_key}'" for c in cells)

    out = []
    groups, outside = _groups(grid)
    if info.bold_extracted:
        for c in outside:
            out.append(
                Inconsistency(
                    paper.paper,
                    info.label,
                    "bold_outside_groups",
                    f"{info.label}: {c.row_key} / {c.column_key} is bold but outside every comparison group",
                    (c.cell_id,),
                )
            )
    for name, cells in groups:
        usable = [c for c in cells if c.number is not None and "cell" not in c.doubt_scopes]
        if len(usable) < 2:
            continue
        ids = tuple(c.cell_id for c in usable)
        where = f"{info.label} [{name}]"
        found = [
            _bold_finding(usable, where, names) if info.bold_extracted else None,
            _underline_finding(usable, where, names) if info.underline == "second_best" else None,
        ]
        out += [Inconsistency(paper.paper, info.label, kind, message, ids) for kind, message in filter(None, found)]
    return out


def _bold_finding(
    usable: list[ReportedCell], where: str, names: Callable[[Iterable[ReportedCell]], str]
) -> tuple[str, str] | None:
    """(kind, message) when the group's bold marks are not exactly its best numbers; None when they are."""
    best = max(c.number for c in usable)
    tops = [c for c in usable if abs(c.number - best) <= EPS]
    bold = [c for c in usable if c.bold]
    wrong = [c for c in bold if abs(c.number - best) > EPS]
    if wrong:
        return (
            "bold_not_best",
            f"{where}: bold {', '.join(c.value or '' for c in wrong)} at {names(wrong)} is not the best; "
            f"{fmt(best)} at {names(tops)} is better",
        )
    if not bold:
        return "best_not_bold", f"{where}: nothing is bold although {names(tops)} is better ({fmt(best)})"
    if len(tops) > 1 and any(not c.bold for c in tops):
        return (
            "bold_tie",
            f"{where}: {fmt(best)} at {names(tops)} is a tie but only {names(c for c in tops if c.bold)} is bold",
        )
    return None


def _underline_finding(
    usable: list[ReportedCell], where: str, names: Callable[[Iterable[ReportedCell]], str]
) -> tuple[str, str] | None:
    """(kind, message) when the group's underlines are not exactly its second-best numbers; None when they
    are, or when there is no second best."""
    best = max(c.number for c in usable)
    lower = [c.number for c in usable if c.number < best - EPS]
    if not lower:
        return None
    second = max(lower)
    seconds = [c for c in usable if abs(c.number - second) <= EPS]
    under = [c for c in usable if c.underline]
    wrong = [c for c in under if abs(c.number - second) > EPS]
    if wrong:
        return (
            "underline_not_second",
            f"{where}: underlined {', '.join(c.value or '' for c in wrong)} at {names(wrong)} is not the second best ({fmt(second)})",
        )
    if under and any(not c.underline for c in seconds):
        return (
            "underline_tie",
            f"{where}: second best {fmt(second)} at {names(seconds)} is a tie but only {names(c for c in seconds if c.underline)} is underlined",
        )
    if not under:
        return (
            "underline_missing",
            f"{where}: nothing is underlined; the second best is {fmt(second)} at {names(seconds)}",
        )
    return None


# ------------------------------------------------------------------------------ claims


def _check_claims(cells: list[ReportedCell], papers: list[PaperInfo]) -> list[Inconsistency]:
    out = []
    for r in evaluate_claims(cells, papers):
        if r.status == "ok":
            continue
        stated = f"states {r.stated}" if r.stated is not None else "states a comparison"
        found = f"found {r.found}" if r.found is not None else "no number found"  # never the word None
        out.append(
            Inconsistency(
                r.paper,
                None,
                f"claim_{r.status}",
                f"claim '{r.claim_id}' ({r.text!r}) {stated}; {found}: {r.detail}",
                r.cells,
            )
        )
    return out


# ---------------------------------------------------------------- identities & versions


def _identity(info: TableInfo, c: ReportedCell) -> tuple:
    """What was run and measured: (system, quantity, conditions), independent of layout."""
    if c.method:
        who = c.method
    elif info.systems == "rows":
        who = "label:" + info.row_canonical[c.row_key]
    else:
        who = "label:" + info.column_canonical[c.column_key]
    if c.benchmark:
        what = (c.benchmark, c.measure)
    elif c.measure:  # a metric on a dataset without a harness benchmark: name it by its header
        where = info.column_groups.get(c.column_key) or info.column_canonical[c.column_key]
        what = ("dataset:" + canonical_label(where), c.measure)
    else:
        what = (
            "label",
            info.column_canonical[c.column_key] if info.systems == "rows" else info.row_canonical[c.row_key],
        )
    cond = tuple(sorted((k, v) for k, v in c.conditions.items() if k not in _PROVENANCE_CONDITIONS))
    return who, what, cond


def identity_text(ident: tuple) -> str:
    """What a cell identity names, as a sentence part: "bm25 on msmarco-dev RR@10", with its stated
    conditions ("under pretrain_steps=50K") when there are any."""
    who, what, cond = ident
    system = who.removeprefix("label:")
    if what[0] == "label":
        quantity = what[1]
    else:
        quantity = f"{what[0].removeprefix('dataset:')} {what[1]}"
    under = f" under {', '.join(f'{k}={v}' for k, v in cond)}" if cond else ""
    return f"{system} on {quantity}{under}"


def points_text(c: ReportedCell) -> str:
    """A score cell in points at its printed precision ("18.7 (printed 0.187)"); any other as printed."""
    if c.unit in ("points", "fraction") and c.score is not None and c.value:
        return reported_text(100.0 * c.score, c.value) + c.marks
    return cell_text(c)


def _same(a: ReportedCell, b: ReportedCell) -> bool:
    if a.score is not None and b.score is not None:
        return abs(a.score - b.score) <= EPS
    return (a.value or "") == (b.value or "")


def _systems(info: TableInfo, cells: list[ReportedCell], keys: set[str] | None) -> dict[tuple, str]:
    """The retrievers a table prints (rows or columns, per ``systems``): identity -> label.

    A system's identity is its method or canonical label plus the conditions in ``keys``
    (conditions constant along the system's line in both compared tables)."""
    lines: dict[str, list[ReportedCell]] = defaultdict(list)
    for c in cells:
        lines[c.row_key if info.systems == "rows" else c.column_key].append(c)
    out = {}
    for line in lines.values():
        who = _identity(info, line[0])[0]
        cond = tuple(sorted((k, v) for k, v in line[0].conditions.items() if keys is None or k in keys))
        out[(who, cond)] = line[0].row_key if info.systems == "rows" else line[0].column_key
    return out


def _line_constant_keys(info: TableInfo, cells: list[ReportedCell]) -> set[str]:
    """Condition names that never vary along one system's line (row or column)."""
    lines: dict[str, list[ReportedCell]] = defaultdict(list)
    for c in cells:
        lines[c.row_key if info.systems == "rows" else c.column_key].append(c)
    keys = {k for c in cells for k in c.conditions} - _PROVENANCE_CONDITIONS
    for line in lines.values():
        for k in list(keys):
            if len({repr(c.conditions.get(k)) for c in line}) > 1:
                keys.discard(k)
    return keys


def _check_versions(papers: list[PaperInfo], cells: list[ReportedCell]) -> list[Inconsistency]:
    out = []
    by_table: dict[tuple[str, str], list[ReportedCell]] = defaultdict(list)
    for c in cells:
        by_table[(c.paper, c.table)].append(c)
    infos = {(p.paper, t.label): t for p in papers for t in p.tables}
    for p in papers:
        for t in p.tables:
            for other, olabel in t.counterparts.items():
                oinfo = infos.get((other, olabel))
                if oinfo is None or not by_table.get((other, olabel)):
                    continue
                mine = {_identity(t, c): c for c in by_table[(p.paper, t.label)]}
                theirs = {_identity(oinfo, c): c for c in by_table[(other, olabel)]}
                pair = f"{other} {olabel} vs {p.paper} {t.label}"
                for ident, a in theirs.items():
                    b = mine.get(ident)
                    if b is None or a.value is None or b.value is None or _same(a, b):
                        continue
                    # A value that sits in another row of the other version, where this version
                    # prints something else, has probably moved rows (e.g. a swapped column).
                    moved = [
                        c.row_key
                        for c in by_table[(other, olabel)]
                        if c.column_key == a.column_key
                        and c is not a
                        and c.value == b.value
                        and b.value not in ("-", "")
                        and (mine.get(_identity(oinfo, c)) is None or mine[_identity(oinfo, c)].value != b.value)
                    ]
                    hint = f" ({p.paper}'s {b.value} is {other}'s value for {', '.join(moved)})" if moved else ""
                    out.append(
                        Inconsistency(
                            p.paper,
                            t.label,
                            "version_mismatch",
                            f"{pair}: {a.row} / {a.column}: {other} prints {cell_text(a)}, {p.paper} prints {cell_text(b)}{hint}",
                            (a.cell_id, b.cell_id),
                        )
                    )
                keys = _line_constant_keys(t, by_table[(p.paper, t.label)]) & _line_constant_keys(
                    oinfo, by_table[(other, olabel)]
                )
                rows_mine = _systems(t, by_table[(p.paper, t.label)], keys)
                rows_theirs = _systems(oinfo, by_table[(other, olabel)], keys)
                for name, only in (
                    (p.paper, [rows_mine[k] for k in rows_mine if k not in rows_theirs]),
                    (other, [rows_theirs[k] for k in rows_theirs if k not in rows_mine]),
                ):
                    if only:
                        out.append(
                            Inconsistency(
                                p.paper,
                                t.label,
                                "version_rows",
                                f"{pair}: rows only in {name}: {'; '.join(dict.fromkeys(only))}",
                            )
                        )
        if p.text_differences:
            for item in p.text_differences["items"]:
                note = f" ({item['note']})" if item.get("note") else ""
                out.append(
                    Inconsistency(
                        p.paper,
                        None,
                        "version_text_difference",
                        f"vs {p.text_differences['against']}, section {item.get('section')}: "
                        f"{p.text_differences['against']} has {item.get('other')!r}; this file has {item.get('this')!r}{note}",
                    )
                )
    return out


def _check_duplicates(papers: list[PaperInfo], cells: list[ReportedCell]) -> list[Inconsistency]:
    """The same run printed with different values: inside one paper, or across papers (methods only)."""
    infos = {(p.paper, t.label): t for p in papers for t in p.tables}
    family = {p.paper: p.family for p in papers}
    groups: dict[tuple, list[ReportedCell]] = defaultdict(list)
    for c in cells:
        info = infos.get((c.paper, c.table))
        if info is None or c.value is None or c.value in ("-", ""):
            continue
        groups[_identity(info, c)].append(c)
    out = []
    for ident, members in groups.items():
        papers_here = {c.paper for c in members}
        for paper in sorted(papers_here):
            mine = [c for c in members if c.paper == paper]
            if len({c.table for c in mine}) > 1 and any(not _same(mine[0], c) for c in mine[1:]):
                out.append(
                    Inconsistency(
                        paper,
                        None,
                        "within_paper_mismatch",
                        f"{identity_text(ident)} is printed differently in its tables (in points): "
                        + "; ".join(f"{c.table} '{c.row}' / '{c.column}' {points_text(c)}" for c in mine),
                        tuple(c.cell_id for c in mine),
                    )
                )
        fams = {family[c.paper] for c in members}
        if not ident[0].startswith("label:") and len(fams) > 1:
            values = {round(c.score, 6) if c.score is not None else c.value for c in members}
            if len(values) > 1:
                out.append(
                    Inconsistency(
                        sorted(papers_here)[0],
                        None,
                        "cross_paper_mismatch",
                        f"{identity_text(ident)} differs between papers (in points): "
                        + "; ".join(f"{c.paper} {c.table} '{c.row}' {points_text(c)}" for c in members),
                        tuple(c.cell_id for c in members),
                    )
                )
    return out


# --------------------------------------------------------------------------- top level


def _doubts(p: PaperInfo, given: set[str]) -> list[Inconsistency]:
    """One finding per recorded doubt text (the same doubt on several rows is merged)."""
    merged: dict[tuple, list] = {}
    for d in p.doubts:
        if d.cells and not set(d.cells) & given:
            continue
        key = (d.table, d.scope, d.text)
        merged.setdefault(key, []).append(d)
    out = []
    for (table, scope, text), ds in merged.items():
        wheres = ", ".join(d.where for d in ds)
        prefix = f"{table} {scope} {wheres}" if table else f"{scope} {wheres}"
        cells = tuple(dict.fromkeys(c for d in ds for c in d.cells))
        out.append(Inconsistency(p.paper, table, "extraction_doubt", f"{prefix}: {text}", cells))
    return out


def check_papers(cells: list[ReportedCell] | None = None) -> list[Inconsistency]:
    """Every finding about the papers' own numbers, in paper order."""
    if cells is None:
        cells = load_registry()
    cells = list(cells)
    papers = papers_for(cells)
    out: list[Inconsistency] = []
    by_table: dict[tuple[str, str], list[ReportedCell]] = defaultdict(list)
    for c in cells:
        by_table[(c.paper, c.table)].append(c)
    given = {c.cell_id for c in cells}
    for p in papers:
        for t in p.tables:
            grid = TableGrid(t, by_table.get((p.paper, t.label), []))
            if not grid.cells:
                continue
            out += _check_derived(p, grid)
            out += _check_marks(p, grid)
        out += _doubts(p, given)
        for issue in p.known_issues:
            out.append(
                Inconsistency(
                    p.paper, issue.get("table"), "known_issue", f"[{issue.get('kind', 'note')}] {issue['message']}"
                )
            )
    out += _check_claims(cells, papers)
    out += _check_versions(papers, cells)
    out += _check_duplicates(papers, cells)
    order = {p.paper: i for i, p in enumerate(papers)}
    return sorted(out, key=lambda x: order.get(x.paper, len(order)))
