"""End to end: `python -m harness leaderboard` serves the app on localhost and headless Chromium
renders it as a person's browser would (Streamlit delivers the page over a websocket, so the
browser is driven through the Chrome DevTools Protocol and waits for the content to appear).
A screenshot is kept under test-artifacts/ (git-ignored). The glance tab over the committed records is
checked in test_leaderboard_browser.py, by the server that opens every tab.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from browser import CHROMIUM, EMOJI, chromium, free_port
from browser import screenshot as take_screenshot
from browser import stop as _stop

from harness.core.paths import PROJECT_ROOT

pytestmark = pytest.mark.slow

FIXTURES = Path(__file__).parent / "fixtures" / "records"


def _leaderboard_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "harness", "leaderboard", *args]


def _wait_http(url: str, deadline: float, proc: subprocess.Popen, log: Path) -> None:
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"server exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.3)
    pytest.fail(f"{url} did not answer in time:\n{log.read_text()[-3000:]}")


def render_leaderboard(
    tmp_path: Path,
    records: Path,
    reported: Path | None,
    wanted: list[str],
    *,
    env: dict[str, str] | None = None,
    screenshot: str | None = None,
    evaluate: str | None = None,
    results: dict | None = None,
    seconds: float = 90,
    tab: str | None = None,
) -> str:
    """Serve the leaderboard over ``records`` (and ``reported``, a snapshot; None: the registry),
    render it in headless Chromium until every ``wanted`` text is on the page (fails naming the
    missing ones), and return the page text. ``tab``: the label of a tab to open first (a data
    grid puts its cells in the page only while its tab is shown). ``evaluate``: a JavaScript expression run on the
    rendered page, its JSON value stored as ``results["evaluate"]``."""
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (apt-get install chromium chromium-driver)")
    started = time.monotonic()
    deadline = started + seconds
    port = free_port()
    log = tmp_path / "server.log"
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true", **(env or {})}
    inputs = ["--records", str(records), *(["--reported", str(reported)] if reported is not None else [])]
    with log.open("w") as out:
        server = subprocess.Popen(
            _leaderboard_command("--port", str(port), *inputs),
            cwd=PROJECT_ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        _wait_http(f"http://127.0.0.1:{port}/_stcore/health", deadline, server, log)
        # Wide enough for Table 1's columns at the widths their texts need (leaderboard_app/display.py
        # column_widths): a data grid puts only the cells in view into the page.
        with chromium(tmp_path, deadline, window="2400,1800") as tools:
            tools.call("Page.navigate", url=f"http://127.0.0.1:{port}/")
            text = ""
            while time.monotonic() < deadline:
                if tab is not None:  # clicked until it is selected: the tabs appear with the page
                    tools.call(
                        "Runtime.evaluate",
                        expression=(
                            "Array.from(document.querySelectorAll('[role=tab]')).filter(b => b.innerText.trim() == "
                            f"{json.dumps(tab)} && b.getAttribute('aria-selected') != 'true').forEach(b => b.click())"
                        ),
                    )
                text = tools.text()
                if all(w in text for w in wanted) and "Every comparison" in text:
                    break
                time.sleep(0.5)
            missing = [w for w in wanted if w not in text]
            assert not missing, f"not rendered: {missing}\n--- page text ---\n{text[:3000]}"
            assert "Traceback" not in text and "Error" not in text.split("Skipped records")[0]
            if evaluate is not None and results is not None:
                value = tools.call("Runtime.evaluate", expression=evaluate, returnByValue=True)
                results["evaluate"] = value["result"].get("value")
            if screenshot:
                time.sleep(1.0)  # let the grids and charts paint before the screenshot
                take_screenshot(tools, screenshot)
    finally:
        _stop(server)
    assert server.poll() is not None
    assert time.monotonic() - started < seconds
    return text


def test_leaderboard_renders_in_headless_chromium(tmp_path):
    text = render_leaderboard(
        tmp_path,
        FIXTURES / "runs",
        FIXTURES / "reported_cells.json",
        [
            "Retrieval pre-training leaderboard",
            "Table 1: MS MARCO dev and TREC DL",
            "3 run record(s) skipped",
            "Skipped records",
            "BEIR zero-shot: nDCG@10 (points)",
            "18.4 (-0.3 REPRODUCED)",
            "coCondenser (120K) - retriever 2 †",
            "Effectiveness vs efficiency",
            "Retriever 1 vs retriever 2",
        ],
        screenshot="leaderboard.png",
        tab="MS MARCO & TREC DL",
    )
    # verdicts are text badges: no glyph the page's fonts may lack
    assert not EMOJI.findall(text), sorted(set(EMOJI.findall(text)))
