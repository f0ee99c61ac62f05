"""What the terminal commands print (issue 53): the gate's verdict in `check`'s first line and at most
60 lines without options; `reported` readable in a 120-column terminal (no line over 160 characters),
in points; `noise` with no number of 4 or more decimals and "measured" only for measured values;
p-values as "< 0.001", never "0.000"; `fetch --list` naming the embedded data."""

from __future__ import annotations

import re
from itertools import takewhile

import pytest

from harness.cli import main
from harness.core.paths import PROJECT_ROOT
from harness.core.points import p_phrase, p_text
from harness.core.statuses import FAIL, PASS, SUPERSEDED
from harness.gate.grading import GateRow
from harness.gate.run import GateResult
from harness.gate.summary import format_summary

COMMITTED = PROJECT_ROOT / "runs" / "records"
LONG_DECIMALS = re.compile(r"\d\.\d{4,}")


def _out(capsys, argv: list[str], code: int = 0) -> str:
    assert main(argv) == code
    return capsys.readouterr().out


def test_check_opens_with_its_verdict_and_fits_60_lines_on_the_committed_records(capsys):
    out = _out(capsys, ["check", "--records", str(COMMITTED)])
    lines = out.splitlines()
    assert len(lines) <= 60, len(lines)
    verdict = " ".join([lines[0], *takewhile(lambda line: line.startswith("  "), lines[1:])])  # wrapped at 120
    assert lines[0].startswith("gate PASSED: ") and "record(s)" in verdict and f"{SUPERSEDED} " in verdict
    assert not any(line.startswith(SUPERSEDED) for line in lines)  # counted, not listed
    assert "check --all" in out
    full = _out(capsys, ["check", "--records", str(COMMITTED), "--all"])
    assert len(full.splitlines()) > 60 and any(line.startswith(SUPERSEDED) for line in full.splitlines())
    assert "p=0.000" not in full and "p = 0.000" not in full


def test_the_summary_lists_the_failing_rows_after_the_verdict(tmp_path):
    rows = [
        GateRow(PASS, "ok", "m", "tiny", "scifact", "nDCG@10", expected=1.0, reproduced=1.0, delta=0.0, tolerance=0.5),
        GateRow(FAIL, "bad", "m", "tiny", "scifact", "nDCG@10", expected=1.0, reproduced=3.0, delta=2.0, tolerance=0.5),
    ]
    lines = format_summary(GateResult(tmp_path, rows, [], n_records=2)).splitlines()
    assert lines[0].startswith("gate FAILED (1 failing row(s)): 2 record(s)")
    assert any(line.startswith(FAIL) and "bad" in line for line in lines[1:])
    assert not any(line.startswith(PASS) for line in lines)


@pytest.mark.parametrize("argv", [["reported"], ["reported", "--all"], ["reported", "--paper", "cpdae"]])
def test_reported_has_no_line_over_160_characters(capsys, argv):
    out = _out(capsys, argv)
    assert max(len(line) for line in out.splitlines()) <= 160
    assert "(not legible)" not in out


def test_reported_shows_fractions_in_points_with_the_printed_value_beside(capsys):
    out = _out(capsys, ["reported", "--method", "bm25", "--paper", "cpdae"])
    assert "18.7 (printed 0.187)" in out
    assert not re.search(r"(?<!printed )\b0\.\d{3}\b", out)  # a fraction only as the printed value


@pytest.mark.parametrize("argv", [["noise", "--all"], ["noise", "--margins"], ["noise", "--margins", "--all"]])
def test_noise_prints_no_number_with_4_or_more_decimals_and_no_raw_yaml(capsys, argv):
    out = _out(capsys, [*argv, "--runs", str(PROJECT_ROOT / "runs")])
    assert not LONG_DECIMALS.search(out), LONG_DECIMALS.search(out)
    assert "settings_hash:" not in out and "| benchmark |" not in out and "\n- " not in out


