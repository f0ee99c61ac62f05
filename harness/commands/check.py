"""`python -m harness check`: the CI regression gate over runs/records/ (see harness/gate/)."""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from harness.commands._output import add_wide, json_target, records_folder, write_json
from harness.core.errors import HarnessError
from harness.core.paths import cache_dir, local_runs_dir
from harness.core.statuses import FAILING, STRICT_ONLY
from harness.core.text_table import wrap_text
from harness.gate.answer import gate_answer
from harness.gate.cell_state import states_line
from harness.gate.grading import CROSS_MACHINE_TOLERANCE, TINY_TOLERANCE
from harness.gate.references import accept_reference, admit_local
from harness.gate.rerun import RERUN_TOLERANCE, RERUNS, gate_fresh, parse_reruns, run_fresh
from harness.gate.run import YOUR_RUNS, GateResult, format_gate, run_gate, your_runs
from harness.gate.summary import format_summary, hidden_rows, sigma_sources
from harness.papers.registry import load_reported_cells
from harness.records.store import records_dir
from harness.records.writer import record_path

SOURCE_WIDTH = 120  # a sigma source line wraps past this width


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "check",
        help="regression gate: record integrity, records vs the papers (paper) and vs accepted references (tiny)",
        description=(
            "Check every run record in runs/records/ (your own runs, in runs/local/, are graded too and "
            "listed apart, but never fail the gate: `--add RUN_ID` or `--accept RUN_ID` moves one in): its content seal and its aggregates recomputed from its "
            "per-query scores (an edited record is CORRUPT), its data checksums against the catalog's "
            "(DATA-MISMATCH names the dataset and file) and, for a record it grades, its spec against the "
            "method's current one or its reference's (SPEC-CHANGED: not gated; docs/contributing-runs.md), "
            "then paper-profile records against the papers' "
            "reported cells (REPRODUCED / DIFFERENT-BELOW / DIFFERENT-ABOVE / INCONCLUSIVE / NOT-COMPARABLE, "
            "harness/evaluation/verdict.py) and other profiles against the reference run of their precision named in "
            f"runs/records/references.json, within {TINY_TOLERANCE} points per metric ({CROSS_MACHINE_TOLERANCE} when "
            "the reference ran on another machine; the row says so) (PASS / NEAR / FAIL). A "
            "reference named there but absent is MISSING, one whose record is of another method or profile "
            "WRONG-REFERENCE; a record in which a training stage left its weights where they started is UNTRAINED. "
            "A file that cannot be read as a record is UNREADABLE (files still being written, "
            f"*.tmp and *.tmp.json, are IN-PROGRESS). Exit status 1 on {', '.join(FAILING)} (with --strict also "
            f"on {', '.join(STRICT_ONLY)}). --rerun runs methods again from an empty "
            f"cache ({', '.join(r.label for r in RERUNS)}) and gates the fresh numbers ({RERUN_TOLERANCE} "
            "points for tiny: the measured spread between machines)."
        ),
    )
    p.add_argument(
        "--strict",
        action="store_true",
        help="also fail on NEAR, unknown methods, records without a reference or with a stale one, "
        "records of a changed spec, and files still being written",
    )
    p.add_argument("--records", metavar="DIR", default=None, help="records folder (default: runs/records)")
    p.add_argument(
        "--reported",
        metavar="JSON",
        default=None,
        help="compare with a JSON snapshot of reported cells instead of baselines/reported/",
    )
    p.add_argument(
        "--tiny-tolerance",
        metavar="POINTS",
        type=float,
        default=None,
        help=f"tolerance against a reference, in points (default {TINY_TOLERANCE}; with --rerun {RERUN_TOLERANCE})",
    )
    p.add_argument(
        "--accept",
        metavar="RUN_ID",
        help="make this run the reference of its method and profile in its precision (a second reference, "
        "<method>/<profile>/bf16, where the one there trained in another precision; writes references.json; "
        "refuses a record that is unsealed or fails its seal); commit both",
    )
    p.add_argument(
        "--add",
        metavar="RUN_ID",
        help="move your run's record from runs/local/ into the records folder, where the gate checks "
        "it (refuses an unsealed or edited record); commit it to contribute the run",
    )
    p.add_argument(
        "--rerun",
        nargs="?",
        const="",
        default=None,
        metavar="M[:P],...",
        help="re-run methods from an empty cache into a scratch folder and gate the fresh records "
        "(default: " + ", ".join(f"{r.method}:{r.profile}" for r in RERUNS) + ")",
    )
    p.add_argument(
        "--scratch",
        metavar="DIR",
        default=None,
        help="scratch folder for --rerun (default: a new folder under the cache dir)",
    )
    p.add_argument(
        "--all",
        "-v",
        "--verbose",
        dest="all",
        action="store_true",
        help="print every row (by default: the verdict and counts, the failing rows, then your runs)",
    )
    p.add_argument("--json", metavar="PATH", help="write every row, the skipped records and the verdict as JSON")
    add_wide(p)
    p.set_defaults(func=_check)


def _headline(said: str) -> tuple[str, str]:
    """The summary's verdict (its first line and the indented lines it wrapped onto), and the rest."""
    lines = said.split("\n")
    k = 1
    while k < len(lines) and lines[k].startswith("  "):
        k += 1
    return "\n".join(lines[:k]), "\n".join(lines[k:])


