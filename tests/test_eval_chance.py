"""Chance level: a seeded random ranking, and the paired check that flags runs no better than it."""

from __future__ import annotations

import pytest

from harness.data.catalog import get_benchmark
from harness.evaluation.chance import chance_check, describe, random_run
from harness.evaluation.measures import evaluate


def test_random_run_is_seeded_and_depth_limited():
    docs, queries = [f"d{i}" for i in range(50)], ["q1", "q2"]
    run = random_run(docs, queries, depth=10, seed=1)
    assert run == random_run(docs, queries, depth=10, seed=1) != random_run(docs, queries, depth=10, seed=2)
    assert all(len(r) == 10 for r in run.values())
    assert len(random_run(docs, queries, depth=1000)["q1"]) == 50


@pytest.fixture(scope="module")
def scifact():
    return get_benchmark("scifact")


def test_a_perfect_run_is_above_chance_and_the_random_run_is_not(scifact):
    qrels = scifact.qrels(scifact.eval_split)
    perfect = {q: {d: 10.0 - i for i, d in enumerate(sorted(rels))} for q, rels in qrels.items()}
    good = chance_check(scifact, evaluate(perfect, qrels, "scifact").per_query["nDCG@10"], "nDCG@10")
    assert good["above_chance"] and good["chance"] < 0.02 and good["delta"] > 0.9
    assert "above chance" in describe("scifact", good, 1.0)

    chance = evaluate(random_run(sorted(scifact.corpus()), sorted(qrels)), qrels, "scifact")
    same = chance_check(scifact, chance.per_query["nDCG@10"], "nDCG@10")
    assert same["delta"] == 0 and not same["above_chance"]
    assert "NOT above chance" in describe("scifact", same, chance.aggregate["nDCG@10"])


def test_no_local_corpus_means_no_check():
    assert chance_check(get_benchmark("msmarco-dev"), {"q": 0.5}, "RR@10") is None
