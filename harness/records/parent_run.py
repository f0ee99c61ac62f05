"""A run's parent run in MLflow, the same for a live run and a loaded record: its name, params, metrics
and tags, so that MLflow's compare view lines every method's runs up.

A parent run is named ``<method>/<profile>/<seed>/<stamp>`` (:func:`parent_tracker`; the unique run_id is its
``run_id`` tag) and, once the run is scored, holds the FINAL stage's metrics as ``<benchmark>/<measure>``
(:func:`log_parent_summary`) beside the flattened spec (params) and the verdict / git / hardware tags,
so every method's parent has the same metric keys (and ``condition.*`` params) and MLflow's compare view lines them up. Stage
metrics stay on the nested runs. Metric keys are the benchmark and measure as the papers print them,
made safe by :func:`harness.records.mlflow_keys.mlflow_key` (``NFCorpus/nDCG at 10``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.core import benchmarks
from harness.core.statuses import VERDICTS
from harness.papers.schema import CONDITION_KEYS
from harness.records.mlflow_keys import mlflow_key, param_value
from harness.records.run_precision import precision_label
from harness.records.run_record import RunRecord
from harness.records.tracker import Tracker

GIT_TAG = "mlflow.source.git.commit"  # MLflow's own: its UI shows it as the run's source version

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
        key: NOT_STATED if conditions.get(key) is None else param_value(conditions[key]) for key in RUN_CONDITIONS
    }
    return {
        "method": method,
        "profile": profile,
        "spec_hash": spec_hash,
        "seed": seed,
        "condition": stated,
        "spec": settings,
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


def measure_key(benchmark: str, measure: str) -> str:
    """A measure's MLflow key as the papers print it on ``benchmark`` (MS MARCO's ``RR@10`` -> ``MRR at
    10``, its ``R@1000`` -> ``R at 1k``; ``nDCG@10`` -> ``nDCG at 10``): MLflow refuses ``@``."""
    return mlflow_key(benchmarks.printed_measure(benchmark, measure))


def stage_metrics(benchmark: str, aggregate: Mapping[str, float]) -> dict[str, float]:
    """An evaluation stage's measures on ``benchmark`` under :func:`measure_key`, in points."""
    return {measure_key(benchmark, m): value for m, value in in_points(aggregate).items()}


def parent_metrics(metrics: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """A record's (final stage's) ``{benchmark: {measure: fraction}}`` as ``<benchmark>/<measure>`` keys in
    points, both as the papers print them (``MS MARCO dev/MRR at 10``, ``NFCorpus/nDCG at 10``): the same
    keys for every method, so runs line up when compared."""
    return {
        f"{mlflow_key(benchmarks.printed_name(bench))}/{key}": value
        for bench, values in metrics.items()
        for key, value in stage_metrics(bench, values).items()
    }


def parent_tags(record: RunRecord) -> dict[str, str]:
    """What a finished run's parent is tagged with, from its run record: ``verdict.<STATUS>`` (how many
    of its comparison rows got each verdict, 0 included so every parent has every key), ``precision`` (the
    one its training stages used: ``spec.pretrain.precision`` is the spec's ``auto``), ``git.commit``
    / ``git.dirty``, and ``hardware.cpu_model`` / ``cpus`` / ``memory_gib`` / ``cuda_devices``."""

    statuses = [str(c.get("status")) for c in record.comparison or []]
    tags = {f"verdict.{v}": str(statuses.count(v)) for v in [*VERDICTS, *sorted(set(statuses) - set(VERDICTS))]}
    for key, value in (
        ("method", record.method),
        ("profile", record.profile),
        ("seed", record.seed),
        ("run_id", record.run_id),
    ):
        if value is not None:
            tags[key] = str(value)
    git = record.git or {}
    tags["precision"] = precision_label(record.stages)  # what `auto` resolved to (the spec param keeps "auto")
    tags["git.commit"] = str(git.get("commit") or "unknown")
    if git.get("commit"):  # MLflow's own: its run page and compare view show it as the run's source version
        tags[GIT_TAG] = str(git["commit"])
    tags["git.dirty"] = str(git.get("dirty")).lower()
    detected = (record.hardware or {}).get("detected") or {}
    tags["hardware.cpu_model"] = str(detected.get("cpu_model") or detected.get("machine") or "unknown")
    for key in ("cpus", "memory_gib"):
        tags[f"hardware.{key}"] = "unknown" if detected.get(key) is None else str(detected[key])
    # Absent when the run never imported torch (BM25): no device was looked for.
    cuda = detected.get("cuda_devices")
    tags["hardware.cuda_devices"] = "not probed" if cuda is None else (", ".join(cuda) or "none")
    return tags


def log_parent_summary(tracker: Tracker, record: RunRecord) -> None:
    """The parent run's comparable face, from the finished run's record: its final metrics
    (:func:`parent_metrics`) and tags (:func:`parent_tags`). The one helper `run` and `reproduce` use."""
    metrics = parent_metrics(record.metrics or {})
    tracker.log_parent_metrics(metrics)
    tracker.show_metric_columns(list(metrics))
    tracker.set_parent_tags(parent_tags(record))
