"""Issue 63 item 4: terminal outputs fit 120 columns by default over the committed records; `--wide`
keeps one line per row (the full text). Covered so far: ls, check, check --all, effects, reported,
noise (--margins, --all). Not yet: grade, the dry-runs, run's closing table."""

from __future__ import annotations

import pytest

from harness.cli import main
from harness.core.text_table import TERMINAL_WIDTH, format_table

COMMANDS = [
    ["ls"],
    ["check"],
    ["check", "--all"],
    ["effects"],
    ["reported"],
    ["noise", "--margins"],
    ["noise", "--margins", "--all"],
]


@pytest.mark.parametrize("argv", COMMANDS, ids=" ".join)
def test_every_line_fits_the_terminal(argv, capsys):
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    too_wide = [line for line in lines if len(line) > TERMINAL_WIDTH]
    assert not too_wide, too_wide[:3]


def test_wide_prints_each_description_on_one_line(capsys):
    assert main(["ls", "methods", "--wide"]) == 0
    wide = capsys.readouterr().out
    assert max(map(len, wide.splitlines())) > TERMINAL_WIDTH  # the committed descriptions are longer
    assert main(["ls", "methods"]) == 0
    fitted = capsys.readouterr().out
    assert len(fitted.splitlines()) > len(wide.splitlines())  # wrapped onto continuation lines, not cut

    def words(text: str) -> list[str]:
        return sorted(w for w in text.split() if set(w) != {"-"})  # the rule lines differ in length

    assert words(fitted) == words(wide)  # every word kept


def test_a_table_wraps_text_at_words_and_moves_marked_columns_below():
    rows = [["a", "word " * 30, "x" * 40]]
    text = format_table(["id", "note", "ref"], rows, below=[2], width=49)
    assert max(map(len, text.splitlines())) <= 49
    assert "    ref: " + "x" * 40 in text
    assert format_table(["id", "note", "ref"], rows, below=[2], width=None).count("\n") == 2
