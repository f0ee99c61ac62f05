"""A self-contained static site of the results (``python -m harness report --html DIR``), split into
pages (issue 63: it was one 18,000 px page whose gate rows took most of it), each reachable from the
summary and linking back to it:

* ``index.html``, the summary: the answer (harness/gate/answer.py), the gate's verdict and its failing
  rows (issue 41), the list of pages, the legend, each method against the papers and every printed
  table's reachable count and command (harness/gate/tables.py, issue 62);
* one page per paper, its headline cells and printed effects (harness/present/report_pages.py);
* ``gate.html``: the CI gate's rows exactly as ``check`` grades them (``gate.run.run_gate``, never
  re-graded here), failing rows first, the rows that grade nothing folded in a collapsed ``<details>``,
  then the user's own runs;
* ``learned.html`` (the small runs, an inline SVG of the mini runs) and ``records.html`` (each record's
  integrity hash, precision and hardware).

Every table opens with the state and the numbers, then what the row is about in as few columns as read
well; long texts (run ids, notes, the command that reproduces the row) wrap between words, so each table
fits a 1440 px screen; in a narrower window it scrolls sideways, and no column is ever hidden under
another (issue 53: a pinned command column covered the delta and CI columns).

Pages and one ``style.css``: no server, no network, no script, no external font, so the folder opens
from a file:// URL on a machine without internet. Every text is escaped.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.core.errors import HarnessError
from harness.core.fsutil import atomic_dir
from harness.core.statuses import FAIL, PASS, REFERENCE, STATUSES, SUPERSEDED
from harness.gate.answer import Answer, gate_answer
from harness.gate.grading import GateRow
from harness.gate.run import YOUR_RUNS, GateResult, row_numbers, run_gate, your_runs
from harness.gate.tables import TableCount, table_counts
from harness.papers.registry import load_papers, load_reported_cells
from harness.papers.released import CHECKPOINT_PROFILE
from harness.present.glance_html import (
    CSS,
    MATRIX_CAPTION,
    TABLES_CAPTION,
    answer_html,
    badge,
    counts_html,
    esc,
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
from harness.present.report_pages import (
    GATE_PAGE,
    GENERATOR,
    INDEX,
    LEARNED_PAGE,
    RECORDS_PAGE,
    STYLE,
    PaperPage,
    learned_body,
    page,
    paper_body,
    paper_pages,
)
from harness.records.run_precision import precision_label
from harness.records.store import RunRecord, load_records
from harness.records.store import records_dir as default_records

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
    "benchmark and measure",
    "against; note",
    "reproduce with",
]


def gate_what(row: GateRow) -> str:
    """A gate row's benchmark and measure, and its stage where it names one: one column (four were
    wider than a 1440 px screen beside the numbers)."""
    return " ".join(x for x in (row.benchmark, row.measure) if x) + (f" ({row.stage})" if row.stage else "")


def _gate_table(rows: Sequence[GateRow], by_id: dict[str, RunRecord], scroll: bool = True) -> str:
    cells = []
    for r in rows:
        command = gate_command(r, by_id)
        about = "; ".join(x for x in (r.against, r.note) if x)
        # the numbers exactly as `check` prints them: points, the paper's precision, no delta where not comparable
        cells.append(
            [
                badge(r.status),
                *(esc(x) for x in row_numbers(r)),
                wrappable(r.run_id),
                wrappable(gate_what(r)),
                wrappable(about),
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
                wrappable(rec.method),  # cocondenser_lexmae_ft: wraps after its underscores as run ids do
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


@dataclass
class Report:
    """What the pages are written from (``yours``: the user's own runs graded apart,
    :func:`harness.gate.run.your_runs`)."""

    glance: Glance
    gate: GateResult
    records: Sequence[RunRecord]
    records_dir: str
    reported: str
    yours: GateResult | None = None
    your_records: Sequence[RunRecord] = ()
    answer: Answer | None = None
    tables: Sequence[TableCount] = ()
    papers: Sequence[PaperPage] = ()


def pages_html(report: Report) -> str:
    """The summary's list of every other page, each with what it holds."""
    items = [
        f'<li><a href="{esc(p.file)}">{esc(p.title)}</a>: {len(p.headline)} headline cell(s), '
        f"{len(p.claims)} printed effect(s) ({counts_html(report.glance.counts([*p.headline, *p.claims]))})</li>"
        for p in report.papers
    ]
    items += [
        f'<li><a href="{GATE_PAGE}">CI gate</a>: its {len(report.gate.rows)} row(s), {esc(report.gate.verdict)}'
        + (f", and {esc(YOUR_RUNS)}" if report.yours is not None else "")
        + "</li>",
        f'<li><a href="{LEARNED_PAGE}">Learned runs at small scale</a>: {len(report.glance.learned)} row(s), '
        "not comparable with the papers</li>",
        f'<li><a href="{RECORDS_PAGE}">Run records</a>: integrity and hardware of {len(report.records)}</li>',
    ]
    return f'<h2 id="pages">The pages of this report</h2>\n<ul id="page-list">{"".join(items)}</ul>'


