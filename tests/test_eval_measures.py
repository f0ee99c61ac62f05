"""Conventions and measures: cutoffs, ties, missing queries, BEIR self-hits, cqadupstack averaging."""

from __future__ import annotations

import pytest

from harness.core.errors import HarnessError, UnknownNameError
from harness.evaluation.conventions import BEIR_NAMES, CONVENTIONS, CQADUPSTACK_FORUMS, get_convention, primary_measure
from harness.evaluation.measures import (
    EvalResult,
    canonical_ranking,
    combine_subsets,
    evaluate,
    evaluate_benchmark,
    evaluate_measures,
    merge_subsets,
)


def _ranked(*docs: str) -> dict[str, float]:
    """A ranking with strictly decreasing scores in the given order."""
    return {d: float(len(docs) - i) for i, d in enumerate(docs)}


# ---------------------------------------------------------------------------- conventions


def test_conventions_match_the_papers():
    assert get_convention("msmarco-dev").measures[:1] == ("RR@10",)
    assert {"RR@10", "R@50", "R@1000"} <= set(get_convention("msmarco-dev").measures)
    for dl in ("dl19", "dl20"):
        c = get_convention(dl)
        assert c.primary == "nDCG@10" and set(c.measures) == {"nDCG@10", "R(rel=2)@1000", "RR(rel=2)@10"}
        assert not c.drop_self_hits
    for name in BEIR_NAMES:
        c = get_convention(name)
        assert c.primary == "nDCG@10" and c.drop_self_hits and "R@100" in c.measures
    assert get_convention("cqadupstack").subsets == CQADUPSTACK_FORUMS
    assert get_convention("cqadupstack-android").drop_self_hits


def test_convention_names_agree_with_the_catalog():
    from harness.data import catalog

    assert list(BEIR_NAMES) == catalog.BEIR_NAMES
    assert list(CQADUPSTACK_FORUMS) == catalog.CQADUPSTACK_FORUMS
    for name in catalog.list_benchmarks():
        b = catalog.get_benchmark(name)
        if b.kind == "corpus":  # pre-training corpora are never evaluated on
            assert name in catalog.PRETRAIN_CORPORA
            continue
        if b.kind == "msmarco-train":  # training data: it trains retrievers, it is never scored
            continue
        assert get_convention(name, b.kind).kind == b.kind


def test_unknown_benchmark_and_kind_fallback():
    with pytest.raises(UnknownNameError, match="did you mean|Did you mean"):
        get_convention("dl91")
    smoke = get_convention("msmarco-dl19-subset", "trec-dl")
    assert smoke.measures == CONVENTIONS["dl19"].measures


def test_the_primary_measure_is_the_conventions_own():
    """Effects and plots ask the conventions (no list of their own): MRR@10 on MS MARCO dev, nDCG@10 elsewhere."""
    assert primary_measure("msmarco-dev") == "RR@10"
    assert all(primary_measure(name) == c.primary for name, c in CONVENTIONS.items())
    assert primary_measure("dl19") == primary_measure("scifact") == primary_measure("cqadupstack-android") == "nDCG@10"
    # a name without a convention of its own keeps the measure effects always gave it
    assert primary_measure("msmarco-dl19-subset") == primary_measure("msmarco-dev@sample") == "nDCG@10"


# ---------------------------------------------------------------------------- measures


def test_rr_at_10_honours_the_cutoff():
    """First relevant document at rank 11: RR@10 = 0 (pytrec_eval's recip_rank would give 1/11)."""
    docs = [f"n{i:02d}" for i in range(10)] + ["rel"]
    result = evaluate_measures({"q": _ranked(*docs)}, {"q": {"rel": 1}}, ["RR@10", "RR", "RR@11"])
    assert result.aggregate["RR@10"] == 0.0
    assert result.aggregate["RR"] == pytest.approx(1 / 11)
    assert result.aggregate["RR@11"] == pytest.approx(1 / 11)


