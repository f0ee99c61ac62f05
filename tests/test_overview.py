"""The at-a-glance rows (harness/present/overview.py) over the committed records and the papers' registry:
every headline cell once, its state the one `python -m harness check` gives, a command and a
projected cost for what was never run, and the small learned runs in points with their CIs."""

from __future__ import annotations

import pytest

from harness.core.paths import PROJECT_ROOT
from harness.core.statuses import NOT_COMPARABLE, NOT_YET_RUN, REPRODUCED, STATUSES
from harness.evaluation.effects import method_effects
from harness.gate.run import run_gate
from harness.papers.registry import load_reported_cells
from harness.present import overview
from harness.records.store import load_records
from harness.spec.method import variants_of
from leaderboard_app import glance as page

# Named, not the default: the tests' own runs folder (conftest) is an empty tmp one.
RECORDS = PROJECT_ROOT / "runs" / "records"


@pytest.fixture(scope="module")
def committed() -> overview.Glance:
    return overview.from_folder(RECORDS)


@pytest.fixture(scope="module")
def cells() -> list[dict]:
    found, error = load_reported_cells(None)
    assert error is None
    return found


def test_every_headline_cell_once_in_points_with_its_printed_value(committed, cells) -> None:
    heads = overview.headline_cells(cells)
    assert len(committed.headline) == len(heads) > 100
    by_id = {c["cell_id"]: c for c in heads}
    assert len(by_id) == len(heads)
    papers = {(r.paper, r.table) for r in committed.headline}
    # each paper's Table 1 and the two BEIR tables (lexmae Table 3, qc-v2 Table 2)
    assert {
        ("qc-v1", "Table 1"),
        ("qc-v2", "Table 1"),
        ("cpdae", "Table 1"),
        ("lexmae", "Table 1"),
        ("lexmae", "Table 3"),
        ("qc-v2", "Table 2"),
    } <= papers
    for row, cell in zip(committed.headline, heads):
        assert row.printed == cell["value"] and row.reported == pytest.approx(100 * cell["score"])
        assert row.state in overview.STATES
        assert row.measure in ("RR@10", "nDCG@10")


def test_graded_states_are_the_gates(committed) -> None:
    """A graded headline row shows the worst of `check`'s rows for that cell (same runs, benchmark,
    measure and source); the committed BM25 paper runs reproduce LexMAE's BM25 on BEIR."""
    gate = run_gate(RECORDS)
    graded = [r for r in committed.headline if r.state not in (NOT_YET_RUN, NOT_COMPARABLE)]
    assert graded, "the committed bm25 paper records grade some cells"
    for row in graded:
        statuses = {
            g.status
            for g in gate.rows
            if g.run_id in row.runs
            and g.benchmark == row.benchmark
            and g.measure == row.measure
            and g.against == row.source
        }
        assert statuses and row.state in statuses, (row.source, row.benchmark, statuses)
    bm25 = {r.benchmark: r.state for r in graded if r.method == "bm25" and r.paper == "lexmae"}
    assert bm25 == {"scifact": REPRODUCED, "nfcorpus": REPRODUCED}


def test_what_was_never_run_says_how_and_at_what_cost(committed) -> None:
    never = [r for r in committed.headline if r.state == NOT_YET_RUN]
    assert never
    for row in never:
        if row.cited:  # a copied row no paper-profile run grades: the released checkpoint it is does
            assert row.command.startswith("python -m harness reproduce --checkpoint "), row
            assert "not its own run" in row.reason and "released checkpoint" in row.reason, row
        else:
            # the method's own paper spec, or a declared variant of it (cpdae_pairwise for CPDAE's cells)
            spec = next(m for m in (row.method, *variants_of(row.method)) if f"--method {m} --profile" in row.command)
            assert row.command.startswith(f"python -m harness run --method {spec} --profile paper"), row
        assert row.cost and row.reason
    cotmae = next(r for r in never if r.method == "cotmae_qc" and r.benchmark == "msmarco-dev")
    assert " on 16 x V100-32GB (" in cotmae.cost and "PFLOP" in cotmae.cost
    # a benchmark outside the spec's own datasets is named on the command line
    bm25 = next(r for r in never if r.method == "bm25" and r.benchmark == "msmarco-dev")
    assert bm25.command.endswith(",msmarco-dev") and "--dataset scifact,nfcorpus," in bm25.command
    for claim in committed.claims:
        assert claim.state in overview.STATES
        if claim.state == NOT_YET_RUN:
            assert "--profile paper" in claim.command and claim.cost


