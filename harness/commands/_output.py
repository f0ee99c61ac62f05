"""Shared output helper for commands: --json summaries (plain tables: ``harness.core.text_table``)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from harness.core.errors import HarnessError
from harness.core.fsutil import atomic_write_text


def write_json(path: str | Path, payload: dict[str, Any]) -> None:
    """Write a machine-readable summary (metrics keyed {dataset: {measure: value}})."""
    path = Path(path)
    atomic_write_text(path, json.dumps(payload, indent=2, sort_keys=False, default=str) + "\n")
    print(f"wrote {path}")


def port_number(text: str) -> int:
    """argparse type of --port: a TCP port, 1-65535 (a larger one crashed the server's start)."""

    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a TCP port (1-65535)")
    return port


def name_list(values: list[str] | str | None, flag: str) -> list[str] | None:
    """Comma-separated names given once or repeatedly; None when the flag was not given. A flag given
    with no name in it (``--benchmark ,``) is an error, not a silent fall-back to the default."""
    if values is None:
        return None
    items = [values] if isinstance(values, str) else values
    names = [n.strip() for item in items for n in item.split(",") if n.strip()]
    if not names:

        raise HarnessError(f"{flag} {','.join(items)!r} names nothing: give one or more names, comma-separated")
    return names
