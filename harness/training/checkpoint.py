"""Atomic, resumable training checkpoints.

Layout under ``<output_dir>/checkpoints/``::

    step-000100/            one finished checkpoint (the newest ``keep`` are kept)
      model.pt              the objective's state_dict (backbone + heads)
      optimizer.pt          AdamW state
      scheduler.pt          LR schedule position
      scaler.pt             fp16 loss-scaler state (fp16 runs only)
      rng-rank0.pt ...      python / numpy / torch (+ CUDA) RNG states, one file per rank
      trainer_state.json    step, epoch, config, loss and metric histories (written last)
    .step-000000200.partial.tmp/   a checkpoint being written; never read, removed on restart

A checkpoint is written into a temp folder (:func:`harness.core.fsutil.temp_name`) and renamed into
place (:func:`harness.core.fsutil.replace_dir`), so a process killed at any moment leaves either the
previous set of checkpoints or the new one, never a half-written ``step-*`` folder. (Not
:func:`harness.core.fsutil.atomic_dir`: every rank writes into the one folder between barriers.)
``trainer_state.json`` is the resume point a step folder is read by, not a finished marker. Under DDP every rank writes its own RNG file and rank 0
writes the rest; the folder must be on a file system all ranks share.

The data order needs no saved state: it is a pure function of (seed, epoch, step), see
``trainer.py``.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch

from harness.core import ranks
from harness.core.errors import DiskFull, HarnessError, disk_full
from harness.core.fsutil import PARTIAL, is_temp, replace_dir, temp_name
from harness.training import distributed as D

CHECKPOINTS = "checkpoints"
STATE_FILE = "trainer_state.json"
_STEP_DIR = re.compile(r"^step-(\d+)$")


def checkpoint_root(output_dir: str | Path) -> Path:
    return Path(output_dir) / CHECKPOINTS


def step_dirname(step: int) -> str:
    return f"step-{step:09d}"


def list_checkpoints(output_dir: str | Path) -> list[tuple[int, Path]]:
    """Finished checkpoints as (step, folder), oldest first."""
    root = checkpoint_root(output_dir)
    if not root.is_dir():
        return []
    found = []
    for child in root.iterdir():
        match = _STEP_DIR.match(child.name)
        if match and child.is_dir() and (child / STATE_FILE).is_file():
            found.append((int(match.group(1)), child))
    return sorted(found)


def latest_checkpoint(output_dir: str | Path) -> Path | None:
    found = list_checkpoints(output_dir)
    return found[-1][1] if found else None


def remove_partial(output_dir: str | Path) -> list[Path]:
    """Delete the temp folders a killed save left (call on rank 0 before training)."""
    root = checkpoint_root(output_dir)
    removed = []
    if root.is_dir():
        for child in root.iterdir():
            if is_temp(child):
                shutil.rmtree(child, ignore_errors=True)
                removed.append(child)
    return removed


# --- RNG -----------------------------------------------------------------------------


def capture_rng() -> dict[str, Any]:
    """This process's global RNG states, in a form ``torch.load(weights_only=True)`` accepts."""
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": {
            "kind": kind,
            "keys": torch.from_numpy(keys.astype(np.int64)),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "cached_gaussian": float(cached),
        },
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
    }
    return state


def restore_rng(state: dict[str, Any]) -> None:
    random.setstate(_as_tuple(state["python"]))
    np_state = state["numpy"]
    np.random.set_state(
        (
            np_state["kind"],
            np_state["keys"].numpy().astype(np.uint32),
            np_state["pos"],
            np_state["has_gauss"],
            np_state["cached_gaussian"],
        )
    )
    torch.set_rng_state(state["torch"])
    cuda = state.get("cuda") or []
    if cuda and torch.cuda.is_available() and len(cuda) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all(cuda)


def _as_tuple(value: Any) -> Any:
    # random.setstate needs tuples all the way down; serialisers may hand back lists.
    if isinstance(value, (list, tuple)):
        return tuple(_as_tuple(v) for v in value)
    return value


# --- save / load ---------------------------------------------------------------------


def _fsync_save(obj: Any, path: Path) -> None:
    try:
        with open(path, "wb") as fh:
            torch.save(obj, fh)
            fh.flush()
            os.fsync(fh.fileno())
    except Exception as exc:
        # torch says "unexpected pos N vs M" on a full disk; asked while the short file still holds its space
        full = disk_full(exc, (path,))
        if full is None or isinstance(exc, DiskFull):
            raise
        raise DiskFull(path, full.needs_mib) from exc


def _fsync_write_text(text: str, path: Path) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())


def save_checkpoint(
    output_dir: str | Path,
    step: int,
    *,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    scaler: Any | None,
    trainer_state: dict[str, Any],
    keep: int = 2,
) -> Path:
    """Write checkpoint ``step`` atomically and prune to the newest ``keep``; every rank calls it."""
    root = checkpoint_root(output_dir)
    final = root / step_dirname(step)
    tmp = temp_name(final, PARTIAL)  # one name every rank finds
    rank = ranks.rank()
    if rank == 0:
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir(parents=True)
    D.barrier()
    _fsync_save(capture_rng(), tmp / f"rng-rank{rank}.pt")
    if rank == 0:
        _fsync_save(model.state_dict(), tmp / "model.pt")
        _fsync_save(optimizer.state_dict(), tmp / "optimizer.pt")
        _fsync_save(scheduler.state_dict(), tmp / "scheduler.pt")
        if scaler is not None:
            _fsync_save(scaler.state_dict(), tmp / "scaler.pt")
    D.barrier()  # every rank's RNG file is on disk before the folder becomes visible
    if rank == 0:
        _fsync_write_text(json.dumps(trainer_state, indent=1, default=str) + "\n", tmp / STATE_FILE)
        replace_dir(tmp, final)  # an existing one only when re-saving a step (e.g. stop_after == checkpoint step)
        for _, stale in list_checkpoints(output_dir)[:-keep]:
            shutil.rmtree(stale, ignore_errors=True)
    D.barrier()
    return final


def read_state(path: str | Path) -> dict[str, Any]:
    state_file = Path(path) / STATE_FILE
    try:
        return json.loads(state_file.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise HarnessError(
            f"checkpoint {path} is unreadable ({exc}); delete that folder to resume from the one before it"
        ) from exc


def load_checkpoint(
    path: str | Path,
    *,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    scaler: Any | None,
    device: torch.device,
) -> tuple[dict[str, Any], bool]:
    """Restore everything saved by :func:`save_checkpoint` into the given objects.

    Returns (trainer_state, rng_restored). ``rng_restored`` is False when this rank has no
    RNG file (the run was saved with fewer ranks): the caller re-seeds and says so.
    """
    path = Path(path)
    state = read_state(path)

    def load(name: str) -> Any:
        return torch.load(path / name, map_location=device, weights_only=True)

    try:
        model.load_state_dict(load("model.pt"))
        optimizer.load_state_dict(load("optimizer.pt"))
        scheduler.load_state_dict(load("scheduler.pt"))
        if scaler is not None and (path / "scaler.pt").is_file():
            scaler.load_state_dict(load("scaler.pt"))
    except (RuntimeError, ValueError, KeyError, OSError) as exc:
        raise HarnessError(
            f"cannot resume from {path}: {exc}. The checkpoint belongs to a different objective or "
            "model size; use a new output directory or delete the old checkpoints"
        ) from exc
    rng_file = path / f"rng-rank{ranks.rank()}.pt"
    if rng_file.is_file():
        restore_rng(torch.load(rng_file, map_location="cpu", weights_only=True))
        return state, True
    return state, False
