"""CI regression gate: every run record against what it must reproduce (`python -m harness check`).

* **Integrity first.** Every record is re-hashed against the seal written with it and its
  aggregates are recomputed from its own per-query scores (``harness/integrity.py``); an edited,
  unsealed or inconsistent record is CORRUPT (always failing), naming the part that changed.
* ``paper``-profile records are graded against the papers' reported cells for their method,
  re-computed with the current registry, conditions derived from the record's own spec and the
  one rule of ``harness.evaluation.verdict`` (so neither an edited ``comparison`` block nor a
  stale registry can hide a gap): DIFFERENT-BELOW / DIFFERENT-ABOVE fail, INCONCLUSIVE does not.
* ``checkpoint`` records (released weights scored by ``reproduce``) are re-graded against the rows
  the checkpoint registry says are that checkpoint (``harness.released``), never a reference; a
  record of a checkpoint no longer registered is UNKNOWN-METHOD.
* Every other profile (``tiny``, ``mini``) is compared with its **reference**: the run named for its
  (method, profile) in ``references.json`` in the records folder. A reference is made only
  explicitly (``check --accept RUN_ID``), never because a record is the newest. Each metric of
  the reference must be matched within ``TINY_TOLERANCE`` points in either direction; a record
  older than its reference is SUPERSEDED; a changed spec hash is STALE-REFERENCE (re-run and accept). A
  ``paper`` record whose method has a reference (BM25) is gated against both; a method without
  training must match its reference within ``TRAINING_FREE_TOLERANCE`` (float printing only).
* A reference named in ``references.json`` whose record is absent (or unusable) is MISSING
  (failing): the manifest is also the list of records the gate expects. An entry whose record is
  of another method or profile than its key is WRONG-REFERENCE (failing, and nothing is gated
  against it). A manifest that cannot be read, or an entry without the accepted record's sha256,
  stops the gate with one line (exit 2). A record whose method has no spec is UNKNOWN-METHOD, one
  with no reference NO-REFERENCE (both fail under ``--strict``).
* **Nothing is skipped silently.** Every ``*.json`` file in the folder is gated or fails: a file
  that cannot be read as a record (truncated or empty, not JSON, not UTF-8, a partial record
  missing a required key, a repeated ``run_id``) is UNREADABLE, and a record that loaded but
  could not be compared is ERROR, one row each naming the file and why. A record from a newer
  schema version is UNREADABLE too: the harness that checks it cannot vouch for fields it does
  not know, and in CI the records and the harness come from one commit, so a newer version means a
  record from elsewhere (or a version bump without a reader); upgrade the harness to check it.
  Only a temp file still being written (``harness.fsutil.is_temp``: ``atomic_path``'s
  ``.<name>.<random>.tmp.json``, and ``*.tmp``) is IN-PROGRESS: listed, never read, failing
  only under ``--strict`` (a reference still being written is MISSING until it is renamed into
  place, so ignoring the temp file lets nothing expected pass). The papers' cells are read too: a
  ``--reported`` file or registry that cannot be loaded is one UNREADABLE row naming it (paper
  records still show their stored comparison, but the gate cannot pass without the cells).
* **Effects.** For every profile, each method minus each method its spec names in ``compare_with``
  (the control; QC minus non-QC; ``harness.evaluation.effects``), with a paired-bootstrap CI, graded
  against the papers' printed difference where the runs share its setting
  (``harness.evaluation.claims``, the same rule: DIFFERENT fails the gate); otherwise EFFECT (no
  claim) or NOT-COMPARABLE.
* **Contributed runs** (docs/contributing-runs.md) pass the same checks as any other record, plus
  two that every record passes: its ``datasets`` checksums must be the catalog's for the same file
  (``harness.data.checksums``; else DATA-MISMATCH, failing, naming the dataset and file), and a
  record the gate would grade (against its reference, or the papers) must come from a spec it knows,
  the method's current spec for its profile or its reference's (else SPEC-CHANGED: not gated,
  failing under ``--strict``, and shown apart on the leaderboard). A reference, the records it
  superseded and a record without a reference are not graded, so not held to the spec here.
* ``check --accept RUN_ID`` accepts only a record that loads and passes integrity; an unsealed
  record is refused like an edited one (removing the seal of a doctored record must not turn it
  into a reference: every record written since sealing was introduced carries one).

Exit code: 1 when any row is FAIL, DIFFERENT-*, CORRUPT, DATA-MISMATCH, MISSING, WRONG-REFERENCE,
UNREADABLE or ERROR; with ``strict`` (and always for ``check --rerun``) also on NEAR, UNKNOWN-METHOD,
NO-REFERENCE, STALE-REFERENCE, SPEC-CHANGED and IN-PROGRESS.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from harness.errors import HarnessError, UnknownNameError
from harness.fsutil import is_temp
from harness.records import (REFERENCES_FILE, RunRecord, Skipped, load_records, load_references,
                             records_dir)
from harness.reported import load_reported_cells, paper_key
# Every status word, which fail the gate and the order rows are counted in: declared once there.
from harness.statuses import (CORRUPT, DATA_MISMATCH, EFFECT, ERROR, FAIL, FAILING, IN_PROGRESS, MISSING, NEAR,
                               NEAR_FACTOR, NO_CELLS, NO_REFERENCE, NOT_COMPARABLE, PASS, REFERENCE, SPEC_CHANGED,
                               STALE_REFERENCE, STATUSES, STRICT_FAILING, SUPERSEDED, UNKNOWN_METHOD, UNREADABLE,
                               WRONG_REFERENCE)
from harness.text_table import format_table

TINY_TOLERANCE = 0.5  # points; same seed and code must give the same numbers up to float noise
# A method without training (BM25: Lucene, deterministic) reproduces its reference exactly: the
# committed BM25 record (written 2026-11-21 on another machine) and a fresh run on 2026-11-23
# agree to all 16 digits on every measure. 0.01 points leaves room for float printing only, so a
# changed k1, b, analyzer or field weight fails even when it stays within the papers' tolerance.
TRAINING_FREE_TOLERANCE = 0.01
TRAINING_FREE_FAMILIES = ("lexical",)
# Training-loss checkpoints compared with the reference run: (stage, key in the stage's output).
# A chance-level tiny retriever's metrics swing with float rounding from machine to machine, but
# its pre-training loss does not (measured: 0.16% between two machines), and any change to an
# objective, a mask ratio, the data or the optimiser moves it.
LOSS_CHECKPOINTS = (("pretrain", "loss_first10"), ("pretrain", "loss_last10"), ("qgen_model", "final_loss"))
LOSS_TOLERANCE = 2.0  # percent of the reference's loss
CHECKPOINT_PROFILE = "checkpoint"  # records of released checkpoints (harness/reproduce.py)
PAPER_GRADED = ("paper", CHECKPOINT_PROFILE)  # profiles compared with the papers' cells


@dataclass
class GateRow:
    """One gated number (or one record-level line). Numbers in points."""

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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class GateResult:
    """``skipped``: the files not gated (each also has a row, UNREADABLE / ERROR / IN-PROGRESS,
    which is what decides the verdict)."""

    records_dir: Path
    rows: list[GateRow]
    skipped: list[Skipped]
    strict: bool = False
    n_records: int = 0

    def counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for row in self.rows:
            counts[row.status] = counts.get(row.status, 0) + 1
        order = (*STATUSES, *counts)  # declaration order; a status not declared (a stored one) last
        return {s: counts[s] for s in sorted(counts, key=order.index)}

    def failures(self) -> list[GateRow]:
        bad = STRICT_FAILING if self.strict else FAILING
        return [r for r in self.rows if r.status in bad]

    @property
    def passed(self) -> bool:
        return not self.failures()

    @property
    def verdict(self) -> str:
        """The gate's one word: PASSED or FAILED."""
        return "PASSED" if self.passed else "FAILED"

    @property
    def exit_code(self) -> int:
        return 0 if self.passed else 1

    def to_dict(self) -> dict[str, Any]:
        return {
            "records_dir": str(self.records_dir), "strict": self.strict, "passed": self.passed,
            "exit_code": self.exit_code, "records": self.n_records, "counts": self.counts(),
            "rows": [r.to_dict() for r in self.rows],
            "skipped": [{"path": str(s.path), "reason": s.reason} for s in self.skipped],
            "tiny_tolerance": TINY_TOLERANCE,
        }


