"""Hard-negative mining: positives excluded, depth respected, deterministic sampling, stage-2 groups."""

from __future__ import annotations

import pytest

from harness.core.errors import HarnessError
from harness.finetune.negatives import (
    make_examples,
    mine_negatives,
    negative_pool,
    pool_stats,
    ranked,
    sample_group,
)


def _run(n_docs: int = 300) -> dict[str, dict[str, float]]:
    # Scores fall with the doc number, so rank r holds doc f"d{r}".
    return {q: {f"d{i}": 1000.0 - i for i in range(n_docs)} for q in ("q1", "q2", "q3")}


QRELS = {
    "q1": {"d0": 1, "d5": 2, "d250": 1, "d7": 0},  # d7 is judged non-relevant: still a negative
    "q2": {"d3": 1},
    "q3": {"d1": 0},  # no positive: not a training query
}


def test_pool_excludes_positives_and_respects_depth():
    pool = negative_pool(_run(), QRELS, depth=200)
    assert set(pool) == {"q1", "q2"}
    assert len(pool["q1"]) == 200 - 2 and len(pool["q2"]) == 199
    assert not {"d0", "d5", "d250"} & set(pool["q1"])
    assert "d7" in pool["q1"] and "d200" not in pool["q1"]
    assert pool["q1"][:3] == ["d1", "d2", "d3"]  # rank order kept
    assert negative_pool(_run(), QRELS, depth=10)["q2"] == [f"d{i}" for i in range(10) if i != 3]
    # min_rel=2 turns d0 and d250 into candidates for q1.
    assert "d0" in negative_pool(_run(), QRELS, depth=10, min_rel=2)["q1"]
    with pytest.raises(HarnessError):
        negative_pool(_run(), QRELS, depth=0)


def test_ranked_breaks_ties_by_doc_id():
    assert ranked({"b": 1.0, "a": 1.0, "c": 2.0}) == ["c", "a", "b"]


def test_sampling_is_deterministic_and_seeded():
    a = mine_negatives(_run(), QRELS, depth=200, n=15, seed=42)
    b = mine_negatives(_run(), QRELS, depth=200, n=15, seed=42)
    c = mine_negatives(_run(), QRELS, depth=200, n=15, seed=7)
    assert a == b and a != c
    pool = negative_pool(_run(), QRELS, depth=200)
    for qid, negs in a.items():
        assert len(negs) == 15 == len(set(negs))
        assert set(negs) <= set(pool[qid])
    assert mine_negatives(_run(), QRELS, depth=200) == pool  # n=None: the whole pool


def test_epochs_rotate_through_the_pool_and_small_pools_repeat():
    pool = [f"d{i}" for i in range(30)]
    epochs = [sample_group(pool, 10, 42, "q", e) for e in range(3)]
    assert sorted(sum(epochs, [])) == sorted(pool)  # three epochs of 10 cover the 30 once
    assert sample_group(pool, 10, 42, "q", 3) == epochs[0]
    small = sample_group(["x", "y"], 5, 42, "q", 0)
    assert len(small) == 5 and set(small) <= {"x", "y"}
    assert sample_group(pool, 0, 42, "q") == []
    with pytest.raises(HarnessError):
        sample_group([], 3, 42, "q")


def test_make_examples_groups_and_union():
    queries = {"q1": "first", "q2": "second"}
    mined = {"q1": ["d1", "d2"], "q2": ["d4"]}
    bm25 = {"q1": ["d2", "d9"]}
    groups = make_examples(queries, QRELS, [mined, bm25], mode="groups")
    assert groups == [
        ("first", ["d0", "d250", "d5"], ["d1", "d2"]),
        ("second", ["d3"], ["d4"]),
        ("first", ["d0", "d250", "d5"], ["d2", "d9"]),
    ]
    union = make_examples(queries, QRELS, [mined, bm25], mode="union")
    assert union == [("first", ["d0", "d250", "d5"], ["d1", "d2", "d9"]), ("second", ["d3"], ["d4"])]
    with pytest.raises(HarnessError):
        make_examples(queries, QRELS, [mined], mode="concat")


def test_pool_stats():
    pool = negative_pool(_run(5), {"q1": {"d0": 1, "d1": 1, "d2": 1, "d3": 1, "d4": 1}, "q2": {"d0": 1}}, depth=5)
    stats = pool_stats(pool, {"q1": {"d0": 1}, "q2": {"d0": 1}})
    assert stats["queries"] == 1 and stats["queries_without_negatives"] == 1 and stats["pool_max"] == 4
