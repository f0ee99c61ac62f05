"""The at-a-glance rows (harness/present/overview.py) as escaped HTML with coloured text badges: shared by
the leaderboard's first tab (leaderboard_app/glance.py) and the static report (``report --html``).

HTML rather than Streamlit's data grid: the grid draws on a canvas and shows a cell's colour only
through a Styler, while a badge here is a word on its status colour (never an emoji or a symbol,
which Debian's Chromium has no font for), every row is in the page (searchable with the browser's
find), and a reported number's printed form is its tooltip. Every text is escaped (``esc``).
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from harness.core.statuses import NOT_COMPARABLE, STATUSES
from harness.gate.answer import DEFINITION, Answer
from harness.gate.tables import TableCount
from harness.papers.citation import table_citation
from harness.present.overview import (
    CONTROL,
    GRADED,
    MATRIX_COLUMNS,
    NOT_COMPARABLE_WITH_PAPERS,
    ClaimRow,
    HeadlineRow,
    LearnedRow,
    MethodLine,
    legend,
)

CSS = """<style>
.glance-table {border-collapse: collapse; font-size: 0.85rem; width: 100%; margin-bottom: 0.5rem}
.glance-table th, .glance-table td {border-bottom: 1px solid #ddd; padding: 3px 6px; text-align: left;
  vertical-align: top}
.glance-table td.num {text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap}
.glance-table code {font-size: 0.75rem; white-space: nowrap}
.badge {display: inline-block; padding: 1px 6px; border-radius: 4px; color: #fff; font-weight: 600;
  font-size: 0.75rem; white-space: nowrap}
.glance-scroll {max-height: 640px; overflow: auto}
</style>"""


def esc(value: Any) -> str:
    # Line breaks as character references: Streamlit's st.markdown renders markdown again after a blank
    # line ends an HTML block, so a record string holding one could turn its tail into a link or an image.
    text = html.escape("" if value is None else str(value), quote=True)
    return text.replace("\r", "&#13;").replace("\n", "&#10;")


# Where a long id or a comma-joined list may wrap: after these, never inside a word ("scifact").
_BREAK_AFTER = (",", "_", "/", "=")


# A command's option ("--checkpoint", "-m"): kept on one line (a browser breaks after a hyphen: "--" then
# "checkpoint" on the next line).
_OPTION = re.compile(r"(?<![^\s>])(--?[A-Za-z][A-Za-z0-9-]*)")


def wrappable(value: Any) -> str:
    """``esc(value)`` with a line-break opportunity (``<wbr>``) after each of :data:`_BREAK_AFTER`, and
    a command's options never broken at their hyphens."""
    text = esc(value)
    for mark in _BREAK_AFTER:
        text = text.replace(mark, mark + "<wbr>")
    return _OPTION.sub(r'<span style="white-space:nowrap">\1</span>', text)


def _text_colour(background: str) -> str:
    """Black on light badges (amber, grey), white on dark ones: legible either way."""
    rgb = [int(background.lstrip("#")[i : i + 2], 16) for i in (0, 2, 4)]
    return "#000" if 0.299 * rgb[0] + 0.587 * rgb[1] + 0.114 * rgb[2] > 150 else "#fff"


def badge(state: str) -> str:
    """A status as its own word on its colour (harness/core/statuses.py), its meaning as the tooltip."""
    status = STATUSES.get(state)
    colour = status.colour if status else "#9e9e9e"
    meaning = status.meaning if status else ""
    return (
        f'<span class="badge" style="background:{colour};color:{_text_colour(colour)}" '
        f'title="{esc(meaning)}">{esc(state)}</span>'
    )


def pts(value: float | None, signed: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:+.2f}" if signed else f"{value:.2f}"


def interval(low: float | None, high: float | None, signed: bool = False) -> str:
    return "-" if low is None or high is None else f"[{pts(low, signed)}, {pts(high, signed)}]"


def legend_html() -> str:
    items = "".join(f"<li>{badge(state)} {esc(meaning)}</li>" for state, (meaning, _) in legend().items())
    return f'<ul style="list-style: none; padding-left: 0">{items}</ul>'


def counts_html(counts: Mapping[str, int]) -> str:
    return " ".join(f"{badge(state)} {n}" for state, n in counts.items()) or "nothing to show"


