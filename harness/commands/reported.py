"""`python -m harness reported`: the papers' printed cells for a method, paper or benchmark."""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

from harness.commands._output import add_wide
from harness.core.paths import REPORTED_DIR
from harness.core.points import reported_text
from harness.core.text_table import format_table, wrap_text
from harness.papers.citation import citation, table_citation
from harness.papers.registry import cells_for
from harness.papers.schema import ReportedCell

SCORE_UNITS = ("points", "fraction")  # cells shown in points, at the paper's printed precision
LONG_TEXT = 30  # a text cell longer than this (a sample passage) is summarised; --json holds it
# wrapped column widths: row, column, value, flags (a 120-column terminal holds the table)
WRAP = {0: 40, 1: 30, 2: 24, 3: 12}


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "reported",
        help="show the papers' reported cells (the registry in baselines/reported/)",
        description="Without options: how many cells each paper's tables hold. With a filter (or --all): every "
        "matching cell, table by table: row, column, value in points at the paper's printed precision (the "
        "printed fraction beside it), flags (bold, doubt: a recorded extraction doubt, not legible) and the run "
        "conditions as notes under each table.",
    )
    p.add_argument("--method", help="harness method name, e.g. cocondenser_qc")
    p.add_argument("--paper", help="registry paper key, e.g. qc-v2, lexmae")
    p.add_argument("--benchmark", help="benchmark name, e.g. msmarco-dev, scifact, beir-avg14")
    p.add_argument("--measure", help="ir-measures string, e.g. RR@10")
    p.add_argument(
        "--all", "-v", "--verbose", dest="all", action="store_true", help="list every cell (default: a summary)"
    )
    p.add_argument("--json", metavar="PATH", help="also write the cells as a JSON list of objects")
    p.add_argument("--registry", metavar="DIR", default=None, help="registry folder (default: baselines/reported)")
    add_wide(p)
    p.set_defaults(func=_reported)


def _conditions(cond: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in cond.items()) or "none stated"


def value_text(c: ReportedCell) -> str:
    """A cell's value as a reader compares it: points for scores ("66.5 (printed 0.665)"), the unit
    beside any other number, a long text summarised."""
    if c.value is None:
        return "-"
    if not c.value:
        return "(blank)"
    if c.unit in SCORE_UNITS and c.score is not None:
        return reported_text(100.0 * c.score, c.value) + c.marks
    if len(c.value) > LONG_TEXT:
        return f"(text, {len(c.value)} characters; --json PATH writes it)"
    unit = "" if c.unit in SCORE_UNITS or c.unit == "text" or c.value.endswith(c.unit) else f" {c.unit}"
    return c.value + c.marks + unit


def _flags(c: ReportedCell) -> str:
    return " ".join(f for f, on in (("bold", c.bold), ("doubt", c.doubt), ("not legible", c.value is None)) if on)


def format_cells(cells: list[ReportedCell]) -> str:
    """The cells table by table; each table's run conditions as lettered notes under it."""
    groups: dict[tuple[str, str, str], list[ReportedCell]] = {}
    for c in cells:
        groups.setdefault((c.paper, c.version, c.table), []).append(c)
    out = []
    for (paper, version, table), members in groups.items():
        notes: dict[str, str] = {}
        rows = []
        for c in members:
            text = _conditions(c.conditions)
            key = notes.setdefault(text, chr(ord("a") + len(notes)) if len(notes) < 26 else str(len(notes)))
            # The row key tells apart rows printed with the same label (e.g. one per query number).
            rows.append([c.row_key or c.row, c.column, value_text(c), _flags(c), key])
        # the paper as every surface names it, its registry key (what --paper takes) beside it
        out.append(f"{table_citation(paper, table)} [{paper}, {version}]: {len(members)} cell(s), values in points")
        out.append(format_table(["row", "column", "value", "flags", "cond"], rows, wrap=WRAP))
        out.extend(_wrap_note(f"  ({key}) {text}") for text, key in notes.items())
        out.append("")
    return "\n".join(out).rstrip()


def _wrap_note(line: str, width: int = 116) -> str:
    return wrap_text(line, width, "      ")


def format_overview(cells: list[ReportedCell]) -> str:
    """How many cells each paper's tables hold, with the methods and benchmarks they cover."""
    rows = []
    groups: dict[tuple[str, str, str], list[ReportedCell]] = {}
    for c in cells:
        groups.setdefault((c.paper, c.version, c.table), []).append(c)
    for (paper, _, table), members in groups.items():
        methods = Counter(c.method for c in members if c.method)
        benchmarks = Counter(c.benchmark for c in members if c.benchmark)
        rows.append(
            [
                f"{citation(paper)} [{paper}]",
                table,
                len(members),
                ", ".join(methods) or "-",
                ", ".join(benchmarks) or "-",
            ]
        )
    return format_table(["paper [--paper KEY]", "table", "cells", "methods", "benchmarks"], rows, wrap={3: 30, 4: 36})


def _reported(args: argparse.Namespace) -> int:
    cells = cells_for(
        method=args.method,
        benchmark=args.benchmark,
        measure=args.measure,
        paper=args.paper,
        dir=args.registry or REPORTED_DIR,
    )
    filters = ", ".join(
        f"{k}={v}"
        for k, v in (
            ("method", args.method),
            ("paper", args.paper),
            ("benchmark", args.benchmark),
            ("measure", args.measure),
        )
        if v
    )
    print(f"{len(cells)} reported cell(s)" + (f" for {filters}" if filters else ""))
    if cells and (filters or args.all):
        print(format_cells(cells))
    elif cells:
        print(format_overview(cells))
        print("`--method`, `--paper`, `--benchmark` or `--measure` list the matching cells; `--all` lists every cell")
    if args.json:
        path = Path(args.json)
        path.parent.mkdir(parents=True, exist_ok=True)
        # A plain list of cell objects (not the usual metrics summary dict).
        path.write_text(json.dumps([c.to_dict() for c in cells], indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"wrote {path}")
    return 0
