"""Bad input on the command line: exit 2 and one line naming the flag or file, never a traceback
(issue 25's probe, kept as regression tests)."""

from __future__ import annotations

import pytest

from harness.cli import main

CASES = [
    (["check", "--records", "/nonexistent/records"], "--records /nonexistent/records: no such folder"),
    (["check", "--reported", "/nonexistent/cells.json"], "--reported /nonexistent/cells.json: no such file"),
    (["check", "--tiny-tolerance", "nan"], "--tiny-tolerance must be a finite number"),
    (["run", "--method", "../baselines/bm25", "--dry-run"], "a method is named by its spec's file name"),
    (["reproduce", "--list", "--checkpoint", "x"], "give it without --checkpoint"),
    (["run", "--method", "bm25", "--dataset", ",", "--dry-run"], "--dataset ',' names nothing"),
    (["reproduce", "--checkpoint", "co-condenser-marco-retriever", "--benchmark", " , "], "--benchmark ' , ' names nothing"),
    (["leaderboard", "--host", "203.0.113.7", "--port", "8599"], "--host 203.0.113.7 is not an address of this machine"),
    (["ui", "--host", "no-such-host.invalid", "--port", "8599"], "--host no-such-host.invalid: not a host name"),
    (["noise", "--runs", "/nonexistent/runs"], "no reference record of nopretrain [mini] in /nonexistent/runs/records"),
]
ARGPARSE_CASES = [
    (["ui", "--port", "70000"], "70000 is not a TCP port"),
    (["leaderboard", "--port", "0"], "0 is not a TCP port"),
    (["effects", "--profile", "nonsense"], "invalid choice: 'nonsense'"),
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