# ----------------------------------------------------------------------------- reported cells

def _norm(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def system_axes(cells: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str], str]:
    """(paper, table) -> "rows" or "columns": the axis that names the systems.

    Systems run across ("columns") when every row holds one benchmark and the rows hold
    different ones (a BEIR table lists datasets down); otherwise rows name the systems.
    """
    rows_of: dict[tuple[str, str], dict[str, set[str]]] = {}
    for c in cells:
        if c.get("benchmark"):
            table = rows_of.setdefault((paper_key(c), str(c.get("table"))), {})
            table.setdefault(str(c.get("row")), set()).add(str(c["benchmark"]))
    out = {}
    for key, rows in rows_of.items():
        one_each = all(len(b) == 1 for b in rows.values())
        out[key] = "columns" if one_each and len(set().union(*rows.values())) > 1 else "rows"
    return out


def system_label(comp: Mapping[str, Any], axes: Mapping[tuple[str, str], str] | None = None) -> str:
    """The printed name of the system a cell belongs to: its row, or its column when the
    table lists datasets down (``axes`` from ``system_axes``; else guessed from the cell)."""
    row, col, bench = str(comp.get("row") or ""), str(comp.get("column") or ""), str(comp.get("benchmark") or "")
    axis = (axes or {}).get((paper_key(comp), str(comp.get("table"))))
    if axis:
        return col if axis == "columns" else row
    r, b = _norm(row), _norm(bench)
    if col and r and b and (r == b or r in b or b in r or r.startswith("average")
                            or difflib.SequenceMatcher(None, r, b).ratio() >= 0.8):
        return col
    return row


