"""docs/adding-a-method.md, followed literally: its files written into a folder of one's own, its command run.

A new objective needs no edit to the harness: the objective module registers itself from the
``objectives/`` folder beside the user's specs, and the spec names it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from harness.paths import PROJECT_ROOT

DOC = PROJECT_ROOT / "docs" / "adding-a-method.md"


def doc_blocks() -> tuple[dict[str, str], list[str]]:
    """The page's files (```<lang> file=<path>) and commands (```bash run)."""
    files, commands = {}, []
    for info, body in re.findall(r"```([^\n]*)\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S):
        if (match := re.search(r"\bfile=(\S+)", info)):
            files[match.group(1)] = body
        elif info.split() == ["bash", "run"]:
            commands += [line for line in body.splitlines() if line.strip()]
    return files, commands


def test_the_page_has_an_objective_a_spec_and_a_command():
    files, commands = doc_blocks()
    assert set(files) == {"objectives/pair_mlm.py", "pair_mlm.yaml"}
    assert len(commands) == 1 and "--stage pretrain" in commands[0]


@pytest.mark.slow
def test_a_toy_objective_from_a_folder_of_ones_own_pretrains_on_tiny(tmp_path):
    files, commands = doc_blocks()
    folder = tmp_path / "my-methods"
    for name, body in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(body, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("HARNESS_")}
    env.update(HARNESS_CACHE_DIR=str(tmp_path / "cache"), HARNESS_RUNS_DIR=str(tmp_path / "runs"),
               PYTHONPATH=str(PROJECT_ROOT), MLFLOW_TRACKING_URI="")
    # The page's command, run as written from the folder that holds my-methods/.
    command = commands[0].replace("python -m harness", f"{sys.executable} -m harness")
    done = subprocess.run(command, shell=True, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "pair_mlm [tiny] stopped after stage pretrain" in done.stdout
    encoders = list((tmp_path / "cache" / "pretrain").glob("*/encoder/config.json"))
    assert len(encoders) == 1
    # It trained the 4 steps the spec asks for, with the objective the folder registered.
    assert re.search(r"pre-training loss: first 10 steps [\d.]+ -> last 10 steps [\d.]+ \(4 steps\)", done.stdout)
