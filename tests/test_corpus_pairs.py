"""Pairs: span pairs from one document, QC sampling, mixed ratio, sharding."""

from __future__ import annotations

from collections import Counter

import pytest

from harness.core.errors import HarnessError, UnknownNameError
from harness.corpus.pairs import example_kinds, halves, make_examples, step_uses_qc
from harness.corpus.passages import Passage


def _passages(n_docs: int = 60) -> list[Passage]:
    out = []
    for d in range(n_docs):
        n = 1 + d % 4  # docs with 1..4 passages
        for i in range(n):
            out.append(Passage(f"d{d}#{i}", f"d{d}", f"doc {d} passage {i} alpha beta gamma delta"))
    return out


PASSAGES = _passages()
TEXT2P = {p.text: p for p in PASSAGES}
QUERIES = {p.pid: [f"q{j} of {p.pid}" for j in range(5)] for p in PASSAGES}


def test_span_pairs_come_from_same_document():
    ex = make_examples("span", PASSAGES, None, epoch=0)
    assert len(ex) == len(PASSAGES)
    n_docs_multi = 0
    for anchor, ctx in ex:
        if anchor in TEXT2P:
            a, c = TEXT2P[anchor], TEXT2P[ctx]
            assert a.doc_id == c.doc_id and a.pid != c.pid
            n_docs_multi += 1
        else:  # single-passage document: the two halves of that passage
            p = next(p for p in PASSAGES if p.text == anchor + " " + ctx)
            assert sum(q.doc_id == p.doc_id for q in PASSAGES) == 1
    assert n_docs_multi == sum(1 + d % 4 for d in range(60) if d % 4)


def test_span_context_varies_over_epochs_within_doc():
    seen = Counter()
    for epoch in range(30):
        for anchor, ctx in make_examples("span", PASSAGES, None, epoch=epoch, shuffle=False):
            if anchor == PASSAGES[6].text:  # d3#0, a doc with 4 passages
                seen[TEXT2P[ctx].pid] += 1
    assert set(seen) == {"d3#1", "d3#2", "d3#3"}


def test_halves():
    assert halves("a b c d e") == ("a b", "c d e")
    assert halves("single") == ("single", "single")


def test_qc_picks_one_candidate_deterministic_and_epoch_dependent():
    e0 = make_examples("qc", PASSAGES, QUERIES, epoch=0, shuffle=False)
    for (anchor, ctx), p in zip(e0, PASSAGES):
        assert anchor == p.text and ctx in QUERIES[p.pid]
    assert make_examples("qc", PASSAGES, QUERIES, epoch=0, shuffle=False) == e0
    e1 = make_examples("qc", PASSAGES, QUERIES, epoch=1, shuffle=False)
    assert e1 != e0
    other_seed = make_examples("qc", PASSAGES, QUERIES, epoch=0, seed=7, shuffle=False)
    assert other_seed != e0
    # Uniform over the C candidates in aggregate.
    counts = Counter(
        ctx.split()[0] for ep in range(10) for _, ctx in make_examples("qc", PASSAGES, QUERIES, epoch=ep, shuffle=False)
    )
    assert set(counts) == {f"q{j}" for j in range(5)}
    assert max(counts.values()) / min(counts.values()) < 1.4


def test_qc_ignores_empty_candidates_and_requires_queries():
    qs = {p.pid: ["", "only one", "  "] for p in PASSAGES}
    assert all(c == "only one" for _, c in make_examples("qc", PASSAGES, qs))
    missing = dict(QUERIES)
    missing.pop(PASSAGES[3].pid)
    with pytest.raises(HarnessError, match="no non-empty generated query"):
        make_examples("qc", PASSAGES, missing)
    with pytest.raises(HarnessError):
        make_examples("mixed", PASSAGES, None)


def test_mixed_ratio_about_half():
    many = _passages(2000)
    queries = {p.pid: [f"query {p.pid}"] for p in many}
    ex = make_examples("mixed", many, queries, epoch=3)
    frac_qc = sum(c.startswith("query ") for _, c in ex) / len(ex)
    assert 0.47 < frac_qc < 0.53
    flags = example_kinds("mixed", len(many), epoch=3)
    assert abs(flags.mean() - frac_qc) < 1e-9
    assert (example_kinds("mixed", len(many), epoch=4) != flags).any()


def test_mixed_context_is_one_kind_per_training_step():
    """QC v2 §5.2: a training step pairs all its passages with queries or all with passages, p = 0.5 each,
    drawn from (seed, epoch, step): the same on every rank and after a resume."""
    from harness.corpus.epoch_examples import EpochExamples

    many = _passages(200)
    queries = {p.pid: [f"query {p.pid}"] for p in many}
    examples = EpochExamples("mixed", many, queries, epoch=1, seed=42)
    kinds = []
    for step in range(200):
        view = examples.at_step(step)
        contexts = {c.startswith("query ") for _, c in (view[j] for j in range(0, len(view), 7))}
        assert len(contexts) == 1, step  # one kind for the whole step
        assert contexts == {step_uses_qc(42, 1, step)}
        kinds.append(contexts.pop())
    assert 0.35 < sum(kinds) / len(kinds) < 0.65 and len(set(kinds)) == 2
    assert [step_uses_qc(42, 1, s) for s in range(50)] != [step_uses_qc(42, 2, s) for s in range(50)]
    assert examples.at_step(3)[0] == EpochExamples("mixed", many, queries, epoch=1, seed=42).at_step(3)[0]
    qc = EpochExamples("qc", many, queries, epoch=1)
    assert qc.at_step(5) is qc  # the other kinds are the same at every step


def test_single():
    ex = make_examples("single", PASSAGES, shuffle=False)
    assert ex == [(p.text, p.text) for p in PASSAGES]


@pytest.mark.parametrize("kind", ["span", "qc", "mixed", "single"])
@pytest.mark.parametrize("world_size", [2, 3])
def test_sharding_disjoint_and_covering(kind, world_size):
    full = make_examples(kind, PASSAGES, QUERIES, epoch=2)
    shards = [make_examples(kind, PASSAGES, QUERIES, epoch=2, rank=r, world_size=world_size) for r in range(world_size)]
    assert sum(len(s) for s in shards) == len(full)
    assert Counter(x for s in shards for x in s) == Counter(full)
    assert max(map(len, shards)) - min(map(len, shards)) <= 1
    # Disjoint by anchor position: interleaving the shards gives back the full list.
    merged = [None] * len(full)
    for r, s in enumerate(shards):
        merged[r::world_size] = s
    assert merged == full


def test_shuffle_is_per_epoch_and_unknown_kind():
    a = make_examples("single", PASSAGES, epoch=0)
    b = make_examples("single", PASSAGES, epoch=1)
    assert sorted(a) == sorted(b) and a != b
    with pytest.raises(UnknownNameError):
        make_examples("passage", PASSAGES)
    with pytest.raises(HarnessError):
        make_examples("span", PASSAGES, rank=2, world_size=2)
