"""One run record shape: `run` (harness.run.runner) and `reproduce` (a released checkpoint) score through
harness.run.scores and build their record through harness.run.record. A method run's record keeps
exactly the fields it had before the builder; a checkpoint's has the same ones (null where a released
checkpoint has no spec), plus what names the checkpoint. Both stay sealed and gated."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

from harness.data.catalog import get_benchmark
from harness.data.formats import write_trec_run
from harness.run import runner

# A method run's record, field by field in the order it is written (pinned: readers, the seal and the
# committed records rely on it; `substitutions` comes after `hardware` when a spec has some; `models`
# names every checkpoint the run read, with its source, revision and sha256s).
RUN_FIELDS = [
    "schema_version",
    "run_id",
    "created",
    "method",
    "profile",
    "spec_hash",
    "spec",
    "command",
    "seed",
    "git",
    "packages",
    "hardware",
    "models",
    "datasets",
    "finetune_stage",
    "metrics",
    "per_query",
    "metrics_by_stage",
    "per_query_by_stage",
    "efficiency",
    "efficiency_by_stage",
    "comparison",
    "chance",
    "stages",
    "run_files",
    "seconds",
    "mlflow",
    "integrity",
]
CHECKPOINT_IDENTITY = ["checkpoint", "conditions", "depth"]  # after `spec`


def ranked_run(bench_name: str, seed: str, noise: float) -> dict[str, dict[str, float]]:
    """Each judged query: its relevant documents near the top (how near: ``noise``) among others' ones."""
    qrels = get_benchmark(bench_name).qrels()
    rng = random.Random(seed)
    pool = sorted({d for rel in qrels.values() for d in rel})
    return {
        q: {d: rng.random() * noise + (2.0 if d in rel else 0.0) for d in [*rel, *rng.sample(pool, 30)]}
        for q, rel in qrels.items()
    }


