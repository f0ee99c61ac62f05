"""Nothing outlives a killed harness: its children (the Lucene indexer, the ui / leaderboard servers
and their workers) die with it, SIGTERM unwinds a run so its MLflow runs end KILLED, and runs left
RUNNING by a process that is gone are closed by the next run. Processes are read from /proc."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from harness.core import procs
from harness.core.paths import PROJECT_ROOT

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads processes from /proc (Linux)")


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, ppid, process group) of a pid, None when there is none."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()
    return fields[0], int(fields[1]), int(fields[2])


def _alive(pid: int) -> bool:
    stat = _stat(pid)
    return stat is not None and stat[0] != "Z"  # a zombie has finished; only its parent has not looked


def _pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def _children(pid: int) -> list[int]:
    return [p for p in _pids() if (s := _stat(p)) and s[1] == pid and s[0] != "Z"]


def _group(pgid: int) -> list[int]:
    return [p for p in _pids() if (s := _stat(p)) and s[2] == pgid and s[0] != "Z"]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _wait_for(what: Callable[[], object], timeout: float, step: float = 0.1) -> object:
    deadline = time.monotonic() + timeout
    while True:
        value = what()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(step)


def _start(script: str, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(script), *args],
        cwd=PROJECT_ROOT,
        env=env or dict(os.environ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _child(parent: int, marker: str, timeout: float = 60) -> int:
    found = _wait_for(lambda: [p for p in _children(parent) if marker in _cmdline(p)], timeout)
    assert found, f"no child of {parent} running {marker!r}"
    return found[0]


def _identities(pids: list[int]) -> list[dict[str, str]]:
    """Who the pids are now (pid, start time), for :func:`_kill_all` later."""
    return [procs.process_tags(pid) for pid in pids]


def _kill_all(identities: list[dict[str, str]]) -> None:
    """Clean-up after a failed assertion: never leave the processes a test started, and never kill a
    pid that has gone to another process since its identity was taken."""
    for tags in identities:
        if not procs.process_gone(tags):
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(tags["harness.pid"]), signal.SIGKILL)


GROUP_SCRIPT = """
    import subprocess, sys, time
    from harness.core import procs
    # sh and its background sleep: the sleep is a grandchild, which no parent-death signal reaches
    with procs.child_group(["sh", "-c", "sleep 300 & wait"], grace=2, stdout=subprocess.DEVNULL):
        print("ready", flush=True)
        time.sleep(300)
"""


def test_a_killed_parent_takes_its_child_and_grandchildren_along():
    parent = _start(GROUP_SCRIPT)
    assert parent.stdout.readline().strip() == "ready", parent.stderr.read()
    shell = _child(parent.pid, "sh -c")
    watchdog = _child(parent.pid, "procs.py")
    members = _wait_for(lambda: len(g := _group(shell)) >= 2 and g, 30)
    assert members, "the background sleep did not start"
    started = _identities([*members, watchdog])
    try:
        # The watchdog held still: the kernel's parent-death signal alone stops the direct child ...
        os.kill(watchdog, signal.SIGSTOP)
        parent.kill()
        parent.wait()
        assert _wait_for(lambda: not _alive(shell), 10), "the child outlived its SIGKILLed parent"
        assert _group(shell), "expected the grandchild to be alive until the watchdog runs"
        # ... and the watchdog, seeing its pipe from the dead parent closed, stops the rest of the group.
        os.kill(watchdog, signal.SIGCONT)
        assert _wait_for(lambda: not _group(shell), 10), f"left behind: {_group(shell)}"
        assert _wait_for(lambda: not _alive(watchdog), 10), "the watchdog did not exit"
    finally:
        _kill_all(started)


INDEX_SCRIPT = """
    import sys
    from pathlib import Path
    from harness.retrieval.bm25 import build_index

    words = [f"w{i}" for i in range(500)]
    corpus = {f"d{i}": {"title": f"t{i}", "text": " ".join(words[(i * j) % 500] for j in range(40))}
              for i in range(3000)}
    build_index(corpus, Path(sys.argv[1]) / "index", {"contents": 1.0, "title": 1.0})
"""


def test_sigkill_while_indexing_leaves_no_java_process(tmp_path):
    from harness.retrieval.java import ensure_java_home

    try:
        ensure_java_home()
    except Exception as exc:  # noqa: BLE001 - any failure to start Java means: skip
        pytest.skip(f"no Java: {exc}")
    parent = _start(INDEX_SCRIPT, str(tmp_path / "key.partial"))
    started: list[dict[str, str]] = []
    try:
        indexer = _child(parent.pid, "pyserini.index.lucene")
        started = _identities([indexer])

        def jvm_loaded() -> bool:
            try:
                return "libjvm" in Path(f"/proc/{indexer}/maps").read_text()
            except OSError:
                return False

        assert _wait_for(jvm_loaded, 120, 0.05), "the indexer never loaded the JVM"
        # Frozen so it cannot finish before its parent dies (SIGKILL still ends a stopped process).
        os.kill(indexer, signal.SIGSTOP)
        assert parent.poll() is None, parent.communicate()
        parent.kill()
        parent.communicate()
        assert _wait_for(lambda: not _alive(indexer), 5), "the Java indexer outlived its SIGKILLed parent"
        assert _wait_for(lambda: not _group(indexer), 5)
        # killed mid-build: Lucene never committed a segment
        assert not list((tmp_path / "key.partial").rglob("segments_*"))
    finally:
        parent.kill()
        _kill_all(started)


RUN_SCRIPT = """
    import sys, time
    from harness import cli
    from harness.commands import run as run_command
    from harness.core import procs
    from harness.records.tracker import Tracker

    def fake_run(args):  # a run's shape: a parent MLflow run, a stage run, a child process
        tracker = Tracker("procs-test", "fake-run", {"method": "fake"})
        with tracker.run(), tracker.stage("index/fake"):
            assert tracker.enabled, tracker.warning
            with procs.child_group(["sleep", "300"]):
                print(tracker.parent_run_id, flush=True)
                time.sleep(300)

    run_command._run = fake_run
    sys.exit(cli.main(["run"]))