def _check(args: argparse.Namespace) -> int:
    if args.tiny_tolerance is not None and not (0 <= args.tiny_tolerance < float("inf")):  # nan fails too
        raise HarnessError(f"--tiny-tolerance must be a finite number >= 0, got {args.tiny_tolerance}")

    records_folder(args.records)
    json_target(args.json)
    if args.reported is not None and not Path(args.reported).is_file():
        raise HarnessError(
            f"--reported {args.reported}: no such file; give a JSON snapshot written by "
            "`python -m harness reported --json PATH`"
        )
    if args.accept:
        path, entry = accept_reference(args.accept, args.records)
        print(
            f"accepted {entry['run_id']} as the reference (sha256 {entry['sha256'][:12]}...) in {path}; "
            f"commit it with the record"
        )
        return 0
    if args.add:
        return _add(args.add, args.records)
    if args.rerun is not None:
        return _rerun(args)
    tolerance = TINY_TOLERANCE if args.tiny_tolerance is None else args.tiny_tolerance
    cross = CROSS_MACHINE_TOLERANCE if args.tiny_tolerance is None else None  # an explicit tolerance holds
    result = run_gate(
        args.records, strict=args.strict, reported=args.reported, tiny_tolerance=tolerance, cross_machine=cross
    )
    said = format_gate(result) if args.all else format_summary(result)
    first, rest = _headline(said)
    if args.all:  # the table ends with the verdict: the answer follows it
        first, rest = said, ""
    print(first)
    print(_answer(result, args.reported))  # the papers' answer, right after the gate's verdict
    if rest:
        print(rest)
    if result.cells:
        print(
            wrap_text(states_line(result.cells), indent="  ")
        )  # the same states as the glance tab, the report, `grade`
    for line in sigma_sources(result):  # every verdict names its sigma's source (issue 61)
        print(wrap_text(line, SOURCE_WIDTH, "    "))
    yours = _your_runs(args, tolerance, cross)
    if not args.all and (hidden := hidden_rows(result, yours)):
        print(f"\n{hidden} passing or ungraded row(s) not shown: `python -m harness check --all` lists every row")
    if args.json:
        write_json(args.json, {**result.to_dict(), **({"your_runs": yours.to_dict()} if yours else {})})
    return result.exit_code


def _answer(result: GateResult, reported: str | None) -> str:
    """The answer line and what no run can grade (harness.gate.answer), from the cells the gate graded."""
    cells, error = load_reported_cells(reported)
    if error or cells is None:
        return f"Answer: not computed, the papers' cells cannot be loaded ({error})"
    return gate_answer(result.cells, cells).terminal()


def _add(run_id: str, records: str | None) -> int:
    target = admit_local(run_id, records)
    if target is None:
        raise HarnessError(
            f"{record_path(local_runs_dir(), run_id)}: no such record of your runs; "
            f"`python -m harness check` lists them under 'your runs'"
        )
    print(
        f"added {run_id} to {target.parent} (moved from {local_runs_dir()}); run `python -m harness check`, "
        "then commit the record to contribute it (docs/contributing-runs.md)"
    )
    return 0


def _your_runs(args: argparse.Namespace, tolerance: float, cross: float | None) -> GateResult | None:
    """The user's own records (runs/local/) graded like the committed ones, against the committed
    references, and printed apart: they never change the gate's verdict or exit status."""
    if args.records is not None:  # another folder is gated: runs/local/ is not beside it
        return None
    yours = your_runs(strict=args.strict, reported=args.reported, tiny_tolerance=tolerance, cross_machine=cross)
    if yours is not None:
        print()
        print(
            f"{YOUR_RUNS} ({yours.records_dir}; not gated: `python -m harness check --add RUN_ID` moves one "
            "into runs/records/)"
        )
        print(format_gate(yours, apart=True) if args.all else format_summary(yours, apart=True))
    return yours


def _rerun(args: argparse.Namespace) -> int:
    reruns = parse_reruns(args.rerun)
    committed = Path(args.records) if args.records else records_dir()
    if args.scratch:
        scratch = Path(args.scratch)
    else:
        cache_dir().mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix="rerun-", dir=cache_dir()))
    started = time.monotonic()
    fresh, timings = run_fresh(reruns, scratch, committed=committed)
    # strict: a fresh record with no reference, or a NEAR, is a failure of the re-run gate
    result = gate_fresh(fresh, committed, args.tiny_tolerance, args.reported)
    print(format_gate(result) if args.all else format_summary(result))
    print(
        "re-run times: "
        + ", ".join(f"{k} {v:.0f}s" for k, v in timings.items())
        + f"; total {time.monotonic() - started:.0f}s (fresh records in {fresh})"
    )
    if not args.all and (hidden := hidden_rows(result)):
        print(f"{hidden} passing or ungraded row(s) not shown: `--all` lists every row")
    if args.json:
        write_json(args.json, {**result.to_dict(), "rerun_seconds": timings, "scratch": str(scratch)})
    if result.passed and not args.scratch:  # a failed re-run keeps its logs, caches and records to look at
        shutil.rmtree(scratch, ignore_errors=True)
    return result.exit_code
