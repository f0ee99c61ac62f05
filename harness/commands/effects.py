"""`python -m harness effects`: paired differences between runs of one profile (see evaluation/effects.py)."""

from __future__ import annotations

import argparse

from harness.commands._output import records_folder, write_json
from harness.evaluation.effects import (
    count_checks,
    format_effects,
    latest_by_method,
    method_effects,
    stage_effects,
)
from harness.records.store import load_records


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
    significant = sum(e.significant for e in effects)
    # the papers' count claims ("better on 9 of 14 datasets"): graded from the paper runs only
    counts = count_checks(effects) if args.profile == "paper" else []
    print(f"{len(effects)} effect(s) in profile '{args.profile}'; {significant} with a 95% CI that excludes 0")
    for c in counts:
        print(f"count claim {c.key} ({c.a} - {c.b}, {c.measure}): {c.status}; {c.reason}")
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
            },
        )
    return 0
