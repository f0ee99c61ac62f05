"""`check --rerun`: the real CLI re-runs a method from an empty cache into a scratch folder and gates the
fresh record against the papers' cells and the committed references (CI's BM25 re-run is here)."""

from __future__ import annotations

import json

import pytest

from harness.cli import main
from harness.core.paths import PROJECT_ROOT
from harness.gate.rerun import RERUNS, Rerun, parse_reruns


def test_parse_reruns():
    assert parse_reruns(None) == RERUNS and parse_reruns("") == RERUNS
    assert parse_reruns("bm25:paper") == (RERUNS[0],)
    assert parse_reruns("cotmae, foo:mini") == (Rerun("cotmae", "tiny"), Rerun("foo", "mini"))


def test_failed_rerun_is_one_error_naming_the_method_and_log(tmp_path, capsys):
    assert main(["check", "--rerun", "nosuchmethod", "--scratch", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err
    assert "re-run of nosuchmethod [tiny] failed" in err and "nosuchmethod__tiny.log" in err


# CI's re-runs (RERUNS) run in the suite, beside the other slow tests, each once: BM25 here, cotmae_qc tiny in
# tests/test_fresh_copy_tiny_run.py (the README's run on a fresh copy); tests/test_ci_run.py pins that.
IN_THE_SUITE = ("bm25:paper",)


@pytest.mark.slow
def test_ci_rerun_of_bm25_is_gated_against_the_papers_and_its_accepted_record(tmp_path, capsys):
    """CI's BM25 re-run (SciFact and NFCorpus, from an empty cache): every graded number is the papers' by the
    exact rule (BM25 has no seed) and its accepted record's at 0.01 points."""
    out = tmp_path / "gate.json"
    committed = PROJECT_ROOT / "runs" / "records"  # the tests' own runs folder (conftest) holds no references
    argv = ["check", "--rerun", ",".join(IN_THE_SUITE), "--records", str(committed), "--scratch", str(tmp_path / "s")]
    code = main([*argv, "--json", str(out)])
    printed = capsys.readouterr().out
    gate = json.loads(out.read_text())
    assert code == 0, printed[-3000:]
    fresh = [
        r for r in gate["rows"] if r["method"] == "bm25" and r["measure"] == "nDCG@10" and r.get("delta") is not None
    ]
    assert {r["benchmark"] for r in fresh} == set(RERUNS[0].datasets)
    assert {"REPRODUCED", "PASS"} == {r["status"] for r in fresh}  # the papers' cells and the accepted record
    assert "re-run times: bm25 [paper]" in printed and (tmp_path / "s" / "cache").is_dir()