@pytest.fixture
def mlflow_off(monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:9")  # unreachable: tracking off at once


def test_run_record_keeps_its_fields(tmp_path, monkeypatch, mlflow_off):
    def pipeline(ctx, datasets):
        variants: dict[str, dict[str, Path]] = {}
        for variant, noise in (("start", 4.0), ("retriever1", 1.0)):
            for name in datasets:
                path = tmp_path / variant / f"{name}.trec"
                write_trec_run(ranked_run(name, f"{variant}/{name}", noise), path, tag=variant)
                variants.setdefault(variant, {})[name] = path
                ctx.efficiency.setdefault(variant, {})[name] = {"qps": 10.0, "index_bytes": 123, "search_seconds": 0.5}
        return variants

    monkeypatch.setattr(runner, "pipeline_for", lambda spec: pipeline)
    out = runner.run_method("cocondenser", "tiny", datasets=["scifact"])
    assert out.run_record is not None and out.record is not None
    record = json.loads(out.run_record.read_text())
    assert list(record) == RUN_FIELDS
    assert record["finetune_stage"] == "retriever1" and list(record["metrics_by_stage"]) == ["start", "retriever1"]
    assert record["metrics"] == record["metrics_by_stage"]["retriever1"]
    assert set(record["per_query_by_stage"]) == {"start", "retriever1"}
    assert record["efficiency"] == record["efficiency_by_stage"]["retriever1"]
    assert record["hardware"]["declared"] == (out.record.spec or {})["hardware"]
    assert [(s["stage"], s["dataset"], s["cached"]) for s in record["stages"]] == [
        ("evaluate", "start/scifact", False),
        ("evaluate", "retriever1/scifact", False),
    ]
    assert record["run_files"] == {v: {"scifact": str(tmp_path / v / "scifact.trec")} for v in ("start", "retriever1")}
    assert list(record["datasets"]) == ["scifact"] and "scifact" in record["chance"]


def toy_checkpoint(tmp_path: Path, monkeypatch) -> Path:
    """A registered toy retriever whose zero-shot search is a fixed ranking (scored for real), and one
    reported cell it reproduces; returns the cells file."""
    from harness.evaluation import zero_shot
    from harness.evaluation.measures import evaluate
    from harness.run import reproduce as reproduce_module

    registry = tmp_path / "checkpoints.yaml"
    registry.write_text("""schema_version: 1
checkpoints:
  toy-retriever:
    source: toy
    method: null
    kind: retriever
    encoder: {pooling: cls, normalize: false, query_max_length: 32, passage_max_length: 64}
    benchmarks: [scifact, nfcorpus]
    reproduces:
      - {paper: test, table: Table 1, row: toy}
""")
    cell = {
        "cell_id": "test/Table 1/toy/scifact",
        "paper": "test",
        "paper_file": "test.txt",
        "version": "test",
        "table": "Table 1",
        "row": "toy",
        "column": "scifact",
        "value": "50.0",
        "score": 0.5,
        "unit": "points",
        "method": None,
        "benchmark": "scifact",
        "measure": "nDCG@10",
        "conditions": {},
    }
    cells = tmp_path / "cells.json"
    cells.write_text(json.dumps({"cells": [cell]}))
    (tmp_path / "models" / "toy").mkdir(parents=True)
    (tmp_path / "models" / "toy" / "config.json").write_text("{}")
    monkeypatch.setenv("HARNESS_CHECKPOINTS", str(registry))
    monkeypatch.setenv("HARNESS_MODELS_DIR", str(tmp_path / "models"))

    def fake_zero_shot(folder, bench, *, save_run, **options):  # no model: a fixed ranking, scored for real
        run = ranked_run(bench.name, bench.name, 1.0)
        write_trec_run(run, save_run, tag="toy")
        efficiency = {"docs": 10, "qps": 5.0, "corpus_embeddings_cached": True}
        return zero_shot.ZeroShotOutcome({"efficiency": efficiency}, evaluate(run, bench.qrels(), bench), run)

    monkeypatch.setattr(reproduce_module, "run_zero_shot", fake_zero_shot)  # where reproduce calls it
    return cells


def test_checkpoint_record_has_the_run_record_shape(tmp_path, monkeypatch, mlflow_off):
    from harness.gate.run import run_gate
    from harness.run.reproduce import reproduce_checkpoint

    cells = toy_checkpoint(tmp_path, monkeypatch)
    out = reproduce_checkpoint("toy-retriever", reported=str(cells), depth=100)
    record = json.loads(Path(str(out.path)).read_text())
    at = RUN_FIELDS.index("spec") + 1
    assert list(record) == [f for f in RUN_FIELDS[:at] + CHECKPOINT_IDENTITY + RUN_FIELDS[at:] if f != "finetune_stage"]
    assert record["spec"] is None and record["spec_hash"] is None and record["hardware"]["declared"] is None
    assert record["checkpoint"]["name"] == "toy-retriever" and record["depth"] == 100
    assert record["metrics_by_stage"] == {"checkpoint": record["metrics"]} and record["per_query_by_stage"] == {}
    assert record["efficiency_by_stage"] == {"checkpoint": record["efficiency"]}
    assert list(record["efficiency"]) == ["scifact", "nfcorpus"]
    assert [(s["stage"], s["dataset"], s["cached"]) for s in record["stages"]] == [
        ("evaluate", "checkpoint/scifact", True),
        ("evaluate", "checkpoint/nfcorpus", True),
    ]
    assert set(record["run_files"]) == {"checkpoint"} and list(record["datasets"]) == ["scifact", "nfcorpus"]

    gate = run_gate(Path(str(out.path)).parent, reported=cells)  # sealed, and re-graded like it was graded
    assert [(r.status, r.benchmark, r.reproduced) for r in gate.rows] == [
        (c["status"], c["benchmark"], c["reproduced"]) for c in record["comparison"]
    ]
    assert [c["benchmark"] for c in record["comparison"]] == ["scifact"]


def test_reproduce_logs_a_comparable_parent_run(tmp_path, monkeypatch):
    """MLflow on (the test's sqlite store): the parent is named <checkpoint>/checkpoint/<seed> and holds
    the record's final metrics as <benchmark>/<measure>, its verdict counts and identity tags."""
    from mlflow.tracking import MlflowClient

    from harness.core.seeds import DEFAULT_SEED as SEED
    from harness.records.parent_run import parent_metrics
    from harness.run.reproduce import reproduce_checkpoint

    out = reproduce_checkpoint("toy-retriever", reported=str(toy_checkpoint(tmp_path, monkeypatch)), depth=100)
    assert out.mlflow["enabled"] and out.mlflow["run_id"], out.mlflow
    client = MlflowClient(tracking_uri=out.mlflow["tracking_uri"])
    parent = client.get_run(out.mlflow["run_id"])
    assert parent.info.run_name == f"toy-retriever/checkpoint/{SEED}/{out.run_id.rsplit('__', 1)[-1]}"
    assert parent.data.metrics == pytest.approx(parent_metrics(out.metrics))
    assert {"SciFact/nDCG at 10", "NFCorpus/nDCG at 10"} <= set(parent.data.metrics)
    assert all(key.count("/") == 1 for key in parent.data.metrics)  # no variant prefix: stage metrics are nested
    tags = parent.data.tags
    assert (tags["run_id"], tags["checkpoint"], tags["profile"], tags["seed"]) == (
        out.run_id,
        "toy-retriever",
        "checkpoint",
        str(SEED),
    )
    statuses = [c["status"] for c in out.comparison]
    assert tags["verdict.REPRODUCED"] == str(statuses.count("REPRODUCED")) and tags["verdict.INCONCLUSIVE"]
    assert tags["git.commit"] and tags["hardware.cpus"] == str(os.cpu_count())
    assert parent.data.params["depth"] == "100" and parent.data.params["checkpoint.name"] == "toy-retriever"
    nested = client.search_runs([parent.info.experiment_id], f"tags.mlflow.parentRunId = '{parent.info.run_id}'")
    assert sorted(r.data.tags["stage"] for r in nested) == [
        "evaluate/checkpoint/nfcorpus",
        "evaluate/checkpoint/scifact",
    ]
