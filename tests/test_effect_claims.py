"""The papers' claimed differences (QC vs non-QC) derived from the registry and graded: an effect
is graded by the one rule of harness/evaluation/verdict.py: REPRODUCED / DIFFERENT / INCONCLUSIVE."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from harness.evaluation.claims import claims_for
from harness.evaluation.effects import method_effects
from harness.evaluation.verdict import DIFFERENT, DIFFERENT_BELOW, NOT_COMPARABLE
from harness.gate.grading import effect_rows
from harness.gate.run import run_gate
from harness.records.integrity import seal
from harness.records.store import RunRecord
from harness.records.writer import write_run_record
from harness.spec.method import load_method

QIDS = [f"q{i}" for i in range(2000)]
# What the grading reads of a spec: the settings its conditions are derived from (harness/spec/conditions.py).
BASE_SPEC = {
    "family": "dense",
    "pretrain": {"objective": "cocondenser", "steps": 120000},
    "datasets": ["msmarco-dev"],
    "data": {"msmarco_passages": "titled"},
}
SPEC = {**BASE_SPEC, "pretrain": {**BASE_SPEC["pretrain"], "context": "qc"}, "qgen": {"num_queries": 5}}


def _scores(mean: float, seed: int) -> dict[str, float]:
    rng = random.Random(seed)
    return {q: 1.0 if rng.random() < mean else 0.0 for q in QIDS}


def _record(method: str, pq: dict[str, float], profile: str = "paper", created: str = "2026-11-23T00") -> RunRecord:
    data = {
        "schema_version": 1,
        "run_id": f"{method}__{profile}__{created}",
        "created": created,
        "method": method,
        "profile": profile,
        "spec": SPEC if method == "cocondenser_qc" else BASE_SPEC,
        "finetune_stage": "retriever2",
        "metrics": {"msmarco-dev": {"RR@10": sum(pq.values()) / len(pq)}},
        "per_query": {"msmarco-dev": {"RR@10": pq}},
    }
    return RunRecord.from_json(seal(data), Path(f"{data['run_id']}.json"))


def test_claims_come_from_one_tables_own_rows():
    claims = [
        c
        for c in claims_for([("cocondenser_qc", "cocondenser")])
        if c.benchmark == "msmarco-dev" and c.measure == "RR@10"
    ]
    by_source = {(c.source, dict(c.a_conditions)["finetune_stage"]): c.delta for c in claims}
    assert by_source[("qc-pretraining-v2.txt v2 Table 1", "retriever2")] == pytest.approx(0.6)  # 39.4 - 38.8
    assert by_source[("qc-pretraining-v2.txt v2 Table 1", "retriever1")] == pytest.approx(0.4)  # 37.4 - 37.0
    assert all("cited" not in dict(c.b_conditions) for c in claims)  # never against the cited 38.2


def test_paper_runs_grade_a_reproduced_effect_and_a_reversed_one(tmp_path, sharp_evidence):
    """With paper-scale seed evidence (``sharp_evidence``): on the mini transfer alone MS MARCO's sigma
    rests on about one df (issue 61) and an 8-point reversal is INCONCLUSIVE, not DIFFERENT."""
    base = _scores(0.388, 1)
    rng = random.Random(7)
    # QC run: the same queries, with ~0.6 points more reciprocal-rank mass (flip ~0.6% of the misses)
    plus = {q: 1.0 if v == 0.0 and rng.random() < 0.0098 else v for q, v in base.items()}
    good = method_effects([_record("cocondenser", base), _record("cocondenser_qc", plus)], "paper")
    e = next(e for e in good if e.dataset == "msmarco-dev")
    assert 0 < e.delta and e.ci_low <= 0.6 <= e.ci_high
    assert e.claim_status not in DIFFERENT and any(c["claimed"] == pytest.approx(0.6) for c in e.claims)
    check = next(c for c in e.claims if c["claimed"] == pytest.approx(0.6))
    assert check["effect_ratio"] == pytest.approx(e.delta / 0.6) and check["margin"] > 0
    # reversed: QC loses ~8 points, beyond the effect margin at that seed spread
    minus = {q: 0.0 if v == 1.0 and rng.random() < 0.2 else v for q, v in base.items()}
    bad = method_effects([_record("cocondenser", base), _record("cocondenser_qc", minus)], "paper")
    assert bad[0].claim_status == DIFFERENT_BELOW and bad[0].ci_high < 0.6
    rows = effect_rows([_record("cocondenser", base), _record("cocondenser_qc", minus)])
    assert (
        rows[0].status == DIFFERENT_BELOW and rows[0].against.startswith("qc-pretraining-v") and rows[0].expected == 0.6
    )


def test_other_profiles_show_the_effect_but_never_grade_it():
    base, plus = _scores(0.3, 2), _scores(0.3, 2)
    effects = method_effects([_record("cocondenser", base, "mini"), _record("cocondenser_qc", plus, "mini")], "mini")
    assert effects and all(e.claim_status == NOT_COMPARABLE for e in effects)
    assert all("profile is 'mini'" in c["reason"] for e in effects for c in e.claims)


def test_a_failed_claim_fails_the_gate(tmp_path, sharp_evidence):
    base = _scores(0.388, 3)
    rng = random.Random(9)
    minus = {q: 0.0 if v == 1.0 and rng.random() < 0.2 else v for q, v in base.items()}
    for rec in (_record("cocondenser", base), _record("cocondenser_qc", minus)):
        # as a run writes it, with the committed spec: a record of another spec is SPEC-CHANGED, never graded
        write_run_record(rec.replace(spec=load_method(rec.method, "paper").config), tmp_path)
    result = run_gate(tmp_path, reported=None)
    failing = [r for r in result.failures() if r.run_id.startswith("cocondenser_qc - cocondenser")]
    assert failing and not result.passed


def test_leaderboard_effects_table_carries_the_claim_and_its_grade_for_paper_runs_only():
    from leaderboard_app.plots import LEARNING_CHECK, effects_frame

    base = _scores(0.388, 4)
    frame = effects_frame([_record("cocondenser", base), _record("cocondenser_qc", base)], ["paper"])
    row = frame[frame["dataset"] == "msmarco-dev"].iloc[0]
    assert row["effect"] == "cocondenser_qc - cocondenser" and row["vs_claim"] != LEARNING_CHECK
    assert "+0.60 (" in row["paper_claims"]
    # a mini effect is a learning check: no paper's effect beside it
    frame = effects_frame([_record("cocondenser", base, "mini"), _record("cocondenser_qc", base, "mini")], ["mini"])
    row = frame[frame["dataset"] == "msmarco-dev"].iloc[0]
    assert row["vs_claim"] == LEARNING_CHECK and row["paper_claims"] == ""
