"""Effects between runs of one profile and between a run's stages (paired bootstrap, points)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from harness.cli import main
from harness.evaluation.effects import latest_by_method, method_effects, stage_effects
from harness.records.integrity import seal
from harness.records.store import RunRecord
from harness.records.writer import write_run_record

QIDS = [f"q{i}" for i in range(200)]


def scores(shift: float, seed: int) -> dict[str, float]:
    rng = random.Random(seed)
    return {q: min(1.0, max(0.0, rng.random() * 0.6 + shift)) for q in QIDS}


def record(method: str, profile: str, created: str, pq: dict[str, float], stages: dict | None = None) -> RunRecord:
    per_query = {"nfcorpus": {"nDCG@10": pq}}
    data = {
        "schema_version": 1,
        "run_id": f"{method}__{profile}__{created}",
        "created": created,
        "method": method,
        "profile": profile,
        "metrics": {"nfcorpus": {"nDCG@10": sum(pq.values()) / len(pq)}},
        "per_query": per_query,
    }
    if stages:
        data["per_query_by_stage"] = {s: {"nfcorpus": {"nDCG@10": v}} for s, v in stages.items()}
        data["metrics_by_stage"] = {s: {"nfcorpus": {"nDCG@10": sum(v.values()) / len(v)}} for s, v in stages.items()}
    return RunRecord.from_json(seal(data), Path(f"{data['run_id']}.json"))


def test_method_minus_control_is_paired_and_only_within_a_profile():
    control = scores(0.1, 1)
    better = {q: min(1.0, v + 0.1) for q, v in control.items()}
    records = [
        record("nopretrain", "mini", "2026-11-22T01", control),
        record("cotmae", "mini", "2026-11-22T02", better),
        record("cotmae", "mini", "2026-11-21T00", control),  # older: not the one compared
        record("cotmae_qc", "tiny", "2026-11-22T03", better),
    ]  # other profile: never paired with mini
    assert latest_by_method(records, "mini")["cotmae"].created == "2026-11-22T02"
    effects = method_effects(records, "mini")
    assert [(e.a, e.b, e.dataset, e.measure) for e in effects] == [("cotmae", "nopretrain", "nfcorpus", "nDCG@10")]
    e = effects[0]
    assert e.delta == pytest.approx(100 * sum(better[q] - control[q] for q in QIDS) / len(QIDS))
    assert e.ci_low > 0 and e.significant and e.p_value < 0.01 and e.queries == 200
    same = method_effects([record("nopretrain", "mini", "a", control), record("cotmae", "mini", "b", control)], "mini")
    assert same[0].delta == 0.0 and not same[0].significant


def test_the_effects_are_the_specs_comparisons():
    """Each spec's `compare_with` gives the pairs: every pre-training method minus the control, QC minus non-QC
    (the pairs effects.py listed by hand before the specs declared them)."""
    from harness.spec.method import comparisons, pretraining_methods

    pairs = comparisons()
    before = {
        ("cotmae", "nopretrain"),
        ("cotmae_qc", "nopretrain"),
        ("cocondenser", "nopretrain"),
        ("cocondenser_qc", "nopretrain"),
        ("cpdae", "nopretrain"),
        ("lexmae", "nopretrain"),
        ("cotmae_qc", "cotmae"),
        ("cocondenser_qc", "cocondenser"),
    }
    methods = {m for pair in before for m in pair}
    assert {(a, b) for a, b in pairs if {a, b} <= methods} == before  # a method added later adds its own pairs
    assert len(pairs) == len(set(pairs))
    # every pre-training method is measured against the control
    assert {a for a, b in pairs if b == "nopretrain"} == set(pretraining_methods())


def test_stage_effects_against_the_zero_shot_start():
    start, r1 = scores(0.0, 2), scores(0.2, 2)
    rec = record("nopretrain", "mini", "2026-11-22T01", r1, stages={"start": start, "retriever1": r1})
    effects = stage_effects(rec)
    assert [(e.a, e.b) for e in effects] == [("nopretrain retriever1", "nopretrain start")]
    assert effects[0].delta > 0 and effects[0].significant
    assert stage_effects(record("cotmae", "mini", "x", r1)) == []  # no start scored


def test_effects_command_prints_the_table(tmp_path, capsys):
    control = scores(0.1, 3)
    for method, pq in (("nopretrain", control), ("cotmae", {q: v * 0.5 for q, v in control.items()})):
        data = record(method, "mini", f"2026-11-22T0{len(method)}", pq).to_json()
        write_run_record(
            RunRecord.from_json({k: v for k, v in data.items() if k not in ("integrity", "schema_version")}), tmp_path
        )
    assert main(["effects", "--records", str(tmp_path), "--wide", "--json", str(tmp_path / "e.json")]) == 0
    out = capsys.readouterr().out
    assert "cotmae - nopretrain" in out and "1 with a 95% CI that excludes 0" in out
    assert main(["effects", "--records", str(tmp_path), "--profile", "tiny"]) == 0
    assert "no two comparable tiny records" in capsys.readouterr().out
