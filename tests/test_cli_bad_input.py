"""Bad input on the command line: exit 2 and one line naming the flag or file, never a traceback
(issue 25's probe, kept as regression tests)."""

from __future__ import annotations

import os

import pytest

from harness.cli import main

CASES = [
    (["check", "--records", "/nonexistent/records"], "--records /nonexistent/records: no such folder"),
    (["check", "--reported", "/nonexistent/cells.json"], "--reported /nonexistent/cells.json: no such file"),
    (["check", "--tiny-tolerance", "nan"], "--tiny-tolerance must be a finite number"),
    (["run", "--method", "../baselines/bm25", "--dry-run"], "a method is named by its spec's file name"),
    (["reproduce", "--list", "--checkpoint", "x"], "give it without --checkpoint"),
    (["run", "--method", "bm25", "--dataset", ",", "--dry-run"], "--dataset ',' names nothing"),
    (
        ["reproduce", "--checkpoint", "co-condenser-marco-retriever", "--benchmark", " , "],
        "--benchmark ' , ' names nothing",
    ),
    (
        ["leaderboard", "--host", "203.0.113.7", "--port", "8599"],
        "--host 203.0.113.7 is not an address of this machine",
    ),
    (["ui", "--host", "no-such-host.invalid", "--port", "8599"], "--host no-such-host.invalid: not a host name"),
    (["noise", "--runs", "/nonexistent/runs"], "no reference record of nopretrain [mini] in /nonexistent/runs/records"),
]
ARGPARSE_CASES = [
    (["ui", "--port", "70000"], "70000 is not a TCP port"),
    (["leaderboard", "--port", "0"], "0 is not a TCP port"),
    (["effects", "--profile", "nonsense"], "invalid choice: 'nonsense'"),
    # numpy's seeding refused it only when fine-tuning started, and the dry-run accepted it (issue 40)
    (
        ["run", "--method", "bm25", "--seed", "99999999999999999999999", "--dry-run"],
        "99999999999999999999999 is out of range: a seed must be in [0, 4294967295]",
    ),
]


@pytest.mark.parametrize("argv,message", CASES)
def test_bad_input_is_one_line_and_exit_2(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert len([line for line in err.splitlines() if line.strip()]) == 1, err


@pytest.mark.parametrize("argv,message", ARGPARSE_CASES)
def test_bad_flag_value_is_refused_by_the_parser(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


# Unusable places (issue 40): each is refused before the work, in one line naming the path and the fix.
# `{tmp}` is a scratch folder holding `a-file` (a file) and `a-folder` (an empty folder).
UNWRITABLE = "/sys/harness-probe"  # refused even to root (sysfs takes no new folders): chmod binds no root
PLACE_CASES = [
    (
        {"HARNESS_CACHE_DIR": "{tmp}/a-file"},
        ["run", "--method", "nopretrain", "--profile", "tiny"],
        "the cache folder {tmp}/a-file is a file, not a folder (fix: point HARNESS_CACHE_DIR at a folder",
    ),
    (
        {"HARNESS_CACHE_DIR": UNWRITABLE},
        ["run", "--method", "nopretrain", "--profile", "tiny"],
        f"the cache folder {UNWRITABLE}: cannot write there",
    ),
    (
        {"HARNESS_RUNS_DIR": "{tmp}/a-file"},
        ["run", "--method", "nopretrain", "--profile", "tiny"],
        "the runs folder {tmp}/a-file is a file, not a folder (fix: point HARNESS_RUNS_DIR at a folder",
    ),
    (
        {},
        ["run", "--method", "nopretrain", "--profile", "tiny", "--dry-run", "--json", "{tmp}/a-folder"],
        "--json {tmp}/a-folder is a folder (fix: give a file path",
    ),
    (
        {},
        ["run", "--method", "nopretrain", "--profile", "tiny", "--dry-run", "--json", "{tmp}/a-file/out.json"],
        "--json {tmp}/a-file/out.json: its folder {tmp}/a-file is a file, not a folder",
    ),
    (
        {},
        ["eval", "--run", "{tmp}/no-run.trec", "--benchmark", "dl19", "--json", "{tmp}/a-folder"],
        "--json {tmp}/a-folder is a folder",
    ),
    ({}, ["report", "--html", f"{UNWRITABLE}/report"], f"--html {UNWRITABLE}/report: its folder {UNWRITABLE}: cannot"),
    ({}, ["check", "--records", "{tmp}/a-file"], "--records {tmp}/a-file is a file, not a folder"),
    ({}, ["effects", "--records", "{tmp}/a-file"], "--records {tmp}/a-file is a file, not a folder"),
]


@pytest.mark.parametrize(
    "env,argv,message", PLACE_CASES, ids=[" ".join(c[1][:1] + list(c[0]) + c[1][-2:]) for c in PLACE_CASES]
)
def test_an_unusable_place_is_one_line_and_exit_2(env, argv, message, tmp_path, monkeypatch, capsys):
    (tmp_path / "a-file").write_text("not a folder")
    (tmp_path / "a-folder").mkdir()
    if UNWRITABLE in " ".join([*env.values(), *argv]) and _writable(UNWRITABLE):
        pytest.skip(f"{UNWRITABLE} can be written on this machine")
    monkeypatch.setenv("HARNESS_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    for key, value in env.items():
        monkeypatch.setenv(key, value.format(tmp=tmp_path))
    assert main([a.format(tmp=tmp_path) for a in argv]) == 2
    err = capsys.readouterr().err
    assert message.format(tmp=tmp_path) in err and "Traceback" not in err, err
    assert len([line for line in err.splitlines() if line.strip()]) == 1, err
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").iterdir())  # nothing ran


def _writable(path: str) -> bool:
    try:
        os.makedirs(path, exist_ok=True)
    except OSError:
        return False
    os.rmdir(path)
    return True


def test_report_writes_into_an_existing_empty_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HARNESS_RUNS_DIR", str(tmp_path / "runs"))
    (tmp_path / "records").mkdir()
    (tmp_path / "report").mkdir()  # made for it: nothing to lose
    assert main(["report", "--html", str(tmp_path / "report"), "--records", str(tmp_path / "records")]) == 0
    assert (tmp_path / "report" / "index.html").is_file()
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")  # a folder holding something else is still refused
    assert main(["report", "--html", str(tmp_path / "other"), "--records", str(tmp_path / "records")]) == 2
    assert (tmp_path / "other" / "notes.txt").read_text() == "mine"
