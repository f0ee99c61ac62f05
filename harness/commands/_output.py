"""Shared output helper for commands: --json summaries (plain tables: ``harness.core.text_table``)."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from harness.core.errors import HarnessError
from harness.core.fsutil import atomic_write_text, writable_file
from harness.core.text_table import TERMINAL_WIDTH


def add_wide(parser: argparse.ArgumentParser) -> None:
    """``--wide``: the output unbounded, one line per table row (by default every line fits
    ``TERMINAL_WIDTH`` columns: long text wrapped at word boundaries, some columns under their row)."""
    parser.add_argument(
        "--wide",
        action="store_true",
        help=f"print one line per row, nothing wrapped (by default lines fit {TERMINAL_WIDTH} columns)",
    )


def write_json(path: str | Path, payload: dict[str, Any]) -> None:
    """Write a machine-readable summary (metrics keyed {dataset: {measure: value}})."""
    path = writable_file(path, "--json")  # checked at the start too (json_target); the folder may have gone since
    try:
        atomic_write_text(path, json.dumps(payload, indent=2, sort_keys=False, default=str) + "\n")
    except OSError as exc:
        raise HarnessError(
            f"--json {path}: cannot write it ({exc.strerror or exc}) (fix: give a path in a "
            "folder you can write, on a disk with room)"
        ) from None
    print(f"wrote {path}")


def json_target(path: str | None) -> None:
    """Refuse an unusable ``--json`` path (a folder, a folder that cannot be written) before the work
    whose summary it would hold: a run failed on it only after its last stage."""
    if path is not None:
        writable_file(path, "--json")


def records_folder(path: str | None) -> None:
    """``--records DIR`` names a folder this process can list (a gate over no records checks nothing)."""
    if path is None:
        return
    folder = Path(path)
    if not folder.exists():
        raise HarnessError(f"--records {path}: no such folder; give the folder holding the run records")
    if not folder.is_dir():
        raise HarnessError(f"--records {path} is a file, not a folder; give the folder holding the run records")
    try:
        next(os.scandir(folder), None)
    except OSError as exc:
        raise HarnessError(
            f"--records {path}: cannot list it ({exc.strerror or exc}); give a folder of run records you can read"
        ) from None


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
