"""The power of the rule (harness/evaluation/power.py) at the declared sigma_rep and Delta: the formulas
against a simulation of the rule itself, the targets of issue 37, and the docs' table.

    python tests/test_power_table.py --write   # rewrite the table in docs/comparing-with-papers.md
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

from harness.core.paths import PROJECT_ROOT
from harness.evaluation import margins, power
from harness.evaluation import verdict as rule

DOC = PROJECT_ROOT / "docs" / "comparing-with-papers.md"
BEGIN, END = "<!-- power-table: begin (tests/test_power_table.py --write) -->", "<!-- power-table: end -->"


def simulate(t: float, sigma: float, delta: float, runs: int = 1, trials: int = 20000) -> dict[str, float]:
    """Verdict rates of the rule itself: the paper is one honest run, the reproduction ``runs`` runs
    of a recipe whose true mean is ``t`` points off, both with seed SD ``sigma``."""
    rng = np.random.default_rng(42)
    paper = rng.normal(0.0, sigma, trials)
    ours = rng.normal(t, sigma / np.sqrt(runs), trials)
    se = rule.se_of(sigma, runs)
    counts = dict.fromkeys(rule.VERDICTS, 0)
    for d in ours - paper:
        counts[rule.verdicts([rule.Test(float(d), se, delta)])[0][0]] += 1
    return {k: v / trials for k, v in counts.items()}


@pytest.mark.parametrize("sigma, delta, runs", [(0.2, 1.0, 1), (0.5, 1.0, 1), (1.0, 2.0, 3)])
def test_formulas_match_a_simulation_of_the_rule(sigma, delta, runs):
    se = rule.se_of(sigma, runs)
    same, off = simulate(0.0, sigma, delta, runs), simulate(2 * delta, sigma, delta, runs)
    assert same[rule.REPRODUCED] == pytest.approx(power.p_reproduced(0.0, se, delta), abs=0.01)
    assert same[rule.DIFFERENT_BELOW] + same[rule.DIFFERENT_ABOVE] == pytest.approx(
        power.p_different(0.0, se, delta), abs=0.01)
    assert off[rule.DIFFERENT_ABOVE] == pytest.approx(power.p_different(2 * delta, se, delta), abs=0.01)


def test_every_row_says_what_it_can_and_what_would_reach_the_targets():
    for r in power.power_table():
        assert r.false_different <= power.TARGET_FALSE + 1e-9, r
        assert (r.seeds_power == 1) == (r.power >= power.TARGET_POWER), r
        assert (r.seeds_reproduced == 1) == (r.reproduced >= power.TARGET_REPRODUCED), r
        assert (r.sigma_rep <= r.sigma_needed) == (r.reproduced >= power.TARGET_REPRODUCED - 1e-9), r
        assert power.p_reproduced(0.0, rule.se_of(r.sigma_needed), r.delta) == pytest.approx(
            power.TARGET_REPRODUCED, abs=1e-6)


def test_with_the_evidence_of_ten_paper_seeds_one_run_meets_the_targets_on_ms_marco(sharp_evidence):
    row = power.power_row("msmarco-dev", "RR@10")
    assert row.sigma_rep == pytest.approx(0.15 * (9 / margins.chi2_quantile(0.2, 9)) ** 0.5)  # the 80% bound
    assert row.meets, row
    # simulated, not only computed
    assert simulate(0.0, row.sigma_rep, row.delta)[rule.REPRODUCED] >= power.TARGET_REPRODUCED
    assert simulate(2 * row.delta, row.sigma_rep, row.delta)[rule.DIFFERENT_ABOVE] >= power.TARGET_POWER


def test_few_points_err_wide():
    assert margins.upper_bound(1.0, 1, 0.8) > margins.upper_bound(1.0, 9, 0.8) > 1.0
    assert margins.chi2_quantile(0.2, 1) == pytest.approx(0.0642, abs=1e-4)


def _doc_table() -> str:
    text = DOC.read_text(encoding="utf-8")
    assert BEGIN in text and END in text, f"{DOC} lacks the power-table markers"
    return text.split(BEGIN, 1)[1].split(END, 1)[0].strip()


def test_docs_show_this_table():
    assert _doc_table() == power.markdown(power.power_table()), \
        "docs/comparing-with-papers.md's power table is stale: python tests/test_power_table.py --write"


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    text = DOC.read_text(encoding="utf-8")
    head, rest = text.split(BEGIN, 1)
    DOC.write_text(head + BEGIN + "\n" + power.markdown(power.power_table()) + "\n" + END + rest.split(END, 1)[1],
                   encoding="utf-8")
    print(f"wrote the power table into {DOC}")
