"""The BEIR variants of the dense methods (baselines/*_beir.yaml, QC v2 Table 2): they reuse their parent's
pre-training, train retriever 1 on the sbert hard negatives, and (``variant_of``) their runs grade the table's cells,
which keep the methods the paper prints."""

from __future__ import annotations

import pytest

from harness.data.hard_negatives import HARD_NEGATIVE_SOURCES
from harness.data.setting import data_setting
from harness.gate.cell_state import cell_states
from harness.papers.registry import cells_for
from harness.run.runner import plan_method
from harness.spec.conditions import VARIANT, VARIANT_SPEC, derived, run_conditions
from harness.spec.method import MethodSpec, load_method
from harness.spec.schema import HARD_NEGATIVE_FILES

VARIANTS = {"cotmae_qc_beir": "cotmae_qc", "cocondenser_qc_beir": "cocondenser_qc", "cotmae_beir": "cotmae"}
VARIANTS["cocondenser_beir"] = "cocondenser"
BEFORE_FINETUNING = ("tokenizer", "passages", "qgen_model", "qgen", "pretrain")


def keys(spec: MethodSpec) -> dict[tuple[str, str | None], str]:
    with data_setting(spec):
        ctx = plan_method(spec, list(spec.get("datasets") or []))
    return {(e["stage"], e["dataset"]): e["key"] for e in ctx.stages.entries if e.get("key")}


def test_every_declared_file_has_a_download():
    assert set(HARD_NEGATIVE_FILES) == set(HARD_NEGATIVE_SOURCES)


@pytest.mark.parametrize("variant, parent", sorted(VARIANTS.items()))
def test_the_variant_shares_every_stage_before_fine_tuning(variant, parent):
    mine, theirs = keys(load_method(variant, "rehearsal")), keys(load_method(parent, "rehearsal"))
    before = {k: v for k, v in mine.items() if k[0] in BEFORE_FINETUNING}
    assert any(k[0] == "pretrain" for k in before)
    assert before == {k: v for k, v in theirs.items() if k[0] in BEFORE_FINETUNING}
    assert any(k[0] == "hard_negatives" for k in mine) and not any(k[0] == "hard_negatives" for k in theirs)
    retriever1 = next(v for k, v in mine.items() if k[0] == "retriever1")
    assert retriever1 != next(v for k, v in theirs.items() if k[0] == "retriever1")
    assert not any(k[0] in ("retriever2", "bm25_negatives") for k in mine)  # one retriever, on the file


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_the_paper_profile_states_the_tables_fine_tuning_data(variant):
    stated = derived(load_method(variant, "paper").config)
    assert stated["finetune_data"] == "msmarco-sbert-hard-negatives" and "bm25_negatives" not in stated
    assert derived(load_method(VARIANTS[variant], "paper").config)["finetune_data"] == "msmarco-passage-train"


def test_qc_v2_table_2_is_not_yet_run_for_the_variants():
    # the columns keep the methods the paper prints; each cell is graded by its method's BEIR variant
    cells = [c for c in cells_for(paper="qc-v2") if c.table == "Table 2"]
    assert len(cells) == 60 and {c.method for c in cells} == set(VARIANTS.values())
    states = cell_states(cells, [])
    assert {s.state for s in states.values()} == {"NOT-YET-RUN"}
    by_parent = {parent: variant for variant, parent in VARIANTS.items()}
    for cell in cells:
        command = f"python -m harness run --method {by_parent[cell.method]} --profile paper"
        assert states[cell.cell_id].command.startswith(command), states[cell.cell_id].command


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_the_variants_run_states_its_parent_and_the_condition_it_changes(variant):
    stated = run_conditions(load_method(variant, "paper").config, variant, "paper")
    assert stated["method"] == VARIANTS[variant] and stated[VARIANT_SPEC] == variant
    assert stated[VARIANT] == ["finetune_data"]
