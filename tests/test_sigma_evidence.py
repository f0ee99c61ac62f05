"""What sigma_rep is fed (issue 52): same-recipe seeds only, one degree of freedom per set of runs, a
fallback declared as an upper bound, and INCONCLUSIVE cells that say what would settle them."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from harness.evaluation import margins, noise
from harness.evaluation import verdict as rule
from harness.evaluation.compare import compare, inconclusive_note
from harness.papers.replication import replication_pairs

MARCO = "msmarco-dev"
PAPER_RUN = {"profile": "paper", "method": "cocondenser", "finetune_stage": "retriever2"}


def test_cross_team_re_runs_never_enter_sigma_rep():
    drift = margins.recipe_drift()
    assert replication_pairs() and len(drift) >= len(replication_pairs())  # the registry's pairs are drift
    assert {e.source for e in drift}.isdisjoint({e.source for e in margins.all_evidence()})
    for measure in ("RR@10", "R@50", "R@1000"):
        spread = margins.sigma_rep(MARCO, measure)
        assert not {e.source for e in spread.evidence} & {e.source for e in drift}, spread
    # Tevatron #81 (a one-GPU re-run against the authors' run) is declared a changed recipe
    assert any("tevatron issue #81" in e.source for e in drift)
    assert not any("tevatron issue #81" in e.source for e in margins.load_studies())


def test_a_study_must_say_whether_its_runs_share_one_recipe(monkeypatch, tmp_path):
    bad = tmp_path / "seed_studies.yaml"
    bad.write_text(
        "- {citation: c, where: w, system: s, benchmark: msmarco-dev, measure: RR@10, seeds: 3, sd: 0.2}\n",
        encoding="utf-8",
    )
    monkeypatch.setattr(margins, "STUDIES_FILE", bad)
    margins._studies.cache_clear()
    try:
        with pytest.raises(Exception, match="recipe"):
            margins.load_studies()
    finally:
        margins._studies.cache_clear()


def test_one_pair_of_runs_is_one_degree_of_freedom_whatever_it_prints(monkeypatch):
    """R@50 and R@1000 of the same two runs (variances 10x apart), and their DL19 and DL20, are one df."""
    pair = "team A vs team B, one pair of runs"
    same = (
        margins.Evidence(MARCO, "R@50", 1.0, 1, "pair R@50", pair),
        margins.Evidence(MARCO, "R@1000", 0.1, 1, "pair R@1000", pair),
        margins.Evidence("dl19", "nDCG@10", 0.5, 1, "pair dl19", pair),
        margins.Evidence("dl20", "nDCG@10", 0.0, 1, "pair dl20", pair),
    )
    monkeypatch.setattr(margins, "all_evidence", lambda: same)
    spread = margins.sigma_rep(MARCO, "R@100")  # no R@100: the family's recall measures, i.e. this one pair
    assert spread.scope == "none", spread  # one df is under MIN_DF: not two
    dl = margins.sigma_rep("dl19", "nDCG@10")
    assert dl.scope == "none", dl  # DL19 and DL20 of one pair: one df, and its 0.0 never narrows anything
    other = margins.Evidence(MARCO, "R@50", 0.4, 1, "another pair R@50", "team C vs team D")
    monkeypatch.setattr(margins, "all_evidence", lambda: (*same, other))
    widened = margins.sigma_rep(MARCO, "R@100")
    assert widened.df == 2 and widened.estimate == pytest.approx(math.sqrt((1.0 + 0.4) / 2)), widened  # widest kept


def test_the_fallback_is_an_upper_bound_with_its_source(monkeypatch):
    monkeypatch.setattr(margins, "all_evidence", lambda: ())
    spread = margins.sigma_rep(MARCO, "RR@10")
    transferred = noise.sigma(MARCO, "RR@10").points
    df = len(noise.load()["runs"]) - 1
    assert (spread.scope, spread.df, spread.estimate) == ("none", df, pytest.approx(transferred))
    assert spread.points == pytest.approx(margins.upper_bound(transferred, df, 0.8))
    assert spread.points > transferred
    assert "upper bound" in spread.why and "nopretrain [mini]" in spread.why and "transferred" in spread.label


def test_a_users_seeds_set_sigma_rep_and_are_named():
    seeds = margins.user_seeds("cotmae_qc [paper, retriever2]", MARCO, "MRR@10", [39.2, 39.4, 39.6, 39.3, 39.5])
    assert (seeds.measure, seeds.df) == ("RR@10", 4)
    spread = margins.sigma_rep(MARCO, "RR@10", (seeds,))
    assert (spread.df, spread.scope) == (4, "benchmark") and spread.estimate == pytest.approx(0.1581, abs=1e-4)
    assert "your seeds of cotmae_qc" in spread.label


def test_every_inconclusive_cell_says_its_margin_and_what_would_settle_it():
    cell = {
        "cell_id": "x",
        "paper_file": "p",
        "version": "v",
        "table": "T",
        "row": "r",
        "column": "c",
        "method": "cocondenser",
        "benchmark": MARCO,
        "measure": "RR@10",
        "score": 0.382,
        "value": "38.2",
        "conditions": {"finetune_stage": "retriever2"},
    }
    (c,) = compare({MARCO: {"RR@10": 0.384}}, {}, [cell], PAPER_RUN)
    assert c.status == rule.INCONCLUSIVE  # the mini transfer on 2 df
    note = inconclusive_note(c)
    assert f"consistent within +-{c.within:.2f}" in note and c.within == pytest.approx(max(-c.ci_low, c.ci_high))
    # the paper printed one seed: at this sigma no number of runs can (its own seed noise stays in se)
    assert c.seeds_needed is None and c.no_runs_sigma is not None and c.sigma >= c.no_runs_sigma
    assert f"no number of runs can: the paper printed one seed and sigma_rep {c.sigma:.2f} >= " in note
    assert inconclusive_note(c.to_dict()) == note  # check reads the dict


@pytest.mark.parametrize("sigma, settles", [(0.15, True), (0.5, False)])
def test_seeds_to_settle_or_why_none_can(sigma, settles):
    df, d, delta = 9, 0.2, 1.0
    n = rule.seeds_to_resolve(d, sigma, delta, df=df)
    bound = rule.sigma_no_runs_can(d, delta, df=df)
    assert (n is not None) == settles and (sigma < bound) == settles
    # at the bound, infinitely many runs leave exactly the paper's own seed: CI edge on the margin
    assert d + rule.quantile(0.95, df) * bound == pytest.approx(delta)


def test_check_and_the_leaderboard_say_it_too(tmp_path):
    """A paper record at QC's printed numbers, graded by `check` (the gate) and shown by the leaderboard:
    every INCONCLUSIVE cell states its smallest passing margin and what would settle it."""
    from harness.gate.grading import paper_comparisons
    from harness.gate.run import run_gate
    from harness.papers.registry import load_reported_cells
    from harness.present import overview
    from harness.records.store import load_records
    from harness.records.writer import write_run_record
    from leaderboard_app.tables import comparison_frame
    from tests.test_claims_graded import _qc_records

    for data in _qc_records():
        write_run_record({k: v for k, v in data.items() if k != "schema_version"}, tmp_path)
    inconclusive = [r for r in run_gate(tmp_path, reported=None).rows if r.status == rule.INCONCLUSIVE]
    assert inconclusive and all("consistent within +-" in r.note for r in inconclusive), inconclusive
    records = load_records(tmp_path)[0]
    cells = load_reported_cells()[0]
    frame = comparison_frame(records, {r.run_id: paper_comparisons(r, cells) for r in records})
    shown = frame[frame["status"] == rule.INCONCLUSIVE]
    assert len(shown) and shown["reason"].str.contains("consistent within +-", regex=False).all()
    # the report: its at-a-glance cells and claims (overview), and the gate's rows as check prints them
    glance = overview.from_folder(tmp_path)
    rows = [r for r in (*glance.headline, *glance.claims) if r.state == rule.INCONCLUSIVE]
    assert rows and all("consistent within +-" in r.reason for r in rows), rows
    assert all(("seeds" in r.reason or "runs" in r.reason) for r in rows), rows


def test_the_fallback_names_its_parts_each_with_its_degrees_of_freedom():
    """sigma_rep**2 = shared**2 + tau**2 / N: tau from the per-query scores of the harness's seeds (many
    df), shared from their means (seeds - 1 df); the sum on Welch-Satterthwaite's df."""
    seeds = len(noise.load()["runs"])
    marco = margins.sigma_rep(MARCO, "RR@10")
    p = marco.parts
    assert p is not None and (p.shared_df, p.queries) == (seeds - 1, 6980) and p.tau_df >= 300 * (seeds - 1)
    assert marco.estimate == pytest.approx(math.sqrt(p.shared**2 + p.tau**2 / 6980))
    # on 6,980 queries shared dominates: the df stay the seeds' own, and a lone run 3 points off cannot
    # be told from seed noise (t on 2 df: 4.30 x sigma_rep's se)
    assert marco.df == seeds - 1 and f"{p.shared:.2f}^2 [{seeds - 1} df]" in marco.why
    assert rule.quantile(0.975, marco.df) * rule.se_of(marco.tested) > 3.0
    # on 43 TREC DL queries tau / sqrt(N) dominates: many more df than the seeds'
    dl = margins.sigma_rep("dl19", "nDCG@10")
    assert dl.parts is not None and dl.df > 10 * (seeds - 1) and dl.parts.df == dl.df
    # where the control ran, its measured SD is the spread (no parts)
    assert margins.sigma_rep("scifact", "nDCG@10").parts is None