def source_label(comp: Mapping[str, Any], axes: Mapping[tuple[str, str], str] | None = None) -> str:
    return f"{paper_key(comp)} {comp.get('table', '')} · {system_label(comp, axes)}".strip()


def paper_comparisons(record: RunRecord, cells: Sequence[Mapping[str, Any]] | None) -> list[dict[str, Any]]:
    """The record against the reported cells of its method (the stored comparison if cells is None).

    A released checkpoint's record (profile ``checkpoint``) is graded only against the rows the
    checkpoint registry says are that checkpoint (``harness.reproduce.checkpoint_comparisons``)."""
    if cells is None:
        return record.comparison
    from harness.evaluation.compare import compare

    if record.profile == CHECKPOINT_PROFILE:
        from harness.released import get_checkpoint
        from harness.reproduce import checkpoint_comparisons

        ckpt = get_checkpoint(str((record.get("checkpoint") or {}).get("name")))
        return checkpoint_comparisons(ckpt, record.metrics, record.per_query, cells)

    exact = record.spec.get("family") in TRAINING_FREE_FAMILIES  # deterministic: a fixed tolerance, no seed
    final = record.finetune_stage or "final"
    by_stage = record.get("metrics_by_stage") or {final: record.metrics}
    out = []
    for stage, metrics in by_stage.items():  # every fine-tuning stage a paper prints is graded
        conditions = record.conditions()
        if stage.startswith("retriever"):
            conditions["finetune_stage"] = stage
        mine = [c for c in cells if c.get("method") == record.method and c.get("benchmark") in metrics]
        per_query = (record.get("per_query_by_stage") or {}).get(stage) or record.per_query
        for comp in compare(metrics, per_query, mine, conditions, exact=exact):
            comp.finetune_stage = stage if stage.startswith("retriever") else None
            out.append(comp.to_dict())
    return out


# ----------------------------------------------------------------------------- references

def accept_reference(run_id: str, directory: str | Path | None = None) -> tuple[Path, dict[str, Any]]:
    """Make ``run_id`` the reference of its (method, profile): it must load and pass integrity,
    seal included. Returns the manifest path and the new entry (commit both the record and the manifest).

    Raises HarnessError (one line naming the file) for an unreadable manifest or record, and for an
    unsealed one: a record without its seal cannot be told from an edited one whose seal was
    removed, and accepting it would make the doctored numbers the reference."""
    import datetime as _dt

    from harness.fsutil import atomic_write_text
    from harness.records import read_references

    directory = Path(directory) if directory is not None else records_dir()
    data = read_references(directory)  # first: an unreadable manifest must not be overwritten
    records, skipped = load_records(directory)
    rec = next((r for r in records if r.run_id == run_id), None)
    if rec is None:
        why = next((s.reason for s in skipped if s.path.stem == run_id), None)
        known = [r.run_id for r in records]
        if why:
            raise HarnessError(f"{directory / (run_id + '.json')}: cannot be accepted: {why}")
        raise UnknownNameError("run record", run_id, known)
    problems = rec.integrity_problems
    if problems and problems[0].startswith("unsealed"):
        raise HarnessError(f"{rec.path}: not sealed (no integrity block), so it cannot be accepted as a reference: "
                           "a record without its seal cannot be told from an edited one; re-run the method")
    if problems:
        more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
        raise HarnessError(f"{rec.path}: fails its seal or integrity check, so it cannot be accepted as a reference: "
                           f"{problems[0]}{more}")
    mismatched = data_mismatches(rec)
    if mismatched:  # a reference run on other data would make every later run on the catalog's fail
        raise HarnessError(f"{rec.path}: its data checksums are not the catalog's ({mismatched[0].describe()}), "
                           "so it cannot be accepted as a reference: re-run on the catalog's data")
    path = directory / REFERENCES_FILE
    refs = data["references"]
    entry = {"run_id": rec.run_id, "sha256": rec.get("integrity", {}).get("sha256"),
             "accepted": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}
    refs[f"{rec.method}/{rec.profile}"] = entry
    data["about"] = ("The reference run of each (method, profile): `python -m harness check` gates other runs "
                     "against it and fails when its record is missing. Changed only by `check --accept RUN_ID`.")
    data["references"] = dict(sorted(refs.items()))
    atomic_write_text(path, json.dumps(data, indent=1) + "\n")
    return path, entry