def table(
    headers: Sequence[str], rows: Iterable[Sequence[str]], numeric: Sequence[int] = (), scroll: bool = True
) -> str:
    """``rows`` hold cell HTML (already escaped); ``numeric`` are right-aligned column indexes; a long
    table scrolls inside its own box unless ``scroll`` is off."""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join(
        "<tr>"
        + "".join(f'<td class="num">{c}</td>' if i in numeric else f"<td>{c}</td>" for i, c in enumerate(row))
        + "</tr>"
        for row in rows
    )
    box = ' class="glance-scroll"' if scroll else ""
    return f'<div{box}><table class="glance-table"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def answer_html(answer: Answer) -> str:
    """The answer first (issue 63): its line, what no run can grade and why, and what a claim is; the
    report's and the leaderboard's first screen (the same text `check` prints after the gate's verdict)."""
    items = "".join(f"<li>{esc(item)}</li>" for item in answer.items())
    return (
        '<div id="answer" class="answer" style="border-left:4px solid #444;padding:0.2em 0.8em;margin:0.5em 0">'
        f'<p style="margin:0.3em 0"><b>{esc(answer.line())}</b></p><ul style="margin:0.2em 0">{items}</ul>'
        f'<p class="caption" style="margin:0.3em 0">{esc(DEFINITION)}</p></div>'
    )


def _what_to_do(command: str, cost: str) -> str:
    out = f"<code>{wrappable(command)}</code>" if command else ""
    return out + (f"<br>projected: {esc(cost)}" if cost else "")


# ----------------------------------------------------------------------------- 1a

MATRIX_CAPTION = (
    "One line per method: how many of the papers' headline numbers for it (every paper that "
    "prints one, cited rows included) are in each state, on MS MARCO dev (MRR@10), TREC DL19 and "
    "DL20 (nDCG@10) and the BEIR datasets (nDCG@10); the last column is the run that would grade "
    "the untried ones and its projected cost on the spec's declared hardware. Every cell is "
    "listed below."
)


def no_run_left(line: MethodLine) -> str:
    """What the last column says when no paper run is left to offer: how many cells are graded and how
    are NOT-COMPARABLE (never "every headline number graded" for a method whose cells are NOT-COMPARABLE)."""
    found: dict[str, int] = {}
    for states in line.states.values():
        for state, n in states.items():
            found[state] = found.get(state, 0) + n
    graded = sum(n for state, n in found.items() if state in GRADED)
    cannot = found.get(NOT_COMPARABLE, 0)
    if not cannot:
        return "every headline number graded"
    return f"no paper run to offer: {graded} graded, {cannot} NOT-COMPARABLE (each cell's reason below)"


def matrix_html(lines: Sequence[MethodLine]) -> str:
    def cell(found: Mapping[str, int]) -> str:
        return (
            "<br>".join(f'<span style="white-space:nowrap">{badge(state)} {n}</span>' for state, n in found.items())
            or "-"
        )

    def run(line: MethodLine) -> str:  # a long --dataset list wraps between its words, never inside one
        if not line.command:
            return esc(no_run_left(line))
        return (
            f'<code style="white-space:normal;overflow-wrap:break-word">{wrappable(line.command)}</code>'
            f"<br>projected: {esc(line.cost)}"
        )

    out = [[f"<b>{esc(line.method)}</b>", *(cell(line.states[c]) for c in MATRIX_COLUMNS), run(line)] for line in lines]
    return table(
        ["method", "MS MARCO dev", "DL19", "DL20", "BEIR", "paper run for the untried cells"], out, scroll=False
    )


HEADLINE_HEADERS = [
    "paper",
    "row",
    "benchmark",
    "reported",
    "state",
    "reproduced",
    "delta",
    "90% CI (delta)",
    "runs / why",
    "reproduce with",
]


def headline_html(rows: Sequence[HeadlineRow]) -> str:
    out = []
    for r in rows:
        why = "<br>".join(esc(x) for x in (*r.runs, r.reason) if x)
        out.append(
            [
                esc(table_citation(r.paper, r.table)),
                esc(r.row) + (" (cited)" if r.cited else ""),
                esc(f"{r.benchmark} {r.measure}"),
                f'<span title="printed: {esc(r.printed)}">{pts(r.reported)}</span>',
                badge(r.state),
                pts(r.reproduced),
                pts(r.delta, True),
                interval(r.ci_low, r.ci_high, True),
                why,
                _what_to_do(r.command, r.cost),
            ]
        )
    return table(HEADLINE_HEADERS, out, numeric=(3, 5, 6, 7))


CLAIM_HEADERS = [
    "source",
    "A - B",
    "rows",
    "benchmark",
    "claimed",
    "state",
    "reproduced",
    "90% CI (seeds)",
    "effect ratio [90% CI]",
    "runs / why",
    "reproduce with",
]


