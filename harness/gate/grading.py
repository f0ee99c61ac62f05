"""Grading one record: its rows against the papers' cells, against its reference, and the paired effects.

* ``paper`` records against the papers' cells of their method, re-computed with the current
  registry under conditions derived from the record's own spec (``harness.evaluation.compare``);
  ``checkpoint`` records only against the rows the checkpoint registry says are that checkpoint.
* Other records against their reference: each metric within ``TINY_TOLERANCE`` points either way
  (``TRAINING_FREE_TOLERANCE`` for a method without training), and the training losses at
  ``LOSS_CHECKPOINTS`` within ``LOSS_TOLERANCE`` percent.
* Effects: each method minus each control its spec names (in the paper profile: every pair of
  methods, and of stages, a paper prints a difference of), graded against the papers' claims, and
  the count claims ("better on 9 of 14 datasets") from them.
* Every record: each training stage it built (pre-training, the retrievers, the tiny teacher, the
  tiny T5) must have moved its weights (``weight_change`` in the stage's output, written by
  harness.training.engine); a stage that left them where they started is UNTRAINED. Records from
  before the field are not held to it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from harness.core.errors import HarnessError
from harness.core.points import p_phrase
from harness.core.statuses import (
    EFFECT,
    FAIL,
    NEAR,
    NEAR_FACTOR,
    NO_CELLS,
    NOT_COMPARABLE,
    NOT_YET_RUN,
    PASS,
    STALE_REFERENCE,
    UNTRAINED,
)
from harness.evaluation.bootstrap import paired_bootstrap
from harness.evaluation.compare import PAPER_PROFILE, TRAINING_FREE_FAMILIES, compare, verdict_note
from harness.evaluation.effects import count_checks, method_effects
from harness.gate.labels import source_label, system_axes
from harness.papers.released import (
    CHECKPOINT_PROFILE,
    Checkpoint,
    get_checkpoint,
    map_cells,
)
from harness.records import run_precision
from harness.records.store import RunRecord
from harness.spec.hashing import settings_hash

TINY_TOLERANCE = 0.5  # points; same seed and code must give the same numbers up to float noise
# A method without training (BM25: Lucene, deterministic) reproduces its reference exactly: the
# committed BM25 record (written 2026-11-21 on another machine) and a fresh run on 2026-11-23
# agree to all 16 digits on every measure. 0.01 points leaves room for float printing only, so a
# changed k1, b, analyzer or field weight fails even when it stays within the papers' tolerance.
TRAINING_FREE_TOLERANCE = 0.01
# Training-loss checkpoints compared with the reference run: (stage, key in the stage's output).
# A chance-level tiny retriever's metrics swing with float rounding from machine to machine, but
# its pre-training loss does not (measured: 0.16% between two machines), and any change to an
# objective, a mask ratio, the data or the optimiser moves it.
# A record trained on another machine than its reference's (another CPU model, instruction sets,
# thread count or GPU: HARDWARE_IDENTITY) rounds floats differently, and a chance-level tiny
# retriever's ranking amplifies that: the measured spread between machines (harness/gate/rerun.py's
# docstring: up to 4.72 points on SciFact R@100, an AVX2-only CPU against an AVX-512 one), rounded up.
# `check --rerun` gates at this too.
CROSS_MACHINE_TOLERANCE = 5.0  # points
LOSS_CHECKPOINTS = (("pretrain", "loss_first10"), ("pretrain", "loss_last10"), ("qgen_model", "final_loss"))
LOSS_TOLERANCE = 2.0  # percent of the reference's loss
PAPER_GRADED = ("paper", CHECKPOINT_PROFILE)  # profiles compared with the papers' cells


POINTS, LOSS = "points", "loss"  # a GateRow's unit


@dataclass
class GateRow:
    """One gated number (or one record-level line). Numbers in points, except a loss row's
    (``unit`` LOSS: expected and reproduced are losses, delta and tolerance percent of the expected)."""

    status: str
    run_id: str
    method: str
    profile: str
    benchmark: str = ""
    measure: str = ""
    against: str = ""
    expected: float | None = None
    reproduced: float | None = None
    delta: float | None = None
    tolerance: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    note: str = ""
    stage: str = ""  # which of the run's retrievers the number is (retriever1/2/3), where it is one of several
    printed: str = ""  # the paper's cell as printed ("0.340"): `expected` is it in points
    unit: str = POINTS
    cell_id: str = ""  # the papers' cell a comparison row grades (gate.cell_state keys its states by it)
    # a seed-graded row's tests, to audit its verdict (issue 61); None on the other rows
    se: float | None = None  # seed se of delta (an effect: of effect - printed effect)
    df: float | None = None  # sigma_rep's degrees of freedom
    p_equivalent: float | None = None  # TOST (an effect: its direction)
    p_different: float | None = None  # delta = 0, the row's own p
    p_different_holm: float | None = None  # Holm-adjusted over its table
    sigma: float | None = None  # sigma_rep's estimate the tests read
    sigma_source: str = ""  # which evidence set sigma_rep, in words

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# ----------------------------------------------------------------------------- the papers


def paper_comparisons(record: RunRecord, cells: Sequence[Mapping[str, Any]] | None) -> list[dict[str, Any]]:
    """The record against the reported cells of its method (the stored comparison if cells is None).

    A released checkpoint's record (profile ``checkpoint``) is graded only against the rows the
    checkpoint registry says are that checkpoint (:func:`checkpoint_comparisons`)."""
    if cells is None:
        return record.comparison

    if record.profile == CHECKPOINT_PROFILE:
        ckpt = get_checkpoint(str((record.checkpoint or {}).get("name")))
        return checkpoint_comparisons(ckpt, record.metrics, record.per_query, cells)

    exact = (record.spec or {}).get("family") in TRAINING_FREE_FAMILIES  # deterministic: a fixed tolerance, no seed
    final = record.finetune_stage or "final"
    by_stage = record.metrics_by_stage or {final: record.metrics}
    out = []
    for stage, metrics in by_stage.items():  # every fine-tuning stage a paper prints is graded
        conditions = record.run_conditions()
        if stage.startswith("retriever"):
            conditions["finetune_stage"] = stage
        # a declared variant's record is graded against its parent method's cells (spec.conditions)
        mine = [c for c in cells if c.get("method") == conditions["method"] and c.get("benchmark") in metrics]
        per_query = (record.per_query_by_stage or {}).get(stage) or record.per_query
        for comp in compare(metrics, per_query, mine, conditions, exact=exact):
            comp.finetune_stage = stage if stage.startswith("retriever") else None
            out.append(comp.to_dict())
    return out


def checkpoint_comparisons(
    ckpt: Checkpoint,
    metrics: Mapping[str, Mapping[str, float]],
    per_query: Mapping[str, Mapping[str, Mapping[str, float]]],
    cells: Sequence[Mapping[str, Any]],
) -> list[dict[str, Any]]:
    """Every cell of the checkpoint's rows and method on the scored benchmarks, compared or NOT-COMPARABLE."""

    out = []
    for cell, reason in map_cells(ckpt, [c for c in cells if c.get("benchmark") in metrics]):
        # A row that *is* this checkpoint is graded under its own conditions; the rest are not graded.
        conditions = {**(cell.get("conditions") or {}), "profile": "paper", "method": cell.get("method")}
        comp = compare(metrics, per_query, [cell], conditions, exact=True)[0]  # same weights: numerics only
        if reason:
            comp.status, comp.reason = NOT_COMPARABLE, f"checkpoint {ckpt.name}: {reason}"
            comp.delta = comp.ci_low = comp.ci_high = None
        else:
            comp.notes = "; ".join(filter(None, [f"released checkpoint {ckpt.name}", comp.notes]))
        out.append(comp.to_dict())
    return out