def _reference_status(delta: float, tolerance: float) -> str:
    """Two-sided: a re-run of the same code and seed that moves a number either way has changed
    (a papers' cell, by contrast, may be beaten: ABOVE)."""
    if abs(delta) <= tolerance:
        return PASS
    return NEAR if abs(delta) <= NEAR_FACTOR * tolerance else FAIL


def reference_rows(record: RunRecord, ref: RunRecord, tolerance: float = TINY_TOLERANCE) -> list[GateRow]:
    """Each metric of ``ref`` reproduced by ``record`` within ``tolerance`` points, either way."""
    base = dict(run_id=record.run_id, method=record.method, profile=record.profile, against=f"reference {ref.run_id}")
    from harness.spec import settings_hash

    # Recomputed from the stored specs with today's rule, so a comment or a declared deviation
    # (documentation, not settings) never makes a reference stale.
    mine, theirs = settings_hash(record.spec), settings_hash(ref.spec)
    if record.spec and ref.spec and mine != theirs:
        return [GateRow(STALE_REFERENCE, **base, note=(
            f"spec settings changed (hash {mine} vs reference {theirs}): re-run, then "
            f"`python -m harness check --accept RUN_ID` and commit the new reference"))]
    differ = precision_difference(record, ref)
    if differ:
        return [GateRow(NOT_COMPARABLE, **base, note=(
            f"trained in another precision than the reference ({differ}): a different condition, not compared; "
            "a machine without native bf16 trains a bf16 profile in fp32 (harness/training/precision.py)"))]
    rows = []
    for dataset, values in ref.metrics.items():
        for measure, expected in values.items():
            got = record.metrics.get(dataset, {}).get(measure)
            row = GateRow(NOT_COMPARABLE, **base, benchmark=dataset, measure=measure, expected=100.0 * expected,
                          tolerance=tolerance)
            if got is None:
                row.note = f"run did not evaluate {measure} on {dataset}"
            else:
                row.reproduced = 100.0 * got
                row.delta = row.reproduced - row.expected
                row.status = _reference_status(row.delta, tolerance)
                row.ci_low, row.ci_high = _paired_ci(record, ref, dataset, measure)
                if row.status != PASS:
                    row.note = hardware_difference(record, ref)
            rows.append(row)
    return rows


# What decides whether two runs' last digits agree (docs/ci-gate.md, "What is bit-identical").
HARDWARE_IDENTITY = ("cpu_model", "cpu_features", "torch_threads", "torch_cpu_capability", "cuda_devices")


def stage_precisions(record: RunRecord) -> dict[str, str]:
    """The precision each training stage used, where its record says (records before 2026-11-25 do not)."""
    return {str(e.get("stage")): str(e["output"]["precision"]) for e in record.stages
            if isinstance(e.get("output"), dict) and e["output"].get("precision")}


def precision_difference(record: RunRecord, ref: RunRecord) -> str:
    """'pretrain bf16 -> fp32; ...' for the stages both records name with different precisions, else ''."""
    mine, theirs = stage_precisions(record), stage_precisions(ref)
    return "; ".join(f"{stage} {theirs[stage]} -> {mine[stage]}" for stage in theirs
                     if stage in mine and mine[stage] != theirs[stage])


