"""Tracking: MLflow (one parent run per invocation, a nested run per stage) and run records.

A parent run is named ``<method>/<profile>/<seed>/<stamp>`` (:func:`parent_tracker`; the unique run_id is its
``run_id`` tag) and, once the run is scored, holds the FINAL stage's metrics as ``<benchmark>/<measure>``
(:func:`log_parent_summary`) beside the flattened spec (params) and the verdict / git / hardware tags,
so every method's parent has the same metric keys (and ``condition.*`` params) and MLflow's compare view lines them up. Stage
metrics stay on the nested runs. Metric keys follow :func:`mlflow_key` (``nDCG@10`` -> ``nDCG_at_10``).

MLflow is best-effort by default: if the tracking server is unreachable, slow or errors, the harness
warns once (one line: the status code and URL, never the server's page) and carries on, because the
run record JSON under runs/ is the source of truth and must never be lost to a tracking outage. Every
MLflow request is bounded (:data:`HTTP_BOUNDS`: a timeout and a retry count, where MLflow's own defaults
retry for minutes), and an http(s) server is first asked for ``/health`` with a short timeout, so one
that accepts connections and never answers costs seconds. With ``required`` (``run --track required``)
a server that fails the check stops the run before its first stage, and one that fails later fails the
command after the record and ``--json`` are written.

A store that fails mid-run (a sqlite ``runs/mlflow.db`` locked by another process, a server gone) is
one warning line, the first failure's; the calls after it are skipped (a locked sqlite store makes each
call wait 20 s) and counted, the started runs are still ended (FAILED, or KILLED when interrupted) if
the store takes that call, and the run's last line says "not fully tracked" (:func:`tracking_line`).
MLflow's and SQLAlchemy's own log records of a failing call (a 60-line traceback each) are dropped.

Runs end KILLED when the invocation is interrupted (Ctrl-C; SIGTERM / SIGHUP, which the CLI raises
as KeyboardInterrupt); runs whose process died without unwinding (SIGKILL) are tagged with its host
and pid, and the next run of the experiment closes them as KILLED.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import importlib.metadata as md
import json
import logging
import os
import platform
import re
import secrets
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from harness import __version__
from harness.core import procs
from harness.core.errors import HarnessError
from harness.core.fsutil import atomic_write_text, exclusive_lock, is_plain_name
from harness.core.hardware import CPU_FEATURES, cpu_identity, total_memory_gib  # noqa: F401 - part of a record's hardware
from harness.core.paths import PROJECT_ROOT, local_runs_dir, runs_dir
from harness.core.seeds import DEFAULT_SEED
from harness.core.statuses import VERDICTS
from harness.papers.schema import CONDITION_KEYS
from harness.records.integrity import seal

RECORD_SCHEMA_VERSION = 1
KEY_PACKAGES = (
    "torch",
    "transformers",
    "sentence-transformers",
    "faiss-cpu",
    "pyserini",
    "ir-measures",
    "pytrec-eval-terrier",
    "mlflow",
    "nltk",
    "tokenizers",
    "numpy",
)


# MLflow's limits (mlflow.utils.validation, 3.x): keys of letters, digits, ``_ - . /`` and space (':' too,
# but not on Windows) up to 250 characters; param values up to 6000 characters, tag values 8000; at
# most 100 params or tags per logging request.
KEY_LIMIT, PARAM_VALUE_LIMIT, TAG_VALUE_LIMIT, PARAMS_PER_BATCH = 250, 6000, 8000, 100
_UNSAFE_KEY_CHARS = re.compile(r"[^/\w.\- ]")
TRUNCATED = " ...[truncated; the run record holds the whole value]"


def mlflow_key(name: str) -> str:
    """A metric / param / tag key MLflow accepts: ``@`` reads ``_at_`` (``nDCG@10`` -> ``nDCG_at_10``,
    ``R@1000`` -> ``R_at_1000``) and any other character MLflow refuses becomes ``_``
    (``AP(rel=2)`` -> ``AP_rel_2_``)."""
    return _UNSAFE_KEY_CHARS.sub("_", str(name).replace("@", "_at_"))[:KEY_LIMIT]


def _clip(value: Any, limit: int) -> str:
    text = str(value)
    return text if len(text) <= limit else text[: limit - len(TRUNCATED)] + TRUNCATED


def _param_value(value: Any) -> Any:
    # Lists as JSON, which the compare view lays out as arrays (str() would give Python's quotes).
    return json.dumps(value, default=str) if isinstance(value, (list, tuple)) else value


def param_entries(params: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Params as MLflow takes them: nested dicts flattened to dotted keys (``spec.retrieval.k1``), keys
    made safe (:func:`mlflow_key`), lists as JSON, values over MLflow's limit cut with :data:`TRUNCATED`.
    A setting left unset (None) is no param: the compare view would show the word "None"."""
    return [
        (mlflow_key(k), _clip(_param_value(v), PARAM_VALUE_LIMIT))
        for k, v in flatten(dict(params)).items()
        if v is not None
    ]


