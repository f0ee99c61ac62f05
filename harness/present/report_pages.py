"""The report's pages besides the summary (issue 63: one 18,000 px page whose gate rows took most of
it): one page per paper (its headline cells and printed effects), the small learned runs, and the page
frame every page shares (its title, the style sheet, the link back to the summary).

Every table here opens with the state and the numbers (state, printed, reproduced, delta), then what
the row is about, merged into as few columns as read well, so that the table fits a 1440 px screen;
long ids wrap between words (``wrappable``). Column names are words, never a field's name.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from harness.papers.citation import citation, table_citation
from harness.present.glance_html import (
    LEARNED_CAPTION,
    badge,
    counts_html,
    esc,
    interval,
    pts,
    table,
    wrappable,
)
from harness.present.overview import ClaimRow, Glance, HeadlineRow, LearnedRow

INDEX, STYLE = "index.html", "style.css"
GATE_PAGE, LEARNED_PAGE, RECORDS_PAGE = "gate.html", "learned.html", "records.html"
GENERATOR = '<meta name="generator" content="python -m harness report --html">'  # marks a folder as ours
BACK = f'<p class="nav"><a id="back" href="{INDEX}">Back to the summary</a></p>'


def page(title: str, body: str, *, back: bool = True) -> str:
    """A whole page: ``body`` under the shared head; every page but the summary links back to it
    at its top and its bottom."""
    nav = BACK if back else ""
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
{GENERATOR}
<title>{esc(title)}</title>
<link rel="stylesheet" href="{STYLE}">
</head><body>
{nav}
{body}
{nav}
</body></html>
"""


@dataclass
class PaperPage:
    """One paper's page: its file name, its citation and its rows."""

    key: str
    headline: list[HeadlineRow] = field(default_factory=list)
    claims: list[ClaimRow] = field(default_factory=list)

    @property
    def file(self) -> str:
        return f"paper-{re.sub(r'[^a-z0-9]+', '-', self.key.lower()).strip('-')}.html"

    @property
    def title(self) -> str:
        return citation(self.key)


def _claim_paper(claim: ClaimRow, keys: dict[str, str]) -> str:
    """The registry key of a claim's paper: its source opens with the paper's file ('qc-pretraining-v2.txt v2
    Table 1'); a file the registry does not name is its own key."""
    first = claim.source.split(" ", 1)[0]
    return keys.get(first, first)


def paper_pages(glance: Glance, paper_files: dict[str, str]) -> list[PaperPage]:
    """One page per paper that has a headline cell or a printed effect, in key order; ``paper_files``
    maps a registry paper file to its key."""
    pages: dict[str, PaperPage] = {}
    for row in glance.headline:
        pages.setdefault(row.paper, PaperPage(row.paper)).headline.append(row)
    for claim in glance.claims:
        key = _claim_paper(claim, paper_files)
        pages.setdefault(key, PaperPage(key)).claims.append(claim)
    return [pages[k] for k in sorted(pages)]


HEADLINE_HEADERS = [
    "state",
    "printed",
    "reproduced",
    "delta",
    "90% CI (delta)",
    "table and row",
    "benchmark",
    "runs / why",
    "reproduce with",
]


def _what_to_do(command: str, cost: str) -> str:
    out = f"<code>{wrappable(command)}</code>" if command else ""
    return out + (f"<br>projected: {esc(cost)}" if cost else "")


def headline_table(rows: Sequence[HeadlineRow]) -> str:
    """A paper's headline cells, state and numbers first; a printed number's own form is its tooltip."""
    out = []
    for r in rows:
        why = "<br>".join(wrappable(x) for x in (*r.runs, r.reason) if x)
        out.append(
            [
                badge(r.state),
                f'<span title="printed: {esc(r.printed)}">{pts(r.reported)}</span>',
                pts(r.reproduced),
                pts(r.delta, True),
                interval(r.ci_low, r.ci_high, True),
                esc(r.table) + "<br>" + wrappable(r.row) + (" (cited)" if r.cited else ""),
                esc(f"{r.benchmark} {r.measure}"),
                why,
                _what_to_do(r.command, r.cost),
            ]
        )
    return table(HEADLINE_HEADERS, out, numeric=(1, 2, 3, 4), scroll=False)


