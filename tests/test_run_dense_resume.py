"""`python -m harness run` end to end on a shrunk cotmae_qc spec, through the real CLI:
killed (SIGKILL) in the middle of pre-training, re-run, it resumes and gives the same
metrics as an uninterrupted run on a fresh cache; a third identical call is all cache."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.core.paths import BASELINES_DIR, PROJECT_ROOT

# alone: a kill timed into a running stage
pytestmark = [pytest.mark.slow, pytest.mark.alone]

# Everything small: one layer of width 32, 300 passages of SciFact, a tiny T5 trained for 10
# steps, 200 pre-training steps with a checkpoint every 10 (so a kill lands mid-stage), and
# fine-tuning on 40 SciFact training queries.
MINI = """
name: mini
extends: cotmae_qc
profiles:
  tiny:
    datasets: [scifact]
    model: {layers: 1, hidden: 32, heads: 2, intermediate: 64}
    tokenizer: {vocab_size: 2000, corpora: [scifact]}
    corpus: {source: [scifact], max_tokens: 32, max_passages: 300, punkt_train_chars: 200000}
    qgen: {steps: 10, num_queries: 2, batch_size: 64, max_new_tokens: 6}
    pretrain: {steps: 200, global_batch: 8, per_device_batch: 8, max_length: 32, checkpoint_every: 10}
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


def _env(tmp: Path, cache: str) -> dict[str, str]:
    return {
        **os.environ,
        "HARNESS_SPECS_DIR": str(tmp / "specs"),
        "HARNESS_RUNS_DIR": str(tmp / "runs"),
        "HARNESS_CACHE_DIR": str(tmp / cache),
        "PYTHONUNBUFFERED": "1",
    }


def _cmd(out: Path) -> list[str]:
    return [sys.executable, "-m", "harness", "run", "--method", "mini", "--profile", "tiny", "--json", str(out)]


def _run(tmp: Path, cache: str, out: Path) -> tuple[str, float]:
    started = time.time()
    proc = subprocess.run(
        _cmd(out), cwd=PROJECT_ROOT, env=_env(tmp, cache), capture_output=True, text=True, timeout=900
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout, time.time() - started


def _metrics(path: Path) -> dict:
    return json.loads(path.read_text())["metrics_by_stage"]  # retriever1 and retriever2


@pytest.fixture
def specs(tmp_path: Path) -> Path:
    (tmp_path / "specs").mkdir()
    for name in ("cotmae", "cotmae_qc"):
        shutil.copy(BASELINES_DIR / f"{name}.yaml", tmp_path / "specs")
    (tmp_path / "specs" / "mini.yaml").write_text(MINI)
    return tmp_path


def test_killed_run_resumes_to_the_uninterrupted_result_and_reruns_from_cache(specs: Path):
    tmp = specs
    # 1. Start, wait for a pre-training checkpoint inside the unfinished stage, SIGKILL.
    log = (tmp / "killed.log").open("w")
    proc = subprocess.Popen(
        _cmd(tmp / "killed.json"),
        cwd=PROJECT_ROOT,
        env=_env(tmp, "cache_a"),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    deadline = time.time() + 600
    try:
        while not list((tmp / "cache_a" / "pretrain").glob(".*.partial.tmp/**/step-*")):
            if proc.poll() is not None:
                pytest.fail(
                    "the run ended before it could be killed mid pre-training:\n"
                    + (tmp / "killed.log").read_text()[-3000:]
                )
            assert time.time() < deadline, "no pre-training checkpoint within 10 minutes"
            time.sleep(0.05)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        log.close()
    assert not (tmp / "killed.json").exists()

    # 2. The same command resumes the stage from its checkpoint and finishes.
    out, _ = _run(tmp, "cache_a", tmp / "resumed.json")
    assert "[pretrain] resuming from" in out and "vs random ranking" in out
    resumed = _metrics(tmp / "resumed.json")
    assert set(resumed) == {"retriever1", "retriever2"} and "nDCG@10" in resumed["retriever2"]["scifact"]

    # 3. An uninterrupted run on a fresh cache gives the same numbers (resume is exact, runs are seeded).
    _run(tmp, "cache_b", tmp / "clean.json")
    assert _metrics(tmp / "clean.json") == resumed
    # Retriever 1 encoded the corpus once: mining wrote the shared corpus vectors, its evaluation read them.
    record = json.loads(max((tmp / "runs" / "local").glob("mini__tiny__*.json")).read_text())
    cached = {s["dataset"]: s["output"]["corpus_cached"] for s in record["stages"] if s["stage"] == "dense_retrieve"}
    assert cached == {"scifact/train/mine": False, "scifact/test/retriever1": True, "scifact/test/retriever2": False}
    # each search states how it encoded and where it searched: a CPU's batches of 64 by characters, faiss on the CPU
    outputs = [s["output"] for s in record["stages"] if s["stage"] == "dense_retrieve"]
    batching = {"sorted_by": "characters", "order": "longest first", "batch_size": 64}
    assert all(o["encode_batching"] == batching and o["index_device"] == "cpu" for o in outputs), outputs
    assert len(list((tmp / "cache_b" / "embeddings").iterdir())) == 2  # retriever 1's and retriever 2's

    # 4. A second identical invocation is served from the cache.
    out, seconds = _run(tmp, "cache_a", tmp / "again.json")
    assert "stage pretrain: cached" in out and "resuming from" not in out
    assert seconds < 60
    assert _metrics(tmp / "again.json") == resumed