# Spec keys that are not a setting the run used: prose (a mini run's description says "(50K steps)"), the
# papers it compares with, its declarations, and the conditions block older specs carried (the conditions
# are logged for every method alike, below).
NOT_SETTINGS = ("name", "description", "notes", "papers", "compare_with", "deviations", "assumptions", "profile")
NOT_SETTINGS += ("conditions", "substitutions")
# The spec's hardware block declares the paper's budget ("hours: 60"): a setting of the paper profile only.
PAPER_ONLY = ("hardware",)
PAPER = "paper"
# The conditions a run states for grading (harness.spec.conditions), the same keys on every method's parent
# run so the compare view lines them up; a condition the method does not state reads NOT_STATED. The keys
# only a paper's cell states (a cited row, the authors' reproduction, an average of runs, an ablation) are
# never a run's.
CELL_ONLY = ("cited", "reproduction_by_authors", "runs_averaged", "ablation")
RUN_CONDITIONS = tuple(k for k in CONDITION_KEYS if k not in CELL_ONLY)
NOT_STATED = "-"


def parent_params(
    method: str, profile: str, spec_hash: Any, seed: Any, spec: Mapping[str, Any], conditions: Mapping[str, Any]
) -> dict[str, Any]:
    """A run's parent params, the same for a live run and a loaded record: its identity, the settings its
    profile ran with (``spec.<dotted.path>``, :data:`NOT_SETTINGS` and, but on the paper profile,
    :data:`PAPER_ONLY` left out) and ``condition.<key>`` for every one of :data:`RUN_CONDITIONS`."""
    settings = {k: v for k, v in spec.items() if k not in NOT_SETTINGS and (profile == PAPER or k not in PAPER_ONLY)}
    stated = {
        key: NOT_STATED if conditions.get(key) is None else _param_value(conditions[key]) for key in RUN_CONDITIONS
    }
    return {
        "method": method,
        "profile": profile,
        "spec_hash": spec_hash,
        "seed": seed,
        "condition": stated,
        "spec": settings,
    }


def default_tracking_uri() -> str:
    return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{runs_dir() / 'mlflow.db'}"


# MLflow's HTTP client, bounded (a user's own setting wins): its defaults are a 120 s timeout and 7
# retries with backoff, minutes per request, and a server that accepts and never answers hung a run
# after its last stage. Read by mlflow.utils.rest_utils at each request.
HTTP_BOUNDS = {
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "10",
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
}
PROBE_TIMEOUT = 3.0  # seconds the /health check waits for an answer
_MESSAGE_LIMIT = 240


def bound_mlflow_requests() -> None:
    """Set :data:`HTTP_BOUNDS` where the user has not set them (before any MLflow request)."""
    for key, value in HTTP_BOUNDS.items():
        os.environ.setdefault(key, value)