def summary_body(report: Report) -> str:
    """The summary page (index.html): the answer, the gate's verdict, the pages, the legend, each method
    against the papers and every printed table's count and command."""
    now = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    glance = report.glance
    return f"""{answer_html(report.answer) if report.answer is not None else ""}
{verdict_html(report.gate, report.records)}
<h1>Retrieval pre-training: reproduction report</h1>
<p class="caption">Written {esc(now)} by <code>python -m harness report --html</code> from {report.gate.n_records} run
record(s) in <code>{esc(report.records_dir)}</code> and the papers' cells of <code>{esc(report.reported)}</code>. Numbers
in points (100 x fraction); hover a reported number for it as the paper printed it. This page is the summary:
each paper's cells, the gate's rows, the learned runs and the records are on pages of their own.</p>
{pages_html(report)}
<h2>What each state means</h2>
{legend_html()}
<h2 id="methods">Each method against the papers</h2>
<p class="caption">{esc(MATRIX_CAPTION.removesuffix(" Every cell is listed below."))} Every cell is on
its paper's page.</p>
{matrix_html(method_lines(glance.headline))}
<h2 id="tables">Every printed table: what a run can grade, and its command</h2>
<p class="caption">{esc(TABLES_CAPTION)}</p>
{tables_html(report.tables)}"""


def gate_body(report: Report) -> str:
    """The gate's page: every row, failing first, the ones that grade nothing folded; then the user's runs."""
    gate = report.gate
    counts = ", ".join(f"{k} {v}" for k, v in gate.counts().items()) or "nothing gated"
    return f"""<h1 id="gate">CI gate (<code>python -m harness check</code>): {esc(gate.verdict)}</h1>
<p class="caption">{esc(counts)}; the same rows and statuses as <code>check --json</code>, failing rows
first, rows that grade nothing folded. The gate is about the records' integrity and references, not the
answer on the summary.</p>
{gate_html(gate, report.records)}
{yours_html(report.yours, report.your_records)}"""


def render(report: Report) -> dict[str, str]:
    """Every page of the site by file name: the summary (index.html) first."""
    site = {INDEX: page("Retrieval pre-training: reproduction report", summary_body(report), back=False)}
    for paper in report.papers:
        site[paper.file] = page(f"{paper.title}: reproduction report", paper_body(paper, report.glance))
    site[GATE_PAGE] = page("CI gate: reproduction report", gate_body(report))
    learned = learned_body(
        report.glance.learned, learned_svg(report.glance.learned), profiles(report.glance.learned), CONTROL
    )
    site[LEARNED_PAGE] = page("Learned runs: reproduction report", learned)
    records = f'<h1 id="records">Run records: integrity and hardware</h1>\n{records_html(report.records)}'
    site[RECORDS_PAGE] = page("Run records: reproduction report", records)
    return site


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
    report = Report(
        glance,
        gate,
        records,
        records_dir=str(folder),
        reported=str(reported or "baselines/reported/"),
        yours=yours,
        your_records=mine,
        answer=gate_answer(gate.cells, cells),
        tables=table_counts(cells or [], gate.cells),
        papers=paper_pages(glance, {p.paper_file: p.paper for p in load_papers()}),
    )
    with atomic_dir(out) as work:
        (work / STYLE).write_text(CSS.replace("<style>", "").replace("</style>", "") + PAGE_CSS, encoding="utf-8")
        for name, text in render(report).items():
            (work / name).write_text(text, encoding="utf-8")
    return out / INDEX, summary_line(glance, gate, gate.n_records, len(mine))


def _ours(path: Path) -> bool:
    """A file an earlier report wrote: its style sheet, or a page that carries :data:`GENERATOR`."""
    if not path.is_file():
        return False
    if path.name == STYLE:
        return True
    return path.suffix == ".html" and GENERATOR in path.read_text(encoding="utf-8", errors="replace")


def _refuse_foreign(out: Path) -> None:
    """The report replaces its folder whole: refuse one that holds anything but an earlier report's
    pages and style sheet (an empty folder, made for it, holds nothing to lose)."""

    if not out.exists() or out.is_dir() and next(out.iterdir(), None) is None:
        return
    ours = out.is_dir() and (out / INDEX).is_file() and all(_ours(p) for p in out.iterdir())
    if not ours:
        raise HarnessError(
            f"{out}: exists and is not an earlier report (the report replaces its folder whole); "
            "give a new folder, or remove this one yourself"
        )
