"""One state per registry cell, computed once (issue 53): every surface that says what a paper's cell
is (``run``'s last line, ``check``, ``grade``, the dry-run's graded cells, the glance tab and the
report) reads :func:`cell_states` (or :func:`paper_run` for "could a run grade it at all").

A cell's state, for a set of records:

* the verdict of the paper-graded records that share its setting (the worst of several, as the gate
  fails on any), with the records that gave it;
* NOT-COMPARABLE with the reason when no paper-profile run can grade it: a declared deviation of the
  method's paper spec, a row the paper cites from another paper, an extraction doubt, no number, or
  no paper spec of its method. No command is offered for such a cell, since none would grade it;
* NOT-COMPARABLE with the record's reason when a paper record scored the benchmark but did not share
  the cell's setting (an older spec, a measure not scored), with the command that would grade it;
* NOT-YET-RUN otherwise, naming what is missing, with the command that would grade it.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.core.statuses import NOT_COMPARABLE, NOT_YET_RUN
from harness.data.catalog import AGGREGATES
from harness.evaluation.compare import comparability, verdict_note
from harness.evaluation.verdict import VERDICTS, worst
from harness.gate.grading import PAPER_GRADED, paper_comparisons
from harness.papers import model_pins
from harness.papers.released import load_checkpoints
from harness.records.store import RunRecord
from harness.spec.conditions import run_conditions
from harness.spec.method import load_method, variants_of
from harness.stages.graph import FINETUNE_STAGES, GRAPH

# The verdicts a record can give a cell it shares the setting of.
GRADED = tuple(v for v in VERDICTS if v != NOT_COMPARABLE)


def _get(cell: Any, name: str) -> Any:
    return cell.get(name) if isinstance(cell, Mapping) else getattr(cell, name, None)


def run_command(method: str, profile: str = "paper", datasets: Sequence[str] = ()) -> str:
    dataset = [f"--dataset {','.join(datasets)}"] if datasets else []
    return " ".join(["python -m harness run --method", method, "--profile", profile, *dataset])


def datasets_of(benchmark: str) -> tuple[str, ...]:
    """The datasets a benchmark's number needs (an average: its members)."""
    aggregate = AGGREGATES.get(benchmark)
    return tuple(aggregate.members) if aggregate else (benchmark,)


@dataclass(frozen=True)
class PaperSpec:
    """What a paper-profile run of a method states for grading, at each retriever it evaluates."""

    method: str
    datasets: tuple[str, ...]
    stages: tuple[dict[str, Any], ...]  # the run's conditions per evaluated retriever (the final one last)


@functools.cache
def paper_spec(method: str) -> PaperSpec | None:
    """The method's paper spec as a run would state it, or None when specs/ has no paper profile of it."""
    try:
        spec = load_method(method, "paper")
    except Exception:  # noqa: BLE001 - any failure to load means no paper run of it can be started
        return None
    config = spec.config
    base = run_conditions(config, method, "paper")
    outline = list(config.get("stages") or [])
    trained = [s.name for s in GRAPH if s.name in FINETUNE_STAGES and s.step in outline]
    stages = tuple({**base, "finetune_stage": s, "final_stage": trained[-1]} for s in trained) or (base,)
    return PaperSpec(method, tuple(config.get("datasets") or ()), stages)


@functools.cache
def _variants(method: str) -> tuple[str, ...]:
    return tuple(variants_of(method))


def stage_reason(cell: Any, conditions: Mapping[str, Any]) -> str:
    """Why a run stating ``conditions`` cannot grade ``cell`` ('' when it can, given the numbers):
    the grading rule's comparability, an extraction doubt, or a printed value that is no number."""
    if _get(cell, "score") is None:
        return f"the paper printed no number here ({_get(cell, 'value')!r})"
    if _get(cell, "doubt"):
        return f"doubtful cell, not graded: {_get(cell, 'doubt')}"
    return comparability(_get(cell, "method") or None, dict(_get(cell, "conditions") or {}), conditions)[0]


@dataclass(frozen=True)
class PaperRun:
    """Whether a paper-profile run can grade a cell: the command that would, or why none can."""

    command: str  # "" when no paper-profile run can grade the cell
    reason: str  # why not ("" when the command can)
    datasets: tuple[str, ...] = ()  # the datasets the command names (none: the spec's own)
    via: str = ""  # why the command is no paper-profile run (a released checkpoint's `reproduce`)
    target: str = ""  # what the command runs: the method (or variant) spec, or the released checkpoint