def probe(uri: str, timeout: float = PROBE_TIMEOUT) -> str | None:
    """Why an http(s) tracking server cannot take this run's logging, in one line, or None. A real
    request (``GET <uri>/health``, which an MLflow server answers "OK"), not a TCP connect: a server that
    accepts the connection and never answers passed the connect and hung the run."""
    parsed = urllib.parse.urlparse(uri)
    if parsed.scheme not in ("http", "https"):
        return None
    url = uri.rstrip("/") + "/health"
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="GET"), timeout=timeout) as response:
            response.read(64)
        return None
    except urllib.error.HTTPError as exc:  # its page is never shown: it buried the warning in HTML
        return f"tracking server answered HTTP {exc.code} {exc.reason} to GET {url}"
    except TimeoutError:
        return f"tracking server {uri} did not answer GET {url} within {timeout:g} s"
    except urllib.error.URLError as exc:
        reason = exc.reason
        if isinstance(reason, (TimeoutError, socket.timeout)):
            return f"tracking server {uri} did not answer GET {url} within {timeout:g} s"
        return f"tracking server {uri} is unreachable ({getattr(reason, 'strerror', None) or reason})"
    except (OSError, ValueError) as exc:  # a reset connection, a malformed answer or URL
        return f"tracking server {uri} failed GET {url} ({type(exc).__name__}: {one_line(str(exc))})"


# Loggers whose records of a failing call are a traceback per call (mlflow.store.db.utils logs each
# SQLAlchemy error with its stack): the one warning line says what failed.
_NOISY_LOGGERS = ("mlflow", "sqlalchemy", "alembic")


class _Hold(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.NOTSET)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@contextlib.contextmanager
def _held_logs() -> Iterator[_Hold]:
    """Hold the MLflow / SQLAlchemy log records emitted inside the block (the loggers' own handlers and
    propagation are off meanwhile); the caller replays them (:func:`_replay`) when the call succeeded."""
    hold = _Hold()
    saved = []
    for name in _NOISY_LOGGERS:
        logger = logging.getLogger(name)
        saved.append((logger, logger.handlers[:], logger.propagate))
        logger.handlers[:] = [hold]
        logger.propagate = False
    try:
        yield hold
    finally:
        for logger, handlers, propagate in saved:
            logger.handlers[:] = handlers
            logger.propagate = propagate


def _replay(hold: _Hold) -> None:
    """A succeeded call's held records, as they would have been shown (e.g. MLflow's warnings)."""
    for record in hold.records:
        logging.getLogger(record.name).handle(record)


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


def one_line(text: str) -> str:
    """An MLflow error as one short line: its status code and URL when it is an HTTP error (MLflow
    appends the server's whole response body, an HTML page for a 404 or a proxy's 5xx), else its first
    line, cut to a few hundred characters."""
    text = str(text)
    code = re.search(r"error code (\d{3})", text) or re.search(r"too many (\d{3}) error responses", text)
    where = re.search(r"(https?://[^\s'\"]+)", text) or re.search(r"endpoint (/\S+)", text)
    if code:
        return f"HTTP {code.group(1)}" + (f" from {where.group(1).rstrip('.,:')}" if where else "")
    first = text.split("Response body:", 1)[0].strip().splitlines()[0] if text.strip() else ""
    return first if len(first) <= _MESSAGE_LIMIT else first[:_MESSAGE_LIMIT] + " ..."


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
        hold = _Hold()
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
            with setup_lock, _held_logs() as hold:
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
        _replay(hold)
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
        with _held_logs() as hold:
            try:
                result = fn() or True
            except Exception as exc:  # noqa: BLE001 - a tracking failure must never stop the run
                why = one_line(f"{type(exc).__name__}: {exc}")
                self.failed_calls += 1
                self.first_failure = self.first_failure or why
                self._disable(why)  # the one warning line: _disable prints only while tracking was on
                return None
        _replay(hold)
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
        items = [(mlflow_key(k), _clip(v, TAG_VALUE_LIMIT)) for k, v in tags.items()]

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


