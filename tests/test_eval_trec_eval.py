"""The harness's measures reproduce trec_eval v9.0.8's own expected outputs (tests/fixtures/trec_eval).

Every measure the harness reports is compared per query and aggregated ("all"), to the 4
decimals trec_eval prints: recip_rank (RR), RR@10 (recip_rank truncated at rank 10),
recall_k (R@k; R@50 by recomputation, trec_eval prints no recall_50), ndcg_cut_k (nDCG@k),
map (AP), P_k, success_k, the -l2 outputs for the grade >= 2 measures, and the -c output
for a run missing a judged query.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness.data.formats import read_trec_qrels, read_trec_run
from harness.evaluation.measures import evaluate, evaluate_measures

FIX = Path(__file__).parent / "fixtures" / "trec_eval"
EXPECTED = FIX / "v9.0.8"


def _expected(name: str) -> dict[str, dict[str, str]]:
    """trec_eval -q output -> {trec measure: {qid or 'all': printed value}}."""
    return _expected_in(EXPECTED / name)


def _expected_in(path: Path) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for line in path.read_text().splitlines():
        measure, qid, value = line.split()
        out.setdefault(measure, {})[qid] = value
    return out


def _read_trunc_run(path: Path) -> dict[str, dict[str, float]]:
    """results.trunc has junk after the 6th column ("reserved for future expansion"):
    trec_eval reads the first six, so does this test-only reader."""
    import gzip

    run: dict[str, dict[str, float]] = {}
    with gzip.open(path, "rt") as fh:
        for line in fh:
            qid, _, doc, _, score = line.split()[:5]
            run.setdefault(qid, {})[doc] = float(score)
    return run


@pytest.fixture(scope="module")
def qrels_test():
    return read_trec_qrels(FIX / "qrels.test.gz")


@pytest.fixture(scope="module")
def qrels_rel_level():
    return read_trec_qrels(FIX / "qrels.rel_level.gz")


@pytest.fixture(scope="module")
def run_test():
    return read_trec_run(FIX / "results.test.gz")


def _to_ir(trec: str, rel: int | None = None) -> str | None:
    """trec_eval measure name -> ir-measures string (None for measures the harness does not use)."""
    r = f"(rel={rel})" if rel else ""
    if trec == "map":
        return f"AP{r}"
    if trec == "recip_rank":
        return f"RR{r}"
    m = re.fullmatch(r"(P|recall|success|ndcg_cut)_(\d+)", trec)
    if not m:
        return None
    name, k = m.groups()
    if name == "ndcg_cut":  # trec_eval's ndcg ignores -l: gains are the raw grades
        return f"nDCG@{k}"
    return {"P": "P", "recall": "R", "success": "Success"}[name] + f"{r}@{k}"


def _check_all(expected, result, mapping):
    checked = 0
    for trec, ir in mapping.items():
        for qid, printed in expected[trec].items():
            ours = result.aggregate[ir] if qid == "all" else result.per_query[ir][qid]
            assert f"{ours:.4f}" == printed, f"{ir} vs trec_eval {trec} on {qid}: {ours:.6f} != {printed}"
            checked += 1
    return checked


def test_all_trec_per_query_and_aggregate(qrels_test, run_test):
    expected = _expected("out.test.aq")
    mapping = {t: _to_ir(t) for t in expected if _to_ir(t)}
    assert {"map", "recip_rank", "P_10", "recall_1000", "recall_100", "ndcg_cut_10", "success_10"} <= set(mapping)
    result = evaluate_measures(run_test, qrels_test, list(mapping.values()))
    assert _check_all(expected, result, mapping) == 4 * len(mapping)
    # the harness's headline numbers, as SOURCES.md quotes them
    assert f"{result.aggregate['RR']:.4f}" == "0.4064"
    assert f"{result.aggregate['R@1000']:.4f}" == "0.5997"
    assert f"{result.aggregate['nDCG@10']:.4f}" == "0.3016"
    assert f"{result.aggregate['AP']:.4f}" == "0.1785"


def test_default_output_summary(qrels_test, run_test):
    expected = {}
    for line in (EXPECTED / "out.test").read_text().splitlines():
        measure, _, value = line.split()
        expected[measure] = value
    result = evaluate_measures(run_test, qrels_test, ["AP", "RR", "P@10", "P@1000"])
    assert f"{result.aggregate['AP']:.4f}" == expected["map"]
    assert f"{result.aggregate['RR']:.4f}" == expected["recip_rank"]
    assert f"{result.aggregate['P@10']:.4f}" == expected["P_10"]
    assert f"{result.aggregate['P@1000']:.4f}" == expected["P_1000"]


def test_measure_parameters_output(qrels_test, run_test):
    expected = _expected("out.test.meas_params")
    mapping = {t: _to_ir(t) for t in expected if _to_ir(t)}
    assert set(mapping) == {
        "P_3",
        "P_5",
        "P_7",
        "recall_20",
        "recall_2000",
        "ndcg_cut_10",
        "ndcg_cut_20",
        "ndcg_cut_23",
        "success_2",
        "success_5",
        "success_20",
    }
    result = evaluate_measures(run_test, qrels_test, list(mapping.values()))
    _check_all(expected, result, mapping)


def test_rr_at_10_is_recip_rank_truncated_at_rank_10(qrels_test, run_test):
    expected = _expected("out.test.aq")["recip_rank"]
    result = evaluate_measures(run_test, qrels_test, ["RR@10", "RR"])
    truncated = {q: (float(v) if float(v) >= 0.1 else 0.0) for q, v in expected.items() if q != "all"}
    for qid, value in truncated.items():
        assert f"{result.per_query['RR@10'][qid]:.4f}" == f"{value:.4f}"
    assert result.aggregate["RR@10"] == pytest.approx(sum(truncated.values()) / 3, abs=5e-5)
    # topic 303: first relevant document at rank 19 -> RR 0.0526 but RR@10 = 0 (cutoff honoured)
    assert expected["303"] == "0.0526"
    assert result.per_query["RR@10"]["303"] == 0.0
    assert result.per_query["RR"]["303"] == pytest.approx(1 / 19)


def test_recall_at_50_recomputed(qrels_test, run_test):
    """trec_eval prints no recall_50: recompute it (trec_eval's ranking and definition)."""
    expected = _expected("out.test.aq")
    result = evaluate_measures(run_test, qrels_test, ["R@50"])
    for qid, docs in run_test.items():
        top = sorted(docs, reverse=True)  # trec_eval order: score descending, ties by doc id descending
        top.sort(key=lambda d: docs[d], reverse=True)
        relevant = {d for d, g in qrels_test[qid].items() if g > 0}
        want = len(relevant & set(top[:50])) / len(relevant)
        assert result.per_query["R@50"][qid] == pytest.approx(want, abs=1e-12)
        assert float(expected["recall_30"][qid]) - 5e-5 <= result.per_query["R@50"][qid]
        assert result.per_query["R@50"][qid] <= float(expected["recall_100"][qid]) + 5e-5


def test_relevance_level_2_outputs(qrels_rel_level, run_test):
    """trec_eval -l2 (qrels.rel_level has grades 0-4 and -1): the grade >= 2 measures."""
    expected = _expected("out.test.aql")
    mapping = {
        t: _to_ir(t, rel=2)
        for t in ("map", "recip_rank", "P_10", "recall_1000", "recall_100", "ndcg_cut_10", "success_10")
    }
    result = evaluate_measures(run_test, qrels_rel_level, list(mapping.values()))
    assert _check_all(expected, result, mapping) == 4 * len(mapping)


def test_dl_convention_on_rel_level_fixture(qrels_rel_level, run_test):
    """evaluate(..., "dl19") = trec_eval -l2 ndcg_cut_10 / recall_1000, and recip_rank cut at 10."""
    expected = _expected("out.test.aql")
    result = evaluate(run_test, qrels_rel_level, "dl19")
    assert list(result.aggregate) == ["nDCG@10", "R(rel=2)@1000", "RR(rel=2)@10"]
    assert result.primary == "nDCG@10"
    assert f"{result.aggregate['nDCG@10']:.4f}" == expected["ndcg_cut_10"]["all"] == "0.2656"
    assert f"{result.aggregate['R(rel=2)@1000']:.4f}" == expected["recall_1000"]["all"] == "0.5776"
    rr = {q: float(v) for q, v in expected["recip_rank"].items() if q != "all"}
    cut = {q: v if v >= 0.1 else 0.0 for q, v in rr.items()}
    assert rr["301"] < 0.1 and cut["301"] == 0.0  # first grade >= 2 doc at rank 307
    for qid, value in cut.items():
        assert f"{result.per_query['RR(rel=2)@10'][qid]:.4f}" == f"{value:.4f}"


def test_missing_query_scores_zero_like_trec_eval_c(qrels_test):
    """results.trunc lacks topic 302: the harness's aggregate equals trec_eval -c's."""
    expected = _expected("out.test.aqc")
    assert expected["num_q"]["all"] == "3"
    run = _read_trunc_run(FIX / "results.trunc.gz")
    assert "302" not in run
    mapping = {t: _to_ir(t) for t in ("map", "recip_rank", "P_10", "recall_100", "recall_1000", "ndcg_cut_10")}
    result = evaluate_measures(run, qrels_test, list(mapping.values()))
    assert result.missing_queries == ["302"]
    assert _check_all(expected, result, mapping) == 3 * len(mapping)  # 301, 303, all
    assert all(result.per_query[ir]["302"] == 0.0 for ir in mapping.values())


def test_complete_run_matches_plain_ir_measures(qrels_test, run_test):
    """With every judged query ranked, the aggregate is ir-measures' own calc_aggregate."""
    import ir_measures

    measures = ["nDCG@10", "R@100", "R@1000", "AP", "RR"]
    ours = evaluate_measures(run_test, qrels_test, measures).aggregate
    theirs = ir_measures.calc_aggregate([ir_measures.parse_measure(m) for m in measures], qrels_test, run_test)
    for m in measures:
        assert ours[m] == pytest.approx(theirs[ir_measures.parse_measure(m)], abs=1e-12)


def test_scores_are_ranked_as_doubles_like_trec_eval_10():
    """Scores that tie in float32 but not in float64 (2e300 vs 1e300, 100000001 vs 100000000, 2e-50 vs
    1e-50) are ranked by the doubles, as trec_eval 10 reads them: its own output, per query and "all".
    pytrec_eval (trec_eval 9.0.8, a float per score) tied them and broke the tie by doc id: nDCG@10 0.6789."""
    expected = _expected_in(FIX / "v10.0" / "out.doubles")
    mapping = {t: _to_ir(t) for t in expected}
    assert None not in mapping.values() and len(mapping) == 9
    run = read_trec_run(FIX / "results.doubles")
    result = evaluate_measures(run, read_trec_qrels(FIX / "qrels.doubles"), list(mapping.values()))
    assert _check_all(expected, result, mapping) == 5 * len(mapping)  # 401-404 and all
    assert result.aggregate["nDCG@10"] == pytest.approx(0.9109, abs=5e-5)