def paper_rows(record: RunRecord, cells: Sequence[Mapping[str, Any]] | None) -> list[GateRow]:
    """The record's rows against the papers' cells (one NO-CELLS row when none is of its method)."""
    base: dict[str, Any] = dict(run_id=record.run_id, method=record.method, profile=record.profile)
    comps = paper_comparisons(record, cells)
    axes = system_axes(cells) if cells else None
    if not comps:
        return [
            GateRow(
                NO_CELLS,
                **base,
                note=(f"no reported cell for {record.method} on {', '.join(record.metrics) or 'any benchmark'}"),
            )
        ]
    rows = []
    for c in comps:
        rows.append(
            GateRow(
                str(c.get("status") or NOT_COMPARABLE),
                **base,
                benchmark=str(c.get("benchmark") or ""),
                measure=str(c.get("measure") or ""),
                against=source_label(c, axes),
                expected=c.get("reported"),
                reproduced=c.get("reproduced"),
                delta=c.get("delta"),
                tolerance=c.get("tolerance"),
                ci_low=c.get("ci_low"),
                ci_high=c.get("ci_high"),
                note=verdict_note(c),
                stage=str(c.get("finetune_stage") or ""),
                printed=str(c.get("value") or ""),
                cell_id=str(c.get("cell_id") or ""),
                se=c.get("se"),
                df=c.get("sigma_df"),
                p_equivalent=c.get("p_equivalent"),
                p_different=c.get("p_zero"),
                p_different_holm=c.get("p_different"),
                sigma=c.get("sigma"),
                sigma_source=str(c.get("sigma_source") or ""),
            )
        )
    return rows


