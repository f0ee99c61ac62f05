"""`check --rerun` on a small scope: the real CLI re-runs BM25 on SciFact from an empty cache
into a scratch folder and gates it against the papers' cells."""

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


@pytest.mark.slow
def test_rerun_of_bm25_is_gated_against_the_papers(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("harness.gate.rerun.RERUNS", (Rerun("bm25", "paper", ("scifact",)),))
    out = tmp_path / "gate.json"
    code = main(["check", "--rerun", "bm25:paper", "--scratch", str(tmp_path / "s"), "--json", str(out)])
    printed = capsys.readouterr().out
    gate = json.loads(out.read_text())
    assert code == 0, printed
    rows = [r for r in gate["rows"] if r["benchmark"] == "scifact" and r["measure"] == "nDCG@10"]
    # the papers' cells by the exact rule (BM25 has no seed), the accepted record at 0.01 points
    assert rows and {"REPRODUCED"} <= {r["status"] for r in rows} <= {"REPRODUCED", "PASS"}
    assert "re-run times: bm25 [paper]" in printed and (tmp_path / "s" / "cache").is_dir()


# CI's re-runs of the trained methods (RERUNS), run here beside the other slow tests rather than one after
# another once the suite is done: each from an empty cache, gated against its committed reference as
# `check --rerun` gates it (.ci/run re-runs only BM25; test_ci_run pins that every re-run happens once).
IN_THE_SUITE = ("lexmae:tiny",)


@pytest.mark.slow
@pytest.mark.parametrize("rerun", IN_THE_SUITE)
def test_a_trained_method_re_run_from_scratch_passes_the_gate(rerun, tmp_path, capsys):
    out = tmp_path / "gate.json"
    committed = PROJECT_ROOT / "runs" / "records"  # the tests' own runs folder (conftest) holds no references
    code = main(
        ["check", "--rerun", rerun, "--records", str(committed), "--scratch", str(tmp_path / "s"), "--json", str(out)]
    )
    printed = capsys.readouterr().out
    assert code == 0, printed[-3000:]
    rows = json.loads(out.read_text())["rows"]
    method, profile = rerun.split(":")
    graded = [r for r in rows if (r["method"], r["profile"]) == (method, profile) and r.get("delta") is not None]
    assert graded and all(r["status"] == "PASS" for r in graded), [
        (r["benchmark"], r["measure"], r["delta"]) for r in graded
    ]
    assert any("(loss)" in str(r["benchmark"]) for r in graded)  # its training losses, too
