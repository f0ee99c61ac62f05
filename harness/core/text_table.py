"""Plain-text tables for terminal output (commands, comparisons, the gate, bench scripts)."""

from __future__ import annotations

import re
import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

# A word's places to break when it is wider than its column: after a run id's "__" (method__profile__time).
_ID_PARTS = re.compile(r"(?<=__)(?=.)")


def format_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], wrap: Mapping[int, int] | None = None) -> str:
    """Left-aligned plain-text table; floats rendered as given by the caller.

    ``wrap`` maps a column index to its widest width: longer text in that column is wrapped onto
    continuation lines (never cut), so a long label or note keeps the table within a terminal."""
    head, blocks = table_blocks(headers, rows, wrap)
    return "\n".join([*head, *(line for block in blocks for line in block)])


def table_blocks(
    headers: Sequence[str], rows: Sequence[Sequence[Any]], wrap: Mapping[int, int] | None = None
) -> tuple[list[str], list[list[str]]]:
    """:func:`format_table` in pieces: the header and rule lines, then each row's lines (one or more:
    wrapped text), its columns aligned over the whole table, for a caller that puts lines between rows."""
    wrap = wrap or {}
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in r] for r in rows]
    lines_of = [[_wrapped(c, wrap.get(i)) for i, c in enumerate(r)] for r in cells]
    widths = [max(len(line) for r in lines_of for line in r[i]) for i in range(len(headers))]
    blocks = []
    for r in lines_of:
        block = []
        for k in range(max(len(c) for c in r)):
            parts = [(c[k] if k < len(c) else "").ljust(w) for c, w in zip(r, widths)]
            block.append("  ".join(parts).rstrip())
        blocks.append(block)
    return [*blocks[0], "  ".join("-" * w for w in widths)], blocks[1:]


def _wrapped(text: str, width: int | None) -> list[str]:
    """``text`` in lines of at most ``width``: broken at spaces, a longer word after its "__" parts
    (a run id), and only then inside a part."""
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


def wrap_text(text: str, width: int = 110, indent: str = "") -> str:
    """A long sentence as lines of at most ``width`` characters, continuation lines indented."""
    return "\n".join(textwrap.wrap(text, width, subsequent_indent=indent, break_on_hyphens=False)) or text
