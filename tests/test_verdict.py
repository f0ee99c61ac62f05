"""The one grading rule (harness/evaluation/verdict.py): equivalence testing, Holm, the exact rule,
Effect Ratio / Delta-RI, the measured seed spread behind it, and a simulation of its error rates."""

from __future__ import annotations

import math
import shutil

import numpy as np
import pytest

from harness.evaluation import verdict as rule
from harness.evaluation.noise import NOISE_FILE, load, sigma


def test_margin_is_the_95_percent_range_of_two_honest_runs():
    assert rule.margin(1.0) == pytest.approx(1.959964 * math.sqrt(2), rel=1e-6)
    assert rule.margin(1.0, replicates=2) == pytest.approx(rule.margin(1.0) * math.sqrt(2))
    assert rule.margin(0.4) >= 0.4  # never below the measured spread


@pytest.mark.parametrize("d, se, delta, want", [
    (0.0, 0.2, 1.0, rule.REPRODUCED),         # CI [-0.33, 0.33] inside +-1
    (0.8, 0.2, 1.0, rule.INCONCLUSIVE),       # CI [0.47, 1.13] straddles +1
    (-2.0, 0.2, 1.0, rule.DIFFERENT_BELOW),   # CI wholly below -1
    (2.0, 0.2, 1.0, rule.DIFFERENT_ABOVE),    # far above the paper is not a reproduction either
    (0.0, 2.0, 1.0, rule.INCONCLUSIVE),       # too noisy to tell anything
])
def test_cell_verdicts(d, se, delta, want):
    assert rule.verdicts([rule.Test(d, se, delta)])[0][0] == want


def test_ci_is_what_tost_reads():
    low, high = rule.Test(0.5, 1.0, 3.0).ci()
    assert (low, high) == pytest.approx((0.5 - 1.644854, 0.5 + 1.644854), rel=1e-5)


def test_holm_adjusts_step_down_and_can_turn_a_verdict_inconclusive():
    assert rule.holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    alone = rule.Test(0.0, 0.55, 1.0)  # p_equivalent ~ 0.035 alone
    assert rule.verdicts([alone])[0][0] == rule.REPRODUCED
    assert rule.verdicts([alone, alone, alone])[0][0] == rule.INCONCLUSIVE  # 3 x 0.035 > 0.05


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
    from harness.evaluation import noise
    from harness.core.paths import PROJECT_ROOT

    assert noise.report(PROJECT_ROOT / "runs").strip() == NOISE_FILE.read_text(encoding="utf-8").strip(), \
        "noise.yaml is stale: python -m harness noise --write"


def test_sigma_is_never_below_the_measured_spread_and_grows_with_fewer_queries():
    data = load()
    for bench, measures in data["benchmarks"].items():
        for measure, m in measures.items():
            assert sigma(bench, measure).points >= m["sd"]
    assert sigma("dl19", "nDCG@10").points > sigma("msmarco-dev", "RR@10").points
    assert "transferred" in sigma("dl19", "nDCG@10").why


# ----------------------------------------------------------------------------- simulation

