"""End to end: `python -m harness run --method bm25` reproduces the papers' BM25 rows, as CI's re-run.

LexMAE Table 3 prints BM25 nDCG@10 66.5 (SciFact) and 32.5 (NFCorpus); both must be REPRODUCED.
The re-run's cache keeps the Lucene indexes for the other tests of this module.
"""

from __future__ import annotations

import json

import pytest

from harness.cli import main
from harness.core.paths import PROJECT_ROOT
from harness.gate.rerun import RERUNS

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    """The CI re-run's scratch folder: its cache keeps the Lucene indexes for the other tests of this module."""
    return tmp_path_factory.mktemp("bm25-rerun")


@pytest.fixture(scope="module")
def shared_cache(scratch):
    return scratch / "cache"


@pytest.fixture
def use_shared_cache(shared_cache, monkeypatch, capsys):
    """The module's cache with SciFact's stages built: the re-run's, where it ran in this pytest worker before
    (a worker runs a module's tests in file order), else built here by one run (xdist gave it another worker)."""
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(shared_cache))
    if not shared_cache.is_dir():
        assert main(["run", "--method", "bm25", "--dataset", "scifact"]) == 0
        capsys.readouterr()
    return shared_cache


# CI's re-runs (RERUNS) run in the suite, beside the other slow tests, each once: BM25 here, cotmae_qc tiny in
# tests/test_fresh_copy_tiny_run.py (the README's run on a fresh copy); tests/test_ci_run.py pins that.
IN_THE_SUITE = ("bm25:paper",)


def test_ci_rerun_of_bm25_reproduces_the_papers_and_its_accepted_record(scratch, tmp_path, capsys):
    """CI's BM25 re-run (`check --rerun`: SciFact and NFCorpus from an empty cache): every graded number is the
    papers' by the exact rule (BM25 has no seed) and its accepted record's at 0.01 points; the run's own record
    and its MLflow parent run hold what `run` printed."""
    out = tmp_path / "gate.json"
    committed = PROJECT_ROOT / "runs" / "records"  # the tests' own runs folder (conftest) holds no references
    assert not (scratch / "cache").exists()  # from an empty cache: the first test of the module in its worker
    argv = ["check", "--rerun", ",".join(IN_THE_SUITE), "--records", str(committed), "--scratch", str(scratch)]
    code = main([*argv, "--json", str(out)])
    printed = capsys.readouterr().out
    gate = json.loads(out.read_text())
    assert code == 0, printed[-3000:]
    fresh = [
        r for r in gate["rows"] if r["method"] == "bm25" and r["measure"] == "nDCG@10" and r.get("delta") is not None
    ]
    assert {r["benchmark"] for r in fresh} == set(RERUNS[0].datasets) == {"scifact", "nfcorpus"}
    assert {"REPRODUCED", "PASS"} == {r["status"] for r in fresh}  # the papers' cells and the accepted record
    assert "re-run times: bm25 [paper]" in printed and (scratch / "cache").is_dir()

    # the re-run's own record and log: what `run --method bm25` wrote
    [path] = (scratch / "runs" / "local").glob("bm25__paper__*.json")
    record = json.loads(path.read_text())
    assert set(record["metrics"]) == {"scifact", "nfcorpus"}
    cells = {(c["benchmark"], c["measure"]): c for c in record["comparison"]}
    for dataset, reported in (("scifact", 66.5), ("nfcorpus", 32.5)):
        cell = cells[(dataset, "nDCG@10")]
        assert cell["reported"] == reported
        assert cell["status"] == "REPRODUCED" and cell["rule"] == "exact", cell  # deterministic: no seed noise
        assert abs(cell["delta"]) <= cell["tolerance"] <= 1.0
        assert cell["ci_low"] is None and cell["sigma"] is None
    assert len(record["per_query"]["scifact"]["nDCG@10"]) == 300
    assert record["datasets"]["scifact"] and record["git"] and record["packages"]["pyserini"] == "0.22.1"
    assert record["mlflow"]["run_id"], "the local MLflow store must have recorded the run"
    assert "REPRODUCED" in (scratch / "bm25__paper.log").read_text()

    import mlflow

    mlflow.set_tracking_uri(record["mlflow"]["tracking_uri"])
    runs = mlflow.search_runs(experiment_names=["bm25"], output_format="list")
    parent = next(r for r in runs if r.info.run_id == record["mlflow"]["run_id"])
    assert parent.data.tags["profile"] == "paper" and parent.info.run_name.startswith("bm25/paper/42/")
    assert parent.data.tags["run_id"] == record["run_id"] and parent.data.tags["verdict.REPRODUCED"] == "2"
    assert parent.data.params["spec.retrieval.k1"] == "0.9"
    # Only the final stage's metrics, as <benchmark>/<measure>: the keys every method's parent shares.
    # in points at 2 decimals (harness.records.parent_run.in_points); the record keeps the whole fraction
    assert parent.data.metrics["SciFact/nDCG at 10"] == round(100 * record["metrics"]["scifact"]["nDCG@10"], 2)
    assert all(key.count("/") == 1 for key in parent.data.metrics), sorted(parent.data.metrics)
    nested = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert {r.data.tags["stage"] for r in nested} >= {"index/scifact", "retrieve/scifact", "evaluate/bm25/nfcorpus"}