@functools.cache
def _paper_run(method: str, benchmark: str, conditions: tuple, score: bool, doubt: str, key: tuple) -> PaperRun:
    cell: dict[str, Any] = {"method": method, "benchmark": benchmark, "conditions": dict(conditions)}
    cell.update(doubt=doubt, score=1.0 if score else None)
    if not method:
        return PaperRun("", "the row is no method the harness runs (another system, or a table's text)")
    if not benchmark:
        return PaperRun("", "the column is no benchmark the harness scores (a size, a latency, a count, text)")
    spec = paper_spec(method)
    reason = f"no paper profile of {method} in specs/" if spec is None else ""
    reasons = [stage_reason(cell, c) for c in spec.stages] if spec is not None else []
    # the method's own paper spec first, then each declared variant of it (spec.conditions' variant rule)
    candidates = [s for s in (spec, *map(paper_spec, _variants(method))) if s is not None]
    for candidate in candidates:
        if not all(stage_reason(cell, c) for c in candidate.stages):
            wanted = datasets_of(benchmark)
            have = candidate.datasets
            extra = () if set(wanted) <= set(have) else tuple(dict.fromkeys([*have, *wanted]))
            return PaperRun(run_command(candidate.method, "paper", extra), "", extra, target=candidate.method)
    reason = reason or _unpublished_teacher(cell, candidates) or reasons[-1]
    if score and not doubt:  # a row a released checkpoint is: `reproduce` grades it (gate.grading)
        for ckpt in load_checkpoints().checkpoints.values():
            if key in ckpt.reproduces and benchmark in ckpt.benchmarks:
                command = f"python -m harness reproduce --checkpoint {ckpt.name} --benchmark {benchmark}"
                why = f"{reason}; the released checkpoint {ckpt.name} is this row, so `reproduce` grades it"
                return PaperRun(command, "", (), why, target=ckpt.name)
    return PaperRun("", reason)


def _unpublished_teacher(cell: Mapping[str, Any], candidates: Sequence[PaperSpec]) -> str:
    """The reason a cell distilled from a reranker whose weights have no published copy cannot be graded, when
    no spec of its method distils one at all (else that spec's own reason says it, as LexMAE's does): the
    external dependency, not the first condition some spec happens to differ in."""
    teacher = str(dict(cell.get("conditions") or {}).get("reranker_teacher") or "")
    pin = model_pins.registry().get(teacher)
    if not teacher or pin is None or pin.repo is not None:
        return ""
    if any("reranker_teacher" in stage for c in candidates for stage in c.stages):
        return ""
    return (
        f"cell reports reranker_teacher={teacher}; weights unidentified: no published copy of the teacher "
        f"(harness/papers/model_pins.yaml), and no spec of {cell.get('method')} distils a reranker"
    )


def paper_run(cell: Any) -> PaperRun:
    """The paper-profile run that would grade ``cell`` (or the released checkpoint that is its row), or
    why none can; cached per distinct cell setting."""
    conditions = tuple(sorted((str(k), str(v)) for k, v in (dict(_get(cell, "conditions") or {})).items()))
    # the string form is enough for comparability: values are compared after normalise_condition
    key = (
        str(_get(cell, "paper") or str(_get(cell, "cell_id") or "").split("/", 1)[0]),
        str(_get(cell, "table") or ""),
        str(_get(cell, "row") or ""),
    )
    return _paper_run(
        str(_get(cell, "method") or ""),
        str(_get(cell, "benchmark") or ""),
        conditions,
        _get(cell, "score") is not None,
        str(_get(cell, "doubt") or ""),
        key,
    )


@dataclass
class CellState:
    """One registry cell's state for a set of records (numbers in points)."""

    cell_id: str
    state: str
    reason: str = ""
    command: str = ""  # the run that would grade it ("" when none can)
    runs: list[str] = field(default_factory=list)  # the records that gave the state
    comparison: dict[str, Any] = field(default_factory=dict)  # the record comparison shown (the worst)
    profile: str = ""  # the profile of the record shown ("paper" or "checkpoint")


def _not_run_reason(method: str, benchmark: str, records: Sequence[RunRecord]) -> str:
    if any(r.method == method and r.profile in PAPER_GRADED for r in records):
        return f"the paper-profile runs of {method} did not score {benchmark}"
    others = sorted({r.profile for r in records if r.method == method})
    return "no paper-profile run yet" + (
        f"; the runs so far ({', '.join(others)}) are not comparable with the papers" if others else ""
    )


