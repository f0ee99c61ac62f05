"""Run-record integrity: a content seal written with every record, and a recomputation of its
aggregates from its own per-query scores.

A record is sealed when it is written: ``integrity.parts`` holds a sha256 of each part of the
record (every top-level field; the metric blocks split down to one dataset and measure, so a
mismatch names exactly what changed) and ``integrity.sha256`` one over the whole record. On
every read, :func:`problems` re-hashes and re-derives:

* a part whose hash differs -> the record was edited after it was written (names the part);
* a field added or removed since sealing -> likewise;
* no seal at all -> unsealed (it cannot be told apart from an edited one);
* an aggregate that is not the mean of its own per-query scores -> inconsistent (names the
  dataset and measure), whether or not the seal was updated along with it;
* sealed fields that contradict each other or the file (:func:`identity_problems`): a run id that
  is not its file's name or does not start with ``<method>__<profile>__``, a method or profile
  other than its stored spec's, a ``created`` date in the future.

The seal is a plain sha256 that anyone can recompute: it catches accidental edits and parts that do
not belong together, never a deliberate forgery (docs/contributing-runs.md). The identity checks
hold whether or not the seal was recomputed after an edit.

``AGGREGATE_TOLERANCE`` is float noise: aggregates are means of at most a few thousand
float64 per-query values, whose rounding stays below 1e-12; any edit a reader could see in a
table (0.01 points = 1e-4) is many orders larger.
"""

from __future__ import annotations

import hashlib
import json
import math
from datetime import UTC, datetime, timedelta
from typing import Any

from harness.core import benchmarks as declared

AGGREGATE_TOLERANCE = 1e-9
# field -> how many dict levels its parts go down ({dataset: {measure: value}} -> 2).
PART_DEPTH = {
    "metrics": 2,
    "per_query": 2,
    "metrics_by_stage": 3,
    "per_query_by_stage": 3,
    "efficiency": 2,
    "efficiency_by_stage": 3,
}
# (aggregate field, per-query field, levels above the dataset) pairs that must agree.
AGGREGATE_PAIRS = (("metrics", "per_query", 0), ("metrics_by_stage", "per_query_by_stage", 1))
NOT_A_MEAN = set(declared.averaged_over_forums())  # the mean of 12 forums' means, not of its per-query scores
CLOCK_SKEW = timedelta(days=1)  # a record written on a machine whose clock runs ahead is still not "future"


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _parts(value: Any, name: str, depth: int, out: dict[str, str]) -> None:
    if depth > 0 and isinstance(value, dict) and value:
        for key, child in value.items():
            _parts(child, f"{name}/{key}", depth - 1, out)
    else:
        out[name] = _digest(value)