def test_one_line_per_method_counts_every_headline_cell(committed) -> None:
    """The glance's first table: per method and benchmark column, how many headline cells are in each
    state (adding up to the headline rows), and one command whose datasets cover every untried cell."""
    lines = {line.method: line for line in overview.method_lines(committed.headline)}
    assert list(lines)[0] == "bm25" and {"cotmae_qc", "lexmae", "cpdae"} <= set(lines)
    for method, line in lines.items():
        rows = [r for r in committed.headline if r.method == method]
        assert sum(n for found in line.states.values() for n in found.values()) == len(rows)
        for r in rows:
            assert line.states[overview.matrix_column(r.benchmark)].get(r.state, 0) >= 1
    assert lines["bm25"].states["BEIR"][REPRODUCED] == 2
    bm25 = lines["bm25"].command
    # the spec runs SciFact and NFCorpus only: the line names them and every untried benchmark
    assert bm25.startswith("python -m harness run --method bm25 --profile paper --dataset scifact,nfcorpus,")
    named = set(bm25.split("--dataset ")[1].split(","))
    assert {"msmarco-dev", "dl19", "trec-covid"} <= named
    assert "dl20" not in named  # the papers' BM25 on DL20 is cited (LexMAE, QC): no run grades it
    assert "PFLOP" in lines["cotmae_qc"].cost
    html = page.matrix_html(list(lines.values()))
    assert html.count("<tr>") == len(lines) + 1 and "NOT-YET-RUN" in html and "REPRODUCED" in html


def test_learned_runs_in_points_with_cis_and_effects_vs_the_control(committed) -> None:
    records = [r for r in load_records(RECORDS)[0] if not r.integrity_problems]
    mini = [r for r in committed.learned if r.profile == "mini"]
    assert {r.method for r in mini} >= {"nopretrain", "cocondenser", "cotmae", "lexmae", "cpdae"}
    effects = {(e.a, e.dataset, e.measure): e for e in method_effects(records, "mini") if e.b == overview.CONTROL}
    for row in mini:
        assert row.ci_low <= row.value <= row.ci_high and 0 <= row.value <= 100
        if row.method == overview.CONTROL:
            assert row.effect is None
        else:
            effect = effects[(row.method, row.benchmark, row.measure)]
            assert row.effect == pytest.approx(effect.delta)
            # mini effects carry the seed spread the mini seed records measured, beside the query-only CI
            assert effect.seed_sd and row.effect_low == effect.ci_low < effect.query_ci_low
    assert {"tiny", "rehearsal"} <= {r.profile for r in committed.learned}
    assert not {"paper", "checkpoint"} & {r.profile for r in committed.learned}


def test_the_tabs_html_escapes_and_uses_text_badges(committed) -> None:
    text = page.headline_html(committed.headline) + page.claims_html(committed.claims)
    for state in {r.state for r in committed.headline}:
        assert f">{state}</span>" in text and STATUSES[state].colour in text
    assert 'title="printed: 0.187"' in text  # the printed value stays one hover away
    row = overview.HeadlineRow(
        "p", "v", "Table 1", "<b>x</b> & y", "c", "m", "dl19", "nDCG@10", "0.5", 50.0, "s", False, NOT_YET_RUN
    )
    shown = page.headline_html([row])
    assert "<b>x</b>" not in shown and "&lt;b&gt;x&lt;/b&gt; &amp; y" in shown
    frame = page.learned_matrix(committed.learned, "mini")
    assert list(frame["method"])[0] == overview.CONTROL and "nfcorpus nDCG@10 vs control" in frame.columns


def test_a_claim_takes_the_grade_of_the_paper_runs_effect(monkeypatch) -> None:
    """A printed difference shows the status `check`'s effect row grades it with (the effects of the
    paper profile), and NOT-YET-RUN with the missing method's command otherwise."""
    from harness.evaluation.claims import claims_for
    from harness.evaluation.effects import Effect

    pairs = [("cocondenser_qc", "cocondenser")]
    claims = [c for c in claims_for(pairs) if c.benchmark == "msmarco-dev"][:2]
    assert len(claims) == 2
    graded = claims[0]
    check = {
        "key": graded.key,
        "source": graded.source,
        "a_row": graded.a_row,
        "b_row": graded.b_row,
        "claimed": graded.delta,
        "status": REPRODUCED,
        "reason": "",
        "effect": 0.65,
        "ci_low": -0.4,
        "ci_high": 0.5,
    }
    effect = Effect(
        "paper",
        graded.a,
        graded.b,
        "qc_run",
        "base_run",
        graded.benchmark,
        graded.measure,
        39.4,
        38.8,
        0.65,
        0.1,
        1.2,
        0.02,
        6980,
        claims=[check],
        claim_status=REPRODUCED,
    )
    monkeypatch.setattr(overview, "method_effects", lambda records, profile, pairs=None: [effect])
    rows = overview.claim_rows([], claims, pairs)
    assert rows[0].state == REPRODUCED and rows[0].effect == 0.65 and rows[0].runs == ["qc_run", "base_run"]
    assert rows[1].state == NOT_YET_RUN and "--method cocondenser_qc --profile paper" in rows[1].command
    assert "no paper-profile run of cocondenser_qc, cocondenser" == rows[1].reason
