"""cpdae_pairwise, CPDAE fine-tuned as its paper does (pairwise loss, static negatives of a BM25 warm-up
model): a declared variant of cpdae that grades CPDAE's cells, on cpdae's cached pre-training."""

from __future__ import annotations

import pytest

from harness.core.statuses import NOT_YET_RUN
from harness.data.setting import data_setting
from harness.gate import cell_state
from harness.papers.registry import load_reported_cells
from harness.run.runner import plan_method, run_method
from harness.spec.conditions import run_conditions
from harness.spec.method import load_method, validate_specs, variants_of
from harness.spec.stage_settings import StageSettings


def _keys(method: str, profile: str) -> dict[tuple[str, str | None], str]:
    spec = load_method(method, profile)
    with data_setting(spec):
        ctx = plan_method(spec, list(spec.get("datasets") or []))
    return {(e["stage"], e["dataset"]): e["key"] for e in ctx.stages.entries if e.get("key")}


def test_the_variant_is_graded_as_cpdae_without_its_fine_tuning_deviation():
    spec = load_method("cpdae_pairwise", "paper")
    # the pairwise recipe, and Table 3's low-resource settings declared on top of it (baselines/cpdae_q*.yaml)
    assert sorted(variants_of("cpdae")) == ["cpdae_pairwise", "cpdae_q100", "cpdae_q1000", "cpdae_q10000"]
    conditions = run_conditions(spec.config, "cpdae_pairwise", "paper")
    assert conditions["method"] == "cpdae" and "deviations" not in conditions
    assert "recipe" in run_conditions(load_method("cpdae", "paper").config, "cpdae", "paper")["deviations"]
    r1, r2 = StageSettings.from_spec(spec, "retriever1"), StageSettings.from_spec(spec, "retriever2")
    assert (r1.loss, r2.loss, r2.passages_per_query, r2.lr, r2.global_queries) == ("pairwise", "pairwise", 8, 5e-6, 64)
    assert spec.get("finetune.retriever2.init") == "retriever1" and spec.get("finetune.retriever2.negatives") == [
        "mined"
    ]


def test_check_json_states_cpdae_s_full_data_cells_not_yet_run_with_the_variant_s_command():
    cells, error = load_reported_cells(None)
    assert error is None
    states = cell_state.cell_states(cells, [])
    ours = {c["cell_id"] for c in cells if c.get("method") == "cpdae" and c.get("benchmark")}
    graded = {k for k in ours if "cpdae_pairwise" in states[k].command}
    # Table 1's MARCO dev MRR@10 / R@1000 and TREC 2019 nDCG@10, Table 2's MARCO dev pair
    assert len(graded) == 5 and all(states[k].state == NOT_YET_RUN for k in graded)
    assert states["cpdae/Table 1/CPDAE/MARCO Dev Passage MRR@10"].command == (
        "python -m harness run --method cpdae_pairwise --profile paper"
    )
    # Table 3's low-resource cells state finetune_queries: each is run by its own cpdae_q* variant
    low = [k for k in ours if k.startswith("cpdae/Table 3/CPDAE/MARCO Dev Passage")]
    assert len(low) == 3 and all(states[k].state == NOT_YET_RUN and "cpdae_q" in states[k].command for k in low)


@pytest.mark.parametrize("profile", ["paper", "tiny"])
def test_the_variant_shares_cpdae_s_pre_training_key(profile, tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    ours, theirs = _keys("cpdae_pairwise", profile), _keys("cpdae", profile)
    shared = [k for k in theirs if k[0] in ("tokenizer", "passages", "pretrain", "index", "retrieve")]
    assert ("pretrain", None) in shared
    assert all(ours[k] == theirs[k] for k in shared), profile
    # the warm-up model is retriever 1 with the pairwise loss: another key than cpdae's InfoNCE retriever 1
    assert ours[("retriever1", None)] != theirs[("retriever1", None)] and ("retriever2", None) in ours


def test_the_rehearsal_dry_run_plans_the_warm_up_its_mining_and_the_final_retriever(capsys):
    result = run_method("cpdae_pairwise", "rehearsal", dry_run=True)
    assert result.dry_run and result.run_record is None
    out = capsys.readouterr().out
    for stage in ("pretrain", "retriever1", "dense_retrieve/msmarco-passage-train/train/mine", "retriever2"):
        assert stage in out, stage


def test_a_variant_must_extend_the_method_it_is_graded_as(tmp_path):
    base = (
        "name: {n}\ndescription: d\nfamily: dense\npapers: []\nstages: [finetune_r1, evaluate]\n"
        "datasets: [scifact]\nfinetune: {{lr: 1.0e-5, global_queries: 4, passages_per_query: 2, epochs: 1}}\n"
    )
    (tmp_path / "a.yaml").write_text(base.format(n="a"))
    (tmp_path / "b.yaml").write_text(base.format(n="b") + "variant_of: {method: a}\n")
    assert any("variant_of.method 'a' must be the spec this one extends" in p for p in validate_specs(tmp_path))
