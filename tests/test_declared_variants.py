"""Declared variants (``variant_of``): each grades its parent's printed cells of the setting it runs, and no
others, and reuses every cached stage upstream of what it changes (issue 62)."""

from __future__ import annotations

import pytest

from harness.data.setting import data_setting
from harness.evaluation.compare import comparability
from harness.gate.cell_state import cell_states, paper_spec
from harness.papers.registry import load_registry
from harness.run.runner import plan_method
from harness.spec.conditions import run_conditions
from harness.spec.method import load_method, variants_of

# (paper, table, row key prefix) -> the variant that grades it, and how many of its cells now can be
TABLES = [
    ("qc-v1", "Table 2", "coCondenser / 1", "cocondenser_qc_q1", 5),
    ("qc-v1", "Table 2", "CoT-MAE / 1", "cotmae_qc_q1", 5),
    ("lexmae", "Table 3", "LexMAE", "lexmae_beir", 14),
    ("lexmae", "Table 7", "coCondenser", "cocondenser_lexmae_ft", 4),  # stage 3 needs the unreleased teacher
    ("qc-v2", "Table 4", "coCondenser / mixed ✓", "cocondenser_qc_mixed", 2),  # retriever 2's column is doubtful
    ("qc-v2", "Table 4", "CoT-MAE / mixed ✓", "cotmae_qc_mixed", 2),
]
# CPDAE Table 3's MARCO Dev Passage columns: one variant of cpdae_pairwise per training-query count
CPDAE_LOW = [("0.1k", "cpdae_q100"), ("1k", "cpdae_q1000"), ("10k", "cpdae_q10000")]


def _cells(paper: str, table: str, row: str) -> list:
    return [c for c in load_registry() if c.cell_id.startswith(f"{paper}/{table}/") and f"/{row}/" in c.cell_id + "/"]


@pytest.mark.parametrize(("paper", "table", "row", "variant", "graded"), TABLES)
def test_each_table_s_cells_are_not_yet_run_against_the_variant(paper, table, row, variant, graded):
    states = cell_states(_cells(paper, table, row), [])
    waiting = [s for s in states.values() if s.state == "NOT-YET-RUN"]
    assert len(waiting) == graded, {k: s.reason for k, s in states.items()}
    assert all(f"--method {variant} " in s.command for s in waiting)


def test_a_variant_grades_only_the_cells_stating_what_it_changes():
    spec = paper_spec("cotmae_qc_q1")
    assert spec is not None and "cotmae_qc_q1" in variants_of("cotmae_qc")
    final = spec.stages[-1]
    assert final["method"] == "cotmae_qc" and final["query_number"] == 1
    # QC v1 Table 1's row states query_number 5: the parent's setting, not the variant's
    assert (
        "query_number=5, run has query_number=1"
        in comparability("cotmae_qc", {"query_number": 5, "finetune_stage": "retriever2"}, final)[0]
    )
    # a cell of the parent stating none of the variant's conditions is the parent's own setting
    assert "states none of query_number" in comparability("cotmae_qc", {"finetune_stage": "retriever2"}, final)[0]
    # the parent's own runs do not state the variant's setting
    assert (
        "query_number=1, run has query_number=5"
        in comparability("cotmae_qc", {"query_number": 1}, paper_spec("cotmae_qc").stages[-1])[0]
    )


def test_the_derived_conditions_of_the_corpus_and_checkpoint_variants():
    beir = run_conditions(load_method("lexmae_beir", "paper").config, "lexmae_beir", "paper")
    assert beir["pretrain_corpus"] == "BEIR collections" and beir["method"] == "lexmae"
    assert "deviations" not in beir  # lexmae's MS-MARCO-only deviation is the one the variant undoes
    own = run_conditions(load_method("lexmae", "paper").config, "lexmae", "paper")
    assert own["pretrain_corpus"] == "msmarco-passage"
    ckpt = run_conditions(load_method("cocondenser_lexmae_ft", "paper").config, "cocondenser_lexmae_ft", "paper")
    assert ckpt["checkpoint"] == "co-condenser-marco" and ckpt["pretrain_steps"] == 0
    assert "checkpoint" not in run_conditions(load_method("nopretrain", "paper").config, "nopretrain", "paper")


def _keys(method: str, profile: str = "rehearsal") -> dict[str, str]:
    spec = load_method(method, profile)
    with data_setting(spec):
        ctx = plan_method(spec, list(spec.get("datasets") or []))
    return {f"{e['stage']}/{e['dataset']}": e["key"] for e in ctx.stages.entries if e.get("key")}