# ----------------------------------------------------------------------------- the reference


def against_reference(ref: RunRecord) -> str:
    """What a row graded against ``ref`` says it was graded against: the reference and the precision it
    trained in ("reference cotmae_qc__mini__... (bf16)"; none for a run that trained nothing)."""
    precision = run_precision.precision_label(ref.stages)
    return f"reference {ref.run_id}" + (f" ({precision})" if precision != run_precision.NO_TRAINING else "")


def _reference_status(delta: float, tolerance: float) -> str:
    """Two-sided: a re-run of the same code and seed that moves a number either way has changed
    (a papers' cell, by contrast, may be beaten: ABOVE)."""
    if abs(delta) <= tolerance:
        return PASS
    return NEAR if abs(delta) <= NEAR_FACTOR * tolerance else FAIL


def reference_rows(
    record: RunRecord, ref: RunRecord, tolerance: float = TINY_TOLERANCE, cross_machine: float | None = None
) -> list[GateRow]:
    """Each metric of ``ref`` reproduced by ``record`` within ``tolerance`` points, either way.

    ``cross_machine``: the tolerance when the records name different machines (a wider one than
    ``tolerance``; each row then says so); None keeps ``tolerance`` whatever the machines."""
    base: dict[str, Any] = dict(
        run_id=record.run_id,
        method=record.method,
        profile=record.profile,
        against=against_reference(ref),
        stage=record.finetune_stage or "",
    )

    # Recomputed from the stored specs with today's rule, so a comment or a declared deviation
    # (documentation, not settings) never makes a reference stale.
    mine, theirs = settings_hash(record.spec or {}), settings_hash(ref.spec or {})
    if record.spec and ref.spec and mine != theirs:
        return [
            GateRow(
                STALE_REFERENCE,
                **base,
                note=(
                    f"spec settings changed (hash {mine} vs reference {theirs}): re-run, then "
                    f"`python -m harness check --accept RUN_ID` and commit the new reference"
                ),
            )
        ]
    differ = precision_difference(record, ref)
    if differ:
        return [
            GateRow(
                NOT_COMPARABLE,
                **base,
                note=(
                    f"trained in another precision than the reference ({differ}): a different condition, not compared; "
                    f"re-run with `--precision {'/'.join(sorted(set(stage_precisions(ref).values())))}` "
                    "(what the reference used; CI's re-runs ask for it)"
                ),
            )
        ]
    machines = machine_difference(record, ref)
    across = cross_machine is not None and bool(machines) and cross_machine > tolerance
    if across:
        tolerance = float(cross_machine)  # type: ignore[arg-type]  # across is False when it is None
    rows = []
    for dataset, values in ref.metrics.items():
        for measure, expected in values.items():
            got = record.metrics.get(dataset, {}).get(measure)
            row = GateRow(
                NOT_COMPARABLE,
                **base,
                benchmark=dataset,
                measure=measure,
                expected=100.0 * expected,
                tolerance=tolerance,
            )
            if got is None:
                row.note = f"run did not evaluate {measure} on {dataset}"
            else:
                row.reproduced = 100.0 * got
                row.delta = row.reproduced - 100.0 * expected
                row.status = _reference_status(row.delta, tolerance)
                row.ci_low, row.ci_high = _paired_ci(record, ref, dataset, measure)
                if across:
                    row.note = (
                        f"another machine than the reference's ({machines}): cross-machine tolerance "
                        f"{tolerance:g} points, as `check --rerun`"
                    )
                elif row.status != PASS:
                    row.note = hardware_difference(record, ref)
            rows.append(row)
    return rows


