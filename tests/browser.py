"""Shared by the browser tests: headless Chromium driven through the Chrome DevTools Protocol
(test_ui_browser.py serves it the leaderboard, test_ui_mlflow.py MLflow's compare view, and
test_report.py opens the static report from a file:// URL)."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from harness.core.paths import PROJECT_ROOT

# Screenshots: $HARNESS_SCREENSHOTS (a CI job's artifact folder) or test-artifacts/ (git-ignored).
ARTIFACTS = Path(os.environ.get("HARNESS_SCREENSHOTS") or PROJECT_ROOT / "test-artifacts")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# Pictographs that Debian's Chromium has no font for: they render as empty boxes (issue 28).
EMOJI = re.compile("[\u2600-\u27bf\U0001f000-\U0001faff\ufe0f]")

# What a person must never read on a page (issue 53, item 8), checked by :func:`unreadable` on every
# page the browser tests open (the leaderboard's tabs, the report, MLflow's views).
MISSING_WORDS = re.compile(r"\b(None|nan|NaN)\b")
RAW_DICT = re.compile(r"""[{\[]\s*['"][^'"\n]{1,60}['"]\s*:|\{\}|\bdict\(""")
ABSOLUTE_PATH = re.compile(r"""(?:^|[\s(=`'"])(/(?:[\w.+-]+/)+[\w.+-]*)""")
# A label or cell the page cut: a line (a cell's or a label's text as rendered) ending in an ellipsis.
CUT_LABEL = re.compile(r"\S(?:\u2026|\.\.\.)[ \t]*$", re.MULTILINE)
# The most decimals a number of each kind is shown with: points as the papers print them ("66.47");
# otherwise a paper's printed fraction ("0.340") or a p-value ("0.004"). A raw float has ~15.
MOST_DECIMALS = {"points": 2, "any": 3}


def over_decimals(text: str, kind: str = "any") -> list[str]:
    """The numbers in ``text`` shown with more decimals than a number of ``kind`` allows."""
    most = MOST_DECIMALS[kind]
    return re.findall(rf"(?<![\w.])\d+\.\d{{{most + 1},}}(?![\w.])", text)


# The page's text without its charts' (SVG: MLflow's Plotly axes print ticks their own way, "66.47000").
BESIDE_CHARTS = """(() => {
  const charts = Array.from(document.querySelectorAll('svg'));
  const shown = charts.map(c => c.style.display);
  charts.forEach(c => c.style.display = 'none');
  const text = document.body.innerText;
  charts.forEach((c, i) => c.style.display = shown[i]);
  return text;
})()"""


def outside_checkout(text: str) -> list[str]:
    """Absolute paths in ``text`` that do not lie in this checkout (another machine's, a tmp folder's)."""
    return [p for p in ABSOLUTE_PATH.findall(text) if not (p + "/").startswith(str(PROJECT_ROOT) + "/")]


def unreadable(text: str, kind: str = "any") -> list[str]:
    """What in a page's (or a cell's) ``text`` a person should not read: "None"/"nan" for a missing
    value, raw dict / JSON text, a number with more decimals than ``kind`` allows, a path outside the
    checkout, a label cut with an ellipsis. Each problem with the text around it; empty when readable."""

    def around(m: re.Match) -> str:
        return text[max(0, m.start() - 80) : m.end() + 40].replace("\n", " | ")

    found = [f"missing value {around(m)!r}" for m in MISSING_WORDS.finditer(text)]
    found += [f"raw dict {around(m)!r}" for m in RAW_DICT.finditer(text)]
    found += [f"cut label {around(m)!r}" for m in CUT_LABEL.finditer(text)]
    found += [f"{n} has more than {MOST_DECIMALS[kind]} decimals" for n in over_decimals(text, kind)]
    found += [f"path outside the checkout {p!r}" for p in outside_checkout(text)]
    return found


def free_port() -> int:
    """A port nothing listens on now (the OS picks it), for a test's server."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop(proc: subprocess.Popen, timeout: float = 15) -> None:
    """Stop a process started in its own session, and its children; never leave it running."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=timeout)


class DevTools:
    """Minimal Chrome DevTools Protocol client over one page target."""

    def __init__(self, user_data: Path, deadline: float):
        from websockets.sync.client import connect

        port_file = user_data / "DevToolsActivePort"
        while not (port_file.exists() and port_file.read_text().strip()):  # written in two steps
            if time.monotonic() > deadline:
                pytest.fail("chromium did not open its DevTools port")
            time.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10))
        page = next(t for t in targets if t["type"] == "page")
        self.ws = connect(page["webSocketDebuggerUrl"], max_size=None, open_timeout=10)
        self.next_id = 0
        self.events: list[dict] = []  # what arrived while waiting for answers (e.g. Network.* once enabled)

    def call(self, method: str, timeout: float = 30, **params):
        """Send one command and wait up to ``timeout`` seconds between messages for its answer."""
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:  # keep events aside until our answer arrives
            msg = json.loads(self.ws.recv(timeout=timeout))
            if "method" in msg and "id" not in msg:
                self.events.append(msg)
            if msg.get("id") == self.next_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg["result"]

    def text(self) -> str:
        """All text of the page, including the cells of Streamlit's data grids."""
        res = self.call(
            "Runtime.evaluate",
            expression="document.body ? document.body.innerText + '\\n' + document.body.textContent : ''",
            returnByValue=True,
        )
        return res["result"].get("value", "")

    def close(self) -> None:
        self.ws.close()


@contextlib.contextmanager
def chromium(
    tmp_path: Path, deadline: float, *, window: str = "1400,1800", flags: Sequence[str] = ()
) -> Iterator[DevTools]:
    """Headless Chromium on a new, empty profile, its page driven through :class:`DevTools`; always
    stopped, with its children, however the test ends."""
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (apt-get install chromium chromium-driver)")
    user_data = Path(tempfile.mkdtemp(dir=tmp_path, prefix="chromium-"))
    browser = subprocess.Popen(
        [
            CHROMIUM,
            *CHROMIUM_FLAGS,
            *flags,
            f"--user-data-dir={user_data}",
            "--remote-debugging-port=0",
            f"--window-size={window}",
            "about:blank",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        tools = DevTools(user_data, deadline)
        try:
            tools.call("Page.enable")
            yield tools
        finally:
            tools.close()
    finally:
        stop(browser)
    assert browser.poll() is not None


def screenshot(tools: DevTools, name: str, *, full_page: bool = True) -> Path:
    """The page as a PNG under :data:`ARTIFACTS`, checked to be a real picture."""
    shot = tools.call("Page.captureScreenshot", format="png", captureBeyondViewport=full_page)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    png = ARTIFACTS / name
    png.write_bytes(base64.b64decode(shot["data"]))
    assert png.stat().st_size > 10_000 and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    return png