def hardware_difference(record: RunRecord, ref: RunRecord) -> str:
    """A note naming how the two runs' machines differ, where the records say (training is
    bit-identical only on the same CPU model, instruction sets and thread count)."""
    def identity(rec: RunRecord) -> dict[str, Any]:
        detected = ((rec.data.get("hardware") or {}).get("detected")) or {}
        return {k: detected.get(k) for k in HARDWARE_IDENTITY}

    mine, theirs = identity(record), identity(ref)
    differ = [f"{k} {theirs[k]!r} -> {mine[k]!r}" for k in HARDWARE_IDENTITY
              if mine[k] is not None and theirs[k] is not None and mine[k] != theirs[k]]
    if differ:
        return "another machine than the reference's (" + "; ".join(differ) + "): training differs in the last digits"
    if all(v is None for v in theirs.values()):
        return "the reference does not name its CPU (recorded before hardware identity was): compare by hand"
    return ""


def stage_outputs(record: RunRecord) -> dict[tuple[str, str], float]:
    """(stage, key) -> value for the loss checkpoints of the run's stages (built, or taken from the cache:
    records written since cached stages carry their build's outputs; older ones have none for those)."""
    out = {}
    for entry in record.stages:
        output = entry.get("output") if isinstance(entry.get("output"), dict) else {}
        for stage, key in LOSS_CHECKPOINTS:
            value = output.get(key)
            if entry.get("stage") == stage and isinstance(value, (int, float)) and not isinstance(value, bool):
                out[(stage, key)] = float(value)
    return out


def loss_rows(record: RunRecord, ref: RunRecord, tolerance: float = LOSS_TOLERANCE) -> list[GateRow]:
    """The run's training losses against the reference's, relative (percent), where both built the stage."""
    base = dict(run_id=record.run_id, method=record.method, profile=record.profile, against=f"reference {ref.run_id}")
    mine, theirs = stage_outputs(record), stage_outputs(ref)
    rows = []
    for (stage, key), expected in theirs.items():
        got = mine.get((stage, key))
        if got is None or not expected:
            continue
        delta = 100.0 * (got - expected) / abs(expected)
        rows.append(GateRow(PASS if abs(delta) <= tolerance else FAIL, **base, benchmark=f"{stage} (loss)",
                            measure=key, expected=expected, reproduced=got, delta=delta, tolerance=tolerance,
                            note="training loss; delta and tolerance in % of the reference"))
    return rows


def _paired_ci(record: RunRecord, ref: RunRecord, dataset: str, measure: str) -> tuple[float | None, float | None]:
    """Bootstrap CI (points) of the per-query difference, when both records kept per-query scores."""
    a = record.per_query.get(dataset, {}).get(measure)
    b = ref.per_query.get(dataset, {}).get(measure)
    if not a or not b or not set(a) & set(b):
        return None, None
    from harness.evaluation.bootstrap import paired_bootstrap

    res = paired_bootstrap(a, b)
    return 100.0 * res.low, 100.0 * res.high


# ----------------------------------------------------------------------------- the gate

def _paper_rows(record: RunRecord, cells: Sequence[Mapping[str, Any]] | None) -> list[GateRow]:
    base = dict(run_id=record.run_id, method=record.method, profile=record.profile)
    comps = paper_comparisons(record, cells)
    axes = system_axes(cells) if cells else None
    if not comps:
        return [GateRow(NO_CELLS, **base, note=(
            f"no reported cell for {record.method} on {', '.join(record.metrics) or 'any benchmark'}"))]
    rows = []
    for c in comps:
        rows.append(GateRow(
            str(c.get("status") or NOT_COMPARABLE), **base, benchmark=str(c.get("benchmark") or ""),
            measure=str(c.get("measure") or ""), against=source_label(c, axes), expected=c.get("reported"),
            reproduced=c.get("reproduced"), delta=c.get("delta"), tolerance=c.get("tolerance"),
            ci_low=c.get("ci_low"), ci_high=c.get("ci_high"), note=str(c.get("reason") or c.get("notes") or ""),
        ))
    return rows


