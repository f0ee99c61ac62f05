"""docs/adding-a-benchmark.md, followed literally: its files written into a folder of one's own, its
commands and its check run.

A new benchmark needs no edit to the harness: its declaration lies in ``benchmarks/`` beside the user's
specs, its data beside it; its margin family (TREC DL's) comes from its declared kind, not its name.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from harness.core.paths import PROJECT_ROOT

DOC = PROJECT_ROOT / "docs" / "adding-a-benchmark.md"


def doc_blocks() -> tuple[dict[str, str], list[str], str]:
    """The page's files (```<lang> file=<path>), commands (```bash run) and check (```python check)."""
    files, commands, checks = {}, [], []
    for info, body in re.findall(r"```([^\n]*)\n(.*?)```", DOC.read_text(encoding="utf-8"), re.DOTALL):
        if match := re.search(r"(?:^|\s)file=(\S+)", info):
            files[match.group(1)] = body
        elif info.split() == ["bash", "run"]:
            commands += [line for line in body.splitlines() if line.strip()]
        elif info.split() == ["python", "check"]:
            checks.append(body)
    (check,) = checks
    return files, commands, check


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The page's files in a folder, run from there."""
    files, _, _ = doc_blocks()
    for name, body in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(body, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("HARNESS_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "")
    return tmp_path


def run_command(command: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """One of the page's commands (``VAR=value ... python -m harness ARGS``), in this process."""
    from harness.cli import main

    words = shlex.split(command)
    while "=" in words[0]:
        name, value = words.pop(0).split("=", 1)
        monkeypatch.setenv(name, str(Path(value).resolve()) if name == "HARNESS_SPECS_DIR" else value)
    assert words[:3] == ["python", "-m", "harness"], command
    assert main(words[3:]) in (0, None), command


def test_the_page_has_a_declaration_its_data_a_run_and_commands():
    files, commands, check = doc_blocks()
    assert set(files) == {
        "my-methods/benchmarks/dl21-sample.yaml",
        "my-methods/bm25.dl21-sample.trec",
        *(f"my-methods/benchmarks/dl21-sample/{f}" for f in ("topics.tsv", "qrels.txt", "corpus.jsonl")),
    }
    assert [c.split("python -m harness ")[1].split()[0] for c in commands] == ["ls", "eval"]
    assert "margins.family" in check


def test_a_declared_benchmark_is_listed_scored_and_gets_trec_dls_margin(folder, monkeypatch, capsys):
    from harness.data.catalog import get_benchmark

    _, commands, check = doc_blocks()
    get_benchmark.cache_clear()
    try:
        for command in commands:
            run_command(command, monkeypatch)
        out = capsys.readouterr().out
        assert re.search(r"^dl21-sample +trec-dl +embedded +test$", out, re.MULTILINE), out
        # TREC DL's measures over the 3 judged queries (query 4 has no qrels), the numbers the page shows
        for line in ("nDCG@10 *      0.9034  90.34", "R(rel=2)@1000  1.0000  100.00", "RR(rel=2)@10   0.8333  83.33"):
            assert line in out and line in DOC.read_text(encoding="utf-8"), out
        bench = get_benchmark("dl21-sample")
        assert (bench.kind, len(bench.queries()), len(bench.corpus())) == ("trec-dl", 3, 6)
        exec(compile(check, str(DOC), "exec"), {})
        assert capsys.readouterr().out.split()[:2] == ["trec-dl", "2.0"]
    finally:
        get_benchmark.cache_clear()


def test_without_the_folder_the_benchmark_is_unknown(tmp_path, monkeypatch):
    from harness.core.errors import UnknownNameError
    from harness.evaluation import margins

    monkeypatch.setenv("HARNESS_SPECS_DIR", str(tmp_path))
    with pytest.raises(UnknownNameError):
        margins.family("dl21-sample")
