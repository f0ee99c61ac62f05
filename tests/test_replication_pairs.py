"""Replication pairs read from the registry: two independent runs of one system at one setting, never
a number and its copy, never two versions of one paper, never a deterministic system or a doubtful cell."""

from __future__ import annotations

import dataclasses

import pytest

from harness.papers import registry, replication
from harness.papers.replication import ReplicationPair, rejected_pairs, replication_pairs
from harness.papers.schema import CONDITION_KEYS, ReportedCell

# coCondenser's own paper (copied by QC and LexMAE) vs the QC authors' † re-run, as printed.
COCONDENSER = {
    ("msmarco-dev", "RR@10"): (38.2, 38.8),
    ("msmarco-dev", "R@50"): (86.5, 87.8),
    ("msmarco-dev", "R@1000"): (98.4, 98.8),
    ("dl19", "nDCG@10"): (71.7, 71.1),
    ("dl20", "nDCG@10"): (68.4, 68.4),
}


@pytest.fixture(scope="module")
def cells() -> list[ReportedCell]:
    return registry.load_registry()


@pytest.fixture(scope="module")
def pairs() -> list[ReplicationPair]:
    return replication_pairs()


def _cell(cells: list[ReportedCell], paper: str, table: str, row: str, measure: str, benchmark: str) -> ReportedCell:
    found = [
        c
        for c in cells
        if c.paper == paper and c.table == table and c.row == row and c.measure == measure and c.benchmark == benchmark
    ]
    assert len(found) == 1, (paper, table, row, measure, found)
    return found[0]


def test_cocondenser_original_against_the_qc_rerun_on_five_measures(pairs):
    found = {(p.benchmark, p.measure): p for p in pairs if p.method == "cocondenser"}
    assert set(found) == set(COCONDENSER)
    for key, (a, b) in COCONDENSER.items():
        pair = found[key]
        assert (pair.a, pair.b) == (a, b)
        assert pair.diff == pytest.approx(b - a)
        assert "Gao and Callan" in pair.source_a and "copied from" in pair.source_a
        assert "120K" in pair.source_b and "reproduction" in pair.source_b
        assert ("finetune_stage", "retriever2") in pair.setting
        # the † re-run pre-trains 120K steps, which the cited row does not state: kept visible
        assert any(u.startswith("pretrain_steps=120K") for u in pair.unmatched)


def test_one_pair_per_run_couple_however_often_it_is_printed(pairs):
    # QC v1 and v2 print the same two runs, LexMAE prints the original again: still one pair each.
    keys = [(p.method, p.benchmark, p.measure) for p in pairs]
    assert len(keys) == len(set(keys))


def test_no_pair_is_a_number_and_its_copy(pairs):
    for p in pairs:
        assert not ("copied from" in p.source_a and "copied from" in p.source_b), p


def test_two_copies_of_one_publication_are_one_run(cells):
    # QC cites 'Gao and Callan, 2021b', LexMAE 'Gao & Callan, 2022': arXiv and ACL versions, one run.
    copies = [c for c in cells if c.method == "cocondenser" and c.conditions.get("cited")]
    assert {c.paper for c in copies} >= {"qc-v1", "qc-v2", "lexmae"}
    assert replication_pairs(copies) == []


def test_qc_v1_and_v2_are_the_same_runs(cells):
    own = [c for c in cells if c.paper in ("qc-v1", "qc-v2") and not c.conditions.get("cited")]
    assert replication_pairs(own) == []
    # without the family they would look like two runs of each † row: the family is what prevents it
    alone = [dataclasses.replace(c, paper=f"{c.paper}-alone") for c in own if c.paper == "qc-v2"]
    v1 = [c for c in own if c.paper == "qc-v1"]
    assert any(p.method == "cocondenser" for p in replication_pairs(v1 + alone))


