"""A finished training folder: the run's fingerprint, ``train_stats.json`` and the finished marker.

The stats stay in ``train_stats.json`` where callers read them; whether the folder is finished,
and from what, is the one marker of :mod:`harness.stages.artifacts` (``done.json``, ``key`` = the
fingerprint), written after everything else.
"""

from __future__ import annotations

import itertools
import json
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from harness.core import ranks
from harness.core.errors import HarnessError
from harness.core.fsutil import atomic_write_text
from harness.stages.artifacts import canonical_json, finished_meta, hash_texts, mark_finished
from harness.training import checkpoint as ckpt
from harness.training import distributed as D

STATS_FILE = "train_stats.json"


def fingerprint(init: str, settings: dict[str, Any], items: Iterable[Any], extra: Iterable[Any] = ()) -> str:
    """What makes two runs the same experiment: initial model, identity settings, data (and e.g.
    teacher scores). The artifact key scheme, streamed: :func:`hash_texts` over each value's
    canonical JSON (an empty string, which no JSON value spells, parts the data from ``extra``)."""
    head = canonical_json({"init": init, "settings": settings})
    return hash_texts(itertools.chain([head], map(canonical_json, items), [""], map(canonical_json, extra)))


def finished_stats(out_dir: Path, fingerprint_: str, what: str) -> dict[str, Any] | None:
    """The stats of a folder finished with the same fingerprint (``cached: True``); None if unfinished."""
    done = finished_meta(out_dir)
    if done is None:
        return None
    if done.get("key") != fingerprint_:
        raise HarnessError(
            f"{out_dir} already holds a {what} trained with other data or settings; "
            "use a new output directory (or delete that one)"
        )
    stats_file = out_dir / STATS_FILE
    try:
        stats = json.loads(stats_file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise HarnessError(f"{stats_file} is unreadable ({exc}); delete {out_dir} and train again") from exc
    return {**stats, "cached": True}


def finish(
    out_dir: Path, stats: dict[str, Any], save: Callable[[], None], keep_checkpoints: bool = False
) -> dict[str, Any]:
    """Unless the run stopped early: rank 0 saves the model (``save``), drops the checkpoints (they
    hold optimizer state, 3x the model), writes the stats, then the finished marker last: a folder
    killed before it is trained again. Every rank waits for it and gets ``stats`` back."""
    if stats.get("stopped_early"):
        return stats
    if ranks.is_main():
        save()
        if not keep_checkpoints:
            shutil.rmtree(ckpt.checkpoint_root(out_dir), ignore_errors=True)
        atomic_write_text(out_dir / STATS_FILE, json.dumps(stats, indent=1, default=str) + "\n")
        mark_finished(out_dir, {"key": stats["fingerprint"], "stats": STATS_FILE})
    D.barrier()
    return stats
