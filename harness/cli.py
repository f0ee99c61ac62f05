"""`python -m harness <command>`: one module per subcommand under harness/commands/.

Each command module exposes ``add_parser(subparsers)`` which registers its parser and
sets ``func``. Heavy libraries (torch, pyserini, mlflow) are imported inside the
commands, so ``--help`` and ``ls`` stay fast.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import os
import signal
import sys

from harness.core import env_controls, procs, threads
from harness.core.errors import HarnessError, SpecProblems, disk_full
from harness.core.paths import cache_dir, runs_dir
from harness.core.text_table import TERMINAL_WIDTH, output_width

# Order is the order shown in --help.
# An OSError on a path the user controls (a cache on a full disk, a folder made read-only mid-run) is
# the user's to fix: one line naming the path, as for the paths checked up front (harness.core.fsutil.writable_dir).
_PLACE_ERRNOS = {errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, errno.EDQUOT, errno.ENOTDIR, errno.EISDIR}

COMMANDS = [
    "run",
    "eval",
    "reproduce",
    "fetch",
    "ls",
    "reported",
    "table",
    "validate",
    "check",
    "grade",
    "effects",
    "noise",
    "report",
    "leaderboard",
    "ui",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m harness",
        description=(
            "Reproducibility harness for retrieval pre-training: runs a method's "
            "pretrain -> finetune -> eval spec, evaluates with the papers' conventions "
            "and checks the numbers against the papers' tables."
        ),
        epilog="Run 'python -m harness <command> --help' for a command's options.",
    )
    sub = parser.add_subparsers(dest="command", metavar="<command>", required=True)
    for name in COMMANDS:
        importlib.import_module(f"harness.commands.{name}").add_parser(sub)
    return parser


def _resume_hint(args: argparse.Namespace) -> str:
    """What an interrupted command kept: only the commands that run cached stages (or downloads)
    resume; a Ctrl-C in `check` or `grade` has nothing to resume."""
    command = getattr(args, "command", None)
    if command in ("run", "reproduce") or command == "eval" and getattr(args, "model", None) is not None:
        return ": finished stages are cached; re-run the same command to resume."
    if command == "fetch":
        return ": finished downloads are kept; re-run the same command to continue."
    return "."


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")  # load reports would bury the progress bars
    args = build_parser().parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # `run --seed` starts itself again with them
    try:
        # SIGTERM / SIGHUP / SIGUSR1 unwind like Ctrl-C: children are stopped, MLflow runs marked KILLED.
        with procs.terminate_raises():
            env_controls.check(os.environ)  # every HARNESS_* control, whether or not this command reads it
            threads.configure()  # before torch starts: its OpenMP pool is sized once
            with output_width(None if getattr(args, "wide", False) else TERMINAL_WIDTH):  # `--wide`: unbounded
                return int(args.func(args) or 0)
    except SpecProblems as exc:  # one line per problem, so each names its own file:line
        for problem in exc.problems:
            print(f"error: {problem}", file=sys.stderr)
        return 2
    except HarnessError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `... | head` closed the pipe: not an error; keep Python from reporting it at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as exc:
        # A full disk, whatever raised it (a write to an open file has no filename; torch wraps it in a
        # RuntimeError): one line naming the file, else the fuller of the folders the stages write into.
        full = disk_full(exc, (cache_dir(), runs_dir()))
        if full is not None:
            print(f"error: {full}", file=sys.stderr)
            return 2
        if not isinstance(exc, OSError) or exc.errno not in _PLACE_ERRNOS or exc.filename is None:
            raise
        print(
            f"error: {exc.filename}: {exc.strerror} (fix: make it writable, or point "
            "HARNESS_CACHE_DIR / HARNESS_RUNS_DIR / the flag at a folder you can write)",
            file=sys.stderr,
        )
        return 2
    except KeyboardInterrupt as exc:
        print(f"interrupted{_resume_hint(args)}", file=sys.stderr)
        # the shell's status for death by that signal (procs.Terminated.exit_code: SIGUSR1 as SIGTERM)
        return getattr(exc, "exit_code", 128 + signal.SIGINT)