def test_msmarco_convention_rank_11_and_rank_1():
    qrels = {"a": {"rel": 1}, "b": {"rel": 1}}
    run = {"a": _ranked(*[f"n{i}" for i in range(10)], "rel"), "b": _ranked("rel", "x")}
    result = evaluate(run, qrels, "msmarco-dev")
    assert result.per_query["RR@10"] == {"a": 0.0, "b": 1.0}
    assert result.aggregate["RR@10"] == 0.5
    assert result.primary == "RR@10"


def test_ties_follow_trec_eval_order_for_every_measure():
    """Equal scores: trec_eval ranks doc id descending first, so 'b' (non-relevant) precedes 'a'."""
    run = {"q": {"a": 1.0, "b": 1.0}}
    result = evaluate_measures(run, {"q": {"a": 1}}, ["RR@10", "RR", "nDCG@1", "P@1"])
    assert result.aggregate["RR@10"] == result.aggregate["RR"] == 0.5
    assert result.aggregate["nDCG@1"] == 0.0 and result.aggregate["P@1"] == 0.0
    assert list(canonical_ranking({"a": 1.0, "b": 1.0, "c": 2.0})) == ["c", "b", "a"]
    untied = {"x": 0.3, "y": 0.1}
    assert canonical_ranking(untied) is untied


def test_missing_queries_score_zero_and_unjudged_run_queries_are_ignored():
    qrels = {"q1": {"d1": 1}, "q2": {"d2": 1}}
    run = {"q1": _ranked("d1"), "q9": _ranked("d9"), "q2": {}}
    result = evaluate_measures(run, qrels, ["nDCG@10", "R@1000"])
    assert result.per_query["nDCG@10"] == {"q1": 1.0, "q2": 0.0}
    assert result.aggregate == {"nDCG@10": 0.5, "R@1000": 0.5}
    assert result.missing_queries == ["q2"] and result.num_queries == 2


def test_dl_binary_measures_use_grade_2_and_ndcg_uses_grades():
    qrels = {"q": {"g1": 1, "g3": 3}}
    result = evaluate({"q": _ranked("g1", "g3")}, qrels, "dl19")
    assert result.aggregate["RR(rel=2)@10"] == 0.5  # grade-1 doc is not relevant here
    assert result.aggregate["R(rel=2)@1000"] == 1.0
    ideal = 3 + 1 / 1.5849625007211563  # gains 3, 1 at ranks 1, 2
    assert result.aggregate["nDCG@10"] == pytest.approx((1 + 3 / 1.5849625007211563) / ideal)


def test_dl_evaluates_only_judged_queries():
    qrels = {"q1": {"d": 2}}
    run = {"q1": _ranked("d"), "unjudged1": _ranked("x"), "unjudged2": _ranked("y")}
    result = evaluate(run, qrels, "dl20")
    assert result.num_queries == 1 and result.aggregate["nDCG@10"] == 1.0


def test_beir_drops_self_hits_before_evaluation():
    qrels = {"q1": {"d1": 1}}
    run = {"q1": _ranked("q1", "d1")}
    beir = evaluate(run, qrels, "arguana")
    assert beir.aggregate["nDCG@10"] == 1.0 and beir.dropped_self_hits == 1
    plain = evaluate(run, qrels, "dl19")  # no such rule outside BEIR
    assert plain.aggregate["nDCG@10"] < 1.0 and plain.dropped_self_hits == 0


def test_bad_measure_string_is_a_clear_error():
    with pytest.raises(HarnessError, match="cannot parse measure 'Foo@3'"):
        evaluate_measures({"q": {"d": 1.0}}, {"q": {"d": 1}}, ["Foo@3"])
    with pytest.raises(HarnessError, match="no judged queries"):
        evaluate_measures({"q": {"d": 1.0}}, {}, ["nDCG@10"])


