"""A self-contained static site of the results (``python -m harness report --html DIR``): the
at-a-glance tables (harness/present/overview.py), every printed table's reachable count and command
(harness/gate/tables.py), the claims, the CI gate's rows exactly as ``check``
grades them (``gate.run.run_gate``, never re-graded here), an inline SVG of the mini runs with their
CIs, and per record its integrity hash and hardware; every row says how to reproduce it.

The page opens with the answer (issue 63, harness/gate/answer.py), then the gate's verdict and its failing rows (issue 41: a FAIL row used to sit in a
scroll box among dozens of SUPERSEDED/REFERENCE rows); the gate table lists failing rows first and
folds the rows that grade nothing into a collapsed ``<details>``; a table's long texts (run ids, notes,
its last column: the command that reproduces the row) wrap between words (after a comma, underscore or
slash of an id or a dataset list, never inside "scifact"), so the table fits the page at its full width; in a narrower window it scrolls sideways, and no column is ever hidden under another (issue 53: a
pinned command column covered the delta and CI columns).

One ``index.html`` and one ``style.css``: no server, no network, no script, no external font, so
the folder opens from a file:// URL on a machine without internet. Every text is escaped.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Sequence
from pathlib import Path

from harness.core.errors import HarnessError
from harness.core.fsutil import atomic_dir
from harness.core.statuses import FAIL, PASS, REFERENCE, STATUSES, SUPERSEDED
from harness.gate.answer import Answer, gate_answer
from harness.gate.grading import GateRow
from harness.gate.run import YOUR_RUNS, GateResult, row_numbers, run_gate, your_runs
from harness.gate.tables import TableCount, table_counts
from harness.papers.registry import load_reported_cells
from harness.papers.released import CHECKPOINT_PROFILE
from harness.present.glance_html import (
    CSS,
    LEARNED_CAPTION,
    MATRIX_CAPTION,
    TABLES_CAPTION,
    answer_html,
    badge,
    claims_html,
    counts_html,
    esc,
    headline_html,
    learned_html,
    legend_html,
    matrix_html,
    profiles,
    table,
    tables_html,
    wrappable,
)
from harness.present.overview import (
    CONTROL,
    Glance,
    LearnedRow,
    from_folder,
    method_lines,
    run_command,
)
from harness.records.run_precision import precision_label
from harness.records.store import RunRecord, load_records
from harness.records.store import records_dir as default_records

INDEX, STYLE = "index.html", "style.css"
GENERATOR = '<meta name="generator" content="python -m harness report --html">'  # marks a folder as ours
PAGE_CSS = """body {font-family: sans-serif; margin: 1.5rem auto; max-width: 1400px; padding: 0 1rem; color: #222}
h1 {font-size: 1.6rem} h2 {font-size: 1.25rem; margin-top: 2rem} .caption {color: #555; font-size: 0.85rem}
svg text {font-family: sans-serif; font-size: 11px}
.verdict {font-size: 1.15rem; font-weight: 600; padding: 0.6rem 0.9rem; border-radius: 4px; color: #fff}
.verdict code {font-size: 0.9rem}
.wide {overflow-x: auto}
.glance-table td {overflow-wrap: break-word}
.glance-table th:last-child, .glance-table td:last-child {min-width: 10rem; max-width: 24rem}
.glance-table td:last-child code {white-space: normal; overflow-wrap: break-word}
details.folded > summary {cursor: pointer; margin: 0.5rem 0; color: #444}
"""
# Every table of the report ends with its command column ("reproduce with"; the matrix's run for the
# untried cells), which the last-child rules wrap: in the flow of the table, never over another column.
# They wrap between words (break-word, not "anywhere" or break-all, which cut "scifact" into "sci fact"):
# a column is at least as wide as its longest word, and a table wider than the page scrolls sideways.
FOLDED = (SUPERSEDED, REFERENCE)  # gate rows that grade nothing now: kept in the page, collapsed


def record_command(rec: RunRecord) -> str:
    """The command that makes a record like this one (released weights: re-scored, not trained)."""
    if rec.profile == CHECKPOINT_PROFILE:
        return f"python -m harness reproduce --checkpoint {(rec.checkpoint or {}).get('name', '')}"
    return run_command(rec.method, rec.profile)


def gate_command(row: GateRow, records: dict[str, RunRecord] | None = None) -> str:
    """The command that reproduces a gate row: the run (or the two runs of an effect) it grades;
    ``records`` by run id name a released checkpoint's record."""
    rec = (records or {}).get(row.run_id)
    if rec is not None:
        return record_command(rec)
    if " - " in row.run_id and row.run_id.endswith("]"):  # an effect row: "A - B [profile]"
        pair, profile = row.run_id.rsplit(" [", 1)
        return " && ".join(run_command(m, profile.rstrip("]")) for m in pair.split(" - "))
    if not row.method or not row.profile or row.method == "-":
        return ""
    if row.profile == CHECKPOINT_PROFILE:  # the checkpoint's name is in its record only
        return "python -m harness reproduce --list"
    return run_command(row.method, row.profile)


# The state and the numbers first (issue 63: they were cut off past the ids on a laptop screen), then
# what the row is about; the numbers' order is row_numbers'.
GATE_HEADERS = [
    "status",
    "expected",
    "reproduced",
    "delta",
    "tolerance",
    "90% CI (delta)",
    "run",
    "benchmark",
    "stage",
    "measure",
    "against",
    "note",
    "reproduce with",
]


def _gate_table(rows: Sequence[GateRow], by_id: dict[str, RunRecord], scroll: bool = True) -> str:
    cells = []
    for r in rows:
        command = gate_command(r, by_id)
        # the numbers exactly as `check` prints them: points, the paper's precision, no delta where not comparable
        cells.append(
            [
                badge(r.status),
                *(esc(x) for x in row_numbers(r)),
                wrappable(r.run_id),
                esc(r.benchmark),
                esc(r.stage or "-"),
                esc(r.measure),
                wrappable(r.against),
                wrappable(r.note),
                f"<code>{wrappable(command)}</code>" if command else "",
            ]
        )
    return table(GATE_HEADERS, cells, numeric=(1, 2, 3, 4, 5), scroll=scroll)


def _counted(rows: Sequence[GateRow]) -> str:
    counts: dict[str, int] = {}
    for r in rows:
        counts[r.status] = counts.get(r.status, 0) + 1
    return ", ".join(f"{status} {n}" for status, n in counts.items())


def gate_html(gate: GateResult, records: Sequence[RunRecord] = ()) -> str:
    """The gate's rows: failing ones first, then the rest in `check`'s order, and the SUPERSEDED /
    REFERENCE rows (which grade nothing) folded in a collapsed element that says how many it holds."""
    by_id = {rec.run_id: rec for rec in records}
    failing = gate.failures()
    failed = set(map(id, failing))
    shown = failing + [r for r in gate.rows if id(r) not in failed and r.status not in FOLDED]
    folded = [r for r in gate.rows if id(r) not in failed and r.status in FOLDED]
    out = f'<div class="wide">{_gate_table(shown, by_id, scroll=False)}</div>'
    if folded:
        out += (
            f'\n<details class="folded"><summary>{len(folded)} row(s) folded ({esc(_counted(folded))}): older '
            "records and the references the others are graded against, not graded themselves; open to "
            "list them</summary>\n"
            f'<div class="wide">{_gate_table(folded, by_id, scroll=False)}</div></details>'
        )
    return out


def verdict_html(gate: GateResult, records: Sequence[RunRecord] = ()) -> str:
    """The page's first line: the gate's word, how many of its rows fail, and those rows at once."""
    failing = gate.failures()
    colour = STATUSES[PASS if gate.passed else FAIL].colour
    where = ", listed first below" if failing else ""
    what = f" ({esc(_counted(failing))})" if failing else ""
    line = (
        f'<p id="verdict" class="verdict" style="background:{colour}">Gate {gate.verdict}: '
        f"{len(failing)} failing row(s) of {len(gate.rows)}{what}{where} (<code>python -m harness check</code>): "
        "the records' integrity and references, not the answer above</p>"
    )
    if not failing:
        return line
    by_id = {rec.run_id: rec for rec in records}
    return f'{line}\n<div class="wide" id="failing">{_gate_table(failing, by_id, scroll=False)}</div>'


def records_html(records: Sequence[RunRecord]) -> str:
    """Each record's seal, the precision it trained in and the machine it ran on."""
    headers = [
        "run",
        "method",
        "profile",
        "precision",
        "created",
        "integrity sha256",
        "cpu model",
        "cpus",
        "cuda devices",
        "reproduce with",
    ]
    rows = []
    for rec in sorted(records, key=lambda r: (r.method, r.profile, r.created)):
        detected = (rec.hardware or {}).get("detected") or {}
        cuda = detected.get("cuda_devices") or []
        command = record_command(rec)
        rows.append(
            [
                wrappable(rec.run_id),
                esc(rec.method),
                esc(rec.profile),
                esc(precision_label(rec.stages)),
                esc(rec.created),
                f"<code>{esc((rec.integrity or {}).get('sha256') or 'unsealed')}</code>",
                esc(detected.get("cpu_model") or "-"),
                esc(detected.get("cpus") or "-"),
                esc(", ".join(map(str, cuda)) or "none"),
                f"<code>{wrappable(command)}</code>",
            ]
        )
    return table(headers, rows)


def learned_svg(rows: Sequence[LearnedRow], profile: str = "mini") -> str:
    """Points with 95% CI whiskers: one panel row per benchmark, one dot per method (hand-written SVG)."""
    mine = [r for r in rows if r.profile == profile and r.ci_low is not None and r.ci_high is not None]
    if not mine:
        return f"<p>No {esc(profile)} runs to plot.</p>"
    methods = list(dict.fromkeys(r.method for r in mine))
    benchmarks = list(dict.fromkeys(f"{r.benchmark} {r.measure}" for r in mine))
    high = max(r.ci_high for r in mine)
    top = max(10.0, 10.0 * -(-high // 10))  # the next multiple of 10 points
    left, width, row_h, pad = 170, 600, 18, 30
    height = pad + len(benchmarks) * (len(methods) * row_h + pad) + 20

    def x(v: float) -> float:
        return left + width * v / top

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + width + 40}" height="{height}" '
        f'role="img" aria-label="{esc(profile)} runs, points with 95% CI">'
    ]
    for tick in range(0, int(top) + 1, 10):
        parts.append(f'<line x1="{x(tick):.1f}" y1="{pad - 10}" x2="{x(tick):.1f}" y2="{height - 20}" stroke="#ddd"/>')
        parts.append(f'<text x="{x(tick):.1f}" y="{height - 5}" text-anchor="middle">{tick}</text>')
    y = pad
    for bench in benchmarks:
        parts.append(f'<text x="4" y="{y}" font-weight="bold">{esc(bench)} (points)</text>')
        for method in methods:
            row = next((r for r in mine if r.method == method and f"{r.benchmark} {r.measure}" == bench), None)
            y += row_h
            if row is None:
                continue
            colour = "#616161" if method == CONTROL else "#1565c0"
            parts.append(f'<text x="{left - 8}" y="{y + 4}" text-anchor="end">{esc(method)}</text>')
            parts.append(
                f'<line x1="{x(row.ci_low):.1f}" y1="{y}" x2="{x(row.ci_high):.1f}" y2="{y}" '
                f'stroke="{colour}" stroke-width="2"/>'
            )
            parts.append(
                f'<circle cx="{x(row.value):.1f}" cy="{y}" r="4" fill="{colour}">'
                f"<title>{esc(f'{method} {bench}: {row.value:.2f} [{row.ci_low:.2f}, {row.ci_high:.2f}]')}"
                "</title></circle>"
            )
        y += pad
    parts.append("</svg>")
    return "".join(parts)


def yours_html(yours: GateResult | None, records: Sequence[RunRecord]) -> str:
    """The user's own runs (runs/local/), graded as the gate would, apart from it ('' when none)."""
    if yours is None:
        return ""
    verdict = "would pass" if yours.passed else "would fail"
    counts = ", ".join(f"{k} {v}" for k, v in yours.counts().items()) or "nothing graded"
    return (
        f'<h2 id="yours">{esc(YOUR_RUNS.capitalize())} (<code>{esc(str(yours.records_dir))}</code>): '
        f'not gated</h2>\n<p class="caption">{len(records)} record(s) of your own; {esc(counts)}: they '
        f"{verdict} the gate once added (<code>python -m harness check --add RUN_ID</code>). They never "
        "change the gate's verdict above.</p>\n" + _gate_table(yours.rows, {rec.run_id: rec for rec in records})
    )


def render(
    glance: Glance,
    gate: GateResult,
    records: Sequence[RunRecord],
    *,
    records_dir: str,
    reported: str,
    yours: GateResult | None = None,
    your_records: Sequence[RunRecord] = (),
    answer: Answer | None = None,
    tables: Sequence[TableCount] = (),
) -> str:
    """The whole index.html (``yours``: the user's own runs graded apart, :func:`harness.gate.run.your_runs`)."""
    now = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    counts = ", ".join(f"{k} {v}" for k, v in gate.counts().items()) or "nothing gated"
    learned = "".join(f"<h3>Profile {esc(p)}</h3>{learned_html(glance.learned, p)}" for p in profiles(glance.learned))
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
{GENERATOR}
<title>Retrieval pre-training: reproduction report</title>
<link rel="stylesheet" href="{STYLE}">
</head><body>
{answer_html(answer) if answer is not None else ""}
{verdict_html(gate, records)}
<h1>Retrieval pre-training: reproduction report</h1>
<p class="caption">Written {esc(now)} by <code>python -m harness report --html</code> from {gate.n_records} run
record(s) in <code>{esc(records_dir)}</code> and the papers' cells of <code>{esc(reported)}</code>. Numbers in
points (100 x fraction); hover a reported number for it as the paper printed it.</p>
<h2>What each state means</h2>
{legend_html()}
<h2 id="methods">Each method against the papers</h2>
<p class="caption">{esc(MATRIX_CAPTION)}</p>
{matrix_html(method_lines(glance.headline))}
<h2 id="headline">The papers' headline numbers</h2>
<p class="caption">Each paper's Table 1 and BEIR table on the benchmark's primary measure; the state is the
one <code>python -m harness check</code> gives the paper-profile records on that cell; rows never run give the
command and its projected cost on the spec's declared hardware.</p>
<p>{counts_html(glance.counts(glance.headline))}</p>
{headline_html(glance.headline)}
<h2 id="tables">Every printed table: what a run can grade, and its command</h2>
<p class="caption">{esc(TABLES_CAPTION)}</p>
{tables_html(tables)}
<h2 id="claims">The papers' printed effects (A minus B)</h2>
<p>{counts_html(glance.counts(glance.claims))}</p>
{claims_html(glance.claims)}
<h2 id="learned">Learned runs at small scale: not comparable with the papers</h2>
<p class="caption">{esc(LEARNED_CAPTION)}</p>
{learned_svg(glance.learned)}
{learned}
<h2 id="gate">CI gate (<code>python -m harness check</code>): {esc(gate.verdict)}</h2>
<p class="caption">{esc(counts)}; the same rows and statuses as <code>check --json</code>, failing rows
first, rows that grade nothing folded.</p>
{gate_html(gate, records)}
{yours_html(yours, your_records)}
<h2 id="records">Run records: integrity and hardware</h2>
{records_html(records)}
</body></html>
"""


def summary_line(glance: Glance, gate: GateResult, records: int, yours: int = 0) -> str:
    """What the report says, in one line: the states of the headline cells and claims, the gate."""

    def states(counts: dict[str, int]) -> str:
        return ", ".join(f"{state} {n}" for state, n in counts.items()) or "none"

    return (
        f"{len(glance.headline)} headline cells ({states(glance.counts(glance.headline))}); "
        f"{len(glance.claims)} printed effects ({states(glance.counts(glance.claims))}); "
        f"gate {gate.verdict} over {records} record(s)"
        + (f"; {yours} of {YOUR_RUNS} (runs/local/, not gated)" if yours else "")
    )


def write_report(
    out_dir: str | Path, records_dir: str | Path | None = None, reported: str | Path | None = None
) -> tuple[Path, str]:
    """Write the site into ``out_dir`` atomically (the folder appears whole or not at all, replacing
    an older report); returns the index.html path and :func:`summary_line`."""

    out = Path(out_dir)
    _refuse_foreign(out)
    folder = Path(records_dir) if records_dir is not None else default_records()
    glance = from_folder(folder, reported)
    gate = run_gate(folder, reported=reported)
    records = [r for r in load_records(folder)[0] if not r.integrity_problems]
    # runs/local/ sits beside the committed records only: a report of another folder leaves it out
    yours = your_runs(folder, reported=reported) if folder.resolve() == default_records().resolve() else None
    mine = load_records(yours.records_dir)[0] if yours is not None else []
    cells = load_reported_cells(reported)[0]
    page = render(
        glance,
        gate,
        records,
        records_dir=str(folder),
        reported=str(reported or "baselines/reported/"),
        yours=yours,
        your_records=mine,
        answer=gate_answer(gate.cells, cells),
        tables=table_counts(cells or [], gate.cells),
    )
    with atomic_dir(out) as work:
        (work / STYLE).write_text(CSS.replace("<style>", "").replace("</style>", "") + PAGE_CSS, encoding="utf-8")
        (work / INDEX).write_text(page, encoding="utf-8")
    return out / INDEX, summary_line(glance, gate, gate.n_records, len(mine))


def _refuse_foreign(out: Path) -> None:
    """The report replaces its folder whole: refuse one that holds anything but an earlier report (an
    empty folder, made for it, holds nothing to lose)."""

    if not out.exists() or out.is_dir() and next(out.iterdir(), None) is None:
        return
    index = out / INDEX
    ours = (
        out.is_dir()
        and {p.name for p in out.iterdir()} <= {INDEX, STYLE}
        and index.is_file()
        and GENERATOR in index.read_text(encoding="utf-8", errors="replace")
    )
    if not ours:
        raise HarnessError(
            f"{out}: exists and is not an earlier report (the report replaces its folder whole); "
            "give a new folder, or remove this one yourself"
        )