def parent_tracker(
    experiment: str,
    name: str,
    profile: str,
    seed: int,
    run_id: str,
    tags: Mapping[str, str],
    *,
    uri: str | None = None,
    enabled: bool = True,
    required: bool = False,
) -> Tracker:
    """The tracker of one `run` (or `reproduce`): its parent run is named ``<name>/<profile>/<seed>/<stamp>``
    (e.g. ``cotmae_qc/mini/42/20261123T103403-84b2b3``, :func:`parent_run_name`), what the compare view shows as the column heading, and tagged
    ``run_id`` (two runs of one method and seed stay apart), ``method``, ``profile``, ``seed``. A
    ``run --stage NAME`` run (tag ``stage``) says so in its name: ``cotmae_qc/tiny/42/<stamp> (--stage pretrain)``,
    so it is never taken for the full run of the same name."""
    name = parent_run_name(name, profile, seed, run_id) + (f" (--stage {tags['stage']})" if tags.get("stage") else "")
    return Tracker(
        experiment=experiment,
        run_name=name,
        uri=uri,
        enabled=enabled,
        required=required,
        tags={"method": experiment, "profile": profile, "seed": str(seed), "run_id": run_id, **tags},
    )


def parent_run_name(name: str, profile: str, seed: Any, run_id: str) -> str:
    """``<name>/<profile>/<seed>/<stamp>``, the stamp the run id's (its date, time and a random suffix,
    ``20261123T103403-84b2b3``): one name per run, where five ``lexmae/mini/42`` could not be told apart."""
    stamp = str(run_id).rsplit("__", 1)[-1]
    return f"{name}/{profile}/{seed}/{stamp}"


POINTS_DECIMALS = 2


def in_points(aggregate: Mapping[str, float]) -> dict[str, float]:
    """A benchmark's measures (fractions, as records keep them) in points, as MLflow shows them: the
    unit every table of the harness and the papers' tables use (0.0098 read beside 31.9 misleads), at the
    papers' finest printed precision, 2 decimals (100 * 0.319 is 31.900000000000002; the record keeps the
    whole fraction)."""
    return {measure: round(100.0 * float(value), POINTS_DECIMALS) for measure, value in aggregate.items()}