def test_rerun_uses_cache_and_survives_unreachable_mlflow(use_shared_cache, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:9")  # nothing listens on port 9
    out = tmp_path / "out.json"
    assert main(["run", "--method", "bm25", "--dataset", "scifact", "--json", str(out)]) == 0
    captured = capsys.readouterr()
    assert "MLflow tracking disabled" in captured.err and "unreachable" in captured.err
    assert (
        "[1/3] stage index/scifact: cached" in captured.out and "[2/3] stage retrieve/scifact: cached" in captured.out
    )
    assert "[3/3] stage evaluate/bm25/scifact: scoring" in captured.out
    summary = json.loads(out.read_text())
    assert summary["mlflow"]["enabled"] is False
    assert (tmp_path / "runs" / "local" / f"{summary['run_id']}.json").exists()
    assert summary["comparison"][0]["status"] == "REPRODUCED"


def _cli(*args: str, env: dict[str, str]):
    import subprocess
    import sys

    return subprocess.Popen(
        [sys.executable, "-m", "harness", *args],
        cwd=PROJECT_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _runs_env(cache, runs) -> dict[str, str]:
    import os

    return dict(os.environ, HARNESS_CACHE_DIR=str(cache), HARNESS_RUNS_DIR=str(runs))


def test_two_concurrent_runs_leave_two_records_and_two_mlflow_runs(shared_cache, tmp_path):
    env = _runs_env(shared_cache, tmp_path / "runs")
    procs = [_cli("run", "--method", "bm25", "--dataset", "scifact", env=env) for _ in range(2)]
    outputs = [p.communicate(timeout=600) for p in procs]
    for proc, (out, err) in zip(procs, outputs):
        assert proc.returncode == 0, out + err
        assert "MLflow tracking disabled" not in err, err
    records = sorted((tmp_path / "runs" / "local").glob("bm25__paper__*.json"))
    assert len(records) == 2, [r.name for r in records]
    ids = {json.loads(r.read_text())["mlflow"]["run_id"] for r in records}
    assert len(ids) == 2 and None not in ids

    import mlflow

    mlflow.set_tracking_uri(f"sqlite:///{tmp_path / 'runs' / 'mlflow.db'}")
    runs = mlflow.search_runs(experiment_names=["bm25"], output_format="list")
    assert {r.info.run_id for r in runs if "mlflow.parentRunId" not in r.data.tags} == ids


def test_two_concurrent_force_runs_both_finish(shared_cache, tmp_path):
    env = _runs_env(shared_cache, tmp_path / "runs")
    procs = [_cli("run", "--method", "bm25", "--dataset", "scifact", "--force", env=env) for _ in range(2)]
    outputs = [p.communicate(timeout=600) for p in procs]
    for proc, (out, err) in zip(procs, outputs):
        assert proc.returncode == 0, out + err
        assert "Traceback" not in err and "LockObtainFailedException" not in err
    assert any("is building this; waiting for it to finish" in err for _, err in outputs)
    assert len(list((tmp_path / "runs" / "local").glob("bm25__paper__*.json"))) == 2