def run_gate(directory: str | Path | None = None, *, strict: bool = False,
             cells: Sequence[Mapping[str, Any]] | None = None, reported: str | Path | None = None,
             tiny_tolerance: float = TINY_TOLERANCE, references_from: str | Path | None = None,
             known_methods: Sequence[str] | None = None) -> GateResult:
    """Gate every record in ``directory`` (default runs/records).

    ``cells`` (dicts) overrides the registry; ``reported`` names a JSON snapshot of cells;
    ``references_from`` is the folder whose ``references.json`` and reference records to use
    (default ``directory``: a fresh re-run in a scratch folder is gated against the committed
    references this way; then missing references are not expected in the scratch folder).
    """
    directory = Path(directory) if directory is not None else records_dir()
    ref_dir = Path(references_from) if references_from is not None else directory
    records, skipped = load_records(directory)
    result = GateResult(directory, [], skipped, strict, len(records))
    for s in skipped:  # one row per file not gated, so it counts in the verdict like any other
        status = IN_PROGRESS if is_temp(s.path) else UNREADABLE
        result.rows.append(GateRow(status, s.path.stem, "", "", note=f"{s.path.name}: {s.reason}"))
    if known_methods is None:
        from harness.spec import list_methods

        known_methods = list_methods()
    usable = []
    for rec in records:
        base = dict(run_id=rec.run_id, method=rec.method, profile=rec.profile)
        if rec.integrity_problems:
            result.rows.extend(GateRow(CORRUPT, **base, note=f"{rec.path.name}: {problem}")
                               for problem in rec.integrity_problems)
            continue
        data_problems = data_mismatches(rec)
        if data_problems:  # run on other data than the catalog's: none of its numbers can be compared
            result.rows.extend(GateRow(DATA_MISMATCH, **base, benchmark=m.dataset, note=(
                f"{rec.path.name}: {m.describe()}; re-run on the catalog's data (`python -m harness fetch`)"))
                for m in data_problems)
            continue
        if rec.profile == CHECKPOINT_PROFILE:
            unknown = _unknown_checkpoint(rec)
            if unknown:
                result.rows.append(GateRow(UNKNOWN_METHOD, **base, note=f"{rec.path.name}: {unknown}; not gated"))
                continue
        elif rec.method not in known_methods:
            result.rows.append(GateRow(UNKNOWN_METHOD, **base, note=(
                f"{rec.path.name}: no method spec named '{rec.method}' (known: {', '.join(sorted(known_methods))}); "
                "not gated")))
            continue
        usable.append(rec)
    if cells is None and any(r.profile in PAPER_GRADED for r in usable):
        cells, error = load_reported_cells(reported)
        if error:  # the papers' cells are what paper records are gated against: no silent fall-back
            result.rows.append(GateRow(UNREADABLE, str(reported or "baselines/reported"), "-", "-", note=(
                f"{error}; paper records cannot be graded without the papers' cells")))
    references = load_references(ref_dir)
    ref_records = {r.run_id: r for r in (usable if ref_dir == directory else load_records(ref_dir)[0])}
    if ref_dir == directory:
        present = {r.path.stem for r in records} | {s.path.stem for s in skipped}
        for (method, profile), entry in sorted(references.items()):
            if entry["run_id"] not in ref_records:
                where = ("is here but not usable (its row above says why)" if entry["run_id"] in present
                         else "is not here")
                result.rows.append(GateRow(MISSING, entry["run_id"], method, profile, note=(
                    f"{REFERENCES_FILE} names {entry['run_id']} as the {method} [{profile}] reference, but its "
                    f"record {where} (restore it from git, or accept another run)")))
    wrong: set[tuple[str, str]] = set()  # manifest keys whose record is of another method or profile
    for (method, profile), entry in references.items():
        ref = ref_records.get(entry["run_id"])
        if ref is not None and (ref.method, ref.profile) != (method, profile):
            # Gating cotmae runs against a cocondenser record would compare unlike with unlike.
            result.rows.append(GateRow(WRONG_REFERENCE, ref.run_id, method, profile, note=(
                f"{REFERENCES_FILE}: '{method}/{profile}' names {ref.path.name}, a record of {ref.method} "
                f"[{ref.profile}]: accept a {method} [{profile}] run with `python -m harness check --accept RUN_ID`")))
            wrong.add((method, profile))
            continue
        sealed = (ref.get("integrity") or {}).get("sha256") if ref else None
        if ref is not None and sealed != entry["sha256"]:
            result.rows.append(GateRow(CORRUPT, ref.run_id, method, profile, note=(
                f"{ref.path.name}: differs from the record accepted as the reference (sha256 "
                f"{str(sealed)[:12]}... vs accepted {entry['sha256'][:12]}...): re-sealed after an edit?")))
            ref_records.pop(entry["run_id"])
    def reference_of(rec: RunRecord) -> RunRecord | None:
        entry = references.get((rec.method, rec.profile))
        return ref_records.get(entry["run_id"]) if entry and (rec.method, rec.profile) not in wrong else None

    # A record the gate would grade must come from a spec it knows: the method's current one, or the one
    # its reference ran (STALE-REFERENCE below covers that case); else it is set apart, never graded.
    for rec in list(usable):
        ref = reference_of(rec)
        if rec.profile == CHECKPOINT_PROFILE or (ref is None and rec.profile not in PAPER_GRADED) or (
                ref is not None and (rec.run_id == ref.run_id or (rec.created, rec.run_id) < (ref.created, ref.run_id))):
            continue  # not graded anyway: NO-REFERENCE, REFERENCE or SUPERSEDED below
        why = spec_change(rec, ref)
        if why:
            usable.remove(rec)
            result.rows.append(GateRow(SPEC_CHANGED, rec.run_id, rec.method, rec.profile, note=(
                f"{rec.path.name}: {why}; not gated (re-run with the committed spec)")))
    groups: dict[tuple[str, str], list[RunRecord]] = {}
    for rec in usable:
        if rec.profile in PAPER_GRADED:
            try:
                result.rows.extend(_paper_rows(rec, cells))
            except Exception as exc:  # noqa: BLE001 - one odd record must not stop the gate
                _unusable(result, rec, f"could not be compared with the papers: {type(exc).__name__}: {exc}")
            if rec.profile == CHECKPOINT_PROFILE or (rec.method, rec.profile) not in references:
                continue  # gated against the papers only; with a reference, also against it below
        groups.setdefault((rec.method, rec.profile), []).append(rec)
    for (method, profile), group in groups.items():
        entry = references.get((method, profile))
        ref = ref_records.get(entry["run_id"]) if entry and (method, profile) not in wrong else None
        for rec in group:
            base = dict(run_id=rec.run_id, method=method, profile=profile)
            if ref is None:
                result.rows.append(GateRow(NO_REFERENCE, **base, note=(
                    f"no reference for {method} [{profile}] in {ref_dir / REFERENCES_FILE}: "
                    f"`python -m harness check --accept {rec.run_id}` makes this run the reference")))
            elif rec.run_id == ref.run_id:
                if rec.profile != "paper":  # a paper reference is gated against the papers above
                    result.rows.append(GateRow(REFERENCE, **base, against="(is the reference)",
                                               note=f"accepted {entry.get('accepted', '')}".strip()))
            elif (rec.created, rec.run_id) < (ref.created, ref.run_id):
                result.rows.append(GateRow(SUPERSEDED, **base, against=f"reference {ref.run_id}",
                                           note="older than the reference; not gated"))
            else:
                try:
                    training_free = (rec.get("spec") or {}).get("family") in TRAINING_FREE_FAMILIES
                    tolerance = TRAINING_FREE_TOLERANCE if training_free else tiny_tolerance
                    result.rows.extend(reference_rows(rec, ref, tolerance))
                    result.rows.extend(loss_rows(rec, ref))
                except Exception as exc:  # noqa: BLE001
                    _unusable(result, rec, f"could not be compared with {ref.run_id}: {type(exc).__name__}: {exc}")
    result.rows.extend(effect_rows(usable))
    return result