# What decides whether two runs' last digits agree (docs/ci-gate.md, "What is bit-identical").
HARDWARE_IDENTITY = ("cpu_model", "cpu_features", "torch_threads", "torch_cpu_capability", "cuda_devices")


def stage_precisions(record: RunRecord) -> dict[str, str]:
    """The precision each training stage used (harness.records.run_precision)."""
    return run_precision.stage_precisions(record.stages)


def recorded_precision(record: RunRecord) -> str | None:
    """The one precision a record's training stages used (what a re-run asks `auto` for with
    ``--precision``); None for a record that trained nothing (BM25)."""
    used = set(stage_precisions(record).values())
    if len(used) > 1:
        raise HarnessError(
            f"{record.run_id}: its training stages used several precisions "
            f"({', '.join(sorted(used))}): no one --precision re-runs it"
        )
    return used.pop() if used else None


def _source(record: RunRecord, stage: str) -> str:
    """ " (measured)" / " (flag)" where the stage says how its precision was chosen, else ""."""
    for e in record.stages:
        if e.get("stage") == stage and isinstance(e.get("output"), dict) and e["output"].get("precision_source"):
            return f" ({e['output']['precision_source']})"
    return ""


def precision_difference(record: RunRecord, ref: RunRecord) -> str:
    """'pretrain fp32 -> bf16 (measured); ...' for the stages both records name with different
    precisions (reference's first), else ''."""
    mine, theirs = stage_precisions(record), stage_precisions(ref)
    return "; ".join(
        f"{stage} {theirs[stage]} -> {mine[stage]}{_source(record, stage)}"
        for stage in theirs
        if stage in mine and mine[stage] != theirs[stage]
    )


def _identity(rec: RunRecord) -> dict[str, Any]:
    detected = ((rec.hardware or {}).get("detected")) or {}
    return {k: detected.get(k) for k in HARDWARE_IDENTITY}


def machine_difference(record: RunRecord, ref: RunRecord) -> str:
    """'cpu_model 'A' -> 'B'; ...' for each identity field both records name and that differs, else ''
    (same machine kind, or a record that does not say)."""
    mine, theirs = _identity(record), _identity(ref)
    return "; ".join(
        f"{k} {theirs[k]!r} -> {mine[k]!r}"
        for k in HARDWARE_IDENTITY
        if mine[k] is not None and theirs[k] is not None and mine[k] != theirs[k]
    )


def hardware_difference(record: RunRecord, ref: RunRecord) -> str:
    """A note naming how the two runs' machines differ, where the records say (training is
    bit-identical only on the same CPU model, instruction sets and thread count)."""
    differ = machine_difference(record, ref)
    if differ:
        return f"another machine than the reference's ({differ}): training differs in the last digits"
    if all(v is None for v in _identity(ref).values()):
        return "the reference does not name its CPU (recorded before hardware identity was): compare by hand"
    return ""


def stage_outputs(record: RunRecord) -> dict[tuple[str, str], float]:
    """(stage, key) -> value for the loss checkpoints of the run's stages (built, or taken from the cache:
    records written since cached stages carry their build's outputs; older ones have none for those)."""
    out = {}
    for entry in record.stages:
        output: dict[str, Any] = entry["output"] if isinstance(entry.get("output"), dict) else {}
        for stage, key in LOSS_CHECKPOINTS:
            value = output.get(key)
            if entry.get("stage") == stage and isinstance(value, (int, float)) and not isinstance(value, bool):
                out[(stage, key)] = float(value)
    return out


def loss_rows(record: RunRecord, ref: RunRecord, tolerance: float = LOSS_TOLERANCE) -> list[GateRow]:
    """The run's training losses against the reference's, relative (percent), where both built the stage."""
    base: dict[str, Any] = dict(
        run_id=record.run_id, method=record.method, profile=record.profile, against=against_reference(ref)
    )
    mine, theirs = stage_outputs(record), stage_outputs(ref)
    rows = []
    for (stage, key), expected in theirs.items():
        got = mine.get((stage, key))
        if got is None or not expected:
            continue
        delta = 100.0 * (got - expected) / abs(expected)
        rows.append(
            GateRow(
                PASS if abs(delta) <= tolerance else FAIL,
                **base,
                benchmark=f"{stage} (loss)",
                measure=key,
                expected=expected,
                reproduced=got,
                delta=delta,
                tolerance=tolerance,
                note="training loss; delta and tolerance in % of the reference",
                unit=LOSS,
            )
        )
    return rows


