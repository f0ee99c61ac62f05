"""Every HARNESS_* control declared once and checked at start-up (issue 64, item 5)."""

from __future__ import annotations

import re

import pytest

from harness.cli import main
from harness.core import env_controls
from harness.core.paths import PROJECT_ROOT


def test_every_harness_variable_in_the_code_is_registered():
    named = set()
    for path in (PROJECT_ROOT / "harness").rglob("*.py"):
        named |= set(re.findall(r"\bHARNESS_[A-Z][A-Z0-9_]*[A-Z0-9]\b", path.read_text(encoding="utf-8")))
    assert named - set(env_controls.CONTROLS) == set(), "register these in harness/core/env_controls.py"


def test_docs_commands_lists_every_control():
    doc = (PROJECT_ROOT / "docs" / "commands.md").read_text(encoding="utf-8")
    assert env_controls.table() in doc, "paste env_controls.table() into docs/commands.md's Run controls section"


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("HARNESS_PASSAGE_WORKERS", "abc"),
        ("HARNESS_PASSAGE_WORKERS", "0"),
        ("HARNESS_PASSAGE_WORKERS", "-1"),
        ("HARNESS_SHARE_GPU", "2"),
        ("HARNESS_LUCENE_HEAP", "abc"),
        ("HARNESS_LUCENE_HEAP", "0g"),
        ("HARNESS_CHECKPOINT_MINUTES", "abc"),
        ("HARNESS_CHECKPOINT_MINUTES", "-1"),
        ("HARNESS_CHECKPOINT_MINUTES", "nan"),
        ("HARNESS_THREADS", "1.5"),
        ("HARNESS_PREFETCH", "yes"),
        ("HARNESS_PG_TIMEOUT", "0"),
        ("HARNESS_MSMARCO_PASSAGES", "fancy"),
    ],
)
def test_a_bad_control_is_refused_at_start_up_by_any_command(monkeypatch, capsys, name, value):
    monkeypatch.setenv(name, value)
    assert main(["ls", "methods"]) == 2  # ls reads none of them
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{name}={value!r}" in err and "fix:" in err, err


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("HARNESS_PASSAGE_WORKERS", "3"),
        ("HARNESS_LUCENE_HEAP", "1536m"),
        ("HARNESS_CHECKPOINT_MINUTES", "0.5"),
        ("HARNESS_SHARE_GPU", "1"),
        ("HARNESS_THREADS", ""),
        ("HARNESS_CACHE_DIR", "/tmp/x"),
    ],
)
def test_good_values_pass(name, value):
    env_controls.check({name: value})


def test_the_registry_is_open_to_new_controls():
    control = env_controls.Control("HARNESS_TEST_ONLY", "int", "a test", 1, 3)
    env_controls.register(control)
    try:
        assert "HARNESS_TEST_ONLY" in env_controls.table()
        with pytest.raises(env_controls.HarnessError, match="out of range"):
            env_controls.check({"HARNESS_TEST_ONLY": "4"})
        with pytest.raises(ValueError):
            env_controls.register(control)
    finally:
        del env_controls.CONTROLS["HARNESS_TEST_ONLY"]