"""


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGUSR1"])
def test_sigterm_unwinds_a_run_and_marks_its_mlflow_runs_killed(tmp_path, signame):
    """SIGUSR1 (a scheduler's preemption notice) outside training as SIGTERM: unwound, exit 143, runs KILLED."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    started: list[dict[str, str]] = []
    parent = _start(RUN_SCRIPT, env=dict(os.environ, MLFLOW_TRACKING_URI=uri))
    try:
        run_id = parent.stdout.readline().strip()
        assert run_id, parent.stderr.read()
        sleeper = _child(parent.pid, "sleep 300")
        started = _identities([sleeper])
        parent.send_signal(getattr(signal, signame))
        out, err = parent.communicate(timeout=60)
        assert parent.returncode == 128 + signal.SIGTERM, err
        assert "interrupted: finished stages are cached" in err and "Traceback" not in err, err
        assert _wait_for(lambda: not _alive(sleeper), 5), "the run's child outlived it"
    finally:
        parent.kill()
        _kill_all(started)

    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    runs = client.search_runs([client.get_experiment_by_name("procs-test").experiment_id])
    assert {r.info.run_id for r in runs if "mlflow.parentRunId" not in r.data.tags} == {run_id}
    assert sorted((r.data.tags.get("stage", "-"), r.info.status) for r in runs) == [
        ("-", "KILLED"),
        ("index/fake", "KILLED"),
    ]
    assert all(r.info.end_time for r in runs)


def test_runs_left_running_by_a_dead_process_are_marked_killed(tmp_path, capsys):
    from mlflow.tracking import MlflowClient

    from harness.records.tracker import Tracker

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    exp = client.create_experiment("sweep")
    gone = subprocess.Popen(["sleep", "60"])
    dead = procs.process_tags(gone.pid)  # taken while it runs, so it has a start time
    gone.kill()
    gone.wait()
    elsewhere = {**dead, "harness.host": "another-host"}

    def running(tags: dict[str, str]) -> str:
        return client.create_run(exp, tags=tags).info.run_id

    killed_parent = running(dead)
    killed_stage = running({**dead, "mlflow.parentRunId": killed_parent, "stage": "index/x"})
    live = running(procs.process_tags())  # this test's own process: still running
    reused_pid = running({**procs.process_tags(), "harness.pid_start": "old-boot:1"})  # a live pid, another process
    remote = running(elsewhere)  # another host's pids say nothing about this host
    untagged = running({})  # before the harness tagged its runs: left alone
    finished = running(dead)
    client.set_terminated(finished, "FINISHED")

    tracker = Tracker("sweep", "next-run", {"method": "x"}, uri=uri)
    with tracker.run():
        assert tracker.enabled, tracker.warning
        status = {
            r: client.get_run(r).info.status
            for r in (killed_parent, killed_stage, live, reused_pid, remote, untagged, finished)
        }
    assert status == {
        killed_parent: "KILLED",
        killed_stage: "KILLED",
        live: "RUNNING",
        reused_pid: "KILLED",
        remote: "RUNNING",
        untagged: "RUNNING",
        finished: "FINISHED",
    }
    assert "3 MLflow run(s) of sweep left RUNNING" in capsys.readouterr().err
    own = client.get_run(tracker.parent_run_id).data.tags
    assert own["harness.pid"] == str(os.getpid()) and not procs.process_gone(own)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serving(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return resp.status == 200
    except OSError:
        return False


@pytest.mark.slow
@pytest.mark.parametrize("command, health", [("ui", "/health"), ("leaderboard", "/_stcore/health")])
def test_sigkilled_server_command_leaves_nothing_serving(command, health, tmp_path):
    port = _free_port()
    url = f"http://127.0.0.1:{port}{health}"
    env = dict(os.environ, HARNESS_RUNS_DIR=str(tmp_path / "runs"), MLFLOW_DISABLE_TELEMETRY="true")
    log = tmp_path / "server.log"  # a file, not a pipe: the server's processes hold it open too
    with log.open("w") as out:
        harness = subprocess.Popen(
            [sys.executable, "-m", "harness", command, "--port", str(port)],
            cwd=PROJECT_ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    started: list[dict[str, str]] = []
    try:
        server = _child(harness.pid, "streamlit" if command == "leaderboard" else "mlflow")
        started = _identities([server])
        _wait_for(lambda: _serving(url) or harness.poll() is not None, 240, 0.5)
        if not _serving(url):
            pytest.fail(f"{command} did not start:\n{log.read_text()[-2000:]}")
        started = _identities(_group(server))  # mlflow: the CLI, uvicorn, the job runner, huey consumers
        harness.kill()
        harness.wait()
        assert _wait_for(lambda: not _group(server), 30), f"left behind: {[_cmdline(p) for p in _group(server)]}"
        assert not _serving(url)
    finally:
        harness.kill()
        _kill_all(started)
