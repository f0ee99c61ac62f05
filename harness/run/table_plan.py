"""The dry-run of a printed table (`harness table PAPER TABLE --dry-run`, issue 62): each run the table needs
(:func:`harness.gate.tables.table_runs`) planned as ``run --dry-run`` plans it, with its projected cost on
the spec's declared hardware, the stages it shares with an earlier run of the table (the same stage key:
one pre-training serving several fine-tunings is built once) and the cost once those are counted once.

Every stage is priced as uncached (the cost on a fresh machine), as the glance's commands are. A released
checkpoint's `reproduce` trains nothing; its encoding and search are not projected (said, not guessed).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from harness.gate.tables import REPRODUCE, TableRun
from harness.run import projection
from harness.run.runner import plan_method
from harness.spec.method import load_method
from harness.training.precision import resolve_precision

# (method, datasets) -> the planned stage entries; the planner a test may replace
Planner = Callable[[Any, list[str]], list[dict[str, Any]]]


@dataclass(frozen=True)
class PlannedRun:
    """One run of a table with its plan: the cost alone and in the table, and what it shares."""

    run: TableRun
    cost: str  # the run alone, every stage uncached
    cost_here: str  # after the runs before it in the table: their shared stages counted once
    shared: tuple[
        tuple[str, str, int], ...
    ]  # (stage label, its cache key, 1-based number of the earlier run planning it)
    stages: tuple[dict[str, Any], ...] = ()  # the plan's entries, each with its cache key


def _pipeline_plan(spec: Any, datasets: list[str]) -> list[dict[str, Any]]:
    return list(plan_method(spec, datasets).stages.entries)


def stage_label(entry: dict[str, Any]) -> str:
    return f"{entry['stage']}/{entry['dataset']}" if entry.get("dataset") else str(entry["stage"])


def plan_runs(runs: Sequence[TableRun], planner: Planner = _pipeline_plan) -> list[PlannedRun]:
    """Each run's plan in the table's order; a stage key an earlier run plans is shared (built once)."""
    seen: dict[tuple[str, str], int] = {}
    out = []
    for number, run in enumerate(runs, 1):
        if run.kind == REPRODUCE:
            note = "a released checkpoint: no training; its encoding and search are not projected"
            out.append(PlannedRun(run, note, note, ()))
            continue
        try:
            spec = resolve_precision(load_method(run.target, "paper"), say=lambda line: None)
            entries = [dict(e, plan="to run") for e in planner(spec, list(run.datasets or spec.get("datasets") or []))]
        except Exception as exc:  # noqa: BLE001 - a plan that cannot be built is said, and the others still shown
            note = f"not planned ({type(exc).__name__}: {exc})"
            out.append(PlannedRun(run, note, note, ()))
            continue
        keyed = [(e, (str(e["stage"]), str(e["key"]))) for e in entries if e.get("key")]
        shared = tuple((stage_label(e), k[1], seen[k]) for e, k in keyed if k in seen)
        here = [dict(e, plan="cached") if e.get("key") and (e["stage"], e["key"]) in seen else e for e in entries]
        out.append(
            PlannedRun(
                run,
                projection.declared_cost_line(spec, entries),
                projection.declared_cost_line(spec, here),
                shared,
                tuple(entries),
            )
        )
        for _, k in keyed:
            seen.setdefault(k, number)
    return out
