"""`python -m harness check`: the CI regression gate over runs/records/ (see harness/gate.py)."""

from __future__ import annotations

import argparse

from harness.commands._output import write_json


def add_parser(sub: argparse._SubParsersAction) -> None:
    from harness.gate import TINY_TOLERANCE

    p = sub.add_parser(
        "check",
        help="regression gate: run records vs the papers (paper) and vs committed references (tiny)",
        description=(
            "Compare every run record in runs/records/ with what it must reproduce: paper-profile "
            "records with the papers' reported cells (tolerances.yaml), tiny records with the committed "
            "reference record of the same method and profile (the one marked \"reference\": true, else "
            f"the newest committed one) within {TINY_TOLERANCE} points per metric. Prints one table. "
            "Exit status 1 on FAIL (with --strict also on NEAR and on skipped records); corrupt, partial "
            "or future-version records are listed as skipped, never a crash."
        ),
    )
    p.add_argument("--strict", action="store_true", help="also fail on NEAR and on skipped (unreadable) records")
    p.add_argument("--records", metavar="DIR", default=None, help="records folder (default: runs/records)")
    p.add_argument("--reported", metavar="JSON", default=None,
                   help="compare with a JSON snapshot of reported cells instead of baselines/reported/")
    p.add_argument("--tiny-tolerance", metavar="POINTS", type=float, default=TINY_TOLERANCE,
                   help=f"tolerance of a tiny record against its reference, in points (default {TINY_TOLERANCE})")
    p.add_argument("--json", metavar="PATH", help="write every row, the skipped records and the verdict as JSON")
    p.set_defaults(func=_check)


def _check(args: argparse.Namespace) -> int:
    from harness.errors import HarnessError
    from harness.gate import format_gate, run_gate

    if args.tiny_tolerance < 0:
        raise HarnessError(f"--tiny-tolerance must be >= 0, got {args.tiny_tolerance}")
    result = run_gate(args.records, strict=args.strict, reported=args.reported, tiny_tolerance=args.tiny_tolerance)
    print(format_gate(result))
    if args.json:
        write_json(args.json, result.to_dict())
    return result.exit_code
