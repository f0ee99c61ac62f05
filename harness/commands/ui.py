"""`python -m harness ui`: the MLflow UI and REST API over the project's own tracking store.

Runs ``mlflow server`` on 127.0.0.1 against the store the run pipeline logs to
(``sqlite:///<runs_dir>/mlflow.db``; MLFLOW_TRACKING_URI when it names a database) and serves
artifacts from ``<runs_dir>/mlartifacts``. There, each method is one experiment, each
invocation a parent run named ``<method>/<profile>/<seed>/<stamp>`` (its run_id in the ``run_id`` tag)
holding the final stage's metrics as ``<benchmark>/<measure>``, the flattened spec as params
and method / profile / papers / verdict / git / hardware tags, with a nested run per stage tagged
``stage``: select parent runs and press Compare (``/#/compare-runs?runs=[...]&experiments=[...]``)
to see them side by side (docs/tracking.md). Before serving, the committed run records (runs/records/,
runs/seeds/) the store lacks are added as parent runs (``harness.records.mlflow_import``, keyed by
run_id), so a fresh clone compares methods without running any; ``--no-load`` skips that.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from harness.commands._output import port_number
from harness.commands.leaderboard import serve
from harness.core.errors import HarnessError
from harness.core.paths import runs_dir
from harness.records.mlflow_import import load_committed
from harness.records.mlflow_requests import default_tracking_uri, one_line
from harness.records.runs_view import runs_table_link


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "ui",
        help="MLflow UI over the project's tracking store (http://127.0.0.1:5000)",
        description=(
            "Start `mlflow server` on 127.0.0.1 against the project's tracking store (runs/mlflow.db) with "
            "artifacts served from runs/mlartifacts. One experiment per method; a run's parent is named "
            "method/profile/seed (tag run_id) and holds its final metrics as benchmark/measure, so the "
            "Compare view lines methods up; nested runs are its stages. The committed run records (runs/records/, "
            "runs/seeds/) the store lacks are added first, keyed by run_id, metrics in points. Ctrl-C stops it."
        ),
    )
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=port_number, default=5000, help="port (default 5000)")
    p.add_argument(
        "--workers",
        type=int,
        default=1,
        help="server worker processes (default 1, right for a laptop or a 2-core machine)",
    )
    p.add_argument(
        "--store",
        metavar="URI",
        default=None,
        help="backend store URI (default: the harness's store, sqlite:///<runs>/mlflow.db)",
    )
    p.add_argument(
        "--no-load",
        dest="load",
        action="store_false",
        help="serve the store as it is, without first adding the committed run records "
        "(runs/records/, runs/seeds/) that it does not hold yet",
    )
    p.set_defaults(func=_ui)


def store_uri() -> str:
    """The tracking store the run pipeline writes to, when it is a database or folder."""

    uri = default_tracking_uri()
    if uri.startswith(("http://", "https://")):  # a remote server already serves its own UI
        return f"sqlite:///{runs_dir() / 'mlflow.db'}"
    return uri


def server_command(store: str, artifacts: Path, host: str, port: int, workers: int) -> list[str]:
    mlflow_bin = Path(sys.executable).with_name("mlflow")
    launcher = [str(mlflow_bin)] if mlflow_bin.exists() else [sys.executable, "-m", "mlflow"]
    return [
        *launcher,
        "server",
        "--backend-store-uri",
        store,
        "--serve-artifacts",
        "--artifacts-destination",
        artifacts.resolve().as_uri(),
        "--host",
        host,
        "--port",
        str(port),
        "--workers",
        str(workers),
    ]


def load_records(store: str, artifacts: Path) -> dict[str, str]:
    """The committed records into the store (those it lacks), so methods compare on a fresh clone;
    a failure costs the loaded runs, never the UI over what the store already holds. Returns each
    method's experiment id (empty after a failure)."""
    print("loading the committed run records (runs/records/, runs/seeds/) into the store ...", flush=True)
    try:
        report = load_committed(store, artifacts=artifacts)
    except Exception as exc:  # noqa: BLE001 - the UI still serves the user's own runs
        print(
            f"warning: committed records not loaded ({type(exc).__name__}: {one_line(str(exc))}); "
            "the UI shows what the store already holds",
            file=sys.stderr,
        )
        return {}
    print(report.summary(), flush=True)
    return report.experiments


def runs_table_lines(base: str, experiments: dict[str, str]) -> list[str]:
    """Where each method's runs table opens with its metrics as columns (MLflow 3.17 opens an experiment
    on its GenAI traces view otherwise, its metrics hidden; docs/tracking.md)."""
    if not experiments:
        return []
    width = max(len(name) for name in experiments)
    return ["runs tables (metrics as columns):"] + [
        f"  {name:<{width}}  {runs_table_link(base, experiment_id)}"
        for name, experiment_id in sorted(experiments.items())
    ]


def _ui(args: argparse.Namespace) -> int:
    if args.workers < 1:
        raise HarnessError(f"--workers must be at least 1, got {args.workers}")
    store = args.store or store_uri()
    if store.startswith("sqlite:///"):
        Path(store[len("sqlite:///") :]).parent.mkdir(parents=True, exist_ok=True)
    artifacts = runs_dir() / "mlartifacts"
    artifacts.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    # The server's job runner (a scheduler and 7 huey consumers) serves no page of the comparison UI
    # and costs a process per core on a 2-core machine.
    env.setdefault("MLFLOW_SERVER_ENABLE_JOB_EXECUTION", "false")
    print(f"MLflow store {store}; artifacts {artifacts}")
    if args.load:
        for line in runs_table_lines(f"http://{args.host}:{args.port}", load_records(store, artifacts)):
            print(line, flush=True)
    return serve(
        server_command(store, artifacts, args.host, args.port, args.workers),
        env,
        f"http://{args.host}:{args.port}/",
        args.host,
        args.port,
    )
