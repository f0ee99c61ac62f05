"""`run --seeds S --pretrain-seeds P` (issue 61 item 3): the pre-training seed keys the stages that draw from it
and everything downstream, apart from the fine-tuning seed; without it every key is today's; the records of a
2 x 3 design give sigma_pt, which grade's cells and effects count."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from harness.cli import main
from harness.commands import run as run_command
from harness.core.errors import HarnessError
from harness.core.seeds import DEFAULT_SEED
from harness.data.setting import data_setting
from harness.evaluation import margins, noise, pretrain_part
from harness.evaluation import verdict as rule
from harness.records.run_record import RunRecord
from harness.records.writer import new_run_id, write_run_record
from harness.run import seed_study
from harness.run.runner import plan_method, run_method
from harness.spec.method import load_method
from harness.stages.artifacts import StageCache, config_hash
from harness.stages.graph import PRETRAIN_SEEDED

PRE = ("qgen", "pretrain")  # cotmae_qc's stages that draw from the pre-training seed
ONCE = ("tokenizer", "passages", "qgen_model", "index", "retrieve")  # seed 42's in every study
TUNED = ("retriever1", "dense_retrieve", "retriever2")


def _keys(seed: int, study: bool, pretrain: int = DEFAULT_SEED) -> dict[tuple[str, str | None], str]:
    spec = load_method("cotmae_qc", "tiny")
    with data_setting(spec):
        ctx = plan_method(spec, list(spec.get("datasets") or []), seed=seed, seed_study=study, pretrain_seed=pretrain)
    return {(e["stage"], e["dataset"]): e["key"] for e in ctx.stages.entries if e.get("key")}


@pytest.fixture(scope="module")
def design() -> dict[tuple[int, int], dict[tuple[str, str | None], str]]:
    """The planned keys of cotmae_qc [tiny] for pre-training seeds 42, 43 x fine-tuning seeds 42, 43."""
    return {(p, s): _keys(s, True, p) for p in (42, 43) for s in (42, 43)}


def _of(keys: dict[tuple[str, str | None], str], stages: tuple[str, ...]) -> dict:
    return {k: v for k, v in keys.items() if k[0] in stages}


def test_pretraining_keys_follow_the_pretrain_seed_and_are_shared_across_fine_tuning_seeds(design):
    assert set(PRE) <= {k[0] for k in design[42, 42]} and set(PRE) <= set(PRETRAIN_SEEDED)
    for s in (42, 43):
        a, b = _of(design[42, s], PRE), _of(design[43, s], PRE)
        assert a and all(a[k] != b[k] for k in a)  # another pre-training seed: another pre-training
    for p in (42, 43):
        assert _of(design[p, 42], PRE) == _of(design[p, 43], PRE)  # one pre-training, its fine-tunings share it
    # the stages that draw nothing from it are seed 42's across the whole design
    assert len({json.dumps(sorted(_of(keys, ONCE).items())) for keys in design.values()}) == 1


def test_fine_tuning_keys_differ_across_both_seeds(design):
    tuned = {cellkey: _of(keys, TUNED) for cellkey, keys in design.items()}
    assert all(len(t) >= 3 for t in tuned.values())
    for k in tuned[42, 42]:
        assert len({t[k] for t in tuned.values()}) == 4, k  # four (pre-training, fine-tuning) pairs, four runs


def test_without_pretrain_seeds_every_key_is_todays(design):
    """Pre-training seed 42 is a plain study's (seed 42's pre-training) and seed 42 a plain run's keys; the
    key of a pre-training stage carries no pretrain_seed unless it is another one."""
    assert design[42, 42] == _keys(42, False)
    assert design[42, 43] == _keys(43, True)
    payload = {"stage": "pretrain", "config": {"a": 1}, "inputs": {}, "code": "1"}
    assert StageCache("pretrain", {"a": 1}, {}, "1", 43, True).key == config_hash(payload)
    assert StageCache("pretrain", {"a": 1}, {}, "1", 43, True, 44).key == config_hash({**payload, "pretrain_seed": 44})
    assert StageCache("pretrain", {"a": 1}, {}, "1", 43, False, 44).key != config_hash({**payload, "pretrain_seed": 44})


def test_the_study_runs_every_pair_in_this_process_42_first(monkeypatch, capsys):
    calls = []

    def fake(*args, **kw):
        calls.append((kw["pretrain_seed"], kw["seed"], kw["seed_study"]))
        return _Result()

    monkeypatch.setattr(run_command, "run_method", fake)
    argv = ["run", "--method", "cotmae_qc", "--profile", "tiny", "--seeds", "43,42,44", "--pretrain-seeds", "43,42"]
    assert main(argv) == 0
    assert calls == [(p, s, True) for p in (42, 43) for s in (42, 43, 44)]
    assert "seed study: pre-training seed 43 (2/2)" in capsys.readouterr().out


class _Result:
    warning = ""


def test_one_runs_command_line_carries_its_pretrain_seed_and_the_flag_needs_a_study(capsys):
    args = run_command.argparse.Namespace(
        seeds=[42, 43], pretrain_seeds=[42, 43], seed=None, seed_study=False, pretrain_seed=None,
        argv=["run", "--seeds", "42,43", "--pretrain-seeds=42,43"],
    )  # fmt: skip
    one = run_command._one_seed(args, 43, 44)
    assert (one.seed, one.pretrain_seed, one.seeds, one.pretrain_seeds) == (43, 44, None, None)
    assert one.argv == ["run", "--seed", "43", "--seed-study", "--pretrain-seed", "44"]
    assert main(["run", "--method", "cotmae_qc", "--profile", "tiny", "--pretrain-seeds", "42,43", "--dry-run"])
    assert "--pretrain-seeds needs --seeds" in capsys.readouterr().err
    with pytest.raises(HarnessError, match="belongs to a seed study"):
        run_method("cotmae_qc", "tiny", dry_run=True, pretrain_seed=43)


def test_a_method_that_draws_nothing_from_a_pretrain_seed_is_refused():
    """nopretrain [mini] starts from MiniLM: every pre-training seed would repeat the same runs."""
    with pytest.raises(HarnessError, match="draws from a pre-training seed"):
        run_method("nopretrain", "mini", dry_run=True, seed_study=True, pretrain_seed=43)


def test_the_study_dry_run_says_what_runs_per_pretrain_seed(capsys):
    argv = ["run", "--method", "cotmae_qc", "--profile", "tiny", "--seeds", "42-44", "--pretrain-seeds", "42,43"]
    assert main([*argv, "--dry-run"]) == 0
    out = " ".join(capsys.readouterr().out.split())  # the text, however the 120-column reflow wrapped it
    assert "pre-training seeds 42, 43: qgen, pretrain run once per pre-training seed" in out and "(6 runs" in out
    assert seed_study.without_seeds(argv) == ["run", "--method", "cotmae_qc", "--profile", "tiny"]


def test_records_carry_their_pretrain_seed_and_land_in_runs_seeds_with_ids_apart(tmp_path):
    ids = {new_run_id("cotmae_qc", "paper", s, p) for p in (42, 43) for s in (42, 43)}
    assert len(ids) == 4 and all("__pt4" in i for i in ids) and "__pt" not in new_run_id("cotmae_qc", "paper", 43)
    record = _record(43, 44, 40.0)
    path = write_run_record(record, seed_study=True)
    assert path.parent == tmp_path / "runs" / "seeds"
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["pretrain_seed"] == 43 and list(data).index("pretrain_seed") == list(data).index("seed") + 1
    assert "pretrain_seed" not in RunRecord("x", "m", "mini", {}).to_json()  # every other record unchanged


# --- the estimator, end to end: a 2 x 3 design on file -> sigma_pt -> grade's se

SPEC = load_method("cotmae_qc", "paper").config
DESIGN = {42: (38.6, 38.9, 39.2), 43: (39.4, 39.6, 40.1)}  # RR@10 points per (pre-training, fine-tuning) seed


def _record(pretrain: int, seed: int, value: float) -> RunRecord:
    run_id = new_run_id("cotmae_qc", "paper", seed, pretrain)
    metrics = {"msmarco-dev": {"MRR@10": value / 100}}
    per_query = {"msmarco-dev": {"MRR@10": {"q1": value / 100, "q2": value / 100}}}  # what the seal checks
    return RunRecord(
        run_id, "cotmae_qc", "paper", metrics, spec=SPEC, seed=seed, pretrain_seed=pretrain, per_query=per_query
    )


@pytest.fixture
def on_file(monkeypatch) -> noise.PretrainSpread:
    """The 2 x 3 design's records written to runs/seeds/ as a study writes them; what the verdicts read."""
    for p, values in DESIGN.items():
        for s, v in zip((42, 43, 44), values):
            write_run_record(_record(p, s, v), seed_study=True)
    spreads = pretrain_part.own_pretrain_spreads()
    monkeypatch.setattr(pretrain_part, "on_file", lambda: spreads)
    # sigma_rep's same-recipe evidence: these records alone (per pre-training: the within SD, 2 x 2 df)
    own = margins.own_paper_seeds()
    monkeypatch.setattr(margins, "all_evidence", lambda: own)
    return spreads["msmarco-dev", "RR@10"]


