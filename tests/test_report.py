"""`python -m harness report --html DIR`: a static site over the committed records whose gate rows
are `check --json`'s, that opens with the gate's verdict and its failing rows, folds the rows that
grade nothing, names nothing outside its folder, escapes every text, and renders in headless
Chromium from a file:// URL with no emoji and the command column in view."""

from __future__ import annotations

import json
import re
import shutil
import time
from html.parser import HTMLParser
from pathlib import Path

import pytest
from browser import EMOJI, chromium, screenshot, unreadable

from harness import cli
from harness.core.errors import HarnessError
from harness.core.paths import PROJECT_ROOT
from harness.core.statuses import FAILING, PASS
from harness.gate.grading import GateRow
from harness.gate.run import GateResult
from harness.present.report_html import gate_command, gate_html, write_report
from harness.records.integrity import seal
from harness.records.store import read_references

RECORDS = PROJECT_ROOT / "runs" / "records"  # named: the tests' default runs folder is an empty tmp one


class _Rows(HTMLParser):
    """The cell texts of every table row of a page, by table, and every src/href it names."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[list[list[str]]] = []
        self.headers: list[list[str]] = []
        self.links: list[str] = []
        self.tags: set[str] = set()
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        self.links += [v for k, v in attrs if k in ("src", "href") and v]
        if tag == "table":
            self.tables.append([])
            self.headers.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            text = "".join(self._cell).strip()
            (self.tables[-1][-1] if tag == "td" else self.headers[-1]).append(text)
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def _parsed(html: str) -> _Rows:
    parsed = _Rows()
    parsed.feed(html)
    return parsed


def _section(page: str, start: str, end: str) -> str:
    """The page from the element with id ``start`` to the one with id ``end`` (or the page's end)."""
    return page.split(f'id="{start}"', 1)[1].split(f'id="{end}"', 1)[0]


def _page(folder: Path, name: str = "index.html") -> str:
    return (folder / name).read_text(encoding="utf-8")


def _gate(folder: Path) -> str:
    """The gate's rows: its own page (gate.html), before the user's own runs."""
    return _section(_page(folder, "gate.html"), "gate", "yours")


def _body(page: str) -> str:
    return page.split("<body>", 1)[1]


def _after_answer(page: str) -> str:
    """The page after its first element, the answer (tests/test_answer_line.py checks its text)."""
    body = _body(page).lstrip()
    assert body.startswith('<div id="answer"'), body[:200]
    return body.split("</div>", 1)[1].lstrip()


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> tuple[Path, dict]:
    """The report and `check --json`'s answer over the same committed records."""
    out = tmp_path_factory.mktemp("report")
    return _site(out, RECORDS)


def _site(out: Path, records: Path) -> tuple[Path, dict]:
    check_json = out / "check.json"
    # A module fixture runs before conftest's per-test isolation: keep the checkout's runs/ (a user's own
    # runs in runs/local/ included) out of it, as every test does.
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HARNESS_RUNS_DIR", str(out / "runs"))
        mp.setenv("HARNESS_CACHE_DIR", str(out / "cache"))
        assert cli.main(["check", "--records", str(records), "--json", str(check_json)]) in (0, 1)
        assert cli.main(["report", "--html", str(out / "site"), "--records", str(records)]) == 0
    return out / "site", json.loads(check_json.read_text())


@pytest.fixture(scope="module")
def failed_site(tmp_path_factory) -> tuple[Path, dict]:
    """The committed records and one re-run of the smallest tiny reference whose every per-query score
    of one measure is 0 or 1, whichever is further from the reference: the gate FAILS on it."""
    out = tmp_path_factory.mktemp("failed")
    records = out / "records"
    shutil.copytree(RECORDS, records)
    refs = {k: e for k, e in read_references(records)["references"].items() if k.endswith("/tiny")}
    entry = min(refs.values(), key=lambda e: (records / f"{e['run_id']}.json").stat().st_size)
    rec = json.loads((records / f"{entry['run_id']}.json").read_text())
    for key in ("integrity", "schema_version"):
        rec.pop(key, None)
    rec.update(run_id=f"{rec['method']}__{rec['profile']}__20991231T000000-0000aa", created="2026-11-27T10:00:00Z")
    # every stage's numbers, so the record stays consistent whichever stage its top-level scores are
    stages = [(rec["metrics"], rec["per_query"])]
    by_stage = rec.get("per_query_by_stage") or {}
    stages += [(m, by_stage.get(s, {})) for s, m in (rec.get("metrics_by_stage") or {}).items()]
    for metrics, per_query in stages:
        for dataset, values in metrics.items():
            for measure, value in values.items():
                far = 1.0 if value < 0.5 else 0.0
                values[measure] = far
                if measure in per_query.get(dataset, {}):
                    per_query[dataset][measure] = {q: far for q in per_query[dataset][measure]}
    (records / f"{rec['run_id']}.json").write_text(json.dumps(seal({"schema_version": 1, **rec})))
    folder, checked = _site(out, records)
    assert not checked["passed"], "the fixture meant to fail the gate passed it"
    return folder, checked


def _arranged(rows: list[dict]) -> list[tuple[str, ...]]:
    """check's rows in the order the report shows them: failing first, then the others in check's
    order, then the folded SUPERSEDED / REFERENCE rows."""

    def group(r: dict) -> int:
        return 0 if r["status"] in FAILING else 2 if r["status"] in ("SUPERSEDED", "REFERENCE") else 1

    def what(r: dict) -> str:
        named = " ".join(x for x in (r["benchmark"], r["measure"]) if x)
        return named + (f" ({r['stage']})" if r["stage"] else "")

    return [(r["status"], r["run_id"], what(r)) for r in sorted(rows, key=group)]


def _shown(html: str) -> list[tuple[str, ...]]:
    """A gate table's status, run, and benchmark and measure (the five numbers sit between them)."""
    return [(r[0], r[6], r[7]) for t in _parsed(html).tables for r in t if r]


def test_the_report_holds_checks_rows_and_nothing_from_outside(site) -> None:
    folder, checked = site
    names = sorted(p.name for p in folder.iterdir())
    assert {"index.html", "gate.html", "learned.html", "records.html", "style.css"} <= set(names)
    assert all(n == "style.css" or n.endswith(".html") for n in names), names
    for name in (n for n in names if n.endswith(".html")):
        page = _page(folder, name)
        parsed = _parsed(page)
        # links only to the folder's own files: its pages and its style sheet
        assert set(parsed.links) <= set(names) and "style.css" in parsed.links, (name, parsed.links)
        assert "script" not in parsed.tags and "@import" not in page and not EMOJI.findall(page), name
    assert "url(" not in (folder / "style.css").read_text()
    assert _shown(_gate(folder)) == _arranged(checked["rows"])
    learned = _page(folder, "learned.html")
    assert "<svg" in learned and "<circle" in learned  # the mini runs' plot, inline
    # each record's seal and hardware
    for path in sorted(RECORDS.glob("*__mini__*.json"))[:3]:
        sealed = json.loads(path.read_text())["integrity"]["sha256"]
        assert sealed in _page(folder, "records.html")


def test_the_summary_links_every_page_and_every_cell_is_on_its_papers_page(site) -> None:
    """Issue 63, item 4: a summary and a page per paper; every page reachable from the summary, each
    linking back; every headline cell and printed effect on exactly one paper page, state first."""
    from harness.present.overview import from_folder

    folder, _ = site
    files = sorted(p.name for p in folder.glob("*.html"))
    summary = _page(folder)
    assert set(files) - {"index.html"} <= set(_parsed(summary).links), files
    assert "listed below" not in summary  # the matrix's cells are on the papers' pages now
    assert 'id="tables"' in summary and 'id="gate"' not in summary  # the counts here, the gate's rows on its page
    cells = effects = 0
    for name in (f for f in files if f != "index.html"):
        parsed = _parsed(_page(folder, name))
        assert "index.html" in parsed.links, name
        for headers, rows in zip(parsed.headers, parsed.tables):
            n = len([r for r in rows if r])
            if headers[:4] == ["state", "printed", "reproduced", "delta"]:
                cells += n
            elif headers[:3] == ["state", "printed", "reproduced"]:
                effects += n
    glance = from_folder(RECORDS)
    assert (cells, effects) == (len(glance.headline), len(glance.claims))
    assert len([f for f in files if f.startswith("paper-")]) == len({r.paper for r in glance.headline})


def test_a_passed_gate_opens_the_page_and_folds_what_grades_nothing(site) -> None:
    folder, checked = site
    page = _page(folder)
    assert checked["passed"]
    first = _after_answer(page)
    assert first.startswith('<p id="verdict"')
    assert re.match(rf'<p id="verdict"[^>]*>Gate PASSED: 0 failing row\(s\) of {len(checked["rows"])}\b', first)
    folded = [r for r in checked["rows"] if r["status"] in ("SUPERSEDED", "REFERENCE")]
    assert folded, "the committed records have no SUPERSEDED or REFERENCE row to fold"
    gate = _gate(folder)
    details = re.findall(r"<details( open)?[^>]*><summary>(\d+) row\(s\) folded", gate)
    assert details == [("", str(len(folded)))]  # one element, collapsed, that says how many it holds
    inside = gate.split("<details", 1)[1].split("</details>", 1)[0]
    assert sorted(_shown(inside)) == sorted(_arranged(folded))
    assert not {r[0] for r in _shown(gate.split("<details", 1)[0])} & {"SUPERSEDED", "REFERENCE"}


def test_a_failed_gate_says_so_first_and_lists_its_failing_rows_first(failed_site) -> None:
    folder, checked = failed_site
    page = (folder / "index.html").read_text(encoding="utf-8")
    failing = [r for r in checked["rows"] if r["status"] in FAILING]
    first = _after_answer(page)
    assert re.match(
        rf'<p id="verdict"[^>]*>Gate FAILED: {len(failing)} failing row\(s\) of '
        rf"{len(checked['rows'])} \(FAIL \d+",
        first,
    ), first[:300]
    # the failing rows right under the verdict, before anything else of the page
    top = first.split("</p>", 1)[1].split("<h1>", 1)[0]
    assert _shown(top) == _arranged(failing)
    # and first in the gate table, before every passing row
    shown = _shown(_gate(folder))
    assert shown == _arranged(checked["rows"])
    statuses = [r[0] for r in shown]
    assert set(statuses[: len(failing)]) <= set(FAILING) and PASS in statuses[len(failing) :]
    assert not set(statuses[len(failing) :]) & set(FAILING)


def test_every_gate_table_ends_with_the_command_that_reproduces_its_rows(failed_site) -> None:
    folder, checked = failed_site
    page = (folder / "index.html").read_text(encoding="utf-8")
    parsed = _parsed(_section(page, "verdict", "pages") + _gate(folder))
    gate_tables = [(h, t) for h, t in zip(parsed.headers, parsed.tables) if h[:2] == ["status", "expected"]]
    assert len(gate_tables) == 3  # the failing rows, the gate, the folded rows
    for headers, rows in gate_tables:
        assert headers[-1] == "reproduce with"
        assert all(r[-1].startswith("python -m harness ") for r in rows if r), [r for r in rows if r and not r[-1]]
    css = (folder / "style.css").read_text()
    assert "sticky" not in css  # a pinned column covered the delta and CI columns of a wide table (issue 53)


def test_every_text_is_escaped_and_commands_name_the_run() -> None:
    row = GateRow(PASS, "x__tiny__1", "cotmae", "tiny", "scifact", "nDCG@10", note="<script>alert(1)</script>")
    shown = gate_html(GateResult(Path("records"), [row], []))
    assert "<script>" not in shown and "&lt;script&gt;" in shown
    assert gate_command(row) == "python -m harness run --method cotmae --profile tiny"
    effect = GateRow(PASS, "cotmae - nopretrain [mini]", "cotmae", "mini")
    assert gate_command(effect) == (
        "python -m harness run --method cotmae --profile mini && "
        "python -m harness run --method nopretrain --profile mini"
    )


def test_a_folder_that_is_not_a_report_is_refused(tmp_path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(HarnessError, match="not an earlier report"):
        write_report(tmp_path, RECORDS)
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_an_earlier_report_is_replaced_but_a_page_of_ones_own_in_it_is_kept(site) -> None:
    folder, _ = site
    earlier = folder.parent / "again"
    shutil.copytree(folder, earlier)
    write_report(earlier, RECORDS)  # every page of an earlier report is ours: replaced
    (earlier / "mine.html").write_text("<p>my notes</p>")
    with pytest.raises(HarnessError, match="not an earlier report"):
        write_report(earlier, RECORDS)
    assert (earlier / "mine.html").read_text() == "<p>my notes</p>"


# In the browser, on the summary: its first element (the answer) and the gate's verdict below it.
_FIRST = """(() => {
  if (document.readyState != 'complete') return null;
  const first = document.body.firstElementChild;  // the answer, then the gate's verdict
  const verdict = document.getElementById('verdict');
  return {first: first.id, answer: first.innerText, verdict: verdict.innerText,
          top: verdict.getBoundingClientRect().top, height: window.innerHeight};
})()"""


def _open(tools, page: Path, expression: str, deadline: float, ready=lambda v: v) -> dict | None:
    """Navigate to a page of the report and evaluate ``expression`` until ``ready`` holds of its value."""
    tools.call("Page.navigate", url=page.resolve().as_uri())
    value = None
    while time.monotonic() < deadline and not (value and ready(value)):
        time.sleep(0.3)
        value = tools.call("Runtime.evaluate", returnByValue=True, expression=expression)["result"].get("value")
    return value


# On the gate's page (gate.html): the gate table's rows (the folded ones apart), whether the folded
# element is open, and where the gate table's command column sits against its scroll box and the window.
_LAYOUT = """(() => {
  if (document.readyState != 'complete') return null;
  const box = document.querySelector('#gate + p + div');
  const rows = Array.from(box.querySelectorAll('tbody tr'))
    .map(r => Array.from(r.querySelectorAll('td')).map(c => c.innerText.trim()))
    .map(c => [c[0], c[6], c[7]]);  // status, run, benchmark and measure (as _shown)
  const folded = document.querySelector('#gate ~ details.folded');
  const command = box.querySelector('thead th:last-child');
  const at = command.getBoundingClientRect();  // the box as it opens: scrolled fully left
  return {rows: rows,
          folded_open: folded ? folded.open : null, command: command.innerText, at: {left: at.left, right: at.right},
          box: {left: box.getBoundingClientRect().left, right: box.getBoundingClientRect().right,
                overflows: box.scrollWidth > box.clientWidth},
          // every cell of every table whose text runs past its cell ("+0." of a cut delta), and every cell
          // another one lies over (the point at its centre belongs to another cell)
          clipped: Array.from(document.querySelectorAll('.glance-table td')).filter(c => c.offsetParent !== null
            && c.scrollWidth > c.clientWidth + 1).map(c => c.innerText).slice(0, 5),
          covered: Array.from(document.querySelectorAll('.glance-table td')).filter(c => {
            const r = c.getBoundingClientRect();
            if (c.offsetParent === null || r.width == 0 || r.bottom < 0 || r.top > window.innerHeight) return false;
            const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
            return hit && !c.contains(hit) && hit.closest('td') !== null;
          }).map(c => c.innerText).slice(0, 5),
          width: window.innerWidth};
})()"""


@pytest.mark.slow
def test_the_report_renders_from_a_file_url_with_checks_verdicts(site, failed_site, tmp_path) -> None:
    folder, checked = site
    deadline = time.monotonic() + 60
    # no network at all: every host name fails to resolve, so a reference outside the folder would show;
    # a window as wide as the page (1400 px): the gate table must fit it, its long texts wrapped
    with chromium(tmp_path, deadline, window="1440,1400", flags=["--host-resolver-rules=MAP * ~NOTFOUND"]) as tools:
        first = _open(tools, folder / "index.html", _FIRST, deadline)
        screenshot(tools, "report.png", full_page=False)  # the summary as it opens: the answer, the verdict
        summary = tools.call("Runtime.evaluate", returnByValue=True, expression="document.body.innerText")["result"]
        layout = _open(tools, folder / "gate.html", _LAYOUT, deadline, lambda v: v["rows"])
        styled = tools.call(
            "Runtime.evaluate",
            returnByValue=True,
            expression=("getComputedStyle(document.querySelector('.badge')).borderRadius"),
        )["result"]["value"]
        text = tools.text()
        shown = tools.call("Runtime.evaluate", returnByValue=True, expression="document.body.innerText")["result"]
        failed_first = _open(tools, failed_site[0] / "index.html", _FIRST, deadline)
        screenshot(tools, "report-failed.png", full_page=False)  # the verdict, then the failing rows
        shown_failed = tools.call("Runtime.evaluate", returnByValue=True, expression="document.body.innerText")
        failed = _open(tools, failed_site[0] / "gate.html", _LAYOUT, deadline, lambda v: v["rows"])
    # issue 53, item 8 (tests/browser.py's rules): no None, raw dict, unrounded number, foreign path, cut label
    # (the failed site's records are a copy in a tmp folder: the page names that folder, as it names yours)
    where = failed_site[1]["records_dir"]
    for page in (summary["value"], shown["value"], shown_failed["result"]["value"].replace(where, "records")):
        assert unreadable(page) == [], unreadable(page)[:5]
    assert layout and layout["rows"], "the gate table did not render"
    assert first and first["first"] == "answer" and first["answer"].startswith("Answer: ")
    assert first["verdict"].startswith("Gate PASSED: 0 failing row(s)")
    assert 0 <= first["top"] < first["height"]  # the verdict below the answer, on the first screen
    unfolded = [r for r in checked["rows"] if r["status"] not in ("SUPERSEDED", "REFERENCE")]
    assert [tuple(r) for r in layout["rows"]] == _arranged(unfolded)
    assert layout["folded_open"] is False
    # the gate table fits its box (its texts wrap), its command column inside the box
    # and the window, and no cell is cut or lies under another (issue 53)
    assert not layout["box"]["overflows"], layout
    assert layout["clipped"] == [] and layout["covered"] == [], layout
    assert layout["command"] == "reproduce with"
    assert layout["box"]["left"] <= layout["at"]["left"] < layout["at"]["right"] <= layout["box"]["right"] + 1
    assert layout["box"]["right"] <= layout["width"]
    assert failed_first and failed_first["first"] == "answer" and failed_first["verdict"].startswith("Gate FAILED: ")
    assert failed and failed["rows"]
    assert failed["clipped"] == [] and failed["covered"] == [], failed
    assert styled == "4px"  # style.css loaded from the folder
    assert "CI gate" in text and re.search(r"NOT-YET-RUN|REPRODUCED", text)
    assert "The pages of this report" in summary["value"]
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
