"""Issue 54, done-when 2: a cached stage output damaged after it was built (a run file cut at a line
boundary, model bytes zeroed with the file's size unchanged) is found when a real tiny run reuses it,
rebuilt saying so, and the run's metrics are those of the clean run (before the digests, both were
used silently: nDCG@10 and R@100 fell, rc 0, and `check` passed the record).

A shrunk nopretrain spec (one layer of width 32, 40 SciFact training queries): its stages hold a BM25
run file, dense run files and two fine-tuned models, built from scratch in about two minutes on 2 CPU
cores, the damaged re-run in less."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.core.paths import BASELINES_DIR, PROJECT_ROOT

pytestmark = pytest.mark.slow

MINI = """
name: mini
extends: nopretrain
profiles:
  tiny:
    datasets: [scifact]
    model: {layers: 1, hidden: 32, heads: 2, intermediate: 64}
    tokenizer: {vocab_size: 2000, corpora: [scifact]}
    finetune:
      train_queries: scifact-train
      max_train_queries: 40
      max_q_len: 16
      max_p_len: 32
      global_queries: 8
      passages_per_query: 2
      retriever1: {epochs: 1, negative_depth: 50}
      retriever2: {epochs: 1, negative_depth: 30}
"""


def _run(tmp: Path, out: Path) -> str:
    env = {
        **os.environ,
        "HARNESS_SPECS_DIR": str(tmp / "specs"),
        "HARNESS_RUNS_DIR": str(tmp / "runs"),
        "HARNESS_CACHE_DIR": str(tmp / "cache"),
        "PYTHONUNBUFFERED": "1",
    }
    proc = subprocess.run(
        [sys.executable, "-m", "harness", "run", "--method", "mini", "--profile", "tiny", "--json", str(out)],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


def _metrics(path: Path) -> dict:
    return json.loads(path.read_text())["metrics_by_stage"]  # retriever1 and retriever2


def test_damaged_cached_outputs_are_rebuilt_and_the_metrics_are_the_clean_runs(tmp_path: Path):
    (tmp_path / "specs").mkdir()
    for name in ("cotmae", "nopretrain"):
        shutil.copy(BASELINES_DIR / f"{name}.yaml", tmp_path / "specs")
    (tmp_path / "specs" / "mini.yaml").write_text(MINI)
    _run(tmp_path, tmp_path / "clean.json")
    clean = _metrics(tmp_path / "clean.json")
    assert set(clean) == {"retriever1", "retriever2"} and "nDCG@10" in clean["retriever2"]["scifact"]

    cache = tmp_path / "cache"
    runs = sorted((cache / "dense_retrieve").glob("*/run.trec")) + sorted((cache / "retrieve").glob("*/run.trec"))
    assert len(runs) >= 3  # BM25 negatives' search, mining, the evaluations
    for run in runs:  # cut at a line boundary: every line left is a valid one
        lines = run.read_text().splitlines(keepends=True)
        run.write_text("".join(lines[: len(lines) // 2]))
    (model,) = (cache / "retriever1").glob("*/model/model.safetensors")
    size = model.stat().st_size
    with open(model, "r+b") as fh:  # zeroed in the middle: the header still parses, the size is unchanged
        fh.seek(size // 2)
        fh.write(bytes(min(1 << 21, size // 4)))
    assert model.stat().st_size == size

    out = _run(tmp_path, tmp_path / "again.json")
    assert (
        "[retriever1] cached output changed since it was built (model/model.safetensors (content differs)): "
        "rebuilding" in out
    ), out
    changed_runs = [
        line for line in out.splitlines() if "cached output changed since it was built (run.trec (size" in line
    ]
    assert len(changed_runs) == len(runs), out
    assert _metrics(tmp_path / "again.json") == clean
    for run in runs:  # rebuilt whole
        assert run.read_text().count("\n") > 0
    out = _run(tmp_path, tmp_path / "third.json")  # and from then on reused as it is
    assert "cached output changed" not in out and _metrics(tmp_path / "third.json") == clean