def state_of(
    cell: Any, found: Iterable[tuple[str, str, Mapping[str, Any]]], records: Sequence[RunRecord] = ()
) -> CellState:
    """``cell``'s state from the comparisons of it that records made: (run id, profile, comparison dict)."""
    found = list(found)
    can = paper_run(cell)
    out = CellState(str(_get(cell, "cell_id") or ""), NOT_YET_RUN, command=can.command)
    comparable = [(r, p, x) for r, p, x in found if x.get("status") in GRADED]
    if comparable:
        out.state = worst(x["status"] for _, _, x in comparable)
        out.runs = sorted({r for r, _, _ in comparable})
        _, out.profile, shown = next((r, p, x) for r, p, x in comparable if x["status"] == out.state)
        out.comparison = dict(shown)
        out.reason = verdict_note(shown)
    elif not can.command:
        out.state, out.reason = NOT_COMPARABLE, f"no paper-profile run can grade it: {can.reason}"
        out.runs = sorted({r for r, _, _ in found})
    elif found:
        out.state, out.reason = NOT_COMPARABLE, str(found[0][2].get("reason") or "")
        out.runs = sorted({r for r, _, _ in found})
        out.comparison = dict(found[0][2])
    else:
        out.reason = can.via or _not_run_reason(str(_get(cell, "method")), str(_get(cell, "benchmark")), records)
    return out


def cell_states(
    cells: Sequence[Any],
    records: Sequence[RunRecord],
    comparisons: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
) -> dict[str, CellState]:
    """Cell id -> state for every cell of ``cells`` over ``records`` (only the paper-graded ones count).
    ``comparisons``: run id -> ``grading.paper_comparisons`` dicts, when the caller has them already."""
    graded = [r for r in records if r.profile in PAPER_GRADED]
    if comparisons is None:
        dicts = [c if isinstance(c, Mapping) else c.to_dict() for c in cells]
        comparisons = {r.run_id: paper_comparisons(r, dicts) for r in graded}
    by_cell: dict[str, list[tuple[str, str, Mapping[str, Any]]]] = {}
    for rec in graded:
        for x in comparisons.get(rec.run_id, []):
            by_cell.setdefault(str(x.get("cell_id")), []).append((rec.run_id, rec.profile, x))
    return {str(_get(c, "cell_id")): state_of(c, by_cell.get(str(_get(c, "cell_id")), []), records) for c in cells}


def run_summary_states(comparisons: Sequence[Mapping[str, Any]], stage: str | None) -> dict[tuple[str, str], str]:
    """(benchmark, measure) -> the state a run's last line gives it: the worst verdict of the cells its
    ``stage`` (the final retriever; None: the run's only one) shares the setting of, else NOT-COMPARABLE."""
    out: dict[tuple[str, str], list[str]] = {}
    for c in comparisons:
        if stage is not None and c.get("finetune_stage") not in (None, stage):
            continue  # a training-free run has one variant, named after its method
        out.setdefault((str(c.get("benchmark")), str(c.get("measure"))), []).append(str(c.get("status")))
    return {
        k: worst(s for s in v if s in GRADED) if any(s in GRADED for s in v) else NOT_COMPARABLE for k, v in out.items()
    }


def states_line(states: Mapping[str, CellState], label: str = "papers' cells") -> str:
    """The papers' cells in one line, by state, the ones no paper-profile run can grade said apart."""
    counts: dict[str, int] = {}
    for c in states.values():
        counts[c.state] = counts.get(c.state, 0) + 1
    never = sum(c.state == NOT_COMPARABLE and not c.command for c in states.values())
    parts = [f"{s} {counts[s]}" for s in (*VERDICTS, NOT_YET_RUN) if s in counts]
    tail = (
        f" ({never} NOT-COMPARABLE: no paper-profile run can grade them, the reason per cell in --json)"
        if never
        else ""
    )
    return f"{label} ({len(states)}): " + ", ".join(parts) + tail


def row_state(states: Sequence[CellState]) -> str:
    """A printed row's cells as one status: their state when they share one, else each state with
    its number of cells ("REPRODUCED 2, NOT-YET-RUN 3"), in the legend's order."""
    found = [c.state for c in states]
    order = [s for s in (*VERDICTS, NOT_YET_RUN) if s in found]
    return order[0] if len(order) == 1 else ", ".join(f"{s} {found.count(s)}" for s in order)