def data_mismatches(rec: RunRecord) -> list[Any]:
    """The files of the record's ``datasets`` whose checksums are not the catalog's
    (``harness.data.checksums.Mismatch``; empty when every file the catalog pins matches)."""
    from harness.data.checksums import mismatches

    return mismatches(rec.get("datasets"))


def spec_change(rec: RunRecord, ref: RunRecord | None = None) -> str:
    """Why the record's spec settings are neither those of its method's current spec (for its profile)
    nor those of ``ref`` (its reference); "" when one of them matches. Settings as STALE-REFERENCE
    compares them (``harness.spec.settings_hash``: documentation keys left out)."""
    from harness.spec import load_method, settings_hash

    if not rec.spec:
        return "the record holds no spec, so the settings it ran cannot be known"
    mine = settings_hash(rec.spec)
    if ref is not None and ref.spec and settings_hash(ref.spec) == mine:
        return ""
    try:
        current = settings_hash(load_method(rec.method, rec.profile).config)
    except HarnessError as exc:
        return f"the {rec.method} spec cannot be resolved for profile '{rec.profile}' ({exc})"
    if current == mine:
        return ""
    theirs = f" nor the reference {ref.run_id}'s ({settings_hash(ref.spec)})" if ref is not None and ref.spec else ""
    return (f"spec settings {mine} are not the current {rec.method} [{rec.profile}] spec's ({current}){theirs}")


