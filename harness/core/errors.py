"""Errors the CLI turns into one clear message (never a traceback)."""

from __future__ import annotations

import difflib
import errno
import shutil
from collections.abc import Iterable, Iterator
from pathlib import Path


class HarnessError(Exception):
    """An error meant for the user: what went wrong and how to fix it."""


class DataFormatError(HarnessError):
    """Malformed input file: names the file, the line (1-based) and the problem."""

    def __init__(self, path: str | Path, line: int | None, problem: str, fix: str | None = None):
        self.path, self.line, self.problem, self.fix = str(path), line, problem, fix
        where = f"{self.path}:{line}" if line is not None else self.path
        msg = f"{where}: {problem}"
        if fix:
            msg += f" (fix: {fix})"
        super().__init__(msg)


class SpecProblems(HarnessError):
    """Everything wrong with a method spec, one problem a line (each names file:line and key path);
    the CLI prints one ``error:`` line per problem."""

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        super().__init__("invalid spec:\n  " + "\n  ".join(self.problems))


class UnknownNameError(HarnessError):
    """An unknown method/dataset/benchmark name, with did-you-mean suggestions."""

    def __init__(self, kind: str, name: str, known: list[str]):
        close = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        super().__init__(f"unknown {kind} '{name}'.{hint} Known: {', '.join(sorted(known))}")
        self.kind, self.name, self.suggestions = kind, name, close


# --- a full disk --------------------------------------------------------------------------------

FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
# What torch's serializer says when a write fails on a full disk: it reports no errno (the zip writer's
# fwrite fails: "PytorchStreamWriter failed writing file ...: file write failed", or its position check
# after a short write: "unexpected pos 8832 vs 8724"), so the folder's free space decides.
TORCH_WRITE_FAILED = ("file write failed", "unexpected pos")
LOW_MIB = 16.0  # below this a folder's disk counts as full: a failed write leaves at most a block or so
MIB = 2**20


class DiskFull(HarnessError):
    """No space (or quota) left where a stage writes: names the file or folder and, when an estimate is
    known, what the write needs; never a number guessed."""

    def __init__(self, path: str | Path | None, needs_mib: float | None = None):
        self.path, self.needs_mib = (Path(path) if path is not None else None), needs_mib
        super().__init__(str(self))

    def __str__(self) -> str:  # from the fields: the stage runner adds its estimate on the way up
        where = f"the device holding {self.path}" if self.path is not None else "the device"
        needs = f" (needs ~{max(1, round(self.needs_mib))} MiB)" if self.needs_mib else ""
        return f"no space left on {where}{needs}"


def free_mib(path: str | Path) -> float | None:
    """Free MiB (for this user) on the file system holding ``path`` or, if it does not exist yet, its
    nearest existing folder; None when that cannot be asked."""
    here = Path(path).absolute()
    while not here.exists() and here != here.parent:
        here = here.parent
    try:
        return shutil.disk_usage(here).free / MIB
    except OSError:
        return None


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and the exceptions it was raised from or while handling (torch and MLflow wrap the OSError)."""
    seen: set[int] = set()
    todo: list[BaseException] = [exc]
    while todo:
        e = todo.pop(0)
        if id(e) in seen:
            continue
        seen.add(id(e))
        yield e
        todo += [c for c in (e.__cause__, e.__context__) if c is not None]


def disk_full(exc: BaseException, where: Iterable[str | Path] = (), needs_mib: float | None = None) -> DiskFull | None:
    """``exc`` as a :class:`DiskFull` if a full disk caused it, else None: an ENOSPC/EDQUOT OSError
    anywhere in its chain (Python's and numpy's writes), or torch's write-failed message while one of
    ``where`` (the file being written, or the folders the work writes into) has under :data:`LOW_MIB`
    free. The path named: the OSError's file when it has one (a write to an open file has none), else
    the fullest of ``where``."""
    places = [Path(w) for w in where]
    # free MiB per place; one that cannot be asked is never taken as full
    room = {p: float("inf") if f is None else f for p in places for f in [free_mib(p)]}
    fullest = min(places, key=room.__getitem__, default=None)
    for e in _chain(exc):
        if isinstance(e, DiskFull):
            return e
        if isinstance(e, OSError) and e.errno in FULL_ERRNOS:
            return DiskFull(e.filename if e.filename is not None else fullest, needs_mib)
        if isinstance(e, RuntimeError) and any(m in str(e) for m in TORCH_WRITE_FAILED):
            if fullest is not None and room[fullest] < LOW_MIB:
                return DiskFull(fullest, needs_mib)
    return None
