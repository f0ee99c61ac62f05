"""`python -m harness reported`: the papers' printed cells for a method, paper or benchmark."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from harness.core.paths import REPORTED_DIR
from harness.core.text_table import format_table
from harness.papers.registry import cells_for


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "reported",
        help="show the papers' reported cells (the registry in baselines/reported/)",
        description="Print every reported cell matching the filters: paper, version, table, row, "
        "column, printed value and run conditions. Bold cells are marked (bold), "
        "cells with a recorded extraction doubt (doubt).",
    )
    p.add_argument("--method", help="harness method name, e.g. cocondenser_qc")
    p.add_argument("--paper", help="registry paper key, e.g. qc-v2, lexmae")
    p.add_argument("--benchmark", help="benchmark name, e.g. msmarco-dev, scifact, beir-avg14")
    p.add_argument("--measure", help="ir-measures string, e.g. RR@10")
    p.add_argument("--json", metavar="PATH", help="also write the cells as a JSON list of objects")
    p.add_argument("--registry", metavar="DIR", default=None, help="registry folder (default: baselines/reported)")
    p.set_defaults(func=_reported)


def _conditions(cond: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in cond.items())


def _reported(args: argparse.Namespace) -> int:
    cells = cells_for(
        method=args.method,
        benchmark=args.benchmark,
        measure=args.measure,
        paper=args.paper,
        dir=args.registry or REPORTED_DIR,
    )
    rows = []
    for c in cells:
        flags = [f for f, on in (("bold", c.bold), ("doubt", c.doubt)) if on]
        value = "(not legible)" if c.value is None else (c.value or "(blank)") + c.marks
        # The row key tells apart rows printed with the same label (e.g. one per query number).
        rows.append(
            [
                c.paper,
                c.version,
                c.table,
                c.row_key or c.row,
                c.column,
                value,
                _conditions(c.conditions),
                " ".join(flags),
            ]
        )
    if rows:
        print(format_table(["paper", "version", "table", "row", "column", "value", "conditions", "flags"], rows))
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
    if args.json:
        path = Path(args.json)
        path.parent.mkdir(parents=True, exist_ok=True)
        # A plain list of cell objects (not the usual metrics summary dict).
        path.write_text(json.dumps([c.to_dict() for c in cells], indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"wrote {path}")
    return 0
