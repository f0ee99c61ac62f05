"""YAML aliases are bounded wherever the harness reads a user's YAML (issue 54, item 4): the "billion
laughs" document is one error naming the file, in well under a second and with little memory."""

from __future__ import annotations

import resource
import time

import pytest
import yaml

from harness.core import yamlsafe
from harness.core.errors import DataFormatError

LAUGHS = (
    "\n".join(
        ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
        + [f"{c}: &{c} [{','.join(['*' + p] * 9)}]" for p, c in zip("abcdefgh", "bcdefghi")]
    )
    + "\n"
)


def _maxrss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def test_the_billion_laughs_is_refused_fast_and_small():
    before, started = _maxrss_mib(), time.perf_counter()
    for loader in {yamlsafe.FAST_LOADER, yaml.SafeLoader}:
        with pytest.raises(yamlsafe.AliasBombError, match="alias bomb") as exc:
            yamlsafe.load(LAUGHS, loader)
        assert exc.value.problem_mark is not None
    assert time.perf_counter() - started < 1.0
    assert _maxrss_mib() - before < 50


def test_a_recursive_alias_is_refused_and_ordinary_anchors_load():
    with pytest.raises(yamlsafe.AliasBombError, match="contains it"):
        yamlsafe.load("a: &a [1, *a]\n", yaml.SafeLoader)
    data = yamlsafe.load("base: &b {lr: 1, epochs: 2}\nmini:\n  <<: *b\n  epochs: 3\nboth: [*b, *b]\n")
    assert data["mini"] == {"lr": 1, "epochs": 3} and data["both"] == [{"lr": 1, "epochs": 2}] * 2
    assert yamlsafe.compose("") is None and yamlsafe.load("") is None


def test_a_spec_with_an_alias_bomb_is_one_error_naming_the_file(tmp_path):
    from harness.spec.files import key_line, load_yaml

    spec = tmp_path / "bomb.yaml"
    spec.write_text("method: bomb\n" + LAUGHS, encoding="utf-8")
    started = time.perf_counter()
    with pytest.raises(DataFormatError, match=r"bomb\.yaml:\d+: invalid YAML: .*alias bomb"):
        load_yaml(spec)
    assert key_line(spec, "method") is None  # its key lines are never walked
    assert time.perf_counter() - started < 1.0


def test_a_registry_and_a_tolerance_file_with_an_alias_bomb_are_refused(tmp_path):
    from harness.evaluation.tolerances import _read
    from harness.papers.parsing import parse_file

    paper = tmp_path / "paper.yaml"
    paper.write_text(LAUGHS, encoding="utf-8")
    info, problems = parse_file(paper)
    assert info is None and any("alias bomb" in item[1] for item in problems.items)
    with pytest.raises(DataFormatError, match=r"paper\.yaml:\d+: bad YAML .*alias bomb"):
        _read(paper)


def test_every_yaml_the_harness_reads_goes_through_the_bounded_loader():
    import ast

    from harness.core.paths import PROJECT_ROOT

    direct = {"load", "safe_load", "load_all", "safe_load_all", "full_load", "unsafe_load", "compose", "compose_all"}
    found = []
    for path in sorted((PROJECT_ROOT / "harness").rglob("*.py")):
        if path.name == "yamlsafe.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Attribute)
                and node.attr in direct
                and isinstance(node.value, ast.Name)
                and node.value.id == "yaml"
            ):
                found.append(f"{path.relative_to(PROJECT_ROOT)}:{node.lineno}: yaml.{node.attr}")
    assert found == []
