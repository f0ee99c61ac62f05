"""`check --rerun`: the real CLI re-runs a method from an empty cache into a scratch folder and gates the
fresh record against the papers' cells and the committed references (CI's BM25 re-run is in
tests/test_run_bm25.py)."""

from __future__ import annotations

from harness.cli import main
from harness.gate.rerun import RERUNS, Rerun, parse_reruns


def test_parse_reruns():
    assert parse_reruns(None) == RERUNS and parse_reruns("") == RERUNS
    assert parse_reruns("bm25:paper") == (RERUNS[0],)
    assert parse_reruns("cotmae, foo:mini") == (Rerun("cotmae", "tiny"), Rerun("foo", "mini"))


def test_failed_rerun_is_one_error_naming_the_method_and_log(tmp_path, capsys):
    assert main(["check", "--rerun", "nosuchmethod", "--scratch", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err
    assert "re-run of nosuchmethod [tiny] failed" in err and "nosuchmethod__tiny.log" in err
