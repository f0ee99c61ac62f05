"""Committed run records into an MLflow store, so a fresh clone can compare methods without running them.

`python -m harness ui` calls :func:`load_records_into_store` before it serves: each record of
runs/records/ (and runs/seeds/) becomes one FINISHED parent run in its method's experiment, built like
a live run's parent (:mod:`harness.records.parent_run`): named ``<method>/<profile>/<seed>/<stamp>``, the record's
``spec`` flattened to ``spec.<dotted.path>`` params, the same identity / verdict / git / hardware tags,
and its final metrics as ``<benchmark>/<measure>`` in points (0-100, as the papers print them). Its
start and end times are the record's, and the record itself is its ``record/`` artifact.

Idempotent, keyed by the record's ``run_id``: a run of the experiment already tagged with that
``run_id`` (loaded before, or logged live by the run that wrote the record) is never added again,
deleted runs included, so a run a user deleted stays deleted. Stage metrics are not rebuilt: records
hold no per-stage MLflow runs, and the parent is what the compare view lines up.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.core.fsutil import exclusive_lock
from harness.core.paths import PROJECT_ROOT, runs_dir
from harness.records.mlflow_keys import PARAMS_PER_BATCH, TAG_VALUE_LIMIT, mlflow_key, param_entries
from harness.records.parent_run import parent_metrics, parent_params, parent_run_name, parent_tags
from harness.records.runs_view import EXPERIMENT_KIND, show_in_runs_view
from harness.records.store import RunRecord, Skipped, load_records
from harness.spec.conditions import run_conditions

RECORD_FOLDERS = ("records", "seeds")  # under runs/: the committed records, and other seeds' records
LOADED_FROM_TAG = "harness.loaded_from"  # the record file a loaded run came from (absent on live runs)
CHECKPOINT_PROFILE = "checkpoint"  # `reproduce`'s records (harness.run.reproduce names them so)


@dataclass
class LoadReport:
    """What one load did: run_ids added, how many were there already, files that could not be read."""

    added: list[str] = field(default_factory=list)
    present: int = 0
    skipped: list[Skipped] = field(default_factory=list)
    experiments: dict[str, str] = field(default_factory=dict)  # method -> its experiment's id

    def summary(self) -> str:
        text = f"{len(self.added)} record(s) added to the MLflow store, {self.present} already there"
        if self.skipped:
            text += (
                f"; {len(self.skipped)} unreadable file(s) skipped ({self.skipped[0].path.name}: "
                f"{self.skipped[0].reason}{', ...' if len(self.skipped) > 1 else ''})"
            )
        return text


def committed_records(root: Path | None = None) -> tuple[list[RunRecord], list[Skipped]]:
    """The records under ``<root>/records`` and ``<root>/seeds`` (root: runs/), oldest first."""
    root = root or runs_dir()
    records: list[RunRecord] = []
    skipped: list[Skipped] = []
    for folder in RECORD_FOLDERS:
        found, bad = load_records(root / folder)
        records += found
        skipped += bad
    records.sort(key=lambda r: (r.created, r.run_id))
    return records, skipped


def run_name(record: RunRecord) -> str:
    """``<method>/<profile>/<seed>/<stamp>``; a released checkpoint's ``<checkpoint>/checkpoint/<seed>/<stamp>``."""
    seed = record.seed
    name = record.method
    if record.profile == CHECKPOINT_PROFILE:
        name = str((record.conditions or {}).get("checkpoint") or name)
    return parent_run_name(name, record.profile, seed, record.run_id)


def run_params(record: RunRecord) -> dict[str, Any]:
    """The params a live run logged (the runner's ``run_params``; reproduce's checkpoint block)."""
    if record.profile == CHECKPOINT_PROFILE:
        ckpt = {k: v for k, v in (record.checkpoint or {}).items() if k not in ("folder", "fingerprint")}
        return {"checkpoint": ckpt, "depth": record.depth, "seed": record.seed}
    return parent_params(
        record.method, record.profile, record.spec_hash, record.seed, record.spec or {}, _conditions(record)
    )


def _conditions(record: RunRecord) -> dict[str, Any]:
    """The conditions the record's spec states, derived as a live run derives them; none from a spec of
    an older shape this harness cannot read (its condition params then read "-", never a guess)."""
    try:
        return run_conditions(record.spec or {}, record.method, record.profile)
    except (KeyError, TypeError, ValueError, AttributeError):
        return {}


def run_tags(record: RunRecord, source: str) -> dict[str, str]:
    """Identity, papers, verdict counts, git and hardware (:func:`parent_tags`), and where it came from."""
    tags = {"spec_hash": str(record.spec_hash), "papers": ",".join(map(str, (record.spec or {}).get("papers") or []))}
    if record.profile == CHECKPOINT_PROFILE:
        ckpt = record.checkpoint or {}
        tags = {
            "checkpoint": str((record.conditions or {}).get("checkpoint") or ""),
            "source": str(ckpt.get("source") or ""),
        }
    tags.update(parent_tags(record))
    tags[LOADED_FROM_TAG] = source
    # MLflow renders the note as markdown: the record's file name goes in a code span it cannot close
    fence = "`" * (1 + max((len(run) for run in re.findall("`+", source)), default=0))
    tags["mlflow.note.content"] = (
        f"Loaded by `python -m harness ui` from the committed run record "
        f"{fence} {' '.join(source.split())} {fence}; "
        "metrics are the final stage's, in points (0-100)."
    )
    return {mlflow_key(k) if not k.startswith("mlflow.") else k: str(v)[:TAG_VALUE_LIMIT] for k, v in tags.items()}


