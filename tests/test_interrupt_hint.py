"""Ctrl-C says "finished stages are cached" only after a command that runs cached stages: a `check`
or `grade` has nothing to resume."""

from __future__ import annotations

import importlib
import signal

import pytest

from harness import cli


def _interrupt(*_args, **_kwargs):
    raise KeyboardInterrupt


@pytest.mark.parametrize(
    "argv, module, func, said",
    [
        (["check"], "check", "_check", "interrupted."),
        (["grade", "--metrics", "x.json"], "grade", "_grade", "interrupted."),
        (["run"], "run", "_run", "interrupted: finished stages are cached; re-run the same command to resume."),
        (
            ["fetch", "x"],
            "fetch",
            "_fetch",
            "interrupted: finished downloads are kept; re-run the same command to continue.",
        ),
    ],
)
def test_the_interrupt_line_fits_the_command(monkeypatch, capsys, argv, module, func, said):
    monkeypatch.setattr(importlib.import_module(f"harness.commands.{module}"), func, _interrupt)
    rc = cli.main(argv)
    err = capsys.readouterr().err
    assert rc == 128 + signal.SIGINT
    assert err.strip().splitlines()[-1] == said, err


def test_a_preemption_notice_ends_as_sigterm_does(monkeypatch, capsys):
    """SLURM's SIGUSR1 notice: the run checkpoints and exits 143, the status a requeue looks for."""
    from harness.core.procs import Terminated

    def preempted(*_args, **_kwargs):
        raise Terminated(signal.SIGUSR1)

    monkeypatch.setattr(importlib.import_module("harness.commands.run"), "_run", preempted)
    assert cli.main(["run", "--method", "bm25"]) == 143
    assert "interrupted: finished stages are cached" in capsys.readouterr().err
    assert Terminated(signal.SIGHUP).exit_code == 128 + signal.SIGHUP
