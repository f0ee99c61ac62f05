"""A sigma's source in words (issue 61 item 2, done-when 4): one function writes it
(``margins.source_words``) and every verdict surface prints that very text for the same cell: run's
closing table, ``check``, ``grade``, the static report and the leaderboard's data layer; the transfer
rule it names is declared once (``transfer.yaml``); an upper bound on near-zero df is "unbounded"."""

from __future__ import annotations

import html
import json
import math
import re

import pytest

from harness.cli import main
from harness.core.statuses import NOT_COMPARABLE
from harness.evaluation import margins, noise, transfer_rule
from harness.evaluation.compare import compare, format_comparison_table
from harness.gate.grading import paper_comparisons
from harness.gate.run import run_gate
from harness.papers.registry import load_reported_cells
from harness.records.run_record import RunRecord
from harness.records.store import load_records
from harness.records.writer import write_run_record
from harness.spec.method import load_method
from leaderboard_app.tables import comparison_frame
from tests.test_claims_graded import _qc_records

MARCO, MEASURE, METHOD, STAGE = "msmarco-dev", "RR@10", "cotmae_qc", "retriever2"


def _flat(text: str) -> str:
    """Text with its whitespace collapsed: a wrapped note reads as one line."""
    return " ".join(text.split())


def _records(folder):
    for data in _qc_records():
        write_run_record(RunRecord.from_json({k: v for k, v in data.items() if k != "schema_version"}), folder)
    return [r for r in load_records(folder)[0] if r.method == METHOD]


def test_every_surface_prints_one_wording_of_the_sigmas_source(tmp_path, capsys):
    records = tmp_path / "records"
    (rec,) = _records(records)
    cells = load_reported_cells()[0]
    # the wording, from the evidence object: the mini seeds transferred under the declared rule, and the
    # pre-training part no seed measured (cotmae_qc pre-trains)
    words = margins.source_words(margins.sigma_rep(MARCO, MEASURE), pretrains=True)
    assert "MiniLM mini seeds (5, 640 queries)" in words and f"transferred to {MARCO}" in words
    assert "df capped at" in words and "pre-training part not measured" in words

    def mine(row) -> bool:  # the cell: MS MARCO dev RR@10, seed-graded (not a NOT-COMPARABLE row)
        get = row.get if isinstance(row, dict) else lambda k: getattr(row, k, None)
        graded = get("rule") == "seed" or get("sigma") is not None or get("sigma_rep") is not None
        return (get("benchmark"), get("measure")) == (MARCO, MEASURE) and graded

    # run: the closing table of the record's comparisons, as runner.print_outcome prints it
    metrics, per_query = rec.metrics_by_stage[STAGE], rec.per_query_by_stage[STAGE]
    conditions = {**rec.run_conditions(), "finetune_stage": STAGE}
    comps = [c for c in compare(metrics, per_query, [c for c in cells if c.get("method") == METHOD], conditions)]
    assert [c.sigma_source for c in comps if mine(vars(c))] and all(
        c.sigma_source == words for c in comps if mine(vars(c))
    )
    assert words in _flat(format_comparison_table(comps))
    # check (and --all): the gate's rows, as the table prints them
    gate_rows = [r for r in run_gate(records, reported=None).rows if r.run_id == rec.run_id and mine(r)]
    assert gate_rows and all(r.sigma_source == words and words in r.note for r in gate_rows)
    for extra in ([], ["--all"]):
        main(["check", "--records", str(records), *extra])
        assert words in _flat(capsys.readouterr().out), extra
    # grade: the same numbers as your own
    own = {"runs": [{"method": METHOD, "profile": "paper", "stage": STAGE, "metrics": {MARCO: {MEASURE: [39.4]}}}]}
    (tmp_path / "own.json").write_text(json.dumps(own), encoding="utf-8")
    main(["grade", "--metrics", str(tmp_path / "own.json"), "--json", str(tmp_path / "graded.json")])
    assert words in _flat(capsys.readouterr().out)
    graded = [r for r in json.loads((tmp_path / "graded.json").read_text())["rows"] if r["kind"] == "cell" and mine(r)]
    assert graded and all(r["sigma_source"] == words for r in graded)
    # the static report: the gate's rows, escaped into its gate page
    main(["report", "--html", str(tmp_path / "report"), "--records", str(records)])
    capsys.readouterr()
    page = (tmp_path / "report" / "gate.html").read_text(encoding="utf-8")
    assert words in _flat(html.unescape(re.sub(r"<wbr>", "", page)))  # <wbr>: where a long note may wrap
    # the leaderboard's data layer: its comparison table's reason column
    frame = comparison_frame([rec], {rec.run_id: paper_comparisons(rec, cells)})
    shown = frame[(frame["benchmark"] == MARCO) & (frame["measure"] == MEASURE) & (frame["status"] != NOT_COMPARABLE)]
    assert len(shown) and shown["reason"].map(lambda r: words in r).all()