def _millis(stamp: str) -> int | None:
    with contextlib.suppress(ValueError):
        when = _dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
        if when.tzinfo is None:
            when = when.replace(tzinfo=_dt.UTC)
        return int(when.timestamp() * 1000)
    return None


def _source(path: Path) -> str:
    with contextlib.suppress(ValueError):
        return str(path.resolve().relative_to(PROJECT_ROOT))
    return str(path)


def _known_run_ids(client: Any, experiment_id: str) -> set[str]:
    """Every ``run_id`` tag in the experiment (deleted runs too), page by page."""
    from mlflow.entities import ViewType

    seen: set[str] = set()
    token = None
    while True:
        page = client.search_runs([experiment_id], run_view_type=ViewType.ALL, max_results=1000, page_token=token)
        seen.update(r.data.tags["run_id"] for r in page if "run_id" in r.data.tags)
        token = page.token
        if not token:
            return seen


def _experiment_id(client: Any, name: str, artifacts: Path | None) -> str | None:
    """The experiment's id, made (artifacts under ``artifacts/<name>``, as a live run makes it) when
    missing; None when it was deleted (the user's choice: nothing is loaded into it)."""
    experiment = client.get_experiment_by_name(name)
    if experiment is None:
        location = (artifacts / name).resolve().as_uri() if artifacts is not None else None
        return client.create_experiment(name, artifact_location=location, tags=EXPERIMENT_KIND)
    if experiment.lifecycle_stage == "deleted":
        return None
    for key, value in EXPERIMENT_KIND.items():  # opens on the runs table, not the GenAI traces view
        if experiment.tags.get(key) != value:
            client.set_experiment_tag(experiment.experiment_id, key, value)
    return experiment.experiment_id


def _log(client: Any, experiment_id: str, record: RunRecord) -> None:
    from mlflow.entities import Metric, Param

    source = _source(record.path)
    start = _millis(record.created)
    seconds = record.seconds
    end = start + int(1000 * seconds) if start is not None and isinstance(seconds, (int, float)) else start
    run = client.create_run(experiment_id, start_time=start, tags=run_tags(record, source), run_name=run_name(record))
    run_id = run.info.run_id
    params = [Param(k, v) for k, v in param_entries(run_params(record))]
    for i in range(0, len(params), PARAMS_PER_BATCH):
        client.log_batch(run_id, params=params[i : i + PARAMS_PER_BATCH])
    stamp = end if end is not None else 0
    metrics = [Metric(k, v, stamp, 0) for k, v in parent_metrics(record.metrics).items()]
    if metrics:
        client.log_batch(run_id, metrics=metrics)
    with contextlib.suppress(OSError):  # the record is the run's source, not what the compare view needs
        client.log_artifact(run_id, str(record.path), artifact_path="record")
    # The run_id tag went in with create_run: a load cut short leaves a RUNNING run the next load counts.
    client.set_terminated(run_id, status="FINISHED", end_time=end)


def load_records_into_store(uri: str, records: Iterable[RunRecord], artifacts: Path | None = None) -> LoadReport:
    """Add each record not yet in the store at ``uri`` (keyed by its ``run_id`` tag) as a parent run.

    Held under the store's set-up lock (a sqlite store), the lock a starting run takes, so a `run`
    starting beside `ui` does not create an experiment twice."""
    from mlflow import MlflowClient

    # Its "Creating initial MLflow database tables" INFO lines say nothing a user acts on.
    logging.getLogger("mlflow").setLevel(logging.WARNING)
    report = LoadReport()
    by_method: dict[str, list[RunRecord]] = {}
    for record in records:
        by_method.setdefault(record.method, []).append(record)
    lock: contextlib.AbstractContextManager = contextlib.nullcontext()
    if uri.startswith("sqlite:///"):
        db = Path(uri[len("sqlite:///") :])
        db.parent.mkdir(parents=True, exist_ok=True)
        lock = exclusive_lock(db.with_name(db.name + ".lock"), "mlflow store set-up")
    client = MlflowClient(tracking_uri=uri)
    with lock:
        for method, group in sorted(by_method.items()):
            experiment_id = _experiment_id(client, method, artifacts)
            if experiment_id is None:
                report.present += len(group)  # a deleted experiment: left as the user left it
                continue
            report.experiments[method] = experiment_id
            known = _known_run_ids(client, experiment_id)
            # its runs table shows every committed record's metrics as columns (runs_view.RUNS_VIEW)
            show_in_runs_view(client, experiment_id, {k for record in group for k in parent_metrics(record.metrics)})
            for record in group:
                if record.run_id in known:
                    report.present += 1
                    continue
                _log(client, experiment_id, record)
                known.add(record.run_id)
                report.added.append(record.run_id)
    return report


def load_committed(uri: str, root: Path | None = None, artifacts: Path | None = None) -> LoadReport:
    """:func:`committed_records` of ``root`` (runs/) into the store at ``uri``."""
    records, skipped = committed_records(root)
    report = load_records_into_store(uri, records, artifacts)
    report.skipped = skipped
    return report
