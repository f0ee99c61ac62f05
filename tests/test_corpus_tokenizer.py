"""WordPiece trained on the corpus: deterministic, BERT-like, reloads via AutoTokenizer, cached."""

from __future__ import annotations

import json

import pytest

from harness.core.errors import HarnessError
from harness.corpus.tokenizer import SPECIAL_TOKENS, train_wordpiece
from harness.stages import artifacts

TEXTS = [
    "Aspirin lowers the risk of stroke in older patients.",
    "Vitamin D levels were measured in blood samples.",
    "Insulin resistance predicts type 2 diabetes. Café owners drink coffee!",
] * 20


def test_trains_and_reloads_with_autotokenizer(tmp_path):
    from transformers import AutoTokenizer

    path = train_wordpiece(TEXTS, tmp_path / "wp", vocab_size=120, min_frequency=1)
    tok = AutoTokenizer.from_pretrained(str(path))
    assert tok.is_fast and tok.convert_ids_to_tokens(list(range(5))) == list(SPECIAL_TOKENS)
    assert (tok.pad_token_id, tok.cls_token_id, tok.sep_token_id, tok.mask_token_id) == (0, 2, 3, 4)
    enc = tok("ASPIRIN lowers the Risk")
    pieces = tok.convert_ids_to_tokens(enc["input_ids"])
    assert pieces[0] == "[CLS]" and pieces[-1] == "[SEP]"
    assert "[UNK]" not in pieces and all(p == p.lower() for p in pieces[1:-1])
    assert tok.decode(enc["input_ids"], skip_special_tokens=True) == "aspirin lowers the risk"
    assert "cafe" in tok.decode(tok("Café")["input_ids"], skip_special_tokens=True)  # BERT accent stripping
    assert len(tok) <= 120
    vocab_txt = (path / "vocab.txt").read_text().splitlines()
    assert vocab_txt[:5] == list(SPECIAL_TOKENS) and len(vocab_txt) == len(tok)


def test_deterministic(tmp_path):
    a = train_wordpiece(TEXTS, tmp_path / "a", vocab_size=150, min_frequency=1)
    b = train_wordpiece(list(TEXTS), tmp_path / "b", vocab_size=150, min_frequency=1)
    assert (a / "tokenizer.json").read_text() == (b / "tokenizer.json").read_text()
    assert (a / "vocab.txt").read_text() == (b / "vocab.txt").read_text()


def test_cached_and_rebuilt_on_change(tmp_path):
    out = tmp_path / "wp"
    train_wordpiece(TEXTS, out, vocab_size=120, min_frequency=1)
    mtime = (out / "tokenizer.json").stat().st_mtime_ns
    train_wordpiece(TEXTS, out, vocab_size=120, min_frequency=1)
    assert (out / "tokenizer.json").stat().st_mtime_ns == mtime
    train_wordpiece(TEXTS, out, vocab_size=100, min_frequency=1)
    assert artifacts.finished_meta(out)["config"]["vocab_size"] == 100
    assert len(json.loads((out / "tokenizer.json").read_text())["model"]["vocab"]) <= 100


def test_vocab_size_too_small(tmp_path):
    with pytest.raises(HarnessError):
        train_wordpiece(TEXTS, tmp_path / "x", vocab_size=5)


def _naive_vocab(word_counts, vocab_size, min_frequency):
    """Reference: recount every pair after every merge (slow, obviously right)."""
    from collections import Counter

    words = {w: [w[0]] + ["##" + c for c in w[1:]] for w in sorted(word_counts)}
    vocab = list(SPECIAL_TOKENS)
    vocab += sorted({ch for w in word_counts for ch in w} | {s for v in words.values() for s in v})
    while len(vocab) < vocab_size:
        pc = Counter()
        for w, syms in words.items():
            for p in zip(syms, syms[1:]):
                pc[p] += word_counts[w]
        if not pc:
            break
        a, b = best = min(pc, key=lambda p: (-pc[p], p))
        if pc[best] < min_frequency:
            break
        new = a + b[2:]
        for w, syms in words.items():
            out, j = [], 0
            while j < len(syms):
                if j + 1 < len(syms) and (syms[j], syms[j + 1]) == best:
                    out.append(new)
                    j += 2
                else:
                    out.append(syms[j])
                    j += 1
            words[w] = out
        if new not in vocab:
            vocab.append(new)
    return vocab


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_incremental_merges_match_naive_reference(seed):
    import random

    from harness.corpus.tokenizer import learn_wordpiece_vocab

    rng = random.Random(seed)
    # A two-letter alphabet makes overlapping pairs ("a a a") and count ties frequent.
    wc = {"".join(rng.choice("aab") for _ in range(rng.randint(1, 9))): rng.randint(1, 5) for _ in range(150)}
    assert learn_wordpiece_vocab(wc, 70, 1) == _naive_vocab(wc, 70, 1)