def part_hashes(record: dict[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in record.items():
        if key != "integrity":
            _parts(value, key, PART_DEPTH.get(key, 0), out)
    return out


def seal(record: dict[str, Any]) -> dict[str, Any]:
    """The record with its ``integrity`` block (computed over everything else)."""
    body = {k: v for k, v in record.items() if k != "integrity"}
    return {**body, "integrity": {"algorithm": "sha256", "sha256": _digest(body), "parts": part_hashes(body)}}


def seal_problems(record: dict[str, Any]) -> list[str]:
    """Why the seal does not match the record (empty when it does)."""
    block = record.get("integrity")
    if not isinstance(block, dict) or not isinstance(block.get("parts"), dict):
        return [
            "unsealed: no integrity block (it was removed, or the file was not written by the harness); "
            "a record without its seal cannot be told from an edited one: re-run the method"
        ]
    body = {k: v for k, v in record.items() if k != "integrity"}
    if block.get("sha256") == _digest(body):
        return []
    stored, now = block["parts"], part_hashes(body)
    problems = [
        f"{part} was edited after the record was written (content hash mismatch)"
        for part in sorted(set(stored) & set(now))
        if stored[part] != now[part]
    ]
    problems += [f"{part} was added after the record was written" for part in sorted(set(now) - set(stored))]
    problems += [f"{part} was removed after the record was written" for part in sorted(set(stored) - set(now))]
    return problems or ["the record was edited after it was written (content hash mismatch)"]


def aggregate_problems(record: dict[str, Any]) -> list[str]:
    """Each aggregate that is not the mean of its own per-query scores (names stage, dataset, measure)."""
    problems = []
    for agg_key, pq_key, stage_levels in AGGREGATE_PAIRS:
        aggregates, per_query = record.get(agg_key) or {}, record.get(pq_key) or {}
        # A one-stage run stores its per-query scores once, under per_query; they belong to the
        # final stage, which is the last one the run wrote (the runner's own rule).
        final_pq = record.get("per_query") if stage_levels else None
        final_stage = record.get("finetune_stage") or (list(aggregates)[-1] if aggregates else None)
        blocks = (
            [("", aggregates, per_query)]
            if stage_levels == 0
            else [
                (
                    f"{stage}/",
                    aggregates[stage],
                    per_query.get(stage) or (final_pq if stage == final_stage else None) or {},
                )
                for stage in aggregates
                if isinstance(aggregates[stage], dict)
            ]
        )
        for prefix, agg, pq in blocks:
            for dataset, values in agg.items():
                if dataset in NOT_A_MEAN or not isinstance(values, dict):
                    continue
                for measure, value in values.items():
                    where = f"{agg_key}/{prefix}{dataset}/{measure}"
                    scores = (pq.get(dataset) or {}).get(measure) if isinstance(pq.get(dataset), dict) else None
                    if not isinstance(scores, dict) or not scores:
                        problems.append(f"{where}: no per-query scores to verify it against ({pq_key} lacks them)")
                        continue
                    try:
                        mean = math.fsum(float(v) for v in scores.values()) / len(scores)
                        got = float(value)
                    except (TypeError, ValueError):
                        problems.append(f"{where}: not a number")
                        continue
                    if not abs(got - mean) <= AGGREGATE_TOLERANCE:
                        problems.append(
                            f"{where} = {got:.6f} but the mean of its {len(scores)} per-query scores is {mean:.6f}"
                        )
    return problems


def _created_at(value: Any) -> datetime | None:
    """``created`` as an aware UTC datetime ("2026-11-21T20:50:02Z"); None when it is no ISO date."""
    try:
        when = datetime.fromisoformat(str(value).strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def identity_problems(record: dict[str, Any], stem: str | None = None, now: datetime | None = None) -> list[str]:
    """Sealed fields that contradict each other, the file name ``stem`` or the clock (empty when none).

    A recomputed seal hides an edit from :func:`seal_problems`; these hold whatever the seal says."""
    out = []
    run_id, method, profile = (str(record.get(k) or "") for k in ("run_id", "method", "profile"))
    if stem is not None and run_id != stem:
        out.append(f"run_id '{run_id}' is not its file's name '{stem}.json' (a record is <run_id>.json)")
    if not run_id.startswith(f"{method}__{profile}__"):
        out.append(f"run_id '{run_id}' does not start with its method and profile '{method}__{profile}__'")
    spec = record.get("spec")
    if isinstance(spec, dict):
        for key, field in (("name", "method"), ("profile", "profile")):
            if key in spec and spec[key] != record.get(field):
                out.append(f"{field} '{record.get(field)}' differs from its stored spec's {key} '{spec[key]}'")
    created = _created_at(record["created"]) if record.get("created") else None
    now = now or datetime.now(UTC)
    if created is not None and created > now + CLOCK_SKEW:
        out.append(f"created {record['created']} is in the future (now {now:%Y-%m-%dT%H:%M:%SZ})")
    return out


def problems(record: dict[str, Any], stem: str | None = None) -> list[str]:
    """Every integrity problem of a parsed record: seal first, then aggregates, then identity (``stem``:
    the name of the file it was read from, without ``.json``; None skips that check)."""
    return seal_problems(record) + aggregate_problems(record) + identity_problems(record, stem)
