"""Plain-text tables and text for terminal output (commands, comparisons, the gate, bench scripts).

Every line fits :data:`TERMINAL_WIDTH` columns by default: a table too wide for it wraps its text
columns at word boundaries (widest first, never below a column's longest word), then moves the
columns its caller marked ``below`` under each row; free text wraps with a hanging indent. A
command's ``--wide`` runs under ``output_width(None)``: one line per row, nothing wrapped or moved.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

TERMINAL_WIDTH = 120  # the default line width of every command's output
CURRENT = -1  # ``width=CURRENT``: the width the command runs under (:func:`output_width`)
GAP = "  "  # between columns
BELOW_INDENT = "    "  # a moved column's line under its row

# The width a command's output fits; None: unbounded (``--wide``). A context variable rather than a
# parameter: one setting for every table a command prints, however deep the code that formats it.
_WIDTH: ContextVar[int | None] = ContextVar("output_width", default=TERMINAL_WIDTH)

# A word's places to break when it is wider than its column: after a run id's "__" (method__profile__time)
# and after a path's "/" (a stage's label: dense_retrieve/msmarco-dev/dev/retriever2).
_ID_PARTS = re.compile(r"(?:(?<=__)|(?<=/))(?=.)")


@contextmanager
def output_width(width: int | None) -> Iterator[None]:
    """Format under ``width`` columns (None: unbounded) inside the block."""
    token = _WIDTH.set(width)
    try:
        yield
    finally:
        _WIDTH.reset(token)


def current_width() -> int | None:
    """The width output is formatted to now (None: unbounded)."""
    return _WIDTH.get()


def _resolve(width: int | None) -> int | None:
    return _WIDTH.get() if width == CURRENT else width


def format_table(
    headers: Sequence[str],
    rows: Sequence[Sequence[Any]],
    wrap: Mapping[int, int] | None = None,
    *,
    right: Collection[int] = (),
    below: Sequence[int] = (),
    width: int | None = CURRENT,
    below_first: bool = False,
) -> str:
    """Left-aligned plain-text table (``right``: right-aligned columns); floats rendered as given by the caller.

    ``wrap`` maps a column index to its widest width: longer text in that column is wrapped onto
    continuation lines (never cut). Wider than ``width``, the text columns wrap further, then the
    ``below`` columns, in that order, move under their row as "header: value" lines (``below_first``:
    they move before any column is narrowed: a table whose notes would wrap into narrow towers)."""
    head, blocks = table_blocks(headers, rows, wrap, right=right, below=below, width=width, below_first=below_first)
    return "\n".join([*head, *(line for block in blocks for line in block)])


def table_blocks(
    headers: Sequence[str],
    rows: Sequence[Sequence[Any]],
    wrap: Mapping[int, int] | None = None,
    *,
    right: Collection[int] = (),
    below: Sequence[int] = (),
    width: int | None = CURRENT,
    below_first: bool = False,
) -> tuple[list[str], list[list[str]]]:
    """:func:`format_table` in pieces: the header and rule lines, then each row's lines (one or more:
    wrapped text, moved columns), its columns aligned over the whole table, for a caller that puts
    lines between rows."""
    limit = _resolve(width)
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in r] for r in rows]
    caps = dict(wrap or {}) if limit is not None else {}  # --wide: one line per row
    moved: list[int] = []
    kept = list(range(len(headers)))
    fit_to = None if below_first else limit  # below_first: the columns' own widths decide what moves
    widths = _fit(cells, kept, caps, fit_to)
    for col in below:
        if limit is None or _line_width(widths) <= limit or col not in kept:
            break
        moved.append(col)
        kept.remove(col)
        widths = _fit(cells, kept, caps, fit_to)
    widths = _fit(cells, kept, caps, limit)
    blocks = [_block(r, kept, widths, right) for r in cells]
    for r, block in zip(cells[1:], blocks[1:]):
        for col in moved:
            if r[col]:
                block.append(wrap_text(f"{BELOW_INDENT}{cells[0][col]}: {r[col]}", limit, BELOW_INDENT + "  "))
    rule = GAP.join("-" * widths[i] for i in kept)
    return [*blocks[0], rule], blocks[1:]


def _line_width(widths: Mapping[int, int]) -> int:
    return sum(widths.values()) + len(GAP) * max(len(widths) - 1, 0)


def _fit(cells: list[list[str]], kept: list[int], caps: Mapping[int, int], limit: int | None) -> dict[int, int]:
    """Each kept column's width: its widest cell (or its ``caps`` width), then, while the line is wider
    than ``limit``, a column narrowed by one: first one whose header alone is that wide (wrapping the
    header costs no row a line), else the one of the longest text that can still wrap (above its longest
    word): a note or a description gives up its room before a column of short values wraps."""
    natural = {i: max(len(r[i]) for r in cells) for i in kept}
    body = {i: max((len(r[i]) for r in cells[1:]), default=0) for i in kept}
    floor = {i: max((len(p) for r in cells for w in r[i].split() for p in _ID_PARTS.split(w)), default=0) for i in kept}
    widths = {i: min(natural[i], max(caps[i], floor[i])) if i in caps else natural[i] for i in kept}
    if limit is None:
        return widths
    while _line_width(widths) > limit:
        narrowable = [i for i in kept if widths[i] > floor[i]]
        if not narrowable:
            break
        header_only = [i for i in narrowable if widths[i] > body[i]]
        widest = max(header_only, key=lambda i: widths[i]) if header_only else max(narrowable, key=lambda i: natural[i])
        widths[widest] -= 1
    return widths


def _block(row: list[str], kept: list[int], widths: Mapping[int, int], right: Collection[int]) -> list[str]:
    """One row's lines: each kept cell wrapped to its column's width, the columns side by side."""
    lines_of = {i: _wrapped(row[i], widths[i]) for i in kept}
    out = []
    for k in range(max(len(c) for c in lines_of.values())):
        parts = []
        for i in kept:
            text = lines_of[i][k] if k < len(lines_of[i]) else ""
            parts.append(text.rjust(widths[i]) if i in right else text.ljust(widths[i]))
        out.append(GAP.join(parts).rstrip())
    return out


def _wrapped(text: str, width: int | None) -> list[str]:
    """``text`` in lines of at most ``width``: broken at spaces, a longer word after its "__" or "/"
    parts (a run id, a path), and only then inside a part."""
    if width is None or len(text) <= width:
        return [text]
    out, line = [], ""
    for word in text.split():
        for i, piece in enumerate(_ID_PARTS.split(word)):
            glue = " " if i == 0 and line else ""
            if line and len(line) + len(glue) + len(piece) > width:
                out.append(line)
                line, glue = "", ""
            line += glue + piece
            while len(line) > width:
                out.append(line[:width])
                line = line[width:]
    return [*out, line] if line or not out else out


def wrap_text(text: str, width: int | None = CURRENT, indent: str = "") -> str:
    """A long sentence as lines of at most ``width`` characters (default: the output's width),
    continuation lines indented; unbounded (``--wide``): as given."""
    limit = _resolve(width)
    if limit is None or len(text) <= limit:
        return text
    return "\n".join(textwrap.wrap(text, limit, subsequent_indent=indent, break_on_hyphens=False)) or text


def reflow(text: str, width: int | None = CURRENT, hang: int = 4) -> str:
    """Every line of ``text`` over ``width`` wrapped at word boundaries, its continuation lines indented
    ``hang`` past the line's own indent (a block of free lines: a plan, a run's closing lines). A line
    of aligned columns (cells two or more spaces apart) breaks at a column gap first: the cells that fit
    stay aligned on the first line, the rest (a note, a long id) goes on the lines under it."""
    limit = _resolve(width)
    if limit is None:
        return text
    return "\n".join(line if len(line) <= limit else _reflow_line(line, limit, hang) for line in text.splitlines())


def _reflow_line(line: str, limit: int, hang: int) -> str:
    lead = line[: len(line) - len(line.lstrip())]
    indent = lead + " " * hang
    first, rest = line, ""
    gaps = [m.start() for m in re.finditer(r"(?<=\S) {2,}(?=\S)", line) if m.start() <= limit]
    if gaps and gaps[-1] > len(indent):  # the columns up to the last gap that fits, the rest below
        first, rest = line[: gaps[-1]], line[gaps[-1] + len(GAP) :]  # the rest keeps its columns' padding
    out = _words(first, limit, indent)
    if rest.strip():
        out += _words(indent + rest.rstrip(), limit, indent)
    return "\n".join(out)


def _words(text: str, limit: int, indent: str) -> list[str]:
    """``text`` wrapped at spaces, its leading spaces kept (a word longer than a line is kept whole: never cut)."""
    if len(text) <= limit:
        return [text]
    return textwrap.wrap(
        text,
        limit,
        subsequent_indent=indent,
        break_on_hyphens=False,
        break_long_words=False,
    ) or [text]