def parent_metrics(metrics: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """A record's (final stage's) ``{benchmark: {measure: fraction}}`` as ``<benchmark>/<measure>`` keys in
    points, e.g. ``nfcorpus/nDCG_at_10``: the same keys for every method, so runs line up when compared."""
    return {
        f"{mlflow_key(bench)}/{mlflow_key(measure)}": value
        for bench, values in metrics.items()
        for measure, value in in_points(values).items()
    }


def parent_tags(record: Mapping[str, Any]) -> dict[str, str]:
    """What a finished run's parent is tagged with, from its run record: ``verdict.<STATUS>`` (how many
    of its comparison rows got each verdict, 0 included so every parent has every key), ``git.commit``
    / ``git.dirty``, and ``hardware.cpu_model`` / ``cpus`` / ``memory_gib`` / ``cuda_devices``."""

    statuses = [str(c.get("status")) for c in record.get("comparison") or []]
    tags = {f"verdict.{v}": str(statuses.count(v)) for v in [*VERDICTS, *sorted(set(statuses) - set(VERDICTS))]}
    for key in ("method", "profile", "seed", "run_id"):
        if record.get(key) is not None:
            tags[key] = str(record[key])
    git = record.get("git") or {}
    tags["git.commit"] = str(git.get("commit") or "unknown")
    if git.get("commit"):  # MLflow's own: its run page and compare view show it as the run's source version
        tags[GIT_TAG] = str(git["commit"])
    tags["git.dirty"] = str(git.get("dirty")).lower()
    detected = (record.get("hardware") or {}).get("detected") or {}
    tags["hardware.cpu_model"] = str(detected.get("cpu_model") or detected.get("machine") or "unknown")
    for key in ("cpus", "memory_gib"):
        tags[f"hardware.{key}"] = "unknown" if detected.get(key) is None else str(detected[key])
    # Absent when the run never imported torch (BM25): no device was looked for.
    cuda = detected.get("cuda_devices")
    tags["hardware.cuda_devices"] = "not probed" if cuda is None else (", ".join(cuda) or "none")
    return tags


GIT_TAG = "mlflow.source.git.commit"
# The kind of experiment MLflow 3 shows as model training (runs), not GenAI (traces); mlflow.demo sets
# "genai_development". MLflow 3.17's UI no longer reads it: its GenAI | Model training switch decides
# (see RUNS_VIEW), but other clients and older UIs do.
EXPERIMENT_KIND = {"mlflow.experimentKind": "custom_model_development"}
# MLflow 3.17's UI opens an experiment on its GenAI traces view unless the link says
# ``workflowType=machine_learning`` (or the browser remembers its switch), and its runs table shows no
# metric column until one is picked. A shared view is what it reads for its columns: an experiment tag
# ``mlflow.sharedViewState.<key>`` holding the view as JSON, applied by a link with
# ``viewStateShareKey=<key>`` (:func:`runs_table_link`). Every experiment keeps one, its parents'
# ``<benchmark>/<measure>`` metrics as columns (the JS: makeCanonicalSortKey, ``metrics.`<key>```).
RUNS_VIEW = "harness-runs"
RUNS_VIEW_TAG = f"mlflow.sharedViewState.{RUNS_VIEW}"
RUN_NAME_COLUMN = "attributes.`Run Name`"
# Pixels: a run name (<method>/<profile>/<seed>/<stamp>, ~40 characters), a metric column, a character.
RUN_NAME_WIDTH, COLUMN_WIDTH, CHARACTER_WIDTH = 360, 120, 7


def runs_view_value(current: str | None, metric_keys: Iterable[str]) -> str | None:
    """The runs-table view's tag value showing ``metric_keys`` besides the columns it shows already
    (``current``: the tag's value, None when unset); None when it shows them all already."""
    try:
        view = json.loads(current) if current else {}
    except ValueError:  # a view someone else wrote: started again
        view = {}
    columns = list(view.get("selectedColumns") or [])
    wanted = [f"metrics.`{key}`" for key in sorted(metric_keys)]
    if current and all(c in columns for c in wanted):
        return None
    columns += [c for c in wanted if c not in columns]
    # Wide enough for a whole run name and a whole metric key (MLflow cuts both to ~12 characters); it
    # sizes only the columns its columnOrder names.
    widths = {RUN_NAME_COLUMN: RUN_NAME_WIDTH, **(view.get("columnWidths") or {})}
    widths.update({c: max(COLUMN_WIDTH, CHARACTER_WIDTH * len(c)) for c in columns if c not in widths})
    return json.dumps(
        {**view, "selectedColumns": columns, "columnOrder": [RUN_NAME_COLUMN, *columns], "columnWidths": widths}
    )


def show_in_runs_view(client: Any, experiment_id: str, metric_keys: Iterable[str]) -> None:
    """The experiment's runs-table view (:data:`RUNS_VIEW_TAG`) shows ``metric_keys`` too; written only
    when it did not already."""
    value = runs_view_value(client.get_experiment(experiment_id).tags.get(RUNS_VIEW_TAG), metric_keys)
    if value is not None:
        client.set_experiment_tag(experiment_id, RUNS_VIEW_TAG, value)


def runs_table_link(base: str, experiment_id: str) -> str:
    """Where an experiment's runs table opens with its metric columns (``base``: the server's URL)."""
    query = urllib.parse.urlencode({"workflowType": "machine_learning", "viewStateShareKey": RUNS_VIEW})
    return f"{base.rstrip('/')}/#/experiments/{experiment_id}/runs?{query}"


def log_parent_summary(tracker: Tracker, record: Mapping[str, Any]) -> None:
    """The parent run's comparable face, from the finished run's record: its final metrics
    (:func:`parent_metrics`) and tags (:func:`parent_tags`). The one helper `run` and `reproduce` use."""
    metrics = parent_metrics(record.get("metrics") or {})
    tracker.log_parent_metrics(metrics)
    tracker.show_metric_columns(list(metrics))
    tracker.set_parent_tags(parent_tags(record))


def flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in d.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, dict):
            out.update(flatten(value, name))
        else:
            out[name] = value
    return out