def claims_html(rows: Sequence[ClaimRow]) -> str:
    """The printed differences (points) and count claims (datasets: the paper's count, and how many
    the runs show better)."""
    out = []
    for r in rows:
        why = "<br>".join(esc(x) for x in (*r.runs, r.reason) if x)
        if r.kind == "count":
            claimed, reproduced = (
                f"{r.claimed:.0f} of {esc(r.benchmark)}",
                "-" if r.effect is None else f"&ge; {r.effect:.0f}",
            )
        else:
            claimed, reproduced = pts(r.claimed, True), pts(r.effect, True)
        ratio = "-" if r.effect_ratio is None else f"{r.effect_ratio:.2f} {interval(r.ratio_low, r.ratio_high)}"
        out.append(
            [
                esc(r.source),
                esc(f"{r.a} - {r.b}"),
                esc(f"{r.a_row} - {r.b_row}" if r.a_row else "count"),
                esc(f"{r.benchmark} {r.measure}"),
                claimed,
                badge(r.state),
                reproduced,
                interval(r.ci_low, r.ci_high, True),
                ratio,
                why,
                _what_to_do(r.command, r.cost),
            ]
        )
    return table(CLAIM_HEADERS, out, numeric=(4, 6, 7, 8))


# ----------------------------------------------------------------------------- 1b


def learned_matrix(rows: Sequence[LearnedRow], profile: str) -> tuple[list[str], list[dict[str, str]]]:
    """Method x benchmark for one profile: "value [CI]" and the effect against the control, points.
    Returns the columns and one dict per method (the control first)."""
    mine = [r for r in rows if r.profile == profile]
    benchmarks = list(dict.fromkeys(f"{r.benchmark} {r.measure}" for r in mine))
    table: dict[str, dict[str, str]] = {}
    for r in mine:
        line = table.setdefault(r.method, {"method": r.method, "run": r.run_id, "reproduce with": r.command})
        col = f"{r.benchmark} {r.measure}"
        line[col] = f"{pts(r.value)} {interval(r.ci_low, r.ci_high)}"
        line[f"{col} vs control"] = (
            "control"
            if r.effect is None and r.method == CONTROL
            else "-"
            if r.effect is None
            else f"{pts(r.effect, True)} {interval(r.effect_low, r.effect_high, True)}"
        )
    columns = ["method", *(c for b in benchmarks for c in (b, f"{b} vs control")), "run", "reproduce with"]
    return columns, list(table.values())


def learned_html(rows: Sequence[LearnedRow], profile: str) -> str:
    columns, lines = learned_matrix(rows, profile)
    cells = [
        [*(esc(line.get(c, "")) for c in columns[:-1]), f"<code>{wrappable(line['reproduce with'])}</code>"]
        for line in lines
    ]
    return table(columns, cells, numeric=tuple(range(1, len(columns) - 2)))


def profiles(rows: Sequence[LearnedRow]) -> list[str]:
    """The learned profiles, the mini one first (the largest runs that exist)."""
    found = list(dict.fromkeys(r.profile for r in rows))
    return sorted(found, key=lambda p: (p != "mini", p))


LEARNED_CAPTION = (
    "Points (100 x fraction): the benchmark's primary measure with its bootstrap 95% CI over the "
    "run's queries; 'vs control': the paired-bootstrap effect against nopretrain's newest run of "
    f"the profile on the same queries (`python -m harness effects`). {NOT_COMPARABLE_WITH_PAPERS}."
)


# ----------------------------------------------------------------------------- the tables (issue 62)

TABLES_CAPTION = (
    "Every table the papers print, with how many of its cells a run the harness offers can grade (NOT-YET-RUN "
    "or graded), the states of all its cells, why the rest cannot be graded, and the one command that lists "
    "the table's runs with their projected costs (drop --dry-run to run them in order)."
)


def tables_html(counts: Sequence[TableCount]) -> str:
    """One row per printed table: its cells, how many a run can grade, the states, the reasons, the command."""
    rows = [
        (
            esc(c.name),
            str(c.cells),
            str(c.reachable),
            counts_html(dict(c.states)),
            esc(c.reasons_text()) or "-",
            f"<code>{wrappable(c.command)}</code>",
        )
        for c in counts
    ]
    headers = ["table", "cells", "a run can grade", "states", "no run can grade them because", "command"]
    return table(headers, rows, numeric=(1, 2))
