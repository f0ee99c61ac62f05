"""End to end on real embedded data (optional): SciFact documents -> passages -> pairs."""

from __future__ import annotations

import itertools

import pytest

pytestmark = pytest.mark.slow


def test_scifact_passages_and_pairs(tmp_path):
    catalog = pytest.importorskip("harness.data.catalog")
    from transformers import AutoTokenizer

    from harness.corpus.pairs import make_examples
    from harness.corpus.passages import build_passages_cached
    from harness.corpus.tokenizer import train_wordpiece

    corpus = dict(itertools.islice(catalog.get_benchmark("scifact").corpus().items(), 400))
    texts = [d.get("title", "") + " " + d.get("text", "") for d in corpus.values()]
    tok = AutoTokenizer.from_pretrained(str(train_wordpiece(texts, tmp_path / "wp", vocab_size=3000)))
    passages = build_passages_cached(corpus, tok, tmp_path / "passages", 144)
    lengths = [len(ids) for ids in tok([p.text for p in passages], add_special_tokens=False)["input_ids"]]
    assert max(lengths) <= 144 and sum(lengths) / len(lengths) > 60  # abstracts pack into near-full passages
    assert {p.doc_id for p in passages} <= set(corpus) and len(passages) > len(corpus)
    spans = make_examples("span", passages, epoch=0)
    assert len(spans) == len(passages) and all(a != c for a, c in spans)
