"""`ui` and `leaderboard` on a taken port: one line, a non-zero exit, nothing started or left behind."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from harness.commands.leaderboard import ensure_port_free
from harness.core.errors import HarnessError
from harness.core.paths import PROJECT_ROOT


@pytest.fixture
def busy_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        yield s.getsockname()[1]


def test_free_port_passes_and_taken_port_is_refused(busy_port):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free = s.getsockname()[1]
    ensure_port_free("127.0.0.1", free)
    with pytest.raises(HarnessError, match=f"port {busy_port} on 127.0.0.1 is already in use.*--port"):
        ensure_port_free("127.0.0.1", busy_port)


@pytest.mark.parametrize("command", ["ui", "leaderboard"])
def test_cli_on_a_busy_port_exits_non_zero_in_one_line(command, busy_port, tmp_path):
    env = dict(os.environ, HARNESS_RUNS_DIR=str(tmp_path / "runs"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness", command, "--port", str(busy_port)],
        cwd=PROJECT_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 2, out + err
    assert "serving" not in out  # it never claims to serve
    error_lines = [line for line in err.splitlines() if line.strip()]
    assert len(error_lines) == 1 and "already in use" in error_lines[0] and "Traceback" not in err
    # the session it ran in has no process left (no orphaned server or worker)
    leftover = subprocess.run(["pgrep", "-s", str(proc.pid)], capture_output=True, text=True)
    assert leftover.stdout.strip() == ""