def test_a_number_equal_to_its_papers_cited_copy_is_that_copy(cells):
    cited = _cell(cells, "lexmae", "Table 1", "coCondenser (Gao & Callan, 2022)", "RR@10", "msmarco-dev")
    table7 = [
        c
        for c in cells
        if c.paper == "lexmae"
        and c.table == "Table 7"
        and c.row == "coCondenser"
        and c.measure == "RR@10"
        and c.conditions.get("finetune_stage") == "retriever2"
    ]
    assert len(table7) == 1 and table7[0].value == "38.2"
    same_setting = dataclasses.replace(table7[0], conditions={"finetune_stage": "retriever2"})
    assert replication_pairs([cited, same_setting]) == []
    # a different number in the same place would be LexMAE's own run: then it is a pair
    rerun = dataclasses.replace(same_setting, value="37.9", score=0.379)
    assert [(p.a, p.b) for p in replication_pairs([cited, rerun])] == [(38.2, 37.9)]


def test_a_copy_of_a_registry_paper_is_that_papers_run(cells):
    original = _cell(cells, "qc-v1", "Table 1", "w/ query-as-context (50K)", "RR@10", "msmarco-dev")
    copy = dataclasses.replace(
        original,
        paper="lexmae",
        cell_id="lexmae/copy",
        paper_file="lexmae-iclr2023.txt",
        conditions={**original.conditions, "cited": "Wu, Ma and Hu, 2022"},
    )
    assert replication_pairs([original, copy]) == []
    other = dataclasses.replace(copy, conditions={**original.conditions, "cited": "Someone et al., 2022"})
    assert len(replication_pairs([original, other])) == 1


def test_doubtful_cells_are_not_pairs(cells):
    cited = _cell(cells, "qc-v1", "Table 1", "coCondenser (Gao and Callan, 2021b)", "RR@10", "msmarco-dev")
    rerun = _cell(cells, "qc-v1", "Table 1", "coCondenser (120K)†", "RR@10", "msmarco-dev")
    assert len(replication_pairs([cited, rerun])) == 1
    garbled = dataclasses.replace(rerun, doubt="garbled in the extraction")
    assert replication_pairs([cited, garbled]) == []
    [(pair, reason)] = rejected_pairs([cited, garbled])
    assert "doubt" in reason and (pair.a, pair.b) == (38.2, 38.8)


def test_deterministic_systems_are_not_replication(pairs):
    assert not [p for p in pairs if p.method == "bm25"]
    reasons = [reason for p, reason in rejected_pairs() if p.method == "bm25"]
    assert reasons and all("deterministic" in r for r in reasons)


def test_another_recipe_is_not_a_rerun():
    # QC's CoT-MAE † pre-trains 50K steps, the cited original 1200K: a different recipe, not a seed.
    rejected = [(p, r) for p, r in rejected_pairs() if p.method == "cotmae"]
    assert rejected and all("pretrain_steps" in r for _, r in rejected)
    # another pipeline stage is not even a look-alike
    assert not [r for _, r in rejected_pairs() if "finetune_stage" in r]


def test_cells_as_dicts_and_runs_averaged(cells):
    cited = _cell(cells, "qc-v1", "Table 1", "coCondenser (Gao and Callan, 2021b)", "RR@10", "msmarco-dev")
    rerun = _cell(cells, "qc-v1", "Table 1", "coCondenser (120K)†", "RR@10", "msmarco-dev")
    averaged = dataclasses.replace(rerun, conditions={**rerun.conditions, "runs_averaged": 3})
    [pair] = replication_pairs([cited.to_dict(), averaged.to_dict()])
    assert (pair.runs_a, pair.runs_b) == (1, 3)


def test_every_condition_has_one_kind():
    kinds = (replication.PROVENANCE_KEYS, replication.STRICT_KEYS, replication.STATED_KEYS)
    for key in CONDITION_KEYS:
        assert sum(key in k for k in kinds) == 1, f"condition '{key}' needs exactly one kind in replication.py"
    assert set().union(*kinds) == set(CONDITION_KEYS)
    assert replication.SYSTEM_KEYS <= replication.STRICT_KEYS | replication.STATED_KEYS
