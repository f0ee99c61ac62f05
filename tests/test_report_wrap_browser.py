"""Issue 63, item 4 (the report's part): in Chromium at 1440 x 900, no word of a report table's cell is
cut over two lines (the matrix's command column broke "scifact" into "sci fact" and "--dataset" into
"--data set"; ids wrapped as "coc ond ens er_ qc"), and the gate tables open with the status and the
expected, reproduced and delta numbers, within the screen's width. Screenshot: test-artifacts/report-wrap-1440x900.png."""

from __future__ import annotations

import time

import pytest
from browser import chromium, screenshot
from test_answer_line import RECORDS

from harness.present.report_html import write_report

pytestmark = pytest.mark.slow

# Every word (a run of letters and digits) of a table cell that the browser lays out over two lines: a
# break after a comma, hyphen or underscore of a long id or list is a word boundary, one inside "scifact" is not.
_CUT_WORDS = """(() => {
  const cut = [];
  for (const cell of document.querySelectorAll('table td')) {
    const walk = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let node = walk.nextNode(); node; node = walk.nextNode()) {
      for (const m of node.data.matchAll(/[A-Za-z0-9]+/g)) {
        const range = document.createRange();
        range.setStart(node, m.index);
        range.setEnd(node, m.index + m[0].length);
        const tops = new Set(Array.from(range.getClientRects()).map(r => Math.round(r.top)));
        if (tops.size > 1) cut.push(m[0]);
      }
    }
  }
  // the gate tables' state and numbers: their header cells end inside the 1440 px screen, unscrolled
  const shown = [];
  for (const t of document.querySelectorAll('table')) {
    const heads = Array.from(t.querySelectorAll('th')).slice(0, 4);
    if (!heads.length || heads[0].innerText.trim() !== 'status') continue;
    shown.push(heads.map(h => [h.innerText.trim(), Math.round(h.getBoundingClientRect().right)]));
  }
  return {cut: cut, cells: document.querySelectorAll('table td').length, gate: shown, width: window.innerWidth};
})()"""


def test_no_word_of_a_report_table_wraps_inside_itself(tmp_path) -> None:
    index, _ = write_report(tmp_path / "report", RECORDS)
    deadline = time.monotonic() + 60
    with chromium(tmp_path, deadline, window="1440,900", flags=["--host-resolver-rules=MAP * ~NOTFOUND"]) as tools:
        tools.call("Emulation.setDeviceMetricsOverride", width=1440, height=900, deviceScaleFactor=1, mobile=False)
        tools.call("Page.navigate", url=index.resolve().as_uri())
        shown = None
        while time.monotonic() < deadline and not (shown and shown["cells"]):
            shown = tools.call("Runtime.evaluate", returnByValue=True, expression=_CUT_WORDS)["result"].get("value")
            time.sleep(0.3)
        screenshot(tools, "report-wrap-1440x900.png", full_page=True)
    assert shown and shown["cells"], "the report laid out no table cell"
    assert shown["gate"], "the report has no gate table"
    for heads in shown["gate"]:  # status, expected, reproduced, delta: on the first screen's width
        assert [h for h, _ in heads] == ["status", "expected", "reproduced", "delta"], heads
        assert all(right <= shown["width"] for _, right in heads), heads
    assert not shown["cut"], f"words cut over two lines: {sorted(set(shown['cut']))[:20]}"
