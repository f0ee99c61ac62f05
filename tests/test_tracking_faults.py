"""Tracking can never cost a result (issue 40): a tracking server that accepts connections and never
answers, or answers 404 / 5xx with an HTML page, gives one warning line (status code and URL, never the
page) and the run finishes with its record and --json written; `--track required` stops the run before
its first stage instead. The pipeline is faked (as in tests/test_run_record.py): the tracking path is
what runs, in seconds."""

from __future__ import annotations

import http.server
import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.cli import main
from harness.data.formats import write_trec_run
from harness.records import mlflow_logs, mlflow_requests
from harness.records.tracker import Tracker, tracking_line
from harness.run import runner
from tests.test_run_record import ranked_run


@pytest.fixture
def fake_pipeline(tmp_path, monkeypatch) -> list[str]:
    """A pipeline that writes one ranked run per dataset; the list records each call."""
    calls: list[str] = []

    def pipeline(ctx, datasets):
        if not ctx.plan_only:  # the run's "[k/N]" count plans the same pipeline first: not a run
            calls.append("ran")
        out = {}
        for name in datasets:
            path = tmp_path / "runfiles" / f"{name}.trec"
            write_trec_run(ranked_run(name, name, 1.0), path, tag="fake")
            out[name] = path
        return {"retriever1": out}

    monkeypatch.setattr(runner, "pipeline_for", lambda spec: pipeline)
    monkeypatch.setenv("HARNESS_RUNS_DIR", str(tmp_path / "runs"))
    return calls


