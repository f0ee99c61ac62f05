"""Issue 63 item 4 / done-when 3: terminal outputs fit 120 columns by default over the committed records
(runs/records, runs/seeds) and every paper plan; `--wide` keeps the full one-line form. Covered: ls,
check, check --all, effects, grade, reported, noise, noise --margins, every spec x profile dry-run and
run's closing table (rendered from each committed record, as a run prints it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import main
from harness.core.paths import PROJECT_ROOT
from harness.core.text_table import TERMINAL_WIDTH, format_table, output_width, reflow
from harness.evaluation.compare import Comparison, closing_table, verdict_note
from harness.papers.citation import table_citation
from harness.papers.registry import cells_for
from harness.records.run_record import RunRecord
from harness.spec.files import list_methods
from harness.spec.method import profiles_of

COMMANDS = [
    ["ls"],
    ["check"],
    ["check", "--all"],
    ["effects"],
    ["reported"],
    ["noise", "--runs", str(PROJECT_ROOT / "runs")],
    ["noise", "--all", "--runs", str(PROJECT_ROOT / "runs")],
    ["noise", "--margins"],
    ["noise", "--margins", "--all"],
]
COMMITTED = sorted((PROJECT_ROOT / "runs" / "records").glob("*__*.json")) + sorted(
    (PROJECT_ROOT / "runs" / "seeds").glob("*__*.json")
)  # run records (references.json names the references)


def too_wide(text: str) -> list[str]:
    return [line for line in text.splitlines() if len(line) > TERMINAL_WIDTH]


def words(text: str) -> list[str]:
    """Every word of ``text`` (rule lines aside, whose length follows the columns' widths)."""
    return sorted(w for w in text.split() if set(w) != {"-"})


@pytest.mark.parametrize("argv", COMMANDS, ids=lambda argv: " ".join(a for a in argv if "/" not in a))
def test_every_line_fits_the_terminal(argv, capsys):
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert not too_wide(out), too_wide(out)[:3]


def test_wide_prints_each_description_on_one_line(capsys):
    assert main(["ls", "methods", "--wide"]) == 0
    wide = capsys.readouterr().out
    assert max(map(len, wide.splitlines())) > TERMINAL_WIDTH  # the committed descriptions are longer
    assert main(["ls", "methods"]) == 0
    fitted = capsys.readouterr().out
    assert len(fitted.splitlines()) > len(wide.splitlines())  # wrapped onto continuation lines, not cut
    assert words(fitted) == words(wide)  # every word kept


def test_a_table_wraps_text_at_words_and_moves_marked_columns_below():
    rows = [["a", "word " * 30, "x" * 40]]
    text = format_table(["id", "note", "ref"], rows, below=[2], width=49)
    assert max(map(len, text.splitlines())) <= 49
    assert "    ref: " + "x" * 40 in text
    assert format_table(["id", "note", "ref"], rows, below=[2], width=None).count("\n") == 2


def test_below_first_moves_a_note_before_any_column_narrows():
    rows = [["INCONCLUSIVE", "msmarco-dev", "a long note " * 12]]
    text = format_table(["verdict", "benchmark", "note"], rows, below=[2], width=60, below_first=True)
    lines = text.splitlines()
    assert lines[2] == "INCONCLUSIVE  msmarco-dev"  # the row's cells whole, on one line
    assert lines[3].startswith("    note: a long note") and max(map(len, lines)) <= 60


def test_reflow_breaks_a_column_line_at_a_gap_and_keeps_every_word():
    line = "    dense_retrieve/msmarco-dev/dev/retriever2 (search)   0.0948    0 s   " + "2 x 6,980 queries " * 6
    text = reflow(line, 60)
    assert max(map(len, text.splitlines())) <= 60 and words(text) == words(line)
    assert text.splitlines()[1].startswith("        ")  # continuation lines indented under the line's own
    assert reflow(line, None) == line


# ---------------------------------------------------------------------------- grade


def _printed(method: str) -> dict[str, dict[str, float]]:
    """The method's QC v2 Table 1 retriever-2 row as printed (points), from the registry."""
    out: dict[str, dict[str, float]] = {}
    for c in cells_for(method=method):
        if (
            (c.paper_file, c.table) == ("qc-pretraining-v2.txt", "Table 1")
            and c.score is not None
            and c.conditions.get("finetune_stage") == "retriever2"
            and "cited" not in c.conditions
        ):
            out.setdefault(c.benchmark, {})[c.measure] = round(100 * c.score, 4)
    return out


@pytest.fixture
def own_numbers(tmp_path: Path) -> Path:
    """Two researchers' runs (their cells and the effect between them) as `grade` reads them."""
    runs = [
        {"method": m, "profile": "paper", "stage": "retriever2", "metrics": _printed(m)}
        for m in ("cotmae_qc", "cotmae")
    ]
    assert all(r["metrics"] for r in runs)
    path = tmp_path / "mine.json"
    path.write_text(json.dumps({"runs": runs}), encoding="utf-8")
    return path


@pytest.mark.parametrize("extra", [[], ["--all"]], ids=["default", "all"])
def test_grade_fits_and_says_each_sigma_source_once(own_numbers, extra, capsys):
    assert main(["grade", "--metrics", str(own_numbers), *extra]) == 0
    fitted = capsys.readouterr().out
    assert not too_wide(fitted), too_wide(fitted)[:3]
    assert main(["grade", "--metrics", str(own_numbers), *extra, "--wide"]) == 0
    wide = capsys.readouterr().out
    assert max(map(len, wide.splitlines())) > TERMINAL_WIDTH
    table = [line for line in wide.splitlines() if line.startswith(("INCONCLUSIVE", "REPRODUCED", "DIFFERENT"))]
    assert table, wide[:500]
    for line in table:  # the note no longer repeats the "sigma_rep from" column's source
        assert line.count("transferred to") <= 1 and line.count("pre-training part not measured") <= 1, line


# ---------------------------------------------------------------------------- run --dry-run


def all_plans() -> list[tuple[str, str]]:
    return [(method, profile) for method in list_methods() for profile in profiles_of(method)]


@pytest.mark.parametrize("method,profile", all_plans())
def test_every_dry_run_fits_and_wide_keeps_the_plan_whole(method, profile, capsys):
    argv = ["run", "--method", method, "--profile", profile, "--dry-run"]
    assert main(argv) == 0
    fitted = capsys.readouterr().out
    assert not too_wide(fitted), too_wide(fitted)[:3]
    assert main([*argv, "--wide"]) == 0
    wide = capsys.readouterr().out
    assert stable_words(fitted) == stable_words(wide)  # reflowed, never cut


def stable_words(text: str) -> list[str]:
    """The words of a plan that two dry-runs print alike (not this machine's free disk at the time)."""
    return [w for w in words(text) if not any(ch.isdigit() for ch in w)]


# ---------------------------------------------------------------------------- run's closing table


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: p.stem)
def test_the_closing_table_of_every_committed_record_fits(path):
    record = RunRecord.from_json(json.loads(path.read_text(encoding="utf-8")), path)
    comparisons = [Comparison.from_dict(c) for c in record.comparison]
    fitted = closing_table(comparisons)
    assert not too_wide(fitted), too_wide(fitted)[:3]
    with output_width(None):
        wide = closing_table(comparisons)
    assert len(wide.splitlines()) == len(comparisons) + 3 if comparisons else wide == fitted  # a line per row
    flat = " ".join(fitted.split())
    for c in comparisons:  # every note and source whole, on the lines under its row
        assert " ".join(verdict_note(c).split()) in flat and table_citation(c.paper_file, c.table) in flat


def test_bm25s_closing_table_keeps_each_note_whole():
    path = next(p for p in COMMITTED if p.name.startswith("bm25__paper__"))
    comparisons = [Comparison.from_dict(c) for c in json.loads(path.read_text(encoding="utf-8"))["comparison"]]
    with output_width(None):
        wide = closing_table(comparisons)
    assert max(map(len, wide.splitlines())) > TERMINAL_WIDTH  # the one-line form is wider than a screen
    assert not too_wide(closing_table(comparisons))
