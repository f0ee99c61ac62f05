"""`python -m harness table`: one command per printed table (issue 62): the runs a paper's table needs,
their projected costs and the cells each grades (``--dry-run``), their commands alone (``--commands``), or
the runs themselves in order (each is the `run` path: cached and resumable); ``--list``: every table with
how many of its cells a run can grade and why the rest cannot."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from harness.commands._output import json_target, write_json
from harness.core.errors import HarnessError
from harness.core.text_table import wrap_text
from harness.gate.run import run_gate
from harness.gate.tables import (
    REPRODUCE,
    TableCount,
    TableRun,
    graded_by_row,
    resolve_paper,
    resolve_table,
    states_of,
    table_counts,
    table_runs,
    tables_of,
)
from harness.papers.registry import load_papers, load_reported_cells
from harness.run.reproduce import reproduce_checkpoint
from harness.run.runner import run_method
from harness.run.table_plan import plan_runs


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "table",
        help="the runs one printed table needs: --dry-run (costs, cells each grades), --commands, or run them",
        description=(
            "PAPER TABLE (e.g. qc-v2 'Table 2'; PAPER: the registry key or the short name, 'QC v2'): the paper-profile "
            "runs that grade the table's cells, one per method or variant spec (a released checkpoint's `reproduce` "
            "where that is the row), deduplicated; without --dry-run / --commands they run in order, each as "
            "`run --method M --profile paper` runs (cached, so an interrupted table resumes). --list: every table "
            "of every paper with how many of its cells a run can grade (NOT-YET-RUN or graded) and the reasons of "
            "the rest, counted."
        ),
    )
    p.add_argument("paper", nargs="?", help="registry key (qc-v2) or short name (QC v2)")
    p.add_argument("table", nargs="?", help="the table as printed ('Table 2', or 2)")
    p.add_argument("--list", action="store_true", help="every table of every paper with its counts and command")
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="each run's projected cost, the stages it shares with an earlier run, and the cells it grades",
    )
    p.add_argument("--commands", action="store_true", help="print the runs' commands only, one a line")
    p.add_argument(
        "--records", metavar="DIR", default=None, help="the records the cells' states come from (default: runs/records)"
    )
    p.add_argument("--json", metavar="PATH", help="write the counts (--list) or the runs (a table) as JSON")
    p.set_defaults(func=_table)


def _table(args: argparse.Namespace) -> int:
    json_target(args.json)
    if args.list:
        if args.paper or args.table:
            raise HarnessError("--list lists every table; give it without PAPER TABLE")
        return _list(args.json, args.records)
    if not args.paper or not args.table:
        raise HarnessError("give PAPER TABLE (e.g. python -m harness table qc-v2 'Table 2'), or --list for every table")
    cells, error = load_reported_cells()
    if error or cells is None:
        raise HarnessError(error or "the papers' cells cannot be loaded")
    papers = load_papers()
    paper = resolve_paper(args.paper, papers)
    by_table = tables_of(cells)
    table = resolve_table(paper, args.table, [t for p, t in by_table if p == paper])
    mine = by_table[(paper, table)]
    runs = table_runs(mine)
    count = table_counts(mine, states_of(mine, run_gate(args.records).cells))[0]
    if args.commands:
        print(
            "\n".join(r.command for r in runs) if runs else f"# {count.name}: no run the harness offers grades a cell"
        )
        return 0
    if args.dry_run:
        return _dry_run(count, runs, mine, args.json)
    return _execute(count, runs)


def _list(json_path: str | None, records: str | None) -> int:
    cells, error = load_reported_cells()
    if error or cells is None:
        raise HarnessError(error or "the papers' cells cannot be loaded")
    counts = table_counts(cells, states_of(cells, run_gate(records).cells))
    print("\n".join(list_lines(counts)))
    if json_path:
        write_json(json_path, {"tables": [asdict(c) for c in counts]})
    return 0


def list_lines(counts: Sequence[TableCount]) -> list[str]:
    """--list's text: per table its cells, how many a run can grade, its states, the reasons and the command."""
    total, reach = sum(c.cells for c in counts), sum(c.reachable for c in counts)
    out = [f"{len(counts)} tables, {total} cells; a run the harness offers can grade {reach}"]
    for c in counts:
        out.append(f"{c.name}: {c.cells} cells, {c.reachable} a run can grade ({c.states_text()})")
        if c.unreachable:
            out.append(
                "    " + wrap_text(f"no run can grade {c.cells - c.reachable}: {c.reasons_text()}", 112, "      ")
            )
        out.append(f"    {c.command}")
    return out


def _header(count: TableCount, runs: Sequence[TableRun]) -> str:
    return (
        f"{count.name}: {count.cells} cells, {count.reachable} a run can grade ({count.states_text()}); "
        f"{len(runs)} run(s)"
    )


def _dry_run(count: TableCount, runs: Sequence[TableRun], cells: Sequence[Any], json_path: str | None) -> int:
    print(_header(count, runs))
    planned = plan_runs(runs)
    for number, p in enumerate(planned, 1):
        print(f"run {number} of {len(planned)}: {p.run.command}")
        print(f"  projected: {p.cost}")
        if p.shared:
            shared = ", ".join(f"{label} {key} (run {n})" for label, key, n in p.shared)
            print(
                "  "
                + wrap_text(
                    f"shares with earlier runs of this table (same stage key, built once): {shared}", 114, "    "
                )
            )
            print(f"  projected after them: {p.cost_here}")
        print(f"  grades {len(p.run.cells)} cell(s):")
        for line in graded_by_row(p.run, cells):
            print("    " + wrap_text(line, 112, "      "))
    if count.unreachable:
        print(f"no run can grade {count.cells - count.reachable} cell(s): {count.reasons_text()}")
    if json_path:
        rows = [{**asdict(p.run), "command": p.run.command, **_plan_json(p)} for p in planned]
        write_json(json_path, {"table": asdict(count), "runs": rows})
    return 0


def _plan_json(planned: Any) -> dict[str, Any]:
    stages = [{"stage": e["stage"], "dataset": e.get("dataset"), "key": e.get("key")} for e in planned.stages]
    shared = [{"stage": label, "key": key, "run": n} for label, key, n in planned.shared]
    return {"cost": planned.cost, "cost_here": planned.cost_here, "shared": shared, "stages": stages}


def _execute(count: TableCount, runs: Sequence[TableRun]) -> int:
    """Each run in order, as its own command runs it; the first refusal (a paper profile on a machine without
    its GPUs, a missing input) stops the table with that run's one-line message."""
    print(_header(count, runs))
    if not runs:
        print(f"nothing to run: {count.reasons_text()}")
        return 0
    for number, run in enumerate(runs, 1):
        print(f"run {number} of {len(runs)}: {run.command}")
        if run.kind == REPRODUCE:
            record = reproduce_checkpoint(run.target, list(run.datasets))
            if record is not None:  # None: a torchrun rank other than 0
                print(f"  record {record.path}")
        else:
            run_method(run.target, "paper", list(run.datasets) or None)
    print(f"{count.name}: {len(runs)} run(s) done; `python -m harness check` grades them")
    return 0