def test_the_design_gives_sigma_pt_as_the_estimator_computes_it(on_file):
    by_hand = noise.pretrain_spread({p: list(v) for p, v in DESIGN.items()})
    assert (on_file.sigma_pt, on_file.df, on_file.groups, on_file.runs) == pytest.approx(
        (by_hand.sigma_pt, by_hand.df, 2, 6)
    )
    assert on_file.sigma_pt > 0.3  # the two pre-trainings land apart


def _grade(tmp_path: Path, *runs: dict) -> list[dict]:
    from harness.gate.own_numbers import grade

    path = tmp_path / "mine.json"
    path.write_text(json.dumps({"runs": list(runs)}), encoding="utf-8")
    return grade(path)


def _printed(method: str) -> dict[str, dict[str, float]]:
    from tests.test_grade import printed_row

    return {"msmarco-dev": printed_row(method)["msmarco-dev"]}


def test_grade_counts_the_measured_sigma_pt_in_a_cells_se(tmp_path, on_file):
    """A single run against a printed single run: se^2 = sigma_ft^2 (1/1 + 1/1) + 2 sigma_pt^2, the source
    naming the measured part (not the stand-in)."""
    row = {"method": "cotmae_qc", "profile": "paper", "stage": "retriever2", "metrics": _printed("cotmae_qc")}
    cells = [r for r in _grade(tmp_path, row) if r["kind"] == "cell" and r["status"] != "NOT-COMPARABLE"]
    mrr = [r for r in cells if (r["benchmark"], r["measure"]) == ("msmarco-dev", "RR@10")]
    assert mrr
    for r in mrr:
        assert r["se"] == pytest.approx(math.sqrt(2 * r["sigma_rep"] ** 2 + 2 * on_file.sigma_pt**2)), r
        assert "pre-training part measured: sigma_pt" in r["sigma_source"], r
        assert "not measured" not in r["sigma_source"], r
        # the test's df hold sigma_pt's few (2 pre-training seeds): Satterthwaite on both parts, below either
        # sigma_ft is the records' within-pre-training SD (4 df); the test's df hold sigma_pt's few too
        assert r["sigma_rep"] == pytest.approx(on_file.sigma_ft), r
        assert r["df"] == pytest.approx(rule.pretrain_df(2 * on_file.sigma_ft**2, 4, on_file.sigma_pt, on_file.df))
        assert on_file.df <= r["df"] < 4, r