def test_the_query_number_variant_shares_its_parent_s_stages_up_to_query_generation():
    parent, variant = _keys("cotmae_qc"), _keys("cotmae_qc_q1")
    same = {k for k in parent if k in variant and parent[k] == variant[k]}
    assert any(k.startswith("passages/") for k in same) and any(k.startswith("bm25_negatives/") for k in same)
    assert not any(k.startswith(("qgen/", "pretrain/", "retriever")) for k in same)


def test_the_checkpoint_variant_pre_trains_nothing_and_shares_lexmae_s_bm25_stages():
    variant = _keys("cocondenser_lexmae_ft")
    assert not any(k.startswith(("passages/", "pretrain/")) for k in variant)
    lexmae = _keys("lexmae")  # LexMAE's pipeline: its own BM25 run of the MS MARCO training queries
    bm25 = {k for k in variant if k.startswith(("index/", "retrieve/"))}
    assert bm25 and all(lexmae.get(k) == variant[k] for k in bm25)


def test_the_mixed_context_variants_share_their_parent_s_queries_not_its_pre_training():
    for parent_name in ("cotmae_qc", "cocondenser_qc"):
        parent, variant = _keys(parent_name), _keys(f"{parent_name}_mixed")
        assert any(k.startswith("qgen/") for k in variant)
        assert all(parent.get(k) == variant[k] for k in variant if k.startswith(("passages/", "qgen/")))
        assert all(parent.get(k) != variant[k] for k in variant if k.startswith("pretrain/"))
        final = paper_spec(f"{parent_name}_mixed").stages[-1]
        assert (final["method"], final["mixed"], final["query_number"]) == (parent_name, True, 5)


def test_the_stage_3_cells_of_the_checkpoint_row_name_the_unpublished_teacher():
    # LexMAE Table 7's coCondenser row, reranker-distilled: no run can state Zhou et al.'s ranker (unpublished)
    states = cell_states(_cells("lexmae", "Table 7", "coCondenser"), [])
    never = [s for s in states.values() if s.state == "NOT-COMPARABLE"]
    assert len(never) == 2 and all("reranker_teacher=zhou2022b-ranker" in s.reason for s in never)
    assert all("weights unidentified" in s.reason and "model_pins.yaml" in s.reason for s in never)


@pytest.mark.parametrize(("column", "variant"), CPDAE_LOW)
def test_each_cpdae_low_resource_column_is_graded_by_its_query_count_variant(column, variant):
    cells = [c for c in load_registry() if c.cell_id.startswith("cpdae/Table 3/") and c.benchmark]
    waiting = {k: s for k, s in cell_states(cells, []).items() if s.state == "NOT-YET-RUN"}
    mine = [s for s in waiting.values() if f"--method {variant} " in s.command]
    assert len(waiting) == 3 and len(mine) == 1, {k: s.reason for k, s in cell_states(cells, []).items()}
    assert dict(cells[0].conditions or {}).get("finetune_queries") is not None


def test_the_cpdae_low_resource_variants_share_cpdae_s_pre_training():
    parent = _keys("cpdae")
    for _, variant in CPDAE_LOW:
        keys = _keys(variant)
        pretrain = [k for k in keys if k.startswith(("passages/", "pretrain/"))]
        assert pretrain and all(parent.get(k) == keys[k] for k in pretrain)
        assert any(parent.get(k) != keys[k] for k in keys if k.startswith("retriever"))


def test_a_variant_of_a_variant_names_the_method_its_parent_is_a_variant_of(tmp_path):
    from harness.spec.checks import structure_problems

    (tmp_path / "p.yaml").write_text("name: p\nextends: m\nvariant_of: {method: m}\n")
    ok = {"name": "v", "extends": "p", "variant_of": {"method": "m"}}
    bad = {"name": "v", "extends": "p", "variant_of": {"method": "other"}}
    assert not [p for p in structure_problems(ok, tmp_path / "v.yaml") if "variant_of.method" in p]
    assert [p for p in structure_problems(bad, tmp_path / "v.yaml") if "variant_of.method" in p]


def test_the_pairwise_variant_reuses_cpdae_s_pre_training():
    # only the fine-tuning changes: the pre-trained encoder is cpdae's cached one (same key), not a second run
    parent, variant = _keys("cpdae"), _keys("cpdae_pairwise")
    pre = {k for k in variant if k.startswith(("passages/", "pretrain/"))}
    assert any(k.startswith("pretrain/") for k in pre) and all(parent.get(k) == variant[k] for k in pre)
    assert any(parent.get(k) != variant[k] for k in variant if k.startswith("retriever"))


def test_the_beir_corpus_variant_pre_trains_its_own_encoder():
    # lexmae_beir changes the pre-training corpus, so sharing lexmae's pre-training key would be a wrong cache hit
    parent, variant = _keys("lexmae"), _keys("lexmae_beir")
    pre = [k for k in variant if k.startswith("pretrain/")]
    assert pre and all(parent.get(k) != variant[k] for k in pre)
