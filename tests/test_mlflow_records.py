"""`harness ui` loads the committed run records into its MLflow store (harness/records/mlflow_import.py):
one FINISHED parent run per record, named and keyed like a live run's parent, metrics in points, and a
second load adds nothing. The slow test starts `harness ui` over a copy of every committed record (a
fresh clone), reads the runs back through MLflow's REST API and renders the compare view of two
methods in headless Chromium (test-artifacts/mlflow-compare-records.png)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from browser import BESIDE_CHARTS, CHROMIUM, chromium, free_port, screenshot, stop, unreadable

from harness.core import benchmarks
from harness.core.paths import PROJECT_ROOT
from harness.records.mlflow_import import LOADED_FROM_TAG, committed_records, load_committed, run_name
from harness.records.parent_run import RUN_CONDITIONS, parent_metrics, parent_tracker
from harness.records.runs_view import RUNS_VIEW_TAG, runs_table_link

COMMITTED = PROJECT_ROOT / "runs"
START_TIMEOUT = 600  # the load of every record, then the server, on a busy 2-core machine


def _copy(names: list[str], root: Path) -> Path:
    for name in names:
        src = next(p for p in (COMMITTED / "records" / name, COMMITTED / "seeds" / name) if p.exists())
        dest = root / src.parent.name / name
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(src, dest)
    return root


def _pick() -> list[str]:
    """Three records of the clone: bm25 (paper), a cotmae_qc and one of another seed."""
    records, _ = committed_records(COMMITTED)
    by = {(r.method, r.profile, r.path.parent.name): r.path.name for r in records}
    seed = next(r.path.name for r in records if r.path.parent.name == "seeds")
    return [by[("bm25", "paper", "records")], by[("cotmae_qc", "mini", "records")], seed]


def test_loading_records_gives_one_parent_each_in_points_and_twice_adds_nothing(tmp_path):
    from mlflow import MlflowClient

    root = _copy(_pick(), tmp_path / "runs")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    first = load_committed(uri, root, tmp_path / "mlartifacts")
    records, skipped = committed_records(root)
    assert not skipped and len(records) == 3 and sorted(first.added) == sorted(r.run_id for r in records)

    client = MlflowClient(tracking_uri=uri)
    for rec in records:
        runs = client.search_runs(
            [client.get_experiment_by_name(rec.method).experiment_id], f"tags.run_id = '{rec.run_id}'"
        )
        assert len(runs) == 1, rec.run_id
        run = runs[0]
        assert run.info.status == "FINISHED" and "mlflow.parentRunId" not in run.data.tags
        stamp = rec.run_id.rsplit("__", 1)[-1]  # one name per run: five lexmae/mini/42 could not be told apart
        assert run.info.run_name == run_name(rec) == f"{rec.method}/{rec.profile}/{rec.seed}/{stamp}"
        # The live parent's keys (parent_metrics), values in points.
        assert set(run.data.metrics) == set(parent_metrics(rec.metrics))
        bench = sorted(rec.metrics)[0]
        measure = sorted(rec.metrics[bench])[0]
        key = f"{benchmarks.printed_name(bench)}/{benchmarks.printed_measure(bench, measure).replace('@', ' at ')}"
        assert run.data.metrics[key] == round(100 * rec.metrics[bench][measure], 2)  # points, 2 decimals
        assert all(0 <= v <= 100 for v in run.data.metrics.values())
        assert run.data.params["spec_hash"] == rec.spec_hash and run.data.params["profile"] == rec.profile
        params = run.data.params
        assert "None" not in params.values() and not [k for k in params if k.startswith("spec.conditions")]
        assert {k for k in params if k.startswith("condition.")} == {f"condition.{k}" for k in RUN_CONDITIONS}
        assert "spec.description" not in params and "spec.notes" not in params
        if rec.profile != "paper":  # the paper's declared budget ("hours 60") is not a setting of a mini run
            assert not [k for k in params if k.startswith("spec.hardware.")], rec.run_id
        assert run.data.tags["mlflow.source.git.commit"] == rec.git["commit"]
        assert run.data.tags[LOADED_FROM_TAG].endswith(f"{rec.path.parent.name}/{rec.path.name}")
        statuses = [c["status"] for c in rec.comparison]
        assert run.data.tags["verdict.NOT-COMPARABLE"] == str(statuses.count("NOT-COMPARABLE"))
        assert run.info.start_time < run.info.end_time  # the record's own times, not the load's
    bm25 = client.search_runs([client.get_experiment_by_name("bm25").experiment_id])[0]
    spec = next(r.spec for r in records if r.method == "bm25")
    assert bm25.data.params["spec.retrieval.k1"] == str(spec["retrieval"]["k1"])  # the record's spec, flattened

    for experiment in client.search_experiments():  # opens on the runs table, not the GenAI traces view
        if experiment.name != "Default":
            assert experiment.tags.get("mlflow.experimentKind") == "custom_model_development", experiment.name
            # its runs table's view: every metric of its records a column (runs_view.runs_table_link opens it)
            keys = {k for r in records if r.method == experiment.name for k in parent_metrics(r.metrics)}
            shown = json.loads(experiment.tags[RUNS_VIEW_TAG])["selectedColumns"]
            assert shown == [f"metrics.`{k}`" for k in sorted(keys)], experiment.name
    again = load_committed(uri, root, tmp_path / "mlartifacts")
    assert again.added == [] and again.present == 3
    total = sum(len(client.search_runs([e.experiment_id])) for e in client.search_experiments())
    assert total == 3


def test_a_single_stage_run_is_named_as_such():
    whole = parent_tracker("cotmae_qc", "cotmae_qc", "tiny", 42, "x", {"papers": "qc-v2"}, enabled=False)
    part = parent_tracker(
        "cotmae_qc", "cotmae_qc", "tiny", 42, "y", {"papers": "qc-v2", "stage": "pretrain"}, enabled=False
    )
    assert whole.run_name == "cotmae_qc/tiny/42/x"
    assert part.run_name == "cotmae_qc/tiny/42/y (--stage pretrain)"
    named = parent_tracker("lexmae", "lexmae", "mini", 42, "lexmae__mini__20261123T153706-4cfb23", {}, enabled=False)
    assert named.run_name == "lexmae/mini/42/20261123T153706-4cfb23"


def _rest(base: str, path: str, body: dict | None = None, query: str = "") -> dict:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(
        f"{base}/api/2.0/mlflow/{path}{query}",
        data=data,
        headers={"Content-Type": "application/json"},
        method="POST" if body is not None else "GET",
    )
    with urllib.request.urlopen(req, timeout=60) as resp:
        return json.loads(resp.read() or b"{}")


@pytest.mark.slow
def test_ui_on_a_fresh_clone_serves_every_committed_record_and_compares_two_methods(tmp_path):
    root = tmp_path / "runs"
    for folder in ("records", "seeds"):
        if (COMMITTED / folder).is_dir():
            shutil.copytree(COMMITTED / folder, root / folder)
    records, _ = committed_records(root)
    assert len(records) >= 50
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true", "HARNESS_RUNS_DIR": str(root)}
    env.pop("MLFLOW_TRACKING_URI", None)
    log = tmp_path / "ui.log"
    with log.open("w") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "harness", "ui", "--port", str(port)],
            cwd=PROJECT_ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if server.poll() is not None:
                pytest.fail(f"harness ui exited with {server.returncode}:\n{log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{base}/health", timeout=2):
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"harness ui did not serve in {START_TIMEOUT}s:\n{log.read_text()[-3000:]}")
            time.sleep(1)
        assert f"{len(records)} record(s) added to the MLflow store, 0 already there" in log.read_text()

        experiments = {
            e["name"]: e["experiment_id"]
            for e in _rest(base, "experiments/search", query="?max_results=1000")["experiments"]
        }
        parents: dict[str, dict] = {}
        token = None
        while True:
            body = {"experiment_ids": list(experiments.values()), "max_results": 1000}
            page = _rest(base, "runs/search", {**body, **({"page_token": token} if token else {})})
            for run in page.get("runs", []):
                tags = {t["key"]: t["value"] for t in run["data"].get("tags", [])}
                assert "mlflow.parentRunId" not in tags
                assert tags["run_id"] not in parents, f"{tags['run_id']} loaded twice"
                parents[tags["run_id"]] = run
            token = page.get("next_page_token")
            if not token:
                break
        assert set(parents) == {r.run_id for r in records}
        for rec in records:
            metrics = {m["key"]: m["value"] for m in parents[rec.run_id]["data"].get("metrics", [])}
            assert metrics == pytest.approx(parent_metrics(rec.metrics)), rec.run_id  # points, as live runs

        again = load_committed(f"sqlite:///{root / 'mlflow.db'}", root)  # a second start adds nothing
        assert again.added == [] and again.present == len(records)

        if CHROMIUM is None:
            pytest.skip("chromium is not installed (apt-get install chromium)")
        pick = [
            next(r for r in reversed(records) if (r.method, r.profile) == want)
            for want in (("bm25", "paper"), ("cotmae_qc", "mini"))
        ]
        ids = [parents[r.run_id]["info"]["run_id"] for r in pick]
        url = (
            f"{base}/#/compare-runs?runs={json.dumps(ids)}&experiments="
            f"{json.dumps([experiments['bm25'], experiments['cotmae_qc']])}"
        )
        wanted = ["bm25/paper/42", "cotmae_qc/mini/42", "NFCorpus/nDCG at 10", "spec_hash"]
        until = time.monotonic() + 180
        with chromium(tmp_path, until, window="1400,1600") as tools:
            tools.call("Page.navigate", url=url)
            text = ""
            while time.monotonic() < until and not all(w in (text := tools.text()) for w in wanted):
                time.sleep(0.5)
            assert all(w in text for w in wanted), f"not rendered at {url}:\n{text[:3000]}"
            points = f"{100 * pick[0].metrics['nfcorpus']['nDCG@10']:.2f}"[:4]  # e.g. 32.5 of 0.3253...
            assert points in text, f"nfcorpus nDCG@10 of bm25 in points ({points}) not on the page"
            time.sleep(1.0)
            screenshot(tools, "mlflow-compare-records.png")
            shown = tools.call("Runtime.evaluate", expression=BESIDE_CHARTS, returnByValue=True)["result"]["value"]
            # the cotmae_qc runs table, as `ui` links it: its records' names, their metrics as columns
            url = runs_table_link(base, experiments["cotmae_qc"])
            names = [run_name(r) for r in records if r.method == "cotmae_qc"][:5]
            # the first metric column (the others may lie right of the window: the grid draws only those in view)
            first = min(k for r in records if r.method == "cotmae_qc" for k in parent_metrics(r.metrics))
            tools.call("Page.navigate", url=url)
            while time.monotonic() < until and not all(w in (table := tools.text()) for w in [*names, first]):
                time.sleep(0.5)
            assert all(w in table for w in [*names, first]), f"not rendered at {url}:\n{table[:3000]}"
            time.sleep(1.0)
            screenshot(tools, "mlflow-runs-records.png")
            shown += (
                "\n"
                + tools.call("Runtime.evaluate", expression="document.body.innerText", returnByValue=True)["result"][
                    "value"
                ]
            )
        # Issue 53, item 8: no "None" parameter, raw dict, float noise, path from elsewhere, cut label. (The runs
        # folder the server was given is a tmp one here: the page names the records in it, as it names yours.)
        shown = shown.replace(str(root), "runs")
        assert unreadable(shown, "points") == [], unreadable(shown, "points")[:8]
    finally:
        stop(server, timeout=30)
