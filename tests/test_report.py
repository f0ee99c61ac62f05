"""`python -m harness report --html DIR`: a static site over the committed records whose gate rows
are `check --json`'s, that names nothing outside its folder, escapes every text, and renders in
headless Chromium from a file:// URL with no emoji."""

from __future__ import annotations

import json
import re
import time
from html.parser import HTMLParser
from pathlib import Path

import pytest

from browser import EMOJI, chromium, screenshot
from harness import cli
from harness.core.errors import HarnessError
from harness.gate.grading import GateRow
from harness.core.paths import PROJECT_ROOT
from harness.present.report_html import gate_command, gate_html, write_report
from harness.core.statuses import PASS

RECORDS = PROJECT_ROOT / "runs" / "records"  # named: the tests' default runs folder is an empty tmp one


class _Rows(HTMLParser):
    """The cell texts of every table row of a page, by table, and every src/href it names."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[list[list[str]]] = []
        self.links: list[str] = []
        self.tags: set[str] = set()
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        self.links += [v for k, v in attrs if k in ("src", "href") and v]
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag == "td":
            self._cell = []

    def handle_endtag(self, tag):
        if tag == "td" and self._cell is not None:
            self.tables[-1][-1].append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> tuple[Path, dict]:
    """The report and `check --json`'s answer over the same committed records."""
    out = tmp_path_factory.mktemp("report")
    check_json = out / "check.json"
    # A module fixture runs before conftest's per-test isolation: keep the checkout's runs/ (a user's own
    # runs in runs/local/ included) out of it, as every test does.
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HARNESS_RUNS_DIR", str(out / "runs"))
        mp.setenv("HARNESS_CACHE_DIR", str(out / "cache"))
        assert cli.main(["check", "--records", str(RECORDS), "--json", str(check_json)]) in (0, 1)
        assert cli.main(["report", "--html", str(out / "site"), "--records", str(RECORDS)]) == 0
    return out / "site", json.loads(check_json.read_text())


def _gate_rows(tables: list[list[list[str]]]) -> list[list[str]]:
    return [r for r in tables[-2] if r]  # the gate table is the last but one (then the records)


def test_the_report_holds_checks_rows_and_nothing_from_outside(site) -> None:
    folder, checked = site
    assert sorted(p.name for p in folder.iterdir()) == ["index.html", "style.css"]
    page = (folder / "index.html").read_text(encoding="utf-8")
    parsed = _Rows()
    parsed.feed(page)
    assert parsed.links == ["style.css"] and "script" not in parsed.tags and "@import" not in page
    assert "url(" not in (folder / "style.css").read_text()
    shown = [(r[0], r[1], r[2], r[3], r[4]) for r in _gate_rows(parsed.tables)]
    assert shown == [(r["status"], r["run_id"], r["benchmark"], r["stage"] or "-", r["measure"])
                     for r in checked["rows"]]
    assert "<svg" in page and "<circle" in page  # the mini runs' plot, inline
    # each record's seal and hardware
    for path in sorted(RECORDS.glob("*__mini__*.json"))[:3]:
        sealed = json.loads(path.read_text())["integrity"]["sha256"]
        assert sealed in page
    assert not EMOJI.findall(page)


def test_every_text_is_escaped_and_commands_name_the_run() -> None:
    row = GateRow(PASS, "x__tiny__1", "cotmae", "tiny", "scifact", "nDCG@10", note="<script>alert(1)</script>")
    shown = gate_html(type("G", (), {"rows": [row]})())
    assert "<script>" not in shown and "&lt;script&gt;" in shown
    assert gate_command(row) == "python -m harness run --method cotmae --profile tiny"
    effect = GateRow(PASS, "cotmae - nopretrain [mini]", "cotmae", "mini")
    assert gate_command(effect) == ("python -m harness run --method cotmae --profile mini && "
                                    "python -m harness run --method nopretrain --profile mini")


def test_a_folder_that_is_not_a_report_is_refused(tmp_path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(HarnessError, match="not an earlier report"):
        write_report(tmp_path, RECORDS)
    assert (tmp_path / "notes.txt").read_text() == "mine"


@pytest.mark.slow
def test_the_report_renders_from_a_file_url_with_checks_verdicts(site, tmp_path) -> None:
    folder, checked = site
    deadline = time.monotonic() + 60
    # no network at all: every host name fails to resolve, so a reference outside the folder would show
    with chromium(tmp_path, deadline, flags=["--host-resolver-rules=MAP * ~NOTFOUND"]) as tools:
        tools.call("Page.navigate", url=(folder / "index.html").resolve().as_uri())
        rows = None
        while time.monotonic() < deadline:
            state = tools.call("Runtime.evaluate", returnByValue=True, expression=(
                "document.readyState == 'complete' ? Array.from(document.querySelectorAll('#gate + p + div tbody tr'))"
                ".map(r => Array.from(r.querySelectorAll('td')).slice(0, 5).map(c => c.innerText.trim())) : null"))
            rows = state["result"].get("value")
            if rows:
                break
            time.sleep(0.3)
        styled = tools.call("Runtime.evaluate", returnByValue=True, expression=(
            "getComputedStyle(document.querySelector('.badge')).borderRadius"))["result"]["value"]
        text = tools.text()
        screenshot(tools, "report.png", full_page=False)
    assert rows, "the gate table did not render"
    assert [tuple(r) for r in rows] == [(r["status"], r["run_id"], r["benchmark"], r["stage"] or "-", r["measure"])
                                        for r in checked["rows"]]
    assert styled == "4px"  # style.css loaded from the folder
    assert "The papers' headline numbers" in text and re.search(r"NOT-YET-RUN|REPRODUCED", text)
    assert not EMOJI.findall(text), sorted(set(EMOJI.findall(text)))


def test_the_command_ends_with_one_summary_line(tmp_path, capsys) -> None:
    """The command's last line: the states of the headline cells and claims and the gate's verdict,
    the same counts the page shows, and where the site is."""
    from harness.present.overview import from_folder

    assert cli.main(["report", "--html", str(tmp_path / "site"), "--records", str(RECORDS)]) == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    glance = from_folder(RECORDS)
    counts = ", ".join(f"{s} {n}" for s, n in glance.counts(glance.headline).items())
    assert line.startswith(f"report: {len(glance.headline)} headline cells ({counts}); ")
    assert "gate PASSED over " in line and line.endswith("(open it in a browser; the folder is self-contained)")
    assert str(tmp_path / "site" / "index.html") in line
