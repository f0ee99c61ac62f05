"""A finished training folder: the run's fingerprint and ``train_stats.json``, written last."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any, Callable, Iterable

from harness.errors import HarnessError
from harness.fsutil import atomic_write_text
from harness.training import checkpoint as ckpt
from harness.training import distributed as D

STATS_FILE = "train_stats.json"


def fingerprint(init: str, settings: dict[str, Any], items: Iterable[Any], extra: Iterable[Any] = ()) -> str:
    """What makes two runs the same experiment: initial model, identity settings, data (and e.g. teacher scores)."""
    h = hashlib.sha256()
    h.update(json.dumps({"init": init, "settings": settings}, sort_keys=True, default=str).encode())
    for item in items:
        h.update(json.dumps(item, ensure_ascii=False, default=str).encode())
    for item in extra:
        h.update(json.dumps(item).encode())
    return h.hexdigest()[:16]


def finished_stats(out_dir: Path, fingerprint_: str, what: str) -> dict[str, Any] | None:
    """The stats of a folder finished with the same fingerprint (``cached: True``); None if unfinished."""
    stats_file = out_dir / STATS_FILE
    if not stats_file.is_file():
        return None
    try:
        done = json.loads(stats_file.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise HarnessError(f"{stats_file} is not valid JSON ({exc.msg}); delete {out_dir} and train again") from exc
    if done.get("fingerprint") != fingerprint_:
        raise HarnessError(f"{out_dir} already holds a {what} trained with other data or settings; "
                           "use a new output directory (or delete that one)")
    return {**done, "cached": True}


def finish(out_dir: Path, stats: dict[str, Any], save: Callable[[], None], keep_checkpoints: bool = False) -> dict[str, Any]:
    """Unless the run stopped early: rank 0 saves the model (``save``), drops the checkpoints (they
    hold optimizer state, 3x the model) and writes the stats last: their presence means the folder
    is complete. Every rank waits for it and gets ``stats`` back."""
    if stats.get("stopped_early"):
        return stats
    if D.is_main():
        save()
        if not keep_checkpoints:
            shutil.rmtree(ckpt.checkpoint_root(out_dir), ignore_errors=True)
        atomic_write_text(out_dir / STATS_FILE, json.dumps(stats, indent=1, default=str) + "\n")
    D.barrier()
    return stats
