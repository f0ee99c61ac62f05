"""docs/adding-a-method.md, followed literally: its files written into a folder of one's own, its commands run.

A new objective needs no edit to the harness: the objective module registers itself from the
``objectives/`` folder beside the user's specs, and the spec names it. A new stage is declared
once in harness/stages/graph.py; the page's declarations are added to the graph for the test only,
and its module, imported then, registers the stage's functions (harness/stages/registry.py) for the
test only too.
"""

from __future__ import annotations

import importlib
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.core.paths import PROJECT_ROOT
from harness.stages import graph as stages
from harness.stages import registry
from harness.stages.graph import NOT_PROJECTED, PROJECTED, Family, Stage

DOC = PROJECT_ROOT / "docs" / "adding-a-method.md"
STAGE_PART = "\n## Adding a stage\n"


def doc_blocks(part: str = "method") -> tuple[dict[str, str], list[str]]:
    """One part of the page ("method": the objective's walkthrough; "stage": the stage's): its files
    (```<lang> file=<path>) and commands (```bash run)."""
    method, _, stage = DOC.read_text(encoding="utf-8").partition(STAGE_PART)
    files, commands = {}, []
    for info, body in re.findall(r"```([^\n]*)\n(.*?)```", stage if part == "stage" else method, re.S):
        if match := re.search(r"(?:^|\s)file=(\S+)", info):
            files[match.group(1)] = body
        elif info.split() == ["bash", "run"]:
            commands += [line for line in body.splitlines() if line.strip()]
    return files, commands


def declarations() -> tuple[Stage, Family]:
    """The stage part's block of declarations (```python declare), as harness/stages/graph.py would hold them."""
    _, _, text = DOC.read_text(encoding="utf-8").partition(STAGE_PART)
    (block,) = re.findall(r"```python declare\n(.*?)```", text, re.S)
    names = {"Stage": Stage, "Family": Family, "PROJECTED": PROJECTED, "NOT_PROJECTED": NOT_PROJECTED}
    stage, family = eval(f"({block})", names)  # noqa: S307 - the page's own text
    return stage, family


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
    env.update(
        HARNESS_CACHE_DIR=str(tmp_path / "cache"),
        HARNESS_RUNS_DIR=str(tmp_path / "runs"),
        PYTHONPATH=str(PROJECT_ROOT),
        MLFLOW_TRACKING_URI="",
    )
    # The page's command, run as written from the folder that holds my-methods/.
    command = commands[0].replace("python -m harness", f"{sys.executable} -m harness")
    done = subprocess.run(command, shell=True, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "pair_mlm [tiny] stopped after stage pretrain" in done.stdout
    encoders = list((tmp_path / "cache" / "pretrain").glob("*/encoder/config.json"))
    assert len(encoders) == 1
    # It trained the 4 steps the spec asks for, with the objective the folder registered.
    assert re.search(r"pre-training loss: first 10 steps [\d.]+ -> last 10 steps [\d.]+ \(4 steps\)", done.stdout)


def test_the_stage_part_has_a_module_its_declarations_a_spec_and_commands():
    files, commands = doc_blocks("stage")
    assert set(files) == {"oracle_stage.py", "my-methods/oracle.yaml"}
    stage, family = declarations()
    assert stage.families == (family.name,) and stage.details and stage.cost == PROJECTED
    module = files["oracle_stage.py"]
    for decorator in (
        '@registry.pipeline("oracle")',
        '@registry.details("oracle_run")',
        '@registry.cost("oracle_run")',
    ):
        assert decorator in module
    assert [c.split("python -m harness ")[1].split()[0] for c in commands] == ["ls", "run", "run"]


@pytest.fixture
def oracle_declared(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The page's files in a folder, run from there, with its stage and family added to the graph for this
    test only (what its declarations do in harness/stages/graph.py), and its module imported (what
    harness/pipelines/families.py does for a pipeline module) into registries restored afterwards."""
    files, _ = doc_blocks("stage")
    for name, body in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(body, encoding="utf-8")
    stage, family = declarations()
    monkeypatch.setattr(stages, "GRAPH", (*stages.GRAPH, stage))
    monkeypatch.setitem(stages.STAGES, stage.name, stage)
    monkeypatch.setitem(stages.FAMILIES, family.name, family)
    monkeypatch.setitem(stages.FAMILY_STEPS, family.name, stages.family_steps(family.name))
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))  # as `python -m harness` run from the folder
    for held in registry.REGISTRIES:
        monkeypatch.setattr(held, "functions", dict(held.functions))
    importlib.import_module("oracle_stage")
    yield tmp_path
    sys.modules.pop("oracle_stage", None)


def run_command(command: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """One of the page's commands (``VAR=value ... python -m harness ARGS``), in this process: the one
    that holds the declarations."""
    from harness.cli import main

    words = shlex.split(command)
    while "=" in words[0]:
        monkeypatch.setenv(*words.pop(0).split("=", 1))
    assert words[:3] == ["python", "-m", "harness"], command
    assert main(words[3:]) in (0, None), command


def test_a_declared_stage_is_listed_and_planned(oracle_declared, monkeypatch, capsys):
    _, commands = doc_blocks("stage")
    for command in commands:
        if "ls stages" in command or "--dry-run" in command:
            run_command(command + " --wide", monkeypatch)  # one line per row: the regexes read rows whole
    out = capsys.readouterr().out
    stage, _ = declarations()
    assert re.search(rf"^oracle_run +\[retrieve\] {re.escape(stage.does)}$", out, re.M)
    assert re.search(
        rf"1\. oracle_run/scifact +to run  {re.escape(stage.does)}\n +the judged passages of the test "
        "queries, by grade\n",
        out,
    )
    assert "evaluate/oracle/scifact" in out
    assert re.search(r"^ +oracle_run/scifact +- +- +- +- +- +-  no model: reads the judgements$", out, re.M)


@pytest.mark.slow
def test_a_declared_stage_runs_and_is_scored(oracle_declared, monkeypatch, capsys):
    _, commands = doc_blocks("stage")
    (command,) = [c for c in commands if "run --method" in c and "--dry-run" not in c]
    run_command(command, monkeypatch)
    out = capsys.readouterr().out
    assert "oracle [tiny] scifact nDCG@10 100.0" in out
    assert list(Path(os.environ["HARNESS_CACHE_DIR"]).glob("oracle_run/*/run.trec"))
