"""Issue 63, item 4 (the report's part), in Chromium at 1440 x 900, on every page of the report, each
reached by following links from the summary (index.html):

* every page of the folder is reachable from the summary, and every page but the summary links back to it;
* no word of a table's cell is cut over two lines (the matrix's command column broke "scifact" into
  "sci fact" and "--dataset" into "--data set"; ids wrapped as "coc ond ens er_ qc"), nor a command's
  option at its hyphens ("--" then "checkpoint");
* every table opens with its state and numbers (status / state, expected / printed, reproduced, delta)
  inside the screen's width, and no table is wider than its box or the screen (the gate table was);
* column names are words, never a field's name (ci_low, p_equivalent, seeds_needed);
* nothing unreadable (tests/browser.py's rules).

Screenshots: test-artifacts/report-<page>-1440x900.png (the first screen of each page) and
test-artifacts/report-wrap-1440x900.png (the whole summary)."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from browser import chromium, screenshot, unreadable
from test_answer_line import RECORDS

from harness.present.report_html import write_report

pytestmark = pytest.mark.slow

# Every word (a run of letters and digits) of a table cell that the browser lays out over two lines: a
# break after a comma, hyphen or underscore of a long id or list is a word boundary, one inside "scifact" is not.
_LAID_OUT = r"""(() => {
  if (document.readyState != 'complete') return null;
  const cut = [];
  for (const cell of document.querySelectorAll('table td')) {
    if (cell.offsetParent === null) continue;  // a folded table is not laid out
    const walk = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let node = walk.nextNode(); node; node = walk.nextNode()) {
      // a word, or a command's option with its dashes ("--checkpoint": "--" alone on a line is cut)
      for (const m of node.data.matchAll(/(?<!\S)--?[A-Za-z][A-Za-z0-9-]*|[A-Za-z0-9]+/g)) {
        const range = document.createRange();
        range.setStart(node, m.index);
        range.setEnd(node, m.index + m[0].length);
        const tops = new Set(Array.from(range.getClientRects()).map(r => Math.round(r.top)));
        if (tops.size > 1) cut.push(m[0]);
      }
    }
  }
  const tables = [];
  for (const t of document.querySelectorAll('table')) {
    if (t.offsetParent === null) continue;
    const box = t.parentElement;
    const heads = Array.from(t.querySelectorAll('thead th'));
    tables.push({heads: heads.map(h => [h.innerText.trim(), Math.round(h.getBoundingClientRect().right)]),
                 right: Math.round(t.getBoundingClientRect().right),
                 overflows: box.scrollWidth > box.clientWidth + 1});
  }
  return {cut: cut, tables: tables, width: window.innerWidth, text: document.body.innerText,
          links: Array.from(document.querySelectorAll('a[href]')).map(a => a.getAttribute('href')),
          back: !!document.getElementById('back')};
})()"""

# The state and the numbers every table with a state opens with (the gate's, a paper's cells, its effects).
STATE_FIRST = (
    ["status", "expected", "reproduced", "delta"],
    ["state", "printed", "reproduced", "delta"],
    ["state", "printed", "reproduced", "90% CI (seeds)"],
)
FIELD_NAME = re.compile(r"^[a-z0-9]+(?:_[a-z0-9]+)+$")  # ci_low, p_equivalent, seeds_needed


def _crawl(tools, folder: Path, deadline: float) -> dict[str, dict]:
    """Every page reached from index.html by its links, laid out at 1440 x 900, by file name."""
    seen: dict[str, dict] = {}
    todo = ["index.html"]
    while todo:
        name = todo.pop(0)
        if name in seen:
            continue
        tools.call("Page.navigate", url=(folder / name).resolve().as_uri())
        shown = None
        while time.monotonic() < deadline and not shown:
            shown = tools.call("Runtime.evaluate", returnByValue=True, expression=_LAID_OUT)["result"].get("value")
            time.sleep(0.2)
        assert shown, f"{name} did not load"
        seen[name] = shown
        screenshot(tools, f"report-{name.removesuffix('.html')}-1440x900.png", full_page=False)
        if name == "index.html":
            screenshot(tools, "report-wrap-1440x900.png", full_page=True)
        todo += [link for link in shown["links"] if "/" not in link and link.endswith(".html")]
    return seen


def test_every_page_is_reached_from_the_summary_and_fits_1440_px(tmp_path) -> None:
    index, _ = write_report(tmp_path / "report", RECORDS)
    folder = index.parent
    deadline = time.monotonic() + 120
    with chromium(tmp_path, deadline, window="1440,900", flags=["--host-resolver-rules=MAP * ~NOTFOUND"]) as tools:
        tools.call("Emulation.setDeviceMetricsOverride", width=1440, height=900, deviceScaleFactor=1, mobile=False)
        pages = _crawl(tools, folder, deadline)
    files = sorted(p.name for p in folder.glob("*.html"))
    assert sorted(pages) == files, f"pages not reachable from the summary: {sorted(set(files) - set(pages))}"
    assert len(files) >= 5 and any(f.startswith("paper-") for f in files) and "gate.html" in files, files
    for name, shown in pages.items():
        assert shown["back"] == (name != "index.html"), f"{name}: a link back to the summary"
        assert not shown["cut"], f"{name}: words cut over two lines: {sorted(set(shown['cut']))[:20]}"
        assert unreadable(shown["text"]) == [], (name, unreadable(shown["text"])[:5])
        for table in shown["tables"]:
            heads = [h for h, _ in table["heads"]]
            assert not [h for h in heads if FIELD_NAME.match(h)], (name, heads)
            assert not table["overflows"] and table["right"] <= shown["width"], (name, heads, table)
            if heads and heads[0] in ("status", "state"):
                assert heads[:4] in STATE_FIRST, (name, heads)
                assert all(right <= shown["width"] for _, right in table["heads"][:4]), (name, table["heads"])
        if name == "gate.html" or name.startswith("paper-"):  # their tables grade: each has a state
            assert any(t["heads"] and t["heads"][0][0] in ("status", "state") for t in shown["tables"]), name
