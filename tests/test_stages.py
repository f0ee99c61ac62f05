"""The declared stage graph (harness/stages/graph.py) is the one the pipelines run: its rules derive from it,
and a stage that reads another stage's output it does not declare is refused."""

from __future__ import annotations

import pytest

from harness.core.errors import HarnessError
from harness.pipelines.context import declared_stage
from harness.stages.graph import (
    FAMILIES,
    FAMILY_STEPS,
    FINETUNE_STAGES,
    GRAPH,
    MINING_DETAILS,
    NOT_PROJECTED,
    PRETRAINING,
    STAGES,
    outline,
    resolve,
)


def test_every_need_is_a_declared_stage_met_earlier_or_a_retriever_of_the_chain():
    seen: set[str] = set()
    for stage in GRAPH:
        assert set(stage.needs) <= set(STAGES), stage.name
        seen.add(stage.name)
    assert FINETUNE_STAGES == ("retriever1", "retriever2", "retriever3")
    assert "pretrain" in PRETRAINING and "retriever1" not in PRETRAINING


def test_family_steps_derive_from_the_graph():
    assert FAMILY_STEPS["lexical"] == ("index", "retrieve", "evaluate")
    assert "finetune_r3" not in FAMILY_STEPS["dense"] and "finetune_r3" in FAMILY_STEPS["learned-sparse"]
    assert "mine" in FAMILY_STEPS["dense"]


def test_an_input_from_an_undeclared_stage_is_refused():
    assert declared_stage("passages", {"tokenizer": "tokenizer/0123456789abcdef/tokenizer"}).name == "passages"
    assert declared_stage("passages", {"tokenizer": "sha256:0123456789abcdef"}).name == "passages"  # a checkpoint
    with pytest.raises(HarnessError, match="stage 'passages' reads tokenizer from stage 'pretrain'.*declare it"):
        declared_stage("passages", {"tokenizer": "pretrain/0123456789abcdef/encoder"})
    with pytest.raises(HarnessError, match="not declared in harness/stages/graph.py"):
        declared_stage("pretraining", {})


def test_resumable_stages_are_the_trainers_and_the_passages_builder():
    # passages: its shards (harness/corpus/passage_shards.py); teacher_scores: each rank's scored chunks
    # (harness/finetune/teacher_shards.py); the others: their checkpoints or partial files
    assert {s.name for s in GRAPH if s.resumable} == {
        "passages",
        "qgen",
        "pretrain",
        "retriever1",
        "retriever2",
        "reranker",
        "teacher_scores",
        "retriever3",
    }
    assert "retriever2" in outline() and "(resumable)" in outline()


def test_every_declared_function_reference_resolves():
    """The plan's, the projection's and the families' functions are named once, in the declarations."""
    refs = [ref for s in GRAPH for ref in (s.details, s.cost) if ref and ref != NOT_PROJECTED]
    refs += [MINING_DETAILS, *(family.pipeline for family in FAMILIES.values())]
    for ref in refs:
        assert callable(resolve(ref)), ref
    assert set(FAMILY_STEPS) == set(FAMILIES)
    assert {s.group for s in GRAPH if s.details} >= {"bm25", "impact", "teacher", "pretrain", "retriever1"}