def git_commit() -> dict[str, Any]:
    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=10
        ).stdout.strip()

    try:
        return {
            "commit": git("rev-parse", "HEAD") or None,
            "dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
        }
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}


def package_versions() -> dict[str, str]:
    versions = {"harness": __version__, "python": platform.python_version()}
    for name in KEY_PACKAGES:
        with contextlib.suppress(md.PackageNotFoundError):
            versions[name] = md.version(name)
    return versions


def hardware() -> dict[str, Any]:
    info: dict[str, Any] = {"platform": platform.platform(), "machine": platform.machine(), "cpus": os.cpu_count()}
    if (memory := total_memory_gib()) is not None:
        info["memory_gib"] = round(memory, 1)
    info.update(cpu_identity())
    if "torch" in sys.modules:
        torch = sys.modules["torch"]
        info["cuda_devices"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        # Which kernels ran: the float summation order, hence the last bits, follow them.
        info["torch_threads"] = torch.get_num_threads()
        with contextlib.suppress(AttributeError, RuntimeError):
            info["torch_cpu_capability"] = torch.backends.cpu.get_cpu_capability()
    return info


def new_run_id(method: str, profile: str, seed: int = DEFAULT_SEED) -> str:
    """``<method>__<profile>__<UTC second>-<6 hex>`` (``seed<N>__`` before the time under another seed):
    sorts by time, and two runs started in the same second (two terminals, a CI matrix) still get
    different ids and records."""
    stamp = _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%S")

    other = "" if seed == DEFAULT_SEED else f"seed{seed}__"
    return f"{method}__{profile}__{other}{stamp}-{secrets.token_hex(3)}"


def record_path(directory: str | Path, run_id: Any) -> Path:
    """``<directory>/<run_id>.json``: a run id is its record's file name, never a path, so no run id
    reads, moves or writes a file outside ``directory`` (``check --add ../x`` once moved a file from
    outside runs/local/ into runs/records/, and ``foo/bar`` became runs/records/bar.json)."""
    if not is_plain_name(run_id) or run_id.endswith(".json"):  # "x.json" would look for x.json.json
        stem = Path(str(run_id)).name.removesuffix(".json")
        example = f", e.g. '{stem}'" if is_plain_name(stem) and stem != run_id else ""
        raise HarnessError(
            f"run id {run_id!r} is not a run id: a run id is a record's file name without "
            f"folder or .json (fix: give the run id alone{example}, as `python -m harness check` "
            "lists it)"
        )
    return Path(directory) / f"{run_id}.json"


def write_run_record(record: dict[str, Any], directory: Path | None = None, seed_study: bool = False) -> Path:
    """Atomically write a run record; returns its path (runs/local/<run_id>.json by default).

    A run's own record goes to the git-ignored runs/local/, never straight into the committed, gated
    runs/records/ (`check --accept` / `check --add` move it there); one under another seed (its
    ``seed``), or any seed of a seed study (``seed_study``: `run --seeds`), measures spread and goes to
    runs/seeds/."""

    # a seed study's seed 42 is one of its seeds
    seeds = record.get("seed", DEFAULT_SEED) != DEFAULT_SEED or seed_study
    directory = directory or (runs_dir() / "seeds" if seeds else local_runs_dir())
    directory.mkdir(parents=True, exist_ok=True)
    # Sealed as it will read back (JSON turns tuples into lists, Paths into strings).
    record = seal(json.loads(json.dumps({"schema_version": RECORD_SCHEMA_VERSION, **record}, default=str)))
    path = record_path(directory, record["run_id"])
    if path.exists():  # never overwrite another run's record
        raise HarnessError(f"{path}: a run record with this run_id already exists; refusing to overwrite it")
    atomic_write_text(path, json.dumps(record, indent=1, sort_keys=False) + "\n")
    return path
