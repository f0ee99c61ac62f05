"""`python -m harness report --html DIR`: the results as a static site (see harness/present/report_html.py)."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.commands._output import records_folder
from harness.core.errors import HarnessError
from harness.core.fsutil import writable_dir
from harness.present.report_html import write_report


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "report",
        help="write the results as a self-contained static site (index.html) that opens without a server",
        description=(
            "Write a static site into DIR that opens with the gate's verdict and its failing rows: the papers' "
            "headline numbers and printed effects with their states "
            "(as on the leaderboard's 'At a glance' tab), the small learned runs with their CIs and an SVG plot "
            "of the mini runs, every row of the CI gate exactly as `python -m harness check` grades it (failing rows "
            "first, SUPERSEDED / REFERENCE rows folded), and each "
            "record's integrity hash and hardware; every row gives the command that reproduces it. No server, "
            "no network, no external CSS, script or font: open DIR/index.html in any browser, or attach the "
            "folder. DIR is replaced whole (atomically); a folder holding anything but an earlier report is "
            "refused."
        ),
        epilog="example: python -m harness report --html out/report && xdg-open out/report/index.html",
    )
    p.add_argument(
        "--html",
        metavar="DIR",
        required=True,
        help="folder to write the pages (index.html, the summary, first) and style.css into",
    )
    p.add_argument("--records", metavar="DIR", default=None, help="records folder (default: runs/records)")
    p.add_argument(
        "--reported",
        metavar="JSON",
        default=None,
        help="grade against a JSON snapshot of reported cells instead of baselines/reported/",
    )
    p.set_defaults(func=_report)


def _report(args: argparse.Namespace) -> int:
    records_folder(args.records)
    out = Path(args.html)  # the report is renamed into place beside it: that folder must take a new folder
    writable_dir(out.absolute().parent, f"--html {args.html}: its folder", "give a folder under one you can write")
    if args.reported is not None and not Path(args.reported).is_file():
        raise HarnessError(
            f"--reported {args.reported}: no such file; give a JSON snapshot written by "
            "`python -m harness reported --json PATH`"
        )
    index, summary = write_report(args.html, args.records, args.reported)
    print(f"report: {summary} -- wrote {index} (open it in a browser; the folder is self-contained)")
    return 0
