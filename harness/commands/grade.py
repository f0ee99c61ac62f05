"""`python -m harness grade --metrics FILE`: grade your own numbers against the papers (see gate/own_numbers.py)."""

from __future__ import annotations

import argparse

from harness.commands._output import add_wide, write_json
from harness.core.points import reported_text
from harness.core.statuses import NOT_COMPARABLE
from harness.core.text_table import format_table
from harness.gate.own_numbers import grade, summarise
from harness.papers.citation import table_citation


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "grade",
        help="grade your own numbers (e.g. from the official code) against the papers by the harness's rule",
        description=(
            'Reads FILE, JSON: {"runs": [{"method": "cotmae_qc", "profile": "paper", "stage": '
            '"retriever2", "seeds": [42, 43], "metrics": {"msmarco-dev": {"MRR@10": [39.9, 40.3]}}}]}. '
            "Values are points; a list holds one value per seed. A run whose values are all at most 1 "
            "(fractions), a benchmark or measure the papers do not print, a seed listed twice or outside [0, 2^32-1] (as `run` refuses it), an unknown "
            "key or a value that is not a finite number is refused (exit 2). Each run's conditions come "
            "from the method's spec and profile, as for a record; every cell of its rows is graded by the "
            "rule of docs/comparing-with-papers.md (REPRODUCED inside the practical margin, DIFFERENT beyond "
            "it, INCONCLUSIVE with the seeds that would settle it), and with two or more runs the papers' "
            "printed effects between their methods too."
        ),
    )
    p.add_argument("--metrics", metavar="FILE", required=True, help="your numbers (JSON, see above)")
    p.add_argument("--json", metavar="OUT", help='write every graded row as JSON: {"rows": [...]}')
    p.add_argument("--all", action="store_true", help="also list NOT-COMPARABLE rows (hidden by default)")
    add_wide(p)
    p.set_defaults(func=_grade)


def _num(x: float | None, signed: bool = False) -> str:
    return "-" if x is None else (f"{x:+.2f}" if signed else f"{x:.2f}")


def _sigma(row: dict) -> str:
    """Which evidence set the row's sigma_rep (issue 52: a user's own seeds, or the fallback)."""
    if row.get("sigma_rep") is None or row["status"] == NOT_COMPARABLE:
        return "-"
    return f"{row['sigma_rep']:.2f}: {row.get('sigma_source') or '?'}"


def _note(row: dict) -> str:
    """The row's reason without the sigma_rep source its "sigma_rep from" column already shows (a row
    printed it twice); --json keeps the reason whole."""
    reason = row.get("reason") or ""
    if _sigma(row) == "-":
        return reason
    said = f"sigma_rep {_sigma(row)}"
    for form in (f" ({said})", f"; {said}", said):
        reason = reason.replace(form, "")
    return reason.strip("; ")


def _grade(args: argparse.Namespace) -> int:
    rows = grade(args.metrics)
    shown = [r for r in rows if args.all or r["status"] != NOT_COMPARABLE]
    table = [
        [
            r["status"],
            r["kind"],
            table_citation(r["paper"], r["table"]),
            r["row"],
            r["benchmark"],
            r["measure"],
            _num(r["reported"], True) if r["kind"] == "effect" else reported_text(r["reported"], r.get("printed")),
            _num(r["value"], r["kind"] == "effect"),
            _num(r.get("ci_low"), True) + " .. " + _num(r.get("ci_high"), True),
            _sigma(r),
            _note(r),
        ]
        for r in shown
    ]
    if table:
        print(
            format_table(
                [
                    "verdict",
                    "kind",
                    "source",
                    "row",
                    "benchmark",
                    "measure",
                    "printed",
                    "yours",
                    "90% CI",
                    "sigma_rep from",
                    "note",
                ],
                table,
                below=[10, 9],  # wider than the output: the note, then sigma's source, under the row
                below_first=True,
            )
        )
    hidden = len(rows) - len(shown)
    print(summarise(rows) + (f" ({hidden} NOT-COMPARABLE rows hidden: --all lists them)" if hidden else ""))
    if args.json:
        write_json(args.json, {"rows": rows})
    return 0