def test_a_measured_spread_and_paper_scale_evidence_are_worded_too():
    values = [73.0, 73.2, 73.4, 72.9, 73.3]
    seeds = margins.user_seeds("cotmae_qc [paper, retriever2]", "dl19", "nDCG@10", values)
    assert margins.source_words(margins.sigma_rep("dl19", "nDCG@10", (seeds,))) == (
        "your seeds of cotmae_qc [paper, retriever2] (benchmark, 4 df)"
    )
    own = noise.parts("scifact", "nDCG@10")  # the mini seeds on their own benchmark, at mini scale
    assert not own.transferred and own.df == pytest.approx(len(noise.load()["runs"]) - 1)
    marco = noise.parts(MARCO, MEASURE)
    assert marco.transferred and "df capped at" in marco.describe() and "transfer rule: x2" in marco.describe()


def test_the_transfer_rule_is_declared_once_and_matches_the_control_it_transfers():
    rule = transfer_rule.load()
    assert rule.df_at_most_seeds and rule.inflation >= 1.0 and "seeds - 1" in rule.why
    spec = load_method(noise.CONTROL, noise.PROFILE).config
    assert rule.model.lower() in str(spec["model"]["init"]).lower()
    assert rule.train_queries == spec["finetune"]["max_train_queries"]
    # applied by the estimator: Satterthwaite's df on 43 queries exceed the seeds', the rule caps them
    sigma, df = rule.apply([1.9], [9.6], 3)
    assert float(df[0]) == 2 and float(sigma[0]) == pytest.approx(1.9 * rule.inflation)


def test_a_bound_on_near_zero_df_is_unbounded():
    """0.0081 df once printed an 80% upper bound of ~1e27: it is inf, printed "unbounded"."""
    bound = margins.upper_bound(0.13, 0.0081, 0.8)
    assert math.isinf(bound) and margins.bound_text(bound) == "unbounded"
    finite = margins.upper_bound(1.0, 2, 0.8)
    assert math.isfinite(finite) and margins.bound_text(finite) == f"{finite:.2f}"


def test_check_json_rows_carry_the_tests_behind_their_verdict(tmp_path):
    """Issue 61 item 6 for `check --json` (grade's: tests/test_grade.py): a seed-graded row carries se, df, the
    equivalence p, the difference p and its Holm adjustment, sigma and its source in words."""
    records = tmp_path / "records"
    _records(records)
    out = tmp_path / "check.json"
    assert main(["check", "--records", str(records), "--json", str(out)]) in (0, 1)
    rows = [r for r in json.loads(out.read_text())["rows"] if (r["benchmark"], r["measure"]) == (MARCO, MEASURE)]
    graded = [r for r in rows if r.get("sigma") is not None]
    assert graded, rows
    for row in graded:
        for key in ("se", "df", "p_equivalent", "p_different", "p_different_holm", "sigma"):
            assert isinstance(row[key], (int, float)) and math.isfinite(row[key]), (key, row)
        assert row["p_different"] <= row["p_different_holm"] <= 1.0, row
        assert "MiniLM mini seeds (5, 640 queries)" in row["sigma_source"], row
