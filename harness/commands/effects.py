"""`python -m harness effects`: paired differences between runs of one profile (see evaluation/effects.py)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from harness.commands._output import add_wide, records_folder, write_json
from harness.core.text_table import wrap_text
from harness.evaluation.effects import (
    Effect,
    count_checks,
    format_effects,
    latest_by_method,
    method_effects,
    stage_effects,
)
from harness.gate.cell_state import CellState, cell_states, row_state, states_line
from harness.papers.registry import load_reported_cells
from harness.records.store import RunRecord, load_records


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "effects",
        help="what pre-training, QC and fine-tuning change: paired deltas with 95%% CIs and p-values",
        description=(
            "For the newest record of each method in a profile: every method minus the no-pre-training "
            "control, and QC minus non-QC in each family (in the paper profile also every pair of methods "
            "and of stages a paper prints a difference of, at every stage both runs scored), on every "
            "benchmark and measure both runs scored (paired bootstrap over the shared queries, seed 42; in "
            "the mini profile the CI adds the measured seed spread), plus each fine-tuning stage minus the "
            "zero-shot start where a run scored it (the control in the mini profile). Numbers in points."
        ),
    )
    p.add_argument(
        "--profile",
        default="mini",
        choices=["paper", "rehearsal", "mini", "tiny"],
        help="profile whose records to compare (default: mini)",
    )
    p.add_argument("--records", metavar="DIR", default=None, help="records folder (default: runs/records)")
    p.add_argument(
        "--all",
        "-v",
        "--verbose",
        dest="all",
        action="store_true",
        help="print every effect (by default: those whose CI excludes 0 or that a paper's claim grades)",
    )
    p.add_argument("--json", metavar="PATH", help="write the effects as JSON")
    add_wide(p)
    p.set_defaults(func=_effects)


def _effects(args: argparse.Namespace) -> int:
    records_folder(args.records)
    records, _ = load_records(args.records)
    effects = method_effects(records, args.profile)
    for rec in latest_by_method(records, args.profile).values():
        effects.extend(stage_effects(rec))
    if not effects:
        print(
            f"no two comparable {args.profile} records (need e.g. a method and nopretrain, or a run that "
            "scored its start)"
        )
        return 0
    states = attach_cell_states(effects, records)
    significant = sum(e.significant for e in effects)
    # the papers' count claims ("better on 9 of 14 datasets"): graded from the paper runs only
    counts = count_checks(effects) if args.profile == "paper" else []
    print(f"{len(effects)} effect(s) in profile '{args.profile}'; {significant} with a 95% CI that excludes 0")
    if states:  # the rows of the claims they are set beside, as `check` and the glance tab give them
        print(wrap_text(states_line(states, "the papers' cells of their claims"), indent="  "))
    for c in counts:
        print(wrap_text(f"count claim {c.key} ({c.a} - {c.b}, {c.measure}): {c.status}; {c.reason}", indent="  "))
    shown = effects if args.all else [e for e in effects if e.significant or e.claim_status]
    if shown:
        print(format_effects(shown))
    if len(shown) < len(effects):
        print(
            f"{len(effects) - len(shown)} effect(s) whose CI spans 0 and no paper grades not shown: "
            "`--all` lists every effect"
        )
    if args.json:
        write_json(
            args.json,
            {
                "profile": args.profile,
                "effects": [e.to_dict() for e in effects],
                "counts": [c.to_dict() for c in counts],
                "cells": {k: {"state": c.state, "reason": c.reason, "command": c.command} for k, c in states.items()},
            },
        )
    return 0


def attach_cell_states(effects: Sequence[Effect], records: Sequence[RunRecord]) -> dict[str, CellState]:
    """Give each effect the state of its claims' cells (``Effect.cells``, ``cells_state``): the one
    state `check`, `grade` and the glance tab give each cell over the same records (gate.cell_state)."""
    wanted = {cell for e in effects for cell in e.cell_ids}
    cells, _ = load_reported_cells(None)
    states = cell_states([c for c in cells or [] if c.get("cell_id") in wanted], records) if wanted else {}
    for e in effects:
        e.cells = {cell: states[cell].state for cell in e.cell_ids if cell in states}
        e.cells_state = row_state([states[cell] for cell in e.cells]) if e.cells else ""
    return states
