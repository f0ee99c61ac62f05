"""`python -m harness leaderboard`: serve the Streamlit leaderboard on 127.0.0.1."""

from __future__ import annotations

import argparse
import errno
import os
import signal
import socket
import sys
from pathlib import Path

from harness.commands._output import port_number, records_folder
from harness.core import procs
from harness.core.errors import HarnessError
from harness.core.paths import PROJECT_ROOT

APP = PROJECT_ROOT / "leaderboard_app" / "app.py"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "leaderboard",
        help="serve the leaderboard (Streamlit) on http://127.0.0.1:8501",
        description=(
            "Serve the leaderboard: the papers' Table 1 and BEIR tables with reproduced runs side by side "
            "(delta and status per cell), a page per method, plots, the CI gate, the registry's consistency "
            "report and skipped records. Ctrl-C stops it."
        ),
    )
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=port_number, default=8501, help="port (default 8501)")
    p.add_argument("--records", metavar="DIR", default=None, help="run records folder (default: runs/records)")
    p.add_argument(
        "--reported",
        metavar="JSON",
        default=None,
        help="show a JSON snapshot of reported cells instead of baselines/reported/",
    )
    p.add_argument("--open-browser", action="store_true", help="open a browser tab (default: headless)")
    p.set_defaults(func=_leaderboard)


def streamlit_command(host: str, port: int, headless: bool = True) -> list[str]:
    return [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(APP),
        "--server.address",
        host,
        "--server.port",
        str(port),
        "--server.headless",
        "true" if headless else "false",
        "--server.fileWatcherType",
        "none",
        "--browser.gatherUsageStats",
        "false",
        "--client.toolbarMode",
        "viewer",
    ]


def ensure_port_free(host: str, port: int) -> None:
    """Refuse a taken port up front: a server that fails to bind after we said "serving" misleads,
    and a half-started one (mlflow's huey workers) leaves orphans behind."""

    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except socket.gaierror as exc:
            raise HarnessError(f"--host {host}: not a host name or address ({exc.strerror})") from None
        except OSError as exc:
            if exc.errno == errno.EADDRNOTAVAIL:
                raise HarnessError(
                    f"--host {host} is not an address of this machine ({exc.strerror}): use 127.0.0.1, "
                    "or 0.0.0.0 to serve on every interface"
                ) from None
            raise HarnessError(
                f"port {port} on {host} is already in use ({exc.strerror}): stop what is serving there "
                f"or pick another with --port"
            ) from None


def serve(command: list[str], env: dict[str, str], url: str, host: str, port: int) -> int:
    """Run a server in the foreground until Ctrl-C or SIGTERM (raised as KeyboardInterrupt by the
    CLI), then stop it and every process it started; returns the server's exit status. It runs in
    a process group of its own that dies with this process even when SIGKILL gives it no chance to
    stop it (harness.core.procs: parent-death signal, watchdog)."""

    ensure_port_free(host, port)
    print(f"serving {url}  (Ctrl-C stops)", flush=True)
    try:
        # grace: the server's own shutdown (mlflow forwards the signal to uvicorn and waits for it)
        with procs.child_group(command, env=env, cwd=PROJECT_ROOT, stop_signal=signal.SIGTERM, grace=15) as proc:
            return proc.wait()
    except KeyboardInterrupt:
        return 0


def _leaderboard(args: argparse.Namespace) -> int:
    if not APP.is_file():
        raise HarnessError(f"leaderboard app not found at {APP}: run from a source checkout of the project")
    env = dict(os.environ)
    env.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    env["STREAMLIT_BROWSER_GATHER_USAGE_STATS"] = "false"
    # The app reads its inputs from the environment (leaderboard_app/data.py).
    if args.records:
        records_folder(args.records)
        records = Path(args.records).resolve()
        env["HARNESS_LEADERBOARD_RECORDS"] = str(records)
    if args.reported:
        reported = Path(args.reported).resolve()
        if not reported.is_file():
            raise HarnessError(f"--reported {args.reported}: no such file")
        env["HARNESS_LEADERBOARD_REPORTED"] = str(reported)
    command = streamlit_command(args.host, args.port, headless=not args.open_browser)
    return serve(command, env, f"http://{args.host}:{args.port}/", args.host, args.port)