@pytest.fixture
def silent_server() -> Iterator[str]:
    """A socket that accepts every connection and never answers a byte."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}"
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    server.close()


def _page_server(health: int, api: int) -> tuple[http.server.ThreadingHTTPServer, str]:
    """A server answering ``/health`` with ``health`` and everything else with ``api``, each an HTML page."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def _answer(self) -> None:
            code = health if self.path.startswith("/health") else api
            body = (
                b"<html><head><title>Oops</title></head><body>" + b"<p>not here</p>" * 50 + b"</body></html>"
                if code != 200
                else b"OK"
            )
            self.send_response(code)
            self.send_header("Content-Type", "text/html" if code != 200 else "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _answer

        def log_message(self, *args) -> None:  # keep the test output quiet
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def _run(tmp_path: Path, *extra: str) -> int:
    return main(
        [
            "run",
            "--method",
            "cocondenser",
            "--profile",
            "tiny",
            "--dataset",
            "scifact",
            "--json",
            str(tmp_path / "out.json"),
            *extra,
        ]
    )


def _warnings(err: str) -> list[str]:
    return [line for line in err.splitlines() if "MLflow" in line or "tracking" in line]


def test_a_server_that_never_answers_costs_seconds_not_the_result(
    fake_pipeline, silent_server, tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", silent_server)
    started = time.monotonic()
    assert _run(tmp_path) == 0
    took = time.monotonic() - started
    assert took < 60, f"{took:.0f}s: the tracking check is not bounded"
    err = capsys.readouterr().err
    summary = json.loads((tmp_path / "out.json").read_text())
    assert Path(summary["run_record"]).is_file() and summary["mlflow"]["enabled"] is False
    assert fake_pipeline == ["ran"]
    lines = _warnings(err)
    assert len(lines) == 1 and f"did not answer GET {silent_server}/health" in lines[0], err


@pytest.mark.parametrize("health,api,says", [(404, 404, "HTTP 404"), (503, 503, "HTTP 503")])
def test_an_error_page_is_one_line_with_its_status_and_url(
    health, api, says, fake_pipeline, tmp_path, monkeypatch, capsys
):
    server, uri = _page_server(health, api)
    try:
        monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
        assert _run(tmp_path) == 0
    finally:
        server.shutdown()
    err = capsys.readouterr().err
    lines = _warnings(err)
    assert len(lines) == 1 and says in lines[0] and f"{uri}/health" in lines[0], err
    assert "<html" not in err and "not here" not in err
    assert json.loads((tmp_path / "out.json").read_text())["run_record"]


def test_an_api_that_fails_after_a_healthy_check_is_one_line_and_bounded(fake_pipeline, tmp_path, monkeypatch, capsys):
    """/health answers OK, every API call a 500 page: MLflow's own (bounded) retries, then one line."""
    server, uri = _page_server(200, 500)
    try:
        monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
        started = time.monotonic()
        assert _run(tmp_path) == 0
        took = time.monotonic() - started
    finally:
        server.shutdown()
    err = capsys.readouterr().err
    lines = _warnings(err)
    assert len(lines) == 1 and f"HTTP 500 from {uri}/api/" in lines[0] and "<html" not in err, err
    assert took < 90, f"{took:.0f}s: MLflow's retries are not bounded"
    assert json.loads((tmp_path / "out.json").read_text())["run_record"]


def test_track_required_stops_before_the_first_stage(fake_pipeline, silent_server, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", silent_server)
    assert _run(tmp_path, "--track", "required") == 2
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "--track required" in errors[0] and "did not answer" in errors[0], err
    assert fake_pipeline == [] and not (tmp_path / "out.json").exists()


def test_mlflow_requests_are_bounded_unless_the_user_set_them(monkeypatch):
    import mlflow.environment_variables as ev

    monkeypatch.delenv("MLFLOW_HTTP_REQUEST_TIMEOUT", raising=False)
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "5")
    mlflow_requests.bound_mlflow_requests()
    assert ev.MLFLOW_HTTP_REQUEST_TIMEOUT.get() == 10  # the names MLflow reads (not its 120 s default)
    assert ev.MLFLOW_HTTP_REQUEST_MAX_RETRIES.get() == 5  # the user's own setting wins
    for name in mlflow_requests.HTTP_BOUNDS:
        assert hasattr(ev, name), name


def test_an_mlflow_error_with_a_page_reads_as_its_status_and_url():
    text = (
        "API request to endpoint /api/2.0/mlflow/runs/create failed with error code 404 != 200. "
        "Response body: '<!DOCTYPE html>\n<html><body>Not Found</body></html>'"
    )
    assert mlflow_requests.one_line(text) == "HTTP 404 from /api/2.0/mlflow/runs/create"
    tracker = Tracker("x", "x/tiny/42", {}, uri="http://tracking.invalid:5000")
    tracker._disable(f"MlflowException: {text}")
    assert tracker.warning == (
        "MLflow tracking disabled (HTTP 404 from /api/2.0/mlflow/runs/create at "
        "http://tracking.invalid:5000); the run record is still written."
    )
    assert mlflow_requests.one_line("x" * 1000).endswith(" ...") and len(mlflow_requests.one_line("x" * 1000)) < 300


@pytest.fixture
def locked_store(fake_pipeline, tmp_path, monkeypatch) -> dict[str, bool]:
    """A sqlite store (runs/mlflow.db) that another process locks once the parent run has started and
    its params are logged: every read of a run then fails as a real lock makes it fail after sqlite's
    20 s wait (sqlalchemy's OperationalError, which MLflow logs with its traceback and re-raises), at
    once. ``recovers``: the lock is gone by the time the runs are ended."""
    import sqlite3

    import sqlalchemy.exc
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    state = {"locked": False, "recovers": True}
    get_run, update_run_info = SqlAlchemyStore._get_run, SqlAlchemyStore.update_run_info
    pipeline_for = runner.pipeline_for

    def locked_get_run(self, *args, **kwargs):
        if state["locked"]:
            raise sqlalchemy.exc.OperationalError(
                "SELECT runs.run_uuid FROM runs WHERE runs.run_uuid = ?",
                {},
                sqlite3.OperationalError("database is locked"),
            )
        return get_run(self, *args, **kwargs)

    def end(self, *args, **kwargs):
        if state["recovers"]:
            state["locked"] = False
        return update_run_info(self, *args, **kwargs)

    def locking_pipeline(spec):
        pipeline = pipeline_for(spec)

        def run(ctx, datasets):
            state["locked"] = not ctx.plan_only
            return pipeline(ctx, datasets)

        return run

    monkeypatch.setattr(SqlAlchemyStore, "_get_run", locked_get_run)
    monkeypatch.setattr(SqlAlchemyStore, "update_run_info", end)
    monkeypatch.setattr(runner, "pipeline_for", locking_pipeline)
    return state


def _store_runs(tmp_path: Path) -> dict[str, str]:
    """{run name: status} of the cocondenser experiment in the test's runs/mlflow.db."""
    import mlflow

    client = mlflow.MlflowClient(f"sqlite:///{tmp_path / 'runs' / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("cocondenser")
    runs = {r.info.run_name: r.info.status for r in client.search_runs([experiment.experiment_id])}
    # the parent also under its name without the stamp (<method>/<profile>/<seed>/<stamp>): one per store
    return {**runs, **{name.rsplit("/", 1)[0]: status for name, status in runs.items() if name.count("/") == 3}}


def _run_line(out: str) -> str:
    """The run's last line (its scores, record and tracking; --json's "wrote" line follows it), its
    continuation lines joined (it wraps at 120 columns)."""
    lines: list[str] = []
    for line in out.splitlines():
        if line.startswith("    ") and lines:
            lines[-1] += " " + line.strip()
        else:
            lines.append(line)
    return next(line for line in reversed(lines) if " -- record " in line)


def test_a_store_locked_mid_run_is_one_line_and_the_runs_end_failed(locked_store, tmp_path, capsys):
    assert _run(tmp_path) == 0
    out, err = capsys.readouterr()
    lines = _warnings(err)
    assert len(lines) == 1 and "database is locked" in lines[0], err
    assert "Traceback" not in err and "SELECT" not in err and "sqlalche.me" not in err, err
    summary = json.loads((tmp_path / "out.json").read_text())
    assert Path(summary["run_record"]).is_file() and summary["metrics"]  # the run's result is whole
    mlflow = summary["mlflow"]
    assert mlflow["failed_calls"] >= 2 and "database is locked" in mlflow["first_failure"]
    statuses = _store_runs(tmp_path)
    assert statuses["cocondenser/tiny/42"] == "FAILED" and "RUNNING" not in statuses.values(), statuses
    last = _run_line(out)
    calls = mlflow["failed_calls"]
    assert f"MLflow: not fully tracked ({calls} calls not logged, the first failed: " in last, last
    assert "database is locked" in last and f"partial run {mlflow['run_id']}" in last and "MLflow run " not in last


def test_a_store_that_stays_locked_still_tries_to_end_its_runs(locked_store, tmp_path, capsys):
    locked_store["recovers"] = False
    assert _run(tmp_path) == 0
    out, err = capsys.readouterr()
    assert len(_warnings(err)) == 1 and "Traceback" not in err, err
    assert json.loads((tmp_path / "out.json").read_text())["run_record"]
    locked_store["locked"] = False
    assert _store_runs(tmp_path)["cocondenser/tiny/42"] == "RUNNING"  # the end was tried: it failed too
    assert "not fully tracked" in _run_line(out)


def test_track_required_fails_the_command_after_the_record_when_the_store_locks(locked_store, tmp_path, capsys):
    assert _run(tmp_path, "--track", "required") == 2
    err = capsys.readouterr().err
    assert "--track required" in err and "database is locked" in err and "Traceback" not in err, err
    assert json.loads((tmp_path / "out.json").read_text())["run_record"]


def test_the_last_line_names_a_run_only_when_it_was_tracked_whole():
    info = {"run_id": "abc", "tracking_uri": "sqlite:///runs/mlflow.db", "failed_calls": 0}
    assert tracking_line(info) == "MLflow run abc at sqlite:///runs/mlflow.db"
    assert tracking_line(info, with_uri=False) == "MLflow run abc"
    assert tracking_line(None) == tracking_line({"run_id": None}) == "MLflow off"
    lost = {**info, "failed_calls": 1, "first_failure": "MlflowException: database is locked"}
    assert tracking_line(lost, with_uri=False) == (
        "MLflow: not fully tracked (1 call not logged, the first failed: MlflowException: database is locked; "
        "partial run abc)"
    )


def test_a_failing_call_keeps_mlflows_traceback_off_stderr_and_a_good_one_keeps_its_warnings(capsys):
    import logging

    import mlflow  # noqa: F401 - configures the "mlflow" logger's own stderr handler

    tracker = Tracker("x", "x/tiny/42", {}, uri="sqlite:///unused.db")
    tracker._mlflow = object()
    logger = logging.getLogger("mlflow.store.db.utils")

    def fails() -> None:
        try:
            raise RuntimeError("database is locked")
        except RuntimeError:
            logger.exception("SQLAlchemy database error")
            raise

    assert tracker._safe(lambda: logger.warning("a warning of a call that worked")) is True
    assert tracker._safe(fails) is None and tracker._safe(lambda: None) is None
    err = capsys.readouterr().err
    assert "a warning of a call that worked" in err and "Traceback" not in err, err
    assert [line for line in err.splitlines() if line.startswith("warning:")] == [
        "warning: MLflow tracking disabled (RuntimeError: database is locked); the run record is still written."
    ]
    assert tracker.failed_calls == 2 and tracker.first_failure == "RuntimeError: database is locked"
    assert logging.getLogger("mlflow").handlers and not any(
        isinstance(h, mlflow_logs.LogHold) for h in logging.getLogger("mlflow").handlers
    )
