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

Saves are asynchronous (:class:`CheckpointWriter`): a background thread copies the state to the CPU while
the next step's forward and backward run, then writes it, so a save holds up training only where the copy
outlasts them; the engine saves by wall-clock interval
(:func:`checkpoint_minutes`), at stage end and where asked. A checkpoint is written into a temp folder (:func:`harness.core.fsutil.temp_name`) and renamed into
place (:func:`harness.core.fsutil.replace_dir`), so a process killed at any moment leaves either the
previous set of checkpoints or the new one, never a half-written ``step-*`` folder. (Not
:func:`harness.core.fsutil.atomic_dir`: every rank writes into the one folder.)
``trainer_state.json`` is the resume point a step folder is read by, not a finished marker. Under DDP every rank writes its own RNG file and rank 0
writes the rest; the folder must be on a file system all ranks share.

The data order needs no saved state: it is a pure function of (seed, epoch, step), see
``trainer.py``.
"""

from __future__ import annotations

import copy
import json
import os
import random
import re
import shutil
import threading
import time
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
MINUTES_ENV = "HARNESS_CHECKPOINT_MINUTES"
DEFAULT_MINUTES = 30.0


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


def checkpoint_minutes() -> float:
    """Minutes between the engine's wall-clock checkpoints (:data:`MINUTES_ENV`, default 30; 0 turns them
    off). A run control like ``checkpoint_every``: never part of a stage's key or a run's identity."""
    raw = os.environ.get(MINUTES_ENV, "").strip()
    if not raw:
        return DEFAULT_MINUTES
    try:
        minutes = float(raw)
    except ValueError:
        raise HarnessError(f"{MINUTES_ENV}={raw!r}: give the minutes between checkpoints as a number") from None
    if minutes < 0 or not minutes == minutes:
        raise HarnessError(f"{MINUTES_ENV}={raw!r}: must be >= 0 (0 = no wall-clock checkpoints)")
    return minutes


def snapshot(obj: Any, buffers: dict[str, torch.Tensor], key: str = "") -> Any:
    """A copy of ``obj`` (nested dicts, lists, tuples of tensors and plain values) whose tensors live on
    the CPU, so training can go on changing the originals while a thread writes the copy. The copies go
    into ``buffers`` (reused when a tensor keeps its shape and dtype: no allocation, no page faults after
    the first save; pinned when the source is on a GPU)."""
    if isinstance(obj, torch.Tensor):
        src = obj.detach()
        buf = buffers.get(key)
        if buf is None or buf.shape != src.shape or buf.dtype != src.dtype:
            pin = src.device.type == "cuda"
            buf = torch.empty(src.shape, dtype=src.dtype, pin_memory=pin)
            buffers[key] = buf
        buf.copy_(src)  # synchronous: the copy is done when the writer says so (CheckpointWriter.before_update)
        return buf
    if isinstance(obj, dict):
        return {k: snapshot(v, buffers, f"{key}/{k}") for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        items = [snapshot(v, buffers, f"{key}/{i}") for i, v in enumerate(obj)]
        return items if isinstance(obj, list) else tuple(items)
    return copy.deepcopy(obj)


class CheckpointWriter:
    """Writes checkpoints in a background thread, so a save does not hold up training.

    :meth:`save` takes this rank's small state at once (RNG states; on rank 0 also the schedule, the loss
    scaler and ``trainer_state``) and hands the rest to a thread: it copies the model's and optimizer's
    tensors to CPU buffers, then writes every file into the step's temp folder under a temporary name
    renamed when complete. The copy overlaps the next step's forward and backward, which read the weights
    but change neither them nor the optimizer state; :meth:`before_update` (called before the optimizer
    step) waits for the copy only if it is not done by then. Rank 0's thread waits until every rank's RNG
    file is there, writes ``trainer_state.json`` last, renames the folder into place and prunes to the
    newest ``keep``: the same atomic layout as before, with no collective outside the main thread. A save
    first waits for the one before it; :meth:`wait` joins the thread and raises what it raised."""

    def __init__(self, world_size: int = 1, rank: int = 0, timeout_s: float = 3600.0):
        self.world_size, self.rank, self.timeout_s = world_size, rank, timeout_s
        self._buffers: dict[str, torch.Tensor] = {}
        self._thread: threading.Thread | None = None
        self._copied = threading.Event()
        self._copied.set()
        self._error: BaseException | None = None

    def save(
        self,
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
        """Start saving checkpoint ``step``; its folder (finished once :meth:`wait` returns on rank 0)."""
        self.wait()
        final = checkpoint_root(output_dir) / step_dirname(step)
        small: dict[str, Any] = {f"rng-rank{self.rank}.pt": capture_rng()}
        live: dict[str, Any] = {}
        state_text = ""
        if self.rank == 0:
            live = {"model.pt": model.state_dict(), "optimizer.pt": optimizer.state_dict()}  # the live tensors
            small["scheduler.pt"] = copy.deepcopy(scheduler.state_dict())
            if scaler is not None:
                small["scaler.pt"] = copy.deepcopy(scaler.state_dict())
            state_text = json.dumps(trainer_state, indent=1, default=str) + "\n"  # now: the metrics list grows
        self._copied.clear()
        self._thread = threading.Thread(
            target=self._write, args=(final, live, small, state_text, keep), name=f"checkpoint-{step}", daemon=True
        )
        self._thread.start()
        return final

    def before_update(self) -> None:
        """Block until the weights and optimizer state being saved are copied (call before changing them)."""
        self._copied.wait()

    def wait(self) -> None:
        """Block until the checkpoint being written is on disk; raise the writer's error, if any."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        error, self._error = self._error, None
        if error is not None:
            raise error

    def _write(self, final: Path, live: dict[str, Any], small: dict[str, Any], state_text: str, keep: int) -> None:
        try:
            try:
                files = {name: snapshot(obj, self._buffers, name) for name, obj in live.items()}
            finally:
                self._copied.set()
            files.update(small)
            tmp = temp_name(final, PARTIAL)  # one name every rank finds
            tmp.mkdir(parents=True, exist_ok=True)
            for name, obj in files.items():
                part = tmp / f"{name}.part"
                _fsync_save(obj, part)
                os.replace(part, tmp / name)  # whole or absent: rank 0 waits for whole files only
            if self.rank != 0:
                return
            deadline = time.monotonic() + self.timeout_s
            missing = [r for r in range(self.world_size) if not (tmp / f"rng-rank{r}.pt").is_file()]
            while missing:
                if time.monotonic() > deadline:
                    raise HarnessError(
                        f"checkpoint {final.name}: ranks {missing} wrote no RNG file in {self.timeout_s:.0f} s"
                    )
                time.sleep(0.05)
                missing = [r for r in missing if not (tmp / f"rng-rank{r}.pt").is_file()]
            _fsync_write_text(state_text, tmp / STATE_FILE)
            replace_dir(tmp, final)  # an existing one only when re-saving a step (e.g. stop_after == checkpoint step)
            for _, stale in list_checkpoints(final.parent.parent)[:-keep]:
                shutil.rmtree(stale, ignore_errors=True)
        except BaseException as exc:  # noqa: BLE001 - handed to the training thread by wait()
            self._error = exc


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
    """Write checkpoint ``step`` atomically, prune to the newest ``keep`` and return when every rank's part
    is on disk; every rank calls it (:class:`CheckpointWriter` without the background)."""
    writer = CheckpointWriter(ranks.world_size(), ranks.rank())
    final = writer.save(
        output_dir,
        step,
        model=model,
        optimizer=optimizer,
        scheduler=scheduler,
        scaler=scaler,
        trainer_state=trainer_state,
        keep=keep,
    )
    writer.wait()
    D.barrier()  # rank 0 has renamed the folder into place
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
