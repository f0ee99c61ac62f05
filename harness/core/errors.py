"""Errors the CLI turns into one clear message (never a traceback)."""

from __future__ import annotations

import difflib
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