def movement_rows(record: RunRecord) -> list[GateRow]:
    """One UNTRAINED row per training stage of the record whose weights did not move (its
    ``weight_change.max_abs`` is 0); a stage without the field (older records, or a run that resumed
    a finished stage) says nothing."""
    rows = []
    for entry in record.stages:
        output: dict[str, Any] = entry["output"] if isinstance(entry.get("output"), dict) else {}
        moved = output.get("weight_change")
        if not isinstance(moved, dict) or not isinstance(moved.get("max_abs"), (int, float)) or moved["max_abs"] > 0:
            continue
        stage = entry.get("stage", "?") + (f" ({entry['dataset']})" if entry.get("dataset") else "")
        rows.append(
            GateRow(
                UNTRAINED,
                record.run_id,
                record.method,
                record.profile,
                benchmark=stage,
                measure="weight change",
                reproduced=0.0,
                note=(
                    f"{record.path.name}: {stage} took {moved.get('steps', '?')} step(s) and left all "
                    f"{moved.get('parameters', '?')} trainable weights where they started (every step "
                    "at lr 0, or no gradient); fix the stage's schedule and re-run"
                ),
            )
        )
    return rows


def _paired_ci(record: RunRecord, ref: RunRecord, dataset: str, measure: str) -> tuple[float | None, float | None]:
    """Bootstrap CI (points) of the per-query difference, when both records kept per-query scores."""
    a = record.per_query.get(dataset, {}).get(measure)
    b = ref.per_query.get(dataset, {}).get(measure)
    if not a or not b or not set(a) & set(b):
        return None, None

    res = paired_bootstrap(a, b)
    return 100.0 * res.low, 100.0 * res.high


# ----------------------------------------------------------------------------- effects


def effect_rows(records: Sequence[RunRecord]) -> list[GateRow]:
    """One row per paired effect in each profile, graded against the papers' claims where comparable
    (a reversed or missed claim is DIFFERENT-*, which fails the gate), and in the paper profile one
    row per count claim both of whose methods have a paper run."""

    rows = []
    for profile in sorted({r.profile for r in records}):
        effects = method_effects(records, profile)
        for e in effects:
            name = f"{e.label} [{profile}]"
            shown = next((c for c in e.claims if c["status"] == e.claim_status), None)
            if shown is None:
                rows.append(
                    GateRow(
                        EFFECT,
                        name,
                        e.a,
                        profile,
                        e.dataset,
                        e.measure,
                        reproduced=e.delta,
                        ci_low=e.ci_low,
                        ci_high=e.ci_high,
                        note=f"no printed difference; {p_phrase(e.p_value)}, {e.queries} queries",
                    )
                )
                continue
            comparable = shown["status"] != NOT_COMPARABLE
            note = shown["reason"] or f"{shown['a_row']} - {shown['b_row']}"
            others = len(e.claims) - 1
            if others:
                note += f" (+{others} more claim(s))"
            rows.append(
                GateRow(
                    e.claim_status,
                    name,
                    e.a,
                    profile,
                    e.dataset,
                    e.measure,
                    against=shown["source"],
                    expected=shown["claimed"],
                    reproduced=e.delta,
                    delta=e.delta - shown["claimed"] if comparable else None,
                    ci_low=e.ci_low,
                    ci_high=e.ci_high,
                    note=note,
                    se=shown.get("se_diff"),
                    df=shown.get("sigma_df"),
                    p_equivalent=shown.get("p_direction"),
                    p_different=shown.get("p_zero"),
                    p_different_holm=shown.get("p_different"),
                    sigma=shown.get("sigma"),
                    sigma_source=str(shown.get("sigma_source") or ""),
                )
            )
        if profile == PAPER_PROFILE:
            ran = {r.method for r in records if r.profile == profile}
            for count in count_checks(effects):
                if {count.a, count.b} <= ran and count.status != NOT_YET_RUN:
                    rows.append(
                        GateRow(
                            count.status,
                            f"{count.a} - {count.b} [{profile}, count]",
                            count.a,
                            profile,
                            f"{count.datasets} datasets",
                            count.measure,
                            against=count.source,
                            expected=float(count.stated),
                            reproduced=None if count.at_least is None else float(count.at_least),
                            note=f"{count.text!r}: {count.reason}",
                        )
                    )
    return rows
