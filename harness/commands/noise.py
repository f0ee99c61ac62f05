"""`python -m harness noise`: the seed-to-seed spread behind every verdict (see evaluation/noise.py)."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.evaluation import noise
from harness.evaluation.margins import practical_margin, recipe_drift, sigma_rep
from harness.evaluation.power import PRINTED, markdown, power_table


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
    p.add_argument(
        "--margins",
        action="store_true",
        help="print what every verdict reads instead: Delta and sigma_rep per benchmark and measure, "
        "each piece of evidence behind sigma_rep, and the rule's power",
    )
    p.add_argument(
        "--runs",
        metavar="DIR",
        type=Path,
        default=None,
        help="the runs folder holding records/ and seeds/ (default: runs/)",
    )
    p.set_defaults(func=_noise)


def _noise(args: argparse.Namespace) -> int:
    if args.margins:
        print(margins_report())
        return 0
    print(noise.report(args.runs, args.write))
    return 0


def margins_report() -> str:
    """Delta and sigma_rep with their sources, then the power table (docs/comparing-with-papers.md)."""
    lines = []
    for benchmark, measure in PRINTED:
        spread, margin = sigma_rep(benchmark, measure), practical_margin(benchmark, measure)
        lines.append(f"{benchmark} {measure}: Delta {margin.points:.1f} ({margin.why})")
        lines.append(f"  sigma_rep {spread.points:.2f}: {spread.why}")
        lines.extend(f"    - {e.source} [{e.benchmark} {e.measure}, {e.df} df]" for e in spread.evidence)
    drift = recipe_drift()
    lines += [
        "",
        "Recipe drift (re-runs by another team that changed the recipe: never pooled into sigma_rep; "
        "comparability must catch what they show):",
    ]
    lines.extend(
        f"  {e.benchmark} {e.measure}: {e.variance**0.5 * 2**0.5:.2f} points apart - {e.source}" for e in drift
    )
    return "\n".join(lines) + "\n\n" + markdown(power_table())
