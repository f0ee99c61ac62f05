"""Passages: never over the token limit, cover every sentence in order, titles explicit, cached."""

from __future__ import annotations

import random

import pytest

from harness.core.errors import HarnessError, UnknownNameError
from harness.corpus.passages import (
    Passage,
    build_passages,
    build_passages_cached,
    document_sentences,
    group_sentences,
    load_passages,
    split_long_sentence,
)
from harness.corpus.sentences import train_punkt
from harness.corpus.tokenizer import train_wordpiece
from harness.stages import artifacts

WORDS = (
    "aspirin stroke risk vitamin blood levels trial patients placebo dose effect cohort "
    "mortality insulin glucose therapy protein expression tumour cells mice"
).split()


def _sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."


def _corpus() -> dict[str, dict[str, str]]:
    rng = random.Random(7)
    corpus = {}
    for d in range(12):
        sents = [_sentence(rng, rng.randint(3, 30)) for _ in range(rng.randint(1, 14))]
        corpus[f"doc{d}"] = {"title": f"Study {d} of aspirin" if d % 3 else "", "text": " ".join(sents)}
    corpus["long"] = {"title": "Long", "text": _sentence(rng, 90) + " " + _sentence(rng, 5)}
    corpus["empty"] = {"title": "", "text": ""}
    return corpus


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    from transformers import AutoTokenizer

    corpus = _corpus()
    texts = [d["title"] + " " + d["text"] for d in corpus.values()]
    path = train_wordpiece(texts, tmp_path_factory.mktemp("wp"), vocab_size=60, min_frequency=1)
    return AutoTokenizer.from_pretrained(str(path))


@pytest.fixture(scope="module")
def splitter():
    return train_punkt([d["text"] for d in _corpus().values()])


def _ntok(tok, text: str) -> int:
    return len(tok(text, add_special_tokens=False)["input_ids"])


def _chars(text: str) -> str:
    return "".join(text.split())


@pytest.mark.parametrize("max_tokens", [16, 40, 144])
def test_limit_and_coverage_in_order(tok, splitter, max_tokens):
    corpus = _corpus()
    passages = build_passages(corpus, tok, max_tokens, splitter=splitter)
    assert passages and all(0 < _ntok(tok, p.text) <= max_tokens for p in passages)
    assert len({p.pid for p in passages}) == len(passages)
    for doc_id, doc in corpus.items():
        mine = [p for p in passages if p.doc_id == doc_id]
        assert [p.pid for p in mine] == [f"{doc_id}#{i}" for i in range(len(mine))]
        sents = document_sentences(doc, splitter)
        # Every character of every sentence, in order, nothing added.
        assert _chars(" ".join(p.text for p in mine)) == _chars(" ".join(sents))
    # Packing is greedy: two neighbouring passages of a doc could not have been merged,
    # except around a cut over-long sentence.
    by_doc = {}
    for p in passages:
        by_doc.setdefault(p.doc_id, []).append(p)
    for doc_id, ps in by_doc.items():
        if doc_id == "long":
            continue
        for a, b in zip(ps, ps[1:]):
            first_b = splitter.split(b.text)[0] if not b.text.startswith("Study") else b.text
            assert _ntok(tok, a.text + " " + first_b) > max_tokens


def test_max_passages_takes_whole_documents_in_a_seeded_order(tok, splitter):
    corpus = _corpus()
    full = build_passages(corpus, tok, 16, splitter=splitter)
    some = build_passages(corpus, tok, 16, splitter=splitter, max_passages=10, seed=3)
    assert len(some) == 10
    assert some == build_passages(corpus, tok, 16, splitter=splitter, max_passages=10, seed=3)
    assert some != build_passages(corpus, tok, 16, splitter=splitter, max_passages=10, seed=4)
    # Same passages as the full build, in corpus order; every document but the last taken is whole.
    assert [p for p in full if p in some] == some
    docs = list(dict.fromkeys(p.doc_id for p in some))
    for doc_id in docs[:-1]:
        assert [p for p in some if p.doc_id == doc_id] == [p for p in full if p.doc_id == doc_id]
    assert build_passages(corpus, tok, 16, splitter=splitter, max_passages=10**6) == full
    with pytest.raises(HarnessError, match="max_passages"):
        build_passages(corpus, tok, 16, splitter=splitter, max_passages=0)


def test_empty_document_gives_no_passage(tok, splitter):
    assert build_passages({"e": {"title": "", "text": "  "}}, tok, 144, splitter=splitter) == []


def test_over_long_sentence_is_cut_at_limit(tok):
    rng = random.Random(1)
    long = _sentence(rng, 100)
    pieces = split_long_sentence(long, tok, 16)
    assert len(pieces) >= 100 // 16
    assert all(_ntok(tok, p) <= 16 for p in pieces)
    assert _chars(" ".join(pieces)) == _chars(long)
    # Cuts fall on word boundaries: every piece is made of whole words of the sentence.
    words = set(long.rstrip(".").lower().split())
    assert all(w.strip(".").lower() in words for p in pieces for w in p.split())


def test_titles_explicit(tok, splitter):
    doc = {"title": "Aspirin and stroke", "text": "Patients took aspirin. Risk fell."}
    with_title = build_passages({"d": doc}, tok, 144, splitter=splitter)
    assert with_title[0].text == "Aspirin and stroke Patients took aspirin. Risk fell."
    dropped = build_passages({"d": doc}, tok, 144, splitter=splitter, title_mode="drop")
    assert dropped[0].text == "Patients took aspirin. Risk fell."
    with pytest.raises(UnknownNameError):
        build_passages({"d": doc}, tok, 144, splitter=splitter, title_mode="prefix")
    # Title is a sentence of its own: with a budget that fits the title only, the first
    # passage is exactly the title (Punkt never glued it to the first body sentence).
    budget = _ntok(tok, doc["title"])
    groups = group_sentences(document_sentences(doc, splitter), tok, budget)
    assert groups[0] == ["Aspirin and stroke"]


def test_short_span_prob_is_deterministic_and_shorter(tok, splitter):
    corpus = _corpus()
    full = build_passages(corpus, tok, 40, splitter=splitter)
    a = build_passages(corpus, tok, 40, splitter=splitter, short_span_prob=0.5)
    b = build_passages(corpus, tok, 40, splitter=splitter, short_span_prob=0.5)
    assert a == b and len(a) > len(full)
    assert all(_ntok(tok, p.text) <= 40 for p in a)


def test_bad_limit_and_slow_tokenizer(tok, splitter):
    with pytest.raises(HarnessError):
        build_passages(_corpus(), tok, 1, splitter=splitter)
    with pytest.raises(HarnessError):
        build_passages(_corpus(), "/nonexistent/tokenizer", 144, splitter=splitter)


def test_cached_build_reloads_and_rebuilds_on_change(tok, tmp_path, monkeypatch):
    corpus = _corpus()
    out = tmp_path / "passages"
    first = build_passages_cached(corpus, tok, out, 40)
    assert (out / "done.json").exists() and load_passages(out) == first
    assert all(isinstance(p, Passage) for p in first)

    import harness.corpus.passages as mod

    monkeypatch.setattr(mod, "build_passages", lambda *a, **k: pytest.fail("rebuilt despite cache"))
    assert build_passages_cached(corpus, tok, out, 40) == first
    monkeypatch.undo()
    key = artifacts.finished_meta(out)["key"]
    second = build_passages_cached(corpus, tok, out, 20)
    assert artifacts.finished_meta(out)["key"] != key and len(second) > len(first)