def test_a_measured_pretrain_part_enters_the_df_and_a_clip_never_raises_them():
    ft, pt = 0.3**2 * 2, 0.4
    df = rule.pretrain_df(ft, 8, pt, 1.5)
    assert df == pytest.approx((ft + 2 * pt**2) ** 2 / (ft**2 / 8 + (2 * pt**2) ** 2 / 1.5))
    assert 1.5 < df < 8
    # sigma_pt clipped to 0 on 1 df: se is the fine-tuning part alone, but its df at most the clipped part's
    assert rule.pretrain_df(ft, 8, 0.0, 1.0) == 1.0
    assert rule.satterthwaite([(ft, 8), (0.0, 1.0)]) == pytest.approx(8)


def test_grade_counts_the_measured_sigma_pt_in_an_effect(tmp_path, on_file):
    """Two pre-training methods' single runs: each side's pre-training part enters the effect's variance
    (claims._variances, in sigma_rep units: 1 + 1 runs + both sides' sigma_pt^2)."""
    runs = [
        {"method": m, "profile": "paper", "stage": "retriever2", "metrics": _printed(m)}
        for m in ("cotmae_qc", "cotmae")
    ]
    effects = [
        r
        for r in _grade(tmp_path, *runs)
        if r["kind"] == "effect" and (r["benchmark"], r["measure"]) == ("msmarco-dev", "RR@10")
        and r["status"] != "NOT-COMPARABLE"
    ]  # fmt: skip
    assert effects
    for r in effects:
        sigma = r["sigma_rep"]
        assert r["se"] == pytest.approx(math.sqrt(2 * sigma**2 + 2 * on_file.sigma_pt**2)), r
        # against the printed effect: the paper's two runs add theirs, its two pre-trainings theirs
        assert r["se_diff"] == pytest.approx(math.sqrt(4 * sigma**2 + 4 * on_file.sigma_pt**2)), r
        assert "pre-training part measured" in r["sigma_source"], r
        assert r["df"] == pytest.approx(rule.pretrain_df(4 * sigma**2, 4, on_file.sigma_pt, on_file.df, 4.0)), r


@pytest.mark.parametrize("sigma_pt", [0.0, 0.5, 1.0])
def test_the_measured_part_keeps_both_error_rates_at_alpha(sigma_pt):
    """Simulated 2 x 3 designs (sigma_ft 0.5) through the estimator the verdicts read (noise.pretrain_spread,
    sigma_ft pooled within pre-trainings on 4 df, verdict.pretrain_df): one run against a printed run, each of
    its own pre-training: false DIFFERENT (d = 0 rejected) and false REPRODUCED at truth = Delta <= alpha."""
    rng = np.random.default_rng(7)
    draws, sigma_ft, delta = 3000, 0.5, 1.0
    true = math.sqrt(2 * sigma_ft**2 + 2 * sigma_pt**2)
    different = reproduced = 0
    for _ in range(draws):
        shift = rng.normal(0.0, sigma_pt, 2)
        got = noise.pretrain_spread({p: list(shift[p] + rng.normal(0.0, sigma_ft, 3)) for p in range(2)})
        ft = 2 * got.sigma_ft**2
        se, df = math.sqrt(ft + 2 * got.sigma_pt**2), rule.pretrain_df(ft, 4, got.sigma_pt, got.df)
        different += rule.p_zero(rng.normal(0.0, true), se, df) < rule.ALPHA
        reproduced += rule.p_equivalent(rng.normal(delta, true), se, delta, df) < rule.ALPHA
    assert different / draws <= rule.ALPHA + 0.01 and reproduced / draws <= rule.ALPHA + 0.01