def test_noise_margins_calls_a_transferred_sigma_transferred(capsys):
    """NFCorpus's measured seed SD is far below SciFact's spread carried to its queries, which the rule
    reads: 'transferred', not 'measured'; MS MARCO's is transferred too (issue 61: not 'model')."""
    out = _out(capsys, ["noise", "--margins"])
    # the table's rows (the source lines under it are indented)
    rows = {line.split()[0]: line for line in out.splitlines() if line.split()[:1] and not line.startswith(" ")}
    assert "transferred" in rows["nfcorpus"] and "measured" not in rows["nfcorpus"]
    assert "transferred" in rows["msmarco-dev"] and "model" not in rows["msmarco-dev"]
    assert "measured (mini)" in rows["scifact"]


def test_noise_basis_uses_only_the_legends_words():
    """Paper-scale evidence reads 'measured (paper scale)', not a fourth word 'evidence' (issue 63)."""
    from types import SimpleNamespace
    from typing import Any, cast

    from harness.commands.noise import _basis

    def spread(evidence: tuple[str, ...]) -> Any:
        return cast(Any, SimpleNamespace(evidence=evidence, parts=None))  # _basis reads only these two fields

    assert _basis(spread(("a study",)), "scifact") == "measured (paper scale)"
    assert _basis(spread(()), "scifact") == "transferred"


def test_p_values_are_never_printed_as_zero():
    assert p_text(0.0) == "< 0.001" and p_text(0.0004) == "< 0.001"
    assert p_text(0.001) == "0.001" and p_text(0.04567) == "0.046" and p_text(None) == "-"
    assert p_phrase(0.0) == "p < 0.001" and p_phrase(0.25) == "p = 0.250"


def test_effects_open_with_the_count_and_print_small_p_values_as_below_0_001(capsys):
    out = _out(capsys, ["effects", "--records", str(COMMITTED)])
    assert out.splitlines()[0].endswith("with a 95% CI that excludes 0")
    assert "< 0.001" in out and " 0.000 " not in out


def test_fetch_list_says_embedded_and_gives_sizes(capsys):
    out = _out(capsys, ["fetch", "--list"])
    row = next(line for line in out.splitlines() if line.startswith("beir/nfcorpus "))
    assert "embedded" in row and "missing" not in row and re.search(r"\d(\.\d)? (kB|MB)", row)
    assert "size" in out.splitlines()[0]


def test_fetch_list_sizes_the_ms_marco_downloads_and_gives_a_total(capsys):
    """Issue 63 item 3: the MS MARCO passage files' published sizes are listed (here or not), and one line
    totals what is still to download, counting the downloads no size is registered for."""
    from harness.data import download

    out = _out(capsys, ["fetch", "--list"])
    for key in ("msmarco-passage/collection", "msmarco-passage/queries", "msmarco-passage/qrels-train"):
        assert download.SOURCES[key].size
        row = next(line for line in out.splitlines() if line.startswith(key + " "))
        assert re.search(r"\d(\.\d)? (kB|MB|GB)", row), row
    total = next(line for line in out.splitlines() if line.startswith("to download: "))
    assert re.match(r"to download: \d+(\.\d)? (B|kB|MB|GB|TB) in the published sizes", total), total
    unsized = sum(1 for s in download.SOURCES.values() if s.size is None)
    assert "of no registered size" in total or unsized == 0


def test_check_all_has_no_line_over_160_characters_and_names_every_run_whole(capsys):
    """`check --all` on the committed records was 282 characters wide: too wide a table is reflowed
    (each run's id once above its rows, notes under them), never cut."""
    out = _out(capsys, ["check", "--records", str(COMMITTED), "--all"])
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 160, max(lines, key=len)
    runs = {p.stem for p in COMMITTED.glob("*__*.json")}
    named = {line.removeprefix("run ").split(" ")[0].rstrip(":") for line in lines if line.startswith("run ")}
    assert runs and runs <= named  # each run's id whole on the line above its rows
