"""CLI surface: help, listing, did-you-mean, clear errors instead of tracebacks."""

from __future__ import annotations

import pytest

from harness.cli import build_parser, main


def test_help_lists_every_command(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--help"])
    out = capsys.readouterr().out
    for cmd in ("run", "eval", "ls", "reported", "validate"):
        assert cmd in out


def test_ls_lists_methods_and_benchmarks(capsys):
    assert main(["ls"]) == 0
    out = capsys.readouterr().out
    for name in ("bm25", "cotmae_qc", "cocondenser", "lexmae", "cpdae", "msmarco-dev", "dl19", "scifact"):
        assert name in out
    # A spec that `extends` another inherits its profiles.
    row = next(line for line in out.splitlines() if line.startswith("cotmae_qc "))
    assert "paper,rehearsal,mini,tiny" in row


def test_unknown_method_gets_did_you_mean(capsys):
    assert main(["run", "--method", "cotmea_qc"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: unknown method 'cotmea_qc'") and "Did you mean: cotmae_qc" in err


def test_unknown_dataset_gets_did_you_mean(capsys):
    assert main(["run", "--method", "bm25", "--dataset", "scifcat"]) == 2
    assert "Did you mean: scifact" in capsys.readouterr().err


def test_dry_run_shows_each_profiles_declared_hardware(capsys):
    assert main(["run", "--method", "cotmae_qc", "--profile", "tiny", "--dry-run"]) == 0
    assert "hardware: declared 1 x cpu;" in capsys.readouterr().out
    assert main(["run", "--method", "cotmae_qc", "--profile", "paper", "--dry-run"]) == 0
    assert "hardware: declared 16 x V100-32GB, 60 h;" in capsys.readouterr().out


@pytest.mark.slow
def test_stage_flag_runs_up_to_that_stage_and_writes_no_record(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("HARNESS_RUNS_DIR", str(tmp_path / "runs"))
    assert main(["run", "--method", "cotmae", "--profile", "tiny", "--stage", "tokenizer"]) == 0
    out = capsys.readouterr().out
    assert "cotmae [tiny] stopped after stage tokenizer as asked" in out
    assert "[1/1] stage tokenizer: running" in out  # every stage says where the run is, the first one too
    assert main(["run", "--method", "cotmae", "--profile", "tiny", "--stage", "tokenizer"]) == 0
    assert "[1/1] stage tokenizer: cached (" in capsys.readouterr().out
    assert [p.name for p in (tmp_path / "cache").iterdir()] == ["tokenizer"]  # nothing after it ran
    assert not (tmp_path / "runs" / "local").exists() or not list((tmp_path / "runs" / "local").glob("*.json"))
