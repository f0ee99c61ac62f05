"""`python -m harness noise`: the seed-to-seed spread behind every verdict (see evaluation/noise.py)."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.evaluation import noise


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "noise",
        help="the measured seed-to-seed spread that sets every verdict's margin (noise.yaml)",
        description=(
            "Measures the seed-to-seed spread of the control (nopretrain, mini profile) from its reference "
            "record and its re-runs under other seeds (`run --method nopretrain --profile mini --seed N`, "
            "records in runs/seeds/), and prints harness/evaluation/noise.yaml as it would be written. "
            "--write replaces the file; a test fails when the committed file no longer matches the records."
        ),
    )
    p.add_argument("--write", action="store_true", help="rewrite harness/evaluation/noise.yaml from the records")
    p.add_argument("--runs", metavar="DIR", type=Path, default=None,
                   help="the runs folder holding records/ and seeds/ (default: runs/)")
    p.set_defaults(func=_noise)


def _noise(args: argparse.Namespace) -> int:
    print(noise.report(args.runs, args.write))
    return 0