CLAIM_HEADERS = [
    "state",
    "printed",
    "reproduced",
    "90% CI (seeds)",
    "effect ratio [90% CI]",
    "A - B (rows)",
    "benchmark",
    "runs / why",
    "reproduce with",
]


def _claim_values(r: ClaimRow) -> tuple[str, str]:
    """The printed and the reproduced value: points of A - B, or a count claim's datasets."""
    if r.kind == "count":
        return f"{r.claimed:.0f} of {esc(r.benchmark)}", "-" if r.effect is None else f"&ge; {r.effect:.0f}"
    return pts(r.claimed, True), pts(r.effect, True)


def claims_table(rows: Sequence[ClaimRow]) -> str:
    """A paper's printed effects (A minus B, points) and count claims, state and numbers first."""
    out = []
    for r in rows:
        printed, reproduced = _claim_values(r)
        ratio = "-" if r.effect_ratio is None else f"{r.effect_ratio:.2f} {interval(r.ratio_low, r.ratio_high)}"
        pair = esc(f"{r.a} - {r.b}") + "<br>" + (wrappable(f"{r.a_row} - {r.b_row}") if r.a_row else "count")
        out.append(
            [
                badge(r.state),
                printed,
                reproduced,
                interval(r.ci_low, r.ci_high, True),
                ratio,
                pair,
                esc(f"{r.benchmark} {r.measure}"),
                "<br>".join(wrappable(x) for x in (*r.runs, r.reason) if x),
                _what_to_do(r.command, r.cost),
            ]
        )
    return table(CLAIM_HEADERS, out, numeric=(2, 3, 4), scroll=False)


def paper_body(paper: PaperPage, glance: Glance) -> str:
    """A paper's page: its headline cells, then its printed effects, each with the states' counts."""
    parts = [f'<h1 id="paper">{esc(paper.title)}</h1>']
    tables = sorted({r.table for r in paper.headline})
    parts.append(
        f'<p class="caption">{len(paper.headline)} headline cell(s) ({esc(", ".join(tables) or "none")}) and '
        f"{len(paper.claims)} printed effect(s) of {esc(table_citation(paper.key, ''))}, graded as "
        "<code>python -m harness check</code> grades the paper-profile records; numbers in points.</p>"
    )
    if paper.headline:
        parts += [
            '<h2 id="headline">Headline numbers</h2>',
            f"<p>{counts_html(glance.counts(paper.headline))}</p>",
            headline_table(paper.headline),
        ]
    if paper.claims:
        parts += [
            '<h2 id="claims">Printed effects (A minus B)</h2>',
            f"<p>{counts_html(glance.counts(paper.claims))}</p>",
            claims_table(paper.claims),
        ]
    return "\n".join(parts)


LEARNED_HEADERS = ["method", "benchmark", "points [95% CI]", "vs control [95% CI]", "run", "reproduce with"]


def _versus_control(row: LearnedRow, control: str) -> str:
    """The run's effect against the control with its CI; "control" on the control's own row."""
    if row.effect is not None:
        return f"{pts(row.effect, True)} {interval(row.effect_low, row.effect_high, True)}"
    return "control" if row.method == control else "-"


def learned_table(rows: Sequence[LearnedRow], profile: str, control: str) -> str:
    """One line per method and benchmark of a profile (a matrix of every benchmark was 2,000 px wide)."""
    out = []
    for r in (r for r in rows if r.profile == profile):
        out.append(
            [
                esc(r.method),
                esc(f"{r.benchmark} {r.measure}"),
                f"{pts(r.value)} {interval(r.ci_low, r.ci_high)}",
                _versus_control(r, control),
                wrappable(r.run_id),
                f"<code>{wrappable(r.command)}</code>",
            ]
        )
    return table(LEARNED_HEADERS, out, numeric=(2, 3), scroll=False)


def learned_body(rows: Sequence[LearnedRow], plot: str, profiles: Sequence[str], control: str) -> str:
    tables = "".join(f"<h2>Profile {esc(p)}</h2>{learned_table(rows, p, control)}" for p in profiles)
    return (
        '<h1 id="learned">Learned runs at small scale: not comparable with the papers</h1>\n'
        f'<p class="caption">{esc(LEARNED_CAPTION)}</p>\n{plot}\n{tables}'
    )