def simulate(true_diff: float, seed_sd: float, n_queries: int = 300, trials: int = 2000,
             estimate_from_seeds: int = 3, runs: int = 1, rng_seed: int = 42) -> dict[str, float]:
    """The rule's verdict rates on synthetic per-query scores.

    Each query has a difficulty; a run of a recipe draws a seed effect shared by all queries
    (sd ``shared``) and per-query seed noise (sd ``tau``) such that one run's mean has seed SD
    ``seed_sd``. The paper is one run of recipe A, the reproduction one run of recipe A shifted by
    ``true_diff`` points (the mean of ``runs`` seeds). The project measures sigma from
    ``estimate_from_seeds`` runs of another recipe (as noise.py does), then grades by the rule."""
    rng = np.random.default_rng(rng_seed)
    shared = seed_sd / math.sqrt(2)
    tau = math.sqrt(n_queries) * seed_sd / math.sqrt(2)
    base = rng.uniform(20, 80, size=n_queries)

    def run(shift: float) -> np.ndarray:
        return base + shift + rng.normal(0, shared) + rng.normal(0, tau, size=n_queries)

    counts = dict.fromkeys(rule.VERDICTS, 0)
    for _ in range(trials):
        seeds = np.stack([run(0.0) for _ in range(estimate_from_seeds)])
        sd = float(np.std(seeds.mean(axis=1), ddof=1))
        tau_est = math.sqrt(float(np.var(seeds, axis=0, ddof=1).mean()))
        s = max(sd, tau_est / math.sqrt(n_queries))  # noise.sigma on a measured benchmark
        reproduced = np.mean([run(true_diff).mean() for _ in range(runs)])
        d = float(reproduced - run(0.0).mean())
        counts[rule.verdicts([rule.Test(d, s * math.sqrt(1 + 1 / runs), rule.margin(s))])[0][0]] += 1
    return {k: v / trials for k, v in counts.items()}


def test_simulation_false_different_rate_is_at_most_5_percent():
    rates = simulate(0.0, seed_sd=0.8)
    false_different = rates[rule.DIFFERENT_BELOW] + rates[rule.DIFFERENT_ABOVE]
    print(f"truth 'same', seed SD 0.8: REPRODUCED {rates[rule.REPRODUCED]:.1%}, INCONCLUSIVE "
          f"{rates[rule.INCONCLUSIVE]:.1%}, false DIFFERENT {false_different:.1%}")
    assert false_different <= 0.05


def test_simulation_more_seeds_confirm_more_often_and_still_rarely_call_a_same_recipe_different():
    rates = simulate(0.0, seed_sd=0.8, runs=5)
    false_different = rates[rule.DIFFERENT_BELOW] + rates[rule.DIFFERENT_ABOVE]
    print(f"truth 'same', 5 seeds averaged: REPRODUCED {rates[rule.REPRODUCED]:.1%}, INCONCLUSIVE "
          f"{rates[rule.INCONCLUSIVE]:.1%}, false DIFFERENT {false_different:.1%}")
    assert false_different <= 0.05 and rates[rule.REPRODUCED] > simulate(0.0, seed_sd=0.8)[rule.REPRODUCED]


def test_simulation_power_at_the_papers_effect_sizes():
    """Reported in docs/comparing-with-papers.md: how the rule grades a real 2.1-point gap (QC's BEIR claims) at the
    measured spread, and a gap of twice the margin. A gap inside the margin is within what two
    honest runs differ by, so one printed run cannot resolve it: mostly INCONCLUSIVE, by design."""
    sd = sigma("scifact", "nDCG@10").points
    rates = simulate(-2.1, seed_sd=sd)
    print(f"truth -2.1 nDCG@10, seed SD {sd:.2f} (margin {rule.margin(sd):.2f}): DIFFERENT "
          f"{rates[rule.DIFFERENT_BELOW]:.1%}, INCONCLUSIVE {rates[rule.INCONCLUSIVE]:.1%}, "
          f"REPRODUCED {rates[rule.REPRODUCED]:.1%}")
    assert rates[rule.DIFFERENT_ABOVE] == 0.0  # never the wrong direction
    assert rates[rule.REPRODUCED] < simulate(0.0, seed_sd=sd)[rule.REPRODUCED]  # a real gap is confirmed less often
    far = -2 * rule.margin(sd)
    rates = simulate(far, seed_sd=sd)
    print(f"truth {far:.1f} nDCG@10 (twice the margin): DIFFERENT {rates[rule.DIFFERENT_BELOW]:.1%}, "
          f"INCONCLUSIVE {rates[rule.INCONCLUSIVE]:.1%}, REPRODUCED {rates[rule.REPRODUCED]:.1%}")
    assert rates[rule.DIFFERENT_BELOW] >= 0.5 and rates[rule.REPRODUCED] < 0.01


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
