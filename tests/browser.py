"""Shared by the browser tests: headless Chromium driven through the Chrome DevTools Protocol
(test_ui_browser.py serves it the leaderboard, test_ui_mlflow.py MLflow's compare view, and
test_report.py opens the static report from a file:// URL)."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from harness.paths import PROJECT_ROOT

ARTIFACTS = PROJECT_ROOT / "test-artifacts"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]
# Pictographs that Debian's Chromium has no font for: they render as empty boxes (issue 28).
EMOJI = re.compile("[\u2600-\u27bf\U0001f000-\U0001faff\ufe0f]")


def free_port() -> int:
    """A port nothing listens on now (the OS picks it), for a test's server."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop(proc: subprocess.Popen) -> None:
    """Stop a process started in its own session, and its children; never leave it running."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=15)


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

    def call(self, method: str, **params):
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:  # skip events until our answer arrives
            msg = json.loads(self.ws.recv(timeout=30))
            if msg.get("id") == self.next_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg["result"]

    def text(self) -> str:
        """All text of the page, including the cells of Streamlit's data grids."""
        res = self.call("Runtime.evaluate", expression="document.body ? document.body.innerText + '\\n' + "
                        "document.body.textContent : ''", returnByValue=True)
        return res["result"].get("value", "")

    def close(self) -> None:
        self.ws.close()
