"""Issue 63, done-when 1 (the report's part): the answer line read in Chromium from the report's first
screen at a 1440 x 900 viewport, above the fold, and compared word for word with `check`'s first line
after the gate verdict and the README's generated block. Screenshot: test-artifacts/report-answer-1440x900.png."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from browser import chromium, free_port, screenshot, stop
from test_answer_line import README, RECORDS, ROOT

from harness.gate.answer import committed_answer
from harness.present.report_html import write_report

pytestmark = pytest.mark.slow

# The answer box's text and bounding box, as the browser lays it out.
_ANSWER = """(() => {
  const box = document.getElementById('answer');
  if (!box) return null;
  const r = box.getBoundingClientRect();
  const gate = document.getElementById('verdict');
  const g = gate ? gate.getBoundingClientRect() : null;
  return {text: box.innerText, top: r.top, bottom: r.bottom, width: r.width,
          gate: gate ? gate.innerText : null, gate_top: g ? g.top : null, gate_bottom: g ? g.bottom : null};
})()"""


def _words(text: str) -> str:
    return " ".join(text.replace("**", "").split())


def _check_answer_line() -> str:
    done = subprocess.run(
        [sys.executable, "-m", "harness", "check", "--records", str(RECORDS)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = done.stdout.splitlines()
    after = next(i for i, line in enumerate(lines[1:], 1) if not line.startswith("  "))  # the verdict wraps
    return lines[after]


def test_the_reports_first_screen_shows_the_answer_check_and_the_readme_give(tmp_path) -> None:
    committed = committed_answer(RECORDS)
    index, _ = write_report(tmp_path / "report", RECORDS)
    deadline = time.monotonic() + 60
    with chromium(tmp_path, deadline, window="1440,900", flags=["--host-resolver-rules=MAP * ~NOTFOUND"]) as tools:
        tools.call("Emulation.setDeviceMetricsOverride", width=1440, height=900, deviceScaleFactor=1, mobile=False)
        tools.call("Page.navigate", url=index.resolve().as_uri())
        shown = None
        while time.monotonic() < deadline and not shown:
            shown = tools.call("Runtime.evaluate", returnByValue=True, expression=_ANSWER)["result"].get("value")
            time.sleep(0.3)
        screenshot(tools, "report-answer-1440x900.png", full_page=False)
    assert shown is not None, "the report has no #answer box"
    assert 0 <= shown["top"] and shown["bottom"] <= 900, f"the answer is not above the fold: {shown}"
    # the gate's verdict follows the answer, on the same screen, and says it is about the records' integrity
    assert shown["gate"] is not None and shown["gate_top"] >= shown["bottom"] and shown["gate_bottom"] <= 900, shown
    assert "integrity" in shown["gate"] and "not the answer" in shown["gate"], shown["gate"]
    first = shown["text"].splitlines()[0]
    assert _words(first) == _words(committed.line()), first
    assert _words(first) == _words(_check_answer_line())
    readme = README.read_text(encoding="utf-8")
    assert _words(committed.line()) in _words(readme), "the README's answer block differs"
    for item in committed.items():
        assert _words(item) in _words(shown["text"]), item


# The leaderboard's answer box: the first element whose text opens with the answer (Streamlit may rename ids).
_BOARD_ANSWER = """(() => {
  const box = document.getElementById('answer') || Array.from(document.querySelectorAll('div'))
    .filter(d => d.innerText && d.innerText.startsWith('Answer:')).pop();
  if (!box) return null;
  const r = box.getBoundingClientRect();
  return {text: box.innerText, top: r.top, bottom: r.bottom};
})()"""


def test_the_leaderboards_first_screen_shows_the_same_answer(tmp_path) -> None:
    committed = committed_answer(RECORDS)
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "harness", "leaderboard", "--port", str(port), "--records", str(RECORDS)],
        cwd=ROOT,
        env={**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 180
    shown = None
    try:
        with chromium(tmp_path, deadline, window="1440,900") as tools:
            tools.call("Emulation.setDeviceMetricsOverride", width=1440, height=900, deviceScaleFactor=1, mobile=False)
            while time.monotonic() < deadline and not shown:
                assert server.poll() is None, "the leaderboard exited"
                try:
                    tools.call("Page.navigate", url=f"http://127.0.0.1:{port}/")
                except RuntimeError:  # not listening yet
                    time.sleep(1)
                    continue
                for _ in range(40):
                    shown = tools.call("Runtime.evaluate", returnByValue=True, expression=_BOARD_ANSWER)["result"]
                    shown = shown.get("value")
                    if shown:
                        break
                    time.sleep(0.5)
            time.sleep(1)  # the page settles (its sidebar and tabs draw after the answer)
            shown = tools.call("Runtime.evaluate", returnByValue=True, expression=_BOARD_ANSWER)["result"]["value"]
            screenshot(tools, "leaderboard-answer-1440x900.png", full_page=False)
    finally:
        stop(server)
    assert shown is not None, "the leaderboard shows no answer"
    assert 0 <= shown["top"] and shown["bottom"] <= 900, f"the answer is not above the fold: {shown}"
    assert _words(shown["text"].splitlines()[0]) == _words(committed.line()) == _words(_check_answer_line())
    for item in committed.items():
        assert _words(item) in _words(shown["text"]), item
