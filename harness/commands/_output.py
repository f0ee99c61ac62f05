"""Shared output helpers for commands: --json summaries and plain tables."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence


def write_json(path: str | Path, payload: dict[str, Any]) -> None:
    """Write a machine-readable summary (metrics keyed {dataset: {measure: value}})."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(payload, indent=2, sort_keys=False, default=str) + "\n")
    tmp.replace(path)
    print(f"wrote {path}")


def format_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Left-aligned plain-text table; floats rendered as given by the caller."""
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
