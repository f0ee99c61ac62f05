"""Comparison with reported cells: status boundaries, NOT-COMPARABLE reasons, tolerances, bootstrap."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from harness.core.errors import DataFormatError, HarnessError
from harness.evaluation import verdict as rule
from harness.evaluation.bootstrap import bootstrap_ci, paired_bootstrap
from harness.evaluation.compare import NOT_COMPARABLE, Comparison, compare, format_comparison_table, normalise_condition
from harness.evaluation.margins import practical_margin, sigma_rep
from harness.evaluation.tolerances import TOLERANCES_FILE, ToleranceTable, load_tolerances
from harness.evaluation.verdict import DIFFERENT_ABOVE, DIFFERENT_BELOW, INCONCLUSIVE, REPRODUCED, exact_verdict


@dataclass
class Cell:
    benchmark: str = "msmarco-dev"
    measure: str = "RR@10"
    score: float | None = 0.382
    value: str = "38.2"
    method: str = "cocondenser"
    conditions: dict[str, Any] = field(default_factory=lambda: {"finetune_stage": "retriever2"})
    cell_id: str = "qc-v2/t1/cocondenser-r2/mrr10"
    paper_file: str = "qc-pretraining-v2.txt"
    version: str = "v2"
    table: str = "Table 1"
    row: str = "coCondenser - retriever 2"
    column: str = "MRR@10"


PAPER_RUN = {"profile": "paper", "method": "cocondenser", "finetune_stage": "retriever2"}


def _one(reproduced: float, cell: Cell | None = None, run: dict | None = None, per_query=None) -> Comparison:
    cell = cell or Cell()
    metrics = {cell.benchmark: {cell.measure: reproduced}}
    return compare(metrics, per_query or {}, [cell], run or PAPER_RUN)[0]


# ---------------------------------------------------------------------------- status rules


@pytest.mark.parametrize(
    "delta,status",
    [
        (0.0, REPRODUCED),
        (0.5, REPRODUCED),
        (-0.5, REPRODUCED),
        (0.500001, DIFFERENT_ABOVE),
        (3.0, DIFFERENT_ABOVE),
        (-0.500001, DIFFERENT_BELOW),
        (-5.0, DIFFERENT_BELOW),
    ],
)
def test_exact_rule_boundaries(delta, status):
    assert exact_verdict(delta, 0.5) == status


def test_exact_rule_with_zero_tolerance():
    assert exact_verdict(0.0, 0.0) == REPRODUCED
    assert exact_verdict(0.01, 0.0) == DIFFERENT_ABOVE
    assert exact_verdict(-0.01, 0.0) == DIFFERENT_BELOW


def test_boundaries_survive_float_noise_end_to_end():
    """A deterministic run (exact rule, 0.2 points for released weights): 38.4 vs 38.2 is the edge."""

    def one(x):
        return compare({"msmarco-dev": {"RR@10": x}}, {}, [Cell()], PAPER_RUN, exact=True)[0].status

    assert one(0.384) == REPRODUCED and one(0.380) == REPRODUCED
    assert one(0.3841) == DIFFERENT_ABOVE and one(0.3799) == DIFFERENT_BELOW


def test_seed_rule_reads_the_declared_margin_and_sigma_rep():
    c = _one(0.382)
    assert c.rule == "seed" and c.tolerance == practical_margin("msmarco-dev", "RR@10").points
    spread = sigma_rep("msmarco-dev", "RR@10")
    assert (c.sigma, c.sigma_df) == (spread.tested, spread.df) and c.status != DIFFERENT_BELOW
    # the mini transfer to 6,980 queries rests on the seeds' mean SD, at most the 5 seeds' 4 df, and is taken
    # at twice its size (transfer.yaml), so only a gap far beyond the margin is DIFFERENT; 8 points is not
    assert spread.df <= 4 and _one(0.30).status == INCONCLUSIVE and _one(0.20).status == DIFFERENT_BELOW
    assert _one(0.10).status == DIFFERENT_BELOW and _one(0.66).status == DIFFERENT_ABOVE
    dl = _one(0.70, Cell(benchmark="dl19", measure="nDCG@10", score=0.731, value="73.1"))
    assert dl.status == INCONCLUSIVE  # 43 queries, one seed: a 3-point gap cannot be told apart
    assert dl.seeds_needed is None  # ... nor by any number of seeds: the paper's own run stays in se


def test_seed_rule_reproduces_where_the_evidence_allows(sharp_evidence):
    assert _one(0.382).status == REPRODUCED and _one(0.385).status == REPRODUCED


# ---------------------------------------------------------------------------- NOT-COMPARABLE


@pytest.mark.parametrize(
    "run,cell,reason",
    [
        ({"profile": "tiny", "method": "cocondenser", "finetune_stage": "retriever2"}, Cell(), "run profile is 'tiny'"),
        ({"method": "cocondenser", "finetune_stage": "retriever2"}, Cell(), "run profile not stated"),
        (
            {"profile": "paper", "method": "cotmae", "finetune_stage": "retriever2"},
            Cell(),
            "cell is for method 'cocondenser'",
        ),
        (
            {"profile": "paper", "method": "cocondenser", "finetune_stage": "retriever1"},
            Cell(),
            "cell reports finetune_stage=retriever2, run has finetune_stage=retriever1",
        ),
        (
            {**PAPER_RUN, "pretrain_steps": 120000},
            Cell(conditions={"pretrain_steps": "1200k"}),
            "cell reports pretrain_steps=1200k",
        ),
        (PAPER_RUN, Cell(conditions={"profile": "tiny"}), "cell is for profile 'tiny'"),
        (PAPER_RUN, Cell(score=None, value="-"), "reported value '-' is not a number"),
        (PAPER_RUN, Cell(measure="R@50"), "run did not evaluate R@50 on msmarco-dev"),
    ],
)
def test_not_comparable_reasons(run, cell, reason):
    metrics = {"msmarco-dev": {"RR@10": 0.382}}
    c = compare(metrics, {}, [cell], run)[0]
    assert c.status == NOT_COMPARABLE
    assert reason in c.reason
    assert c.tolerance is None and c.ci_low is None


def test_equivalent_condition_spellings_are_comparable():
    assert normalise_condition("120k") == normalise_condition(120000) == 120000.0
    # One name per fine-tuning stage everywhere: no spelling of it is bridged to another.
    assert normalise_condition("retriever2") == "retriever2" != normalise_condition("stage2")
    assert normalise_condition("yes") is True and normalise_condition("w/o") is False
    cell = Cell(conditions={"finetune_stage": "retriever2", "pretrain_steps": "120k", "query_number": 5})
    c = _one(0.382, cell, {**PAPER_RUN, "pretrain_steps": 120_000, "query_number": "5"})
    assert c.status != NOT_COMPARABLE and c.reason == ""


def test_a_condition_the_run_does_not_state_blocks_unless_it_is_provenance_only():
    cell = Cell(conditions={"finetune_stage": "retriever2", "finetune_queries": "1k"})
    c = _one(0.382, cell, PAPER_RUN)
    assert (
        c.status == NOT_COMPARABLE
        and c.reason == "cell reports finetune_queries=1k, run does not state finetune_queries"
    )
    cell = Cell(conditions={"finetune_stage": "retriever2", "reproduction_by_authors": True, "runs_averaged": 3})
    c = _one(0.382, cell, PAPER_RUN)
    assert c.status != NOT_COMPARABLE and "reproduction_by_authors: True" in c.notes and "runs_averaged: 3" in c.notes


def test_a_cell_without_a_stage_is_compared_with_the_final_stage_only():
    cell = Cell(conditions={})
    assert (
        _one(0.382, cell, {**PAPER_RUN, "finetune_stage": "retriever2", "final_stage": "retriever2"}).status
        != NOT_COMPARABLE
    )
    c = _one(0.382, cell, {**PAPER_RUN, "finetune_stage": "retriever1", "final_stage": "retriever2"})
    assert c.status == NOT_COMPARABLE and "final retriever, retriever2" in c.reason


def test_measure_aliases_and_cell_mappings():
    cell = {
        "cell_id": "x",
        "benchmark": "msmarco-dev",
        "measure": "MRR@10",
        "score": 0.382,
        "value": "38.2",
        "method": "cocondenser",
        "conditions": {},
    }
    c = compare({"msmarco-dev": {"RR@10": 0.382}}, None, [cell], PAPER_RUN)[0]
    assert c.status != NOT_COMPARABLE and c.paper_file == "" and c.measure == "MRR@10"


# ---------------------------------------------------------------------------- tolerances


def test_tolerance_lookup_order():
    t = load_tolerances()
    assert t.get("scifact", "nDCG@10", "bm25").source == "methods.bm25.scifact.default"
    assert t.get("dl19", "nDCG@10", "bm25").source == "methods.bm25.default.default"
    assert t.get("msmarco-dev", "MRR@10", "bm25").source == "methods.bm25.msmarco-dev.default"
    assert t.get("msmarco-dev", "RR@10", "cotmae").source == "global_default"  # released weights: numerics only


def test_every_tolerance_is_justified():
    import yaml

    raw = yaml.safe_load(TOLERANCES_FILE.read_text())
    table = ToleranceTable(raw, TOLERANCES_FILE)
    entries = [table.global_default]
    entries += [e for b in table.benchmarks.values() for e in b.values()]
    entries += [e for m in table.methods.values() for b in m.values() for e in b.values()]
    assert len(entries) >= 5
    assert all(e.why and e.points >= 0 for e in entries)
    from harness.evaluation.conventions import CONVENTIONS

    assert set(table.benchmarks) <= set(CONVENTIONS)


def test_no_tolerance_is_below_its_own_standard_error_without_a_reason():
    import yaml

    raw = yaml.safe_load(TOLERANCES_FILE.read_text())
    entries = [raw["global_default"]] + [e for b in (raw.get("benchmarks") or {}).values() for e in b.values()]
    entries += [e for m in raw["methods"].values() for b in m.values() for e in b.values()]
    with_se = [e for e in entries if "se" in e]
    assert len(with_se) >= 2
    assert all(e["tolerance"] >= e["se"] or e.get("below_se_because") for e in with_se)
    bad = {
        "global_default": {"tolerance": 1.0, "why": "x"},
        "benchmarks": {"dl19": {"nDCG@10": {"tolerance": 2.0, "why": "x", "se": 3.0}}},
    }
    with pytest.raises(DataFormatError, match="benchmarks.dl19.nDCG@10: tolerance 2.0 is below its own standard error"):
        ToleranceTable(bad)
    bad["benchmarks"]["dl19"]["nDCG@10"]["below_se_because"] = "a stated reason"
    assert ToleranceTable(bad).get("dl19", "nDCG@10").points == 2.0


@pytest.mark.parametrize(
    "raw,problem",
    [
        ({"benchmarks": {}}, "missing 'global_default'"),
        ({"global_default": {"tolerance": 1.0}}, "needs 'tolerance' and 'why'"),
        ({"global_default": {"tolerance": -1, "why": "x"}}, "number >= 0"),
        ({"global_default": {"tolerance": 1, "why": " "}}, "non-empty"),
        (
            {
                "global_default": {"tolerance": 1, "why": "x"},
                "benchmarks": {"dl19": {"Foo@3": {"tolerance": 1, "why": "x"}}},
            },
            "not an ir-measures measure",
        ),
        ({"global_default": {"tolerance": 1, "why": "x"}, "extra": 1}, "unknown top-level keys"),
    ],
)
def test_bad_tolerance_tables_are_rejected(raw, problem):
    with pytest.raises(DataFormatError, match=problem):
        ToleranceTable(raw, "t.yaml")


def test_bad_tolerance_yaml_names_the_line(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_text("global_default:\n  tolerance: 1\n  why: [unclosed\n")
    with pytest.raises(DataFormatError, match=r"t\.yaml:\d+: bad YAML"):
        load_tolerances(path)


def test_custom_tolerance_table_is_used():
    table = ToleranceTable({"global_default": {"tolerance": 5.0, "why": "loose"}})
    metrics = {"msmarco-dev": {"RR@10": 0.35}}
    assert compare(metrics, {}, [Cell()], PAPER_RUN, tolerances=table, exact=True)[0].status == REPRODUCED


# ---------------------------------------------------------------------------- bootstrap


def _scores(n: int, offset: float = 0.0) -> dict[str, float]:
    import numpy as np

    rng = np.random.default_rng(7)
    return {f"q{i}": float(min(1.0, max(0.0, v + offset))) for i, v in enumerate(rng.random(n))}


def test_bootstrap_is_deterministic_and_sensible():
    s = _scores(200)
    a, b = bootstrap_ci(s), bootstrap_ci(dict(reversed(list(s.items()))))
    assert a == b  # same seed, same data (whatever the dict order) -> same CI
    assert a.seed == 42 and a.n_resamples == 1000
    assert a.low < a.mean < a.high
    assert bootstrap_ci(s, seed=43) != a
    assert bootstrap_ci(s, n_resamples=200).n_resamples == 200
    wide = bootstrap_ci(s, confidence=0.99)
    assert wide.low < a.low and wide.high > a.high
    with pytest.raises(HarnessError):
        bootstrap_ci({})
    with pytest.raises(HarnessError):
        bootstrap_ci(s, n_resamples=0)


def test_stratified_bootstrap_is_mean_of_stratum_means():
    s = {"a/1": 1.0, "b/1": 0.0, "b/2": 0.0, "b/3": 0.0}
    ci = bootstrap_ci(s, strata=lambda q: q.split("/")[0])
    assert ci.mean == 0.5 and ci.low == ci.high == 0.5  # no variance inside strata


def test_compare_ci_for_delta_is_seed_noise_not_query_sampling():
    per_query = {"msmarco-dev": {"RR@10": _scores(300)}}
    mean = sum(per_query["msmarco-dev"]["RR@10"].values()) / 300
    c = compare({"msmarco-dev": {"RR@10": mean}}, per_query, [Cell(score=round(mean, 3))], PAPER_RUN)[0]
    half = rule.quantile(0.95, c.sigma_df) * c.sigma * 2**0.5  # one run against one printed run, t on its df
    assert (c.ci_low, c.ci_high) == pytest.approx((c.delta - half, c.delta + half), rel=1e-4)
    far = compare({"msmarco-dev": {"RR@10": mean}}, per_query, [Cell(score=0.9)], PAPER_RUN)[0]
    assert far.status == DIFFERENT_BELOW and far.delta < -far.tolerance


def test_paired_bootstrap():
    a = _scores(300)
    same = paired_bootstrap(a, dict(a))
    assert same.mean_diff == 0.0 and same.p_value == 1.0
    better = {q: min(1.0, v + 0.1) for q, v in a.items()}
    res = paired_bootstrap(better, a)
    assert res.mean_diff > 0 and res.low > 0 and res.p_value < 0.01
    assert res == paired_bootstrap(better, a)  # deterministic
    assert res.to_dict()["n_queries"] == 300
    partial = paired_bootstrap({"q0": 1.0, "q1": 0.0, "zz": 1.0}, {"q0": 0.0, "q1": 0.0})
    assert partial.n_queries == 2 and partial.mean_diff == 0.5
    with pytest.raises(HarnessError, match="share no query"):
        paired_bootstrap({"x": 1.0}, {"y": 1.0})


# ---------------------------------------------------------------------------- output


def test_comparison_to_dict_and_table():
    comps = [_one(0.3865), _one(0.10), _one(0.382, run={"profile": "tiny"})]
    d = comps[0].to_dict()
    for key in (
        "cell_id",
        "paper_file",
        "version",
        "table",
        "row",
        "column",
        "method",
        "benchmark",
        "measure",
        "value",
        "conditions",
        "reproduced",
        "reported",
        "delta",
        "tolerance",
        "status",
        "ci_low",
        "ci_high",
        "reason",
    ):
        assert key in d
    text = format_comparison_table(comps)
    assert "INCONCLUSIVE" in text and "DIFFERENT-BELOW" in text and "NOT-COMPARABLE" in text
    assert "run profile is 'tiny'" in text
    assert text.splitlines()[-1] == "3 cells: DIFFERENT-BELOW 1, INCONCLUSIVE 1, NOT-COMPARABLE 1"
