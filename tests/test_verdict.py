"""The one grading rule (harness/evaluation/verdict.py): equivalence within the practical margin, Holm on
"different", the seeds that would settle a cell, effects by direction, the exact rule, Effect Ratio /
Delta-RI, and the harness's own seed spread (noise.yaml). Power: tests/test_power_table.py."""

from __future__ import annotations

import shutil

import pytest

from harness.evaluation import verdict as rule
from harness.evaluation.noise import NOISE_FILE, load, sigma


@pytest.mark.parametrize(
    "d, se, delta, want",
    [
        (0.0, 0.2, 1.0, rule.REPRODUCED),  # CI [-0.33, 0.33] inside +-1
        (0.8, 0.2, 1.0, rule.INCONCLUSIVE),  # CI [0.47, 1.13] straddles +1; d = 0 rejected but |d| < Delta
        (-2.0, 0.2, 1.0, rule.DIFFERENT_BELOW),  # d = 0 rejected and |d| > Delta
        (2.0, 0.2, 1.0, rule.DIFFERENT_ABOVE),  # far above the paper is not a reproduction either
        (0.0, 2.0, 1.0, rule.INCONCLUSIVE),  # too noisy to tell anything
        (-1.5, 1.0, 1.0, rule.INCONCLUSIVE),  # beyond Delta but not significant
    ],
)
def test_cell_verdicts(d, se, delta, want):
    assert rule.verdicts([rule.Test(d, se, delta)])[0][0] == want


def test_ci_is_what_tost_reads():
    low, high = rule.Test(0.5, 1.0, 3.0).ci()
    assert (low, high) == pytest.approx((0.5 - 1.644854, 0.5 + 1.644854), rel=1e-5)


def test_equivalence_has_no_multiplicity_penalty_but_different_is_holm_corrected():
    assert rule.holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    same = rule.Test(0.0, 0.3, 1.0)
    assert [v for v, _, _ in rule.verdicts([same] * 5)] == [rule.REPRODUCED] * 5  # intersection-union
    off = rule.Test(-1.2, 0.55, 1.0)  # p(d = 0) ~ 0.029 alone
    assert rule.verdicts([off])[0][0] == rule.DIFFERENT_BELOW
    assert rule.verdicts([off, off, off])[0][0] == rule.INCONCLUSIVE  # 3 x 0.029 > 0.05


def test_seeds_to_resolve_counts_runs_and_knows_when_none_can():
    # |d| < Delta: more seeds shrink se towards the paper's own sigma * 1
    assert rule.seeds_to_resolve(0.0, 0.3, 1.0) == 1
    n = rule.seeds_to_resolve(0.2, 0.45, 1.0)
    assert n is not None and n > 1
    se = rule.se_of(0.45, n)
    assert rule.verdicts([rule.Test(0.2, se, 1.0)])[0][0] == rule.REPRODUCED
    assert rule.verdicts([rule.Test(0.2, rule.se_of(0.45, n - 1), 1.0)])[0][0] != rule.REPRODUCED
    assert rule.seeds_to_resolve(0.0, 1.0, 1.0) is None  # the paper's one run alone is too wide for +-1
    assert rule.seeds_to_resolve(-3.0, 1.0, 1.0) is not None


def test_effect_direction_reversal_and_tie():
    sigma = 0.3
    one_each = dict(se_effect=rule.se_of(sigma), se_diff=2 * sigma, delta=1.0)
    held, reversed_, nothing, tie = rule.effect_verdicts(
        [
            rule.EffectTest(1.4, claimed=1.4, **one_each),
            rule.EffectTest(-1.4, claimed=1.4, **one_each),
            rule.EffectTest(0.2, claimed=1.4, **one_each),
            rule.EffectTest(0.1, claimed=0.0, **one_each),
        ]
    )
    assert held[0] == rule.REPRODUCED and reversed_[0] == rule.DIFFERENT_BELOW
    assert nothing[0] == rule.INCONCLUSIVE and tie[0] == rule.REPRODUCED
    test = rule.EffectTest(0.7, claimed=1.4, **one_each)
    assert test.ratio_ci() == pytest.approx(tuple(x / 1.4 for x in test.ci()))


def test_exact_rule_for_deterministic_systems():
    assert rule.exact_verdict(38.7 - 38.2, 0.5) == rule.REPRODUCED
    assert rule.exact_verdict(-0.6, 0.5) == rule.DIFFERENT_BELOW
    assert rule.exact_verdict(0.6, 0.5) == rule.DIFFERENT_ABOVE


def test_effect_ratio_and_delta_ri_as_breuer_et_al_define_them():
    assert rule.effect_ratio(40.0, 38.0, 39.4, 38.8) == pytest.approx(2.0 / 0.6)
    assert rule.effect_ratio(40.0, 38.0, 38.8, 38.8) is None
    assert rule.delta_ri(39.4, 38.8, 39.4, 38.8) == pytest.approx(0.0)
    assert rule.delta_ri(39.0, 38.8, 39.4, 38.8) > 0  # the run improves less


def test_noise_file_matches_the_records_it_names():
    """noise.yaml is written from run records, never typed: regenerate it and compare."""
    from harness.core.paths import PROJECT_ROOT
    from harness.evaluation import noise

    assert noise.report(PROJECT_ROOT / "runs").strip() == NOISE_FILE.read_text(encoding="utf-8").strip(), (
        "noise.yaml is stale: python -m harness noise --write"
    )


def test_sigma_is_never_below_the_measured_spread_and_grows_with_fewer_queries():
    data = load()
    for bench, measures in data["benchmarks"].items():
        for measure, m in measures.items():
            assert sigma(bench, measure).points >= m["sd"]
    assert sigma("dl19", "nDCG@10").points > sigma("msmarco-dev", "RR@10").points
    assert "transferred" in sigma("dl19", "nDCG@10").why


def test_dry_run_of_a_1000_step_cotmae_is_graded_against_no_cell(tmp_path, monkeypatch, capsys):
    """Conditions are derived from what runs: 1000 steps are not the papers' 50K."""
    from harness.core.paths import BASELINES_DIR
    from harness.run.runner import run_method

    specs = tmp_path / "specs"
    shutil.copytree(BASELINES_DIR, specs)
    monkeypatch.setenv("HARNESS_SPECS_DIR", str(specs))
    monkeypatch.setenv("HARNESS_RUNS_DIR", str(tmp_path / "runs"))
    run_method("cotmae", "paper", dry_run=True)
    unchanged = capsys.readouterr().out
    n = int(unchanged.split("graded cells: ", 1)[1].split()[0])
    assert n > 0 and "pretrain_steps=50K" in unchanged
    text = (specs / "cotmae.yaml").read_text()
    (specs / "cotmae.yaml").write_text(text.replace("steps: 50000", "steps: 1000", 1))
    run_method("cotmae", "paper", dry_run=True)
    assert "graded cells: 0" in capsys.readouterr().out
