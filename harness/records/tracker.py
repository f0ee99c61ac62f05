"""The MLflow client of a run: one parent run per invocation, a nested run per stage, and best-effort.

MLflow is best-effort by default: if the tracking server is unreachable, slow or errors, the harness
warns once (one line: the status code and URL, never the server's page) and carries on, because the
run record JSON under runs/ is the source of truth and must never be lost to a tracking outage. Every
MLflow request is bounded (:mod:`harness.records.mlflow_requests`), and an http(s) server is first asked
for ``/health`` with a short timeout, so one that accepts connections and never answers costs seconds.
With ``required`` (``run --track required``) a server that fails the check stops the run before its
first stage, and one that fails later fails the command after the record and ``--json`` are written.

A store that fails mid-run (a sqlite ``runs/mlflow.db`` locked by another process, a server gone) is
one warning line, the first failure's; the calls after it are skipped (a locked sqlite store makes each
call wait 20 s) and counted, the started runs are still ended (FAILED, or KILLED when interrupted) if
the store takes that call, and the run's last line says "not fully tracked" (:func:`tracking_line`).
MLflow's and SQLAlchemy's own log records of a failing call (a 60-line traceback each) are dropped
(:mod:`harness.records.mlflow_logs`).

Runs end KILLED when the invocation is interrupted (Ctrl-C; SIGTERM / SIGHUP, which the CLI raises
as KeyboardInterrupt); runs whose process died without unwinding (SIGKILL) are tagged with its host
and pid, and the next run of the experiment closes them as KILLED. What a parent run is named and
holds is :mod:`harness.records.parent_run`'s.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from harness.core import procs
from harness.core.errors import HarnessError
from harness.core.fsutil import exclusive_lock
from harness.core.paths import runs_dir
from harness.records.mlflow_keys import PARAMS_PER_BATCH, TAG_VALUE_LIMIT, clip, mlflow_key, param_entries
from harness.records.mlflow_logs import LogHold, held_logs, replay_held
from harness.records.mlflow_requests import bound_mlflow_requests, default_tracking_uri, one_line, probe
from harness.records.runs_view import EXPERIMENT_KIND, show_in_runs_view


def tracking_line(info: Mapping[str, Any] | None, with_uri: bool = True) -> str:
    """Where a run's last line says it was tracked: ``MLflow run <id> at <uri>``, ``MLflow off``, or,
    when MLflow calls failed mid-run, ``MLflow: not fully tracked (...)``, never a partial run read as whole."""
    info = info or {}
    run_id, uri = info.get("run_id"), info.get("tracking_uri")
    at = f" at {uri}" if with_uri and uri else ""
    lost = int(info.get("failed_calls") or 0)
    if lost:
        partial = f"; partial run {run_id}{at}" if run_id else ""
        calls = "call" if lost == 1 else "calls"
        first = info.get("first_failure")
        return f"MLflow: not fully tracked ({lost} {calls} not logged, the first failed: {first}{partial})"
    return f"MLflow run {run_id}{at}" if run_id else "MLflow off"


class Tracker:
    """Thin MLflow wrapper that degrades to a no-op with a warning on any tracking failure."""

    def __init__(
        self,
        experiment: str,
        run_name: str,
        tags: dict[str, str],
        uri: str | None = None,
        enabled: bool = True,
        required: bool = False,
    ):
        self.uri = uri or default_tracking_uri()
        self.experiment, self.run_name, self.tags = experiment, run_name, tags
        self.enabled = enabled
        self.required = required  # a tracking failure fails the command (at the start: before any stage)
        self.warning: str | None = None
        self.parent_run_id: str | None = None
        self.failed_calls = 0  # MLflow calls of the run that failed or were skipped after a failure
        self.first_failure: str | None = None
        self._mlflow: Any = None

    def _disable(self, why: str) -> None:
        if self.enabled:
            why = one_line(why)
            if why.startswith("HTTP ") and "://" not in why:  # MLflow named the endpoint only
                why += f" at {self.uri}"
            self.warning = f"MLflow tracking disabled ({why}); the run record is still written."
            print(f"warning: {self.warning}", file=sys.stderr)
        self.enabled = False

    def _refuse_or_disable(self, why: str) -> None:
        """At the start: with ``required``, stop before any stage (nothing is lost); else go on untracked."""
        if self.required:
            raise HarnessError(
                f"MLflow tracking is required (--track required) and {one_line(why)}; fix the "
                f"server or MLFLOW_TRACKING_URI ({self.uri}), or run with --track best-effort"
            )
        self._disable(why)

    @contextlib.contextmanager
    def run(self) -> Iterator[Tracker]:
        """The parent run for one invocation."""
        os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
        bound_mlflow_requests()
        if not self.enabled:  # --no-track
            yield self
            return
        problem = probe(self.uri)
        if problem:
            self._refuse_or_disable(problem)
            yield self
            return
        hold = LogHold()
        try:
            import mlflow

            # The store's set-up chatter ("Creating initial MLflow database tables...", "Updating
            # database tables", "Experiment ... does not exist") is not the run's news; warnings still show.
            logging.getLogger("mlflow").setLevel(logging.WARNING)
            self._mlflow = mlflow
            setup_lock: contextlib.AbstractContextManager = contextlib.nullcontext()
            if self.uri.startswith("sqlite:///"):
                db = Path(self.uri[len("sqlite:///") :])
                db.parent.mkdir(parents=True, exist_ok=True)
                # Two runs starting together would both create the schema and the experiment.
                setup_lock = exclusive_lock(db.with_name(db.name + ".lock"), "mlflow store set-up")
            mlflow.set_tracking_uri(self.uri)
            with setup_lock, held_logs() as hold:
                if mlflow.get_experiment_by_name(self.experiment) is None:
                    artifacts = None
                    if self.uri.startswith("sqlite:///"):
                        artifacts = (runs_dir() / "mlartifacts" / self.experiment).resolve().as_uri()
                    mlflow.create_experiment(self.experiment, artifact_location=artifacts)
                experiment = mlflow.set_experiment(self.experiment)
                for key, value in EXPERIMENT_KIND.items():
                    if experiment.tags.get(key) != value:
                        mlflow.set_experiment_tag(key, value)
                # Which process owns the run (stage runs inherit the tags): lets a later run tell
                # a run in progress from one whose process was killed without unwinding.
                self.tags = {**self.tags, **procs.process_tags()}
                self._close_stale_runs(experiment.experiment_id)
                active = mlflow.start_run(run_name=self.run_name, tags=self.tags)
            self.parent_run_id = active.info.run_id
        except Exception as exc:  # noqa: BLE001 - any tracking failure must not stop the run
            self._refuse_or_disable(f"{type(exc).__name__}: {exc}")
            yield self
            return
        replay_held(hold)
        killed = False
        try:
            yield self
        except BaseException:
            killed = True
            raise
        finally:
            self._end(killed)

    def _close_stale_runs(self, experiment_id: str) -> None:
        """Mark KILLED the experiment's RUNNING runs (parents and stages) whose process is gone: a
        SIGKILL, an OOM kill or a power cut gives a run no chance to end its MLflow runs, and they
        would read as in progress forever. Best-effort: a failure here does not stop the run."""
        try:
            client = self._mlflow.MlflowClient()
            running = client.search_runs([experiment_id], "attributes.status = 'RUNNING'", max_results=1000)
            stale = [r for r in running if procs.process_gone(r.data.tags)]
            for r in stale:
                client.set_terminated(r.info.run_id, status="KILLED")
        except Exception as exc:  # noqa: BLE001 - closing old runs is a courtesy: the new run goes on
            print(
                f"warning: could not close stale MLflow runs ({one_line(f'{type(exc).__name__}: {exc}')})",
                file=sys.stderr,
            )
            return
        if stale:
            pids = sorted({r.data.tags["harness.pid"] for r in stale}, key=int)
            print(
                f"note: {len(stale)} MLflow run(s) of {self.experiment} left RUNNING by process(es) "
                f"{', '.join(pids)} on this host, which no longer run, marked KILLED",
                file=sys.stderr,
            )

    @contextlib.contextmanager
    def stage(self, name: str, params: dict[str, Any] | None = None) -> Iterator[None]:
        """A nested run for one stage (no-op when tracking is off)."""
        started = self._safe(
            lambda: self._mlflow.start_run(run_name=name, nested=True, tags={**self.tags, "stage": name})
        )
        if started and params:
            self.log_params(params)
        killed = False
        try:
            yield
        except BaseException:
            killed = True
            raise
        finally:
            if started:
                self._end(killed)

    def _end(self, killed: bool) -> None:
        """End the active (stage or parent) run: KILLED when interrupted, FAILED when MLflow calls were
        lost (the run is not whole), else FINISHED. Tried even after a failure turned logging off, so a
        run is not left RUNNING when the store takes this call; when it does not, the run carries its
        process's pid tag and the experiment's next run closes it (:meth:`_close_stale_runs`)."""
        if self._mlflow is None:
            return
        status = "KILLED" if killed else "FAILED" if self.failed_calls else "FINISHED"
        self._call(lambda: self._mlflow.end_run(status=status))

    def _safe(self, fn: Any) -> Any:
        """``fn()`` (truthy: ``True`` when it returns nothing), or None when tracking is off or the call
        fails. After a first failure the calls are skipped (a locked store makes each wait) and counted."""
        if not self.enabled or self._mlflow is None:
            if self.failed_calls:
                self.failed_calls += 1
            return None
        return self._call(fn)

    def _call(self, fn: Any) -> Any:
        with held_logs() as hold:
            try:
                result = fn() or True
            except Exception as exc:  # noqa: BLE001 - a tracking failure must never stop the run
                why = one_line(f"{type(exc).__name__}: {exc}")
                self.failed_calls += 1
                self.first_failure = self.first_failure or why
                self._disable(why)  # the one warning line: _disable prints only while tracking was on
                return None
        replay_held(hold)
        return result

    def log_params(self, params: dict[str, Any]) -> None:
        """Nested dicts flattened to dotted keys (``spec.retrieval.k1``); values over MLflow's length
        limit are cut with a marker, and the params go in batches of MLflow's per-request maximum."""
        items = param_entries(params)
        for i in range(0, len(items), PARAMS_PER_BATCH):
            batch = dict(items[i : i + PARAMS_PER_BATCH])
            if not self._safe(lambda batch=batch: self._mlflow.log_params(batch)):
                return

    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None:
        clean = {mlflow_key(k): float(v) for k, v in metrics.items()}
        self._safe(lambda: self._mlflow.log_metrics(clean, step=step))

    def set_parent_tags(self, tags: Mapping[str, Any]) -> None:
        """Tags on the parent run itself (not on a stage run that may be active)."""
        items = [(mlflow_key(k), clip(v, TAG_VALUE_LIMIT)) for k, v in tags.items()]

        def log() -> None:
            from mlflow.entities import RunTag

            client = self._mlflow.MlflowClient()
            for i in range(0, len(items), PARAMS_PER_BATCH):
                client.log_batch(self.parent_run_id, tags=[RunTag(k, v) for k, v in items[i : i + PARAMS_PER_BATCH]])

        if self.parent_run_id:
            self._safe(log)

    def log_parent_metrics(self, metrics: Mapping[str, float]) -> None:
        """Metrics on the parent run itself, whatever run is active."""

        def log() -> None:
            from mlflow.entities import Metric

            stamp = int(time.time() * 1000)
            entries = [Metric(mlflow_key(k), float(v), stamp, 0) for k, v in metrics.items()]
            client = self._mlflow.MlflowClient()
            for i in range(0, len(entries), 1000):  # MLflow's maximum metrics per request
                client.log_batch(self.parent_run_id, metrics=entries[i : i + 1000])

        if self.parent_run_id and metrics:
            self._safe(log)

    def show_metric_columns(self, keys: list[str]) -> None:
        """The experiment's runs-table view (:data:`RUNS_VIEW_TAG`) shows these metric columns too."""

        def log() -> None:
            client = self._mlflow.MlflowClient()
            show_in_runs_view(client, client.get_run(self.parent_run_id).info.experiment_id, keys)

        if self.parent_run_id and keys:
            self._safe(log)

    def log_artifact(self, path: str | Path, subdir: str | None = None) -> None:
        self._safe(lambda: self._mlflow.log_artifact(str(path), artifact_path=subdir))

    def log_text(self, text: str, name: str) -> None:
        self._safe(lambda: self._mlflow.log_text(text, name))

    def info(self) -> dict[str, Any]:
        return {
            "enabled": self.enabled,
            "tracking_uri": self.uri,
            "experiment": self.experiment,
            "run_id": self.parent_run_id,
            "warning": self.warning,
            "failed_calls": self.failed_calls,
            "first_failure": self.first_failure,
        }
