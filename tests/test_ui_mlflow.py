"""`python -m harness ui`: an MLflow server over the project's store; two runs of one method are
logged the way the run pipeline logs them, then compared through the REST API. The server is
always stopped, and every wait is bounded."""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request

import pytest

from harness.commands import ui
from harness.paths import PROJECT_ROOT

LAUNCH = ("import argparse, sys; from harness.commands import ui as m; "
          "p = argparse.ArgumentParser(); m.add_parser(p.add_subparsers(dest='c', required=True)); "
          "a = p.parse_args(sys.argv[1:]); sys.exit(a.func(a))")
START_TIMEOUT = 240  # mlflow server takes ~10 s on an idle 2-core machine, much longer under load


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ui_command(*args: str) -> list[str]:
    from harness import cli

    if "ui" in cli.COMMANDS:
        return [sys.executable, "-m", "harness", "ui", *args]
    return [sys.executable, "-c", LAUNCH, "ui", *args]


def _rest(base: str, path: str, body: dict | None = None, query: dict | None = None) -> dict:
    url = f"{base}/api/2.0/mlflow/{path}" + (f"?{urllib.parse.urlencode(query)}" if query else "")
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"},
                                 method="POST" if body is not None else "GET")
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read() or b"{}")


def test_server_command_uses_the_project_store(tmp_path):
    store = ui.store_uri()
    assert store == f"sqlite:///{tmp_path / 'runs' / 'mlflow.db'}"  # conftest: HARNESS_RUNS_DIR=tmp/runs
    cmd = ui.server_command(store, tmp_path / "runs" / "mlartifacts", "127.0.0.1", 5123, 1)
    assert cmd[cmd.index("--backend-store-uri") + 1] == store and cmd[cmd.index("--workers") + 1] == "1"
    assert cmd[cmd.index("--host") + 1] == "127.0.0.1" and "--serve-artifacts" in cmd
    assert cmd[cmd.index("--artifacts-destination") + 1] == (tmp_path / "runs" / "mlartifacts").as_uri()


def test_ui_rejects_bad_workers():
    from harness.errors import HarnessError

    parser = argparse.ArgumentParser()
    ui.add_parser(parser.add_subparsers(dest="c", required=True))
    args = parser.parse_args(["ui", "--workers", "0"])
    with pytest.raises(HarnessError, match="--workers"):
        args.func(args)


@pytest.mark.slow
def test_mlflow_server_compares_two_runs_of_one_method(tmp_path):
    from harness.tracking import Tracker

    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    log = tmp_path / "mlflow.log"
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true"}
    with log.open("w") as out:
        server = subprocess.Popen(_ui_command("--port", str(port), "--workers", "1"), cwd=PROJECT_ROOT, env=env,
                                  stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        import mlflow  # noqa: F401 - a slow import, done while the server starts

        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if server.poll() is not None:
                pytest.fail(f"mlflow server exited with {server.returncode}:\n{log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{base}/health", timeout=2) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"mlflow server did not start in {START_TIMEOUT}s:\n{log.read_text()[-3000:]}")
            time.sleep(0.5)

        # Two runs of bm25, logged exactly as the run pipeline does (parent run + nested stage run).
        record = tmp_path / "record.json"
        for stamp, ndcg in (("20261121T100000", 0.6647), ("20261121T110000", 0.6612)):
            tags = {"method": "bm25", "profile": "paper", "spec_hash": "ea33da26850f0a18", "papers": "lexmae,qc-v2"}
            tracker = Tracker("bm25", f"bm25__paper__{stamp}", tags, uri=base)
            with tracker.run():
                tracker.log_params({"method": "bm25", "retrieval": {"k1": 0.9, "b": 0.4}})
                with tracker.stage("index/scifact", {"stage": "index", "dataset": "scifact"}):
                    tracker.log_metrics({"documents": 5183})
                tracker.log_metrics({"scifact/nDCG@10": ndcg})
                record.write_text(json.dumps({"run_id": f"bm25__paper__{stamp}"}))
                tracker.log_artifact(record, subdir="record")
            assert tracker.enabled, tracker.warning

        exp = _rest(base, "experiments/get-by-name", query={"experiment_name": "bm25"})["experiment"]
        runs = _rest(base, "runs/search", {"experiment_ids": [exp["experiment_id"]], "max_results": 50})["runs"]
        tags_of = {r["info"]["run_id"]: {t["key"]: t["value"] for t in r["data"].get("tags", [])} for r in runs}
        parents = [r for r in runs if "mlflow.parentRunId" not in tags_of[r["info"]["run_id"]]]
        nested = [r for r in runs if "mlflow.parentRunId" in tags_of[r["info"]["run_id"]]]
        assert sorted(r["info"]["run_name"] for r in parents) == ["bm25__paper__20261121T100000",
                                                                   "bm25__paper__20261121T110000"]
        assert len(nested) == 2 and all(tags_of[r["info"]["run_id"]]["stage"] == "index/scifact" for r in nested)
        for r in parents:
            t = tags_of[r["info"]["run_id"]]
            assert (t["method"], t["profile"], t["spec_hash"], t["papers"]) == ("bm25", "paper", "ea33da26850f0a18",
                                                                                "lexmae,qc-v2")

        # The comparison a person makes in the UI: same method, metrics and params side by side.
        def metrics(run):
            return {m["key"]: m["value"] for m in run["data"].get("metrics", [])}

        def params(run):
            return {p["key"]: p["value"] for p in run["data"].get("params", [])}

        a, b = sorted(parents, key=lambda r: r["info"]["run_name"])
        assert params(a)["retrieval.k1"] == params(b)["retrieval.k1"] == "0.9"
        delta = metrics(b)["scifact/nDCG_at_10"] - metrics(a)["scifact/nDCG_at_10"]
        assert delta == pytest.approx(-0.0035)

        # Artifacts are served from the project's store (runs/mlartifacts).
        listed = _rest(base, "artifacts/list", query={"run_id": a["info"]["run_id"], "path": "record"})
        assert [f["path"] for f in listed["files"]] == ["record/record.json"]
        stored = list((tmp_path / "runs" / "mlartifacts").rglob("record.json"))
        assert len(stored) == 2
        with urllib.request.urlopen(f"{base}/get-artifact?path=record/record.json&run_uuid={a['info']['run_id']}",
                                    timeout=30) as resp:
            assert json.loads(resp.read())["run_id"] == "bm25__paper__20261121T100000"
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait(timeout=30)
    assert server.returncode is not None
    with pytest.raises(OSError):  # really stopped: nothing answers on the port any more
        urllib.request.urlopen(f"{base}/health", timeout=2)
