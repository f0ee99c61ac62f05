"""Stage cache keys say what a stage computes from, never where the checkout or the cache lives.

Two copies of the harness in different folders, each with its own cache folder, plan the same
stages with the same keys (``run --dry-run``): a moved checkout, another HARNESS_CACHE_DIR or
another machine reuses nothing wrong and rebuilds nothing it has.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from harness.core.paths import PROJECT_ROOT
from harness.pipelines.context import input_key

# A tokenizer trained here (tiny), a packaged checkpoint as init, tokenizer and stage-3 teacher
# (mini), the learned-sparse chain with its reranker (lexmae tiny).
PLANS = [("cotmae_qc", "tiny"), ("cocondenser", "mini"), ("lexmae", "tiny"), ("lexmae", "mini")]


def copy_checkout(dest: Path) -> Path:
    """The package, the specs and the bench figures the plan projects from: what a dry-run reads."""
    for part in ("harness", "baselines", "bench"):
        shutil.copytree(PROJECT_ROOT / part, dest / part, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return dest


# Run inside a copy: every plan's (stage, dataset, key), one process for all plans.
PLAN_SCRIPT = """
import json, sys
from harness.run.runner import run_method
plans = json.loads(sys.argv[1])
# precision fixed: `auto` would be measured in each process (a dry-run caches nothing), and the keys hold it
print(json.dumps([[(e["stage"], e["dataset"], e.get("key"))
                   for e in run_method(m, p, dry_run=True, precision="fp32").stages] for m, p in plans]))
"""


def planned_keys(checkout: Path, cache: Path) -> list[list[list[str]]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HARNESS_")}
    env.update(
        PYTHONPATH=str(checkout),
        HARNESS_CACHE_DIR=str(cache),
        HARNESS_RUNS_DIR=str(checkout / "runs"),
        MLFLOW_TRACKING_URI="",
        PYTHONDONTWRITEBYTECODE="1",
    )
    done = subprocess.run(
        [sys.executable, "-c", PLAN_SCRIPT, json.dumps(PLANS)],
        cwd=checkout,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_two_checkouts_in_different_folders_plan_the_same_keys(tmp_path):
    first = copy_checkout(tmp_path / "a" / "harness-checkout")
    second = copy_checkout(tmp_path / "elsewhere" / "deeper" / "other-name")
    plans = planned_keys(first, tmp_path / "cache-one")
    assert plans == planned_keys(second, tmp_path / "elsewhere" / "cache-two")
    for (method, profile), stages in zip(PLANS, plans):
        assert sum(1 for _, _, key in stages if key) >= 5, f"{method} [{profile}]: too few keyed stages"


def test_input_key_of_a_stage_output_is_its_stage_and_key(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    assert (
        input_key(tmp_path / "cache" / "pretrain" / "0123456789abcdef" / "encoder")
        == "pretrain/0123456789abcdef/encoder"
    )


def test_input_key_of_a_folder_outside_the_cache_is_its_content(tmp_path):
    one, two = tmp_path / "models" / "a", tmp_path / "elsewhere" / "b"
    for folder in (one, two):
        folder.mkdir(parents=True)
        (folder / "config.json").write_text('{"hidden": 8}')
    assert input_key(one) == input_key(two) and input_key(one).startswith("sha256:")
    (two / "config.json").write_text('{"hidden": 16}')
    assert input_key(one) != input_key(two)  # same place, changed content: another key
    assert input_key(tmp_path / "absent") == "missing:absent"
