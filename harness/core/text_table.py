"""Plain-text tables for terminal output (commands, comparisons, the gate, bench scripts)."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from typing import Any


def format_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], wrap: Mapping[int, int] | None = None) -> str:
    """Left-aligned plain-text table; floats rendered as given by the caller.

    ``wrap`` maps a column index to its widest width: longer text in that column is wrapped onto
    continuation lines (never cut), so a long label or note keeps the table within a terminal."""
    wrap = wrap or {}
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in r] for r in rows]
    lines_of = [[_wrapped(c, wrap.get(i)) for i, c in enumerate(r)] for r in cells]
    widths = [max(len(line) for r in lines_of for line in r[i]) for i in range(len(headers))]
    out = []
    for r in lines_of:
        for k in range(max(len(c) for c in r)):
            parts = [(c[k] if k < len(c) else "").ljust(w) for c, w in zip(r, widths)]
            out.append("  ".join(parts).rstrip())
    out.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(out)


def _wrapped(text: str, width: int | None) -> list[str]:
    if width is None or len(text) <= width:
        return [text]
    return textwrap.wrap(text, width, break_long_words=True, break_on_hyphens=False) or [""]


def wrap_text(text: str, width: int = 110, indent: str = "") -> str:
    """A long sentence as lines of at most ``width`` characters, continuation lines indented."""
    return "\n".join(textwrap.wrap(text, width, subsequent_indent=indent, break_on_hyphens=False)) or text