def set_apart(rec: RunRecord, references: dict[tuple[str, str], dict[str, Any]] | None,
              by_id: dict[str, RunRecord]) -> tuple[str, str] | None:
    """(status, why) when ``rec`` must be shown apart: a method without a spec here, or spec settings
    that are neither the method's current ones nor its reference's (``harness.gate.spec_change``, the
    gate's rule). Unlike the gate, which grades only the newest runs, every record is held to it: a run
    of an older spec is never a row beside the papers'. Without a readable manifest only the method
    is checked (the reference's spec cannot be known)."""
    from harness.spec import list_methods

    if rec.profile == CHECKPOINT_PROFILE:  # a released checkpoint has no spec; its registry names it
        return None
    if rec.method not in list_methods():
        return UNKNOWN_METHOD, f"no method spec named '{rec.method}' in this harness"
    if references is None:
        return None
    entry = references.get((rec.method, rec.profile))
    why = spec_change(rec, by_id.get(entry["run_id"]) if entry else None)
    return (SPEC_CHANGED, why) if why else None


def _unknown_checkpoint(rec: RunRecord) -> str:
    """Why a checkpoint record cannot be graded ("" when its checkpoint is in the registry)."""
    from harness.released import load_checkpoints

    name = (rec.get("checkpoint") or {}).get("name")
    try:
        registry = load_checkpoints()
    except HarnessError as exc:
        return f"checkpoint registry not loadable ({exc})"
    if name not in registry.checkpoints:
        return f"no checkpoint named '{name}' in {registry.path}"
    return ""


def effect_rows(records: Sequence[RunRecord]) -> list[GateRow]:
    """One row per paired effect in each profile, graded against the papers' claim where comparable."""
    from harness.evaluation.effects import method_effects

    rows = []
    for profile in sorted({r.profile for r in records}):
        for e in method_effects(records, profile):
            shown = next((c for c in e.claims if c["status"] == e.claim_status), None)
            if shown is None:
                rows.append(GateRow(EFFECT, f"{e.a} - {e.b} [{profile}]", e.a, profile, e.dataset, e.measure,
                                    reproduced=e.delta, ci_low=e.ci_low, ci_high=e.ci_high,
                                    note=f"no printed difference; p={e.p_value:.3f}, {e.queries} queries"))
                continue
            comparable = shown["status"] != NOT_COMPARABLE
            note = shown["reason"] or f"{shown['a_row']} - {shown['b_row']}"
            others = len(e.claims) - 1
            if others:
                note += f" (+{others} more claim(s))"
            rows.append(GateRow(e.claim_status, f"{e.a} - {e.b} [{profile}]", e.a, profile, e.dataset, e.measure,
                                against=shown["source"], expected=shown["claimed"], reproduced=e.delta,
                                delta=e.delta - shown["claimed"] if comparable else None,
                                ci_low=e.ci_low, ci_high=e.ci_high, note=note))
    return rows


def _unusable(result: GateResult, rec: RunRecord, reason: str) -> None:
    """A record that validated but cannot be compared is not gated: an ERROR row fails the gate
    (it may be a harness bug as much as an odd record; either way nothing vouched for it)."""
    result.skipped.append(Skipped(rec.path, reason))
    result.rows.append(GateRow(ERROR, rec.run_id, rec.method, rec.profile, note=f"{rec.path.name}: {reason}"))
    result.n_records -= 1


# ----------------------------------------------------------------------------- display

def _pts(value: float | None, signed: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:+.2f}" if signed else f"{value:.2f}"


def format_gate(result: GateResult) -> str:
    """One plain-text table of every gated number (and of every file not gated), then the verdict."""
    headers = ["status", "run", "benchmark", "measure", "against", "expected", "reproduced", "delta", "tol",
               "CI(delta)", "note"]
    rows = []
    for r in result.rows:
        ci = "-" if r.ci_low is None or r.ci_high is None else f"[{r.ci_low:+.2f}, {r.ci_high:+.2f}]"
        rows.append([r.status, r.run_id, r.benchmark, r.measure, r.against, _pts(r.expected), _pts(r.reproduced),
                     _pts(r.delta, True), _pts(r.tolerance), ci, r.note])
    lines = []
    if rows:
        lines.append(format_table(headers, rows))
    else:
        lines.append(f"no run records in {result.records_dir}")
    counts = ", ".join(f"{k} {v}" for k, v in result.counts().items()) or "nothing gated"
    why = f" ({len(result.failures())} failing row(s))" if not result.passed else ""
    mode = " [strict: NEAR, ungated records and unfinished writes fail]" if result.strict else ""
    lines.append(f"{result.n_records} record(s), {len(result.skipped)} skipped; {counts} -> gate {result.verdict}"
                 f"{why}{mode}")
    return "\n".join(lines)
