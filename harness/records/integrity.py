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
  dataset and measure), whether or not the seal was updated along with it.

``AGGREGATE_TOLERANCE`` is float noise: aggregates are means of at most a few thousand
float64 per-query values, whose rounding stays below 1e-12; any edit a reader could see in a
table (0.01 points = 1e-4) is many orders larger.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

from harness.core import benchmarks as declared

AGGREGATE_TOLERANCE = 1e-9
# field -> how many dict levels its parts go down ({dataset: {measure: value}} -> 2).
PART_DEPTH = {
    "metrics": 2, "per_query": 2, "metrics_by_stage": 3, "per_query_by_stage": 3,
    "efficiency": 2, "efficiency_by_stage": 3,
}
# (aggregate field, per-query field, levels above the dataset) pairs that must agree.
AGGREGATE_PAIRS = (("metrics", "per_query", 0), ("metrics_by_stage", "per_query_by_stage", 1))
NOT_A_MEAN = set(declared.averaged_over_forums())  # the mean of 12 forums' means, not of its per-query scores


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
        return ["unsealed: no integrity block (it was removed, or the file was not written by the harness); "
                "a record without its seal cannot be told from an edited one: re-run the method"]
    body = {k: v for k, v in record.items() if k != "integrity"}
    if block.get("sha256") == _digest(body):
        return []
    stored, now = block["parts"], part_hashes(body)
    problems = [f"{part} was edited after the record was written (content hash mismatch)"
                for part in sorted(set(stored) & set(now)) if stored[part] != now[part]]
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
        blocks = [("", aggregates, per_query)] if stage_levels == 0 else [
            (f"{stage}/", aggregates[stage],
             per_query.get(stage) or (final_pq if stage == final_stage else None) or {})
            for stage in aggregates if isinstance(aggregates[stage], dict)]
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
                        problems.append(f"{where} = {got:.6f} but the mean of its {len(scores)} per-query scores "
                                        f"is {mean:.6f}")
    return problems


def problems(record: dict[str, Any]) -> list[str]:
    """Every integrity problem of a parsed record: seal first, then aggregates."""
    return seal_problems(record) + aggregate_problems(record)