def test_to_dict_is_json_ready():
    import json

    r = evaluate({"q": _ranked("d")}, {"q": {"d": 1}}, "scifact")
    d = r.to_dict(per_query=True)
    json.dumps(d)
    assert d["aggregate"]["nDCG@10"] == 1.0 and d["per_query"]["nDCG@10"] == {"q": 1.0}


# ---------------------------------------------------------------------------- cqadupstack


def _forum_data(perfect_forums: set[str]):
    """Forum i has i+1 queries; forums in ``perfect_forums`` are ranked perfectly, others badly."""
    qrels, run = {}, {}
    for i, forum in enumerate(CQADUPSTACK_FORUMS):
        q = {f"{n}": {f"d{n}": 1} for n in range(i + 1)}  # same qids in every forum: they collide
        r = {qid: (_ranked(f"d{qid}") if forum in perfect_forums else _ranked("junk")) for qid in q}
        qrels[f"cqadupstack-{forum}"], run[forum] = q, r  # both prefixes are accepted
    return merge_subsets(run), merge_subsets(qrels)


def test_cqadupstack_is_the_mean_of_forum_means():
    perfect = {"android", "english", "gaming"}  # the three smallest forums (1, 2, 3 queries)
    run, qrels = _forum_data(perfect)
    result = evaluate(run, qrels, "cqadupstack")
    assert result.aggregate["nDCG@10"] == pytest.approx(3 / 12)  # a mean over queries would be 6/78
    assert set(result.subsets) == {f"cqadupstack-{f}" for f in CQADUPSTACK_FORUMS}
    assert result.subsets["cqadupstack-english"].aggregate["nDCG@10"] == 1.0
    assert result.num_queries == sum(range(1, 13))
    assert "cqadupstack-gaming/2" in result.per_query["nDCG@10"]
    assert result.primary == "nDCG@10"


def test_cqadupstack_needs_every_forum_and_namespaced_ids():
    run, qrels = _forum_data(set())
    del_forum = {k: v for k, v in qrels.items() if not k.startswith("cqadupstack-tex/")}
    with pytest.raises(HarnessError, match="no queries for: cqadupstack-tex"):
        evaluate(run, del_forum, "cqadupstack")
    with pytest.raises(HarnessError, match="<forum>/<qid>"):
        evaluate(run, {"123": {"d": 1}}, "cqadupstack")


def test_combine_subsets_checks_measures():
    a = EvalResult("x", ("nDCG@10",), {"nDCG@10": 1.0}, {"nDCG@10": {"q": 1.0}}, num_queries=1)
    b = EvalResult("y", ("R@100",), {"R@100": 0.0}, {"R@100": {"q": 0.0}}, num_queries=1)
    with pytest.raises(HarnessError, match="evaluated with"):
        combine_subsets("cqadupstack", {"x": a, "y": b})


def test_real_cqadupstack_qrels_perfect_run():
    """Embedded qrels of the 12 forums, a run ranking each query's relevant documents first."""
    from harness.data.catalog import get_benchmark
    from harness.evaluation.measures import benchmark_qrels

    qrels = benchmark_qrels(get_benchmark("cqadupstack"))
    assert len(qrels) == 13145
    run = {qid: _ranked(*sorted(docs, key=lambda d: -docs[d])) for qid, docs in qrels.items()}
    result = evaluate_benchmark(run, "cqadupstack")
    assert result.aggregate["nDCG@10"] == pytest.approx(1.0)
    assert len(result.subsets) == 12


def test_several_rr_cutoffs_share_one_cut_run():
    docs = [f"n{i}" for i in range(6)] + ["rel"] + [f"m{i}" for i in range(20)]
    result = evaluate_measures({"q": _ranked(*docs)}, {"q": {"rel": 1}}, ["RR@5", "RR@10", "RR", "R@5"])
    assert result.aggregate == {"RR@5": 0.0, "RR@10": pytest.approx(1 / 7), "RR": pytest.approx(1 / 7), "R@5": 0.0}