@pytest.mark.parametrize("benchmark, measure", [(MARCO, "RR@10"), ("dl19", "nDCG@10"), ("trec-covid", "nDCG@10")])
def test_the_parts_keep_both_error_rates_at_alpha(benchmark, measure):
    """Each part drawn from its own evidence (chi-square on its df), the rule's t on the
    Welch-Satterthwaite df (rounded down) keeps P(false DIFFERENT) and P(false REPRODUCED) <= alpha."""
    p = margins.sigma_rep(benchmark, measure).parts
    assert p is not None
    rng, trials, slack = np.random.default_rng(7), 40000, 0.005
    a = p.shared**2 * rng.chisquare(p.shared_df, trials) / p.shared_df
    b = p.tau**2 / p.queries * rng.chisquare(p.tau_df, trials) / p.tau_df
    welch = (a + b) ** 2 / (a**2 / p.shared_df + b**2 / p.tau_df)
    df = np.maximum(min(p.shared_df, p.tau_df), np.floor(welch + 1e-9))
    se = np.sqrt(2 * (a + b))  # one run against one printed run
    sd = math.sqrt(2) * p.sigma
    d0 = rng.normal(0.0, sd, trials)  # same recipe: the test of d = 0 alone (Delta out of the way)
    assert np.mean(np.abs(d0) > stats.t.ppf(0.975, df) * se) <= rule.ALPHA + slack
    delta = 2 * p.sigma  # a margin the rule can reach: false REPRODUCED at the boundary
    for gap in (delta, -delta):
        d = rng.normal(gap, sd, trials)
        assert np.mean(np.abs(d) + stats.t.ppf(0.95, df) * se < delta) <= rule.ALPHA + slack
