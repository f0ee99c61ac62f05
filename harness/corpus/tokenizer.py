"""Train a lower-cased WordPiece vocabulary on the corpus (tiny profile; no bert-base offline).

The pipeline is BERT's own: ``BertNormalizer`` (clean text, Chinese chars, lower case,
accent stripping as BERT does when lower-casing), ``BertPreTokenizer``, WordPiece with
``##`` continuations, ``[CLS] $A [SEP]`` template. Special tokens take ids 0-4 in the
order [PAD] [UNK] [CLS] [SEP] [MASK], the same order transformers' ``BertTokenizer``
assumes, so the folder loads with ``AutoTokenizer.from_pretrained(folder)`` and behaves
exactly like a BERT tokenizer. A ``vocab.txt`` is written too, for other tools.
The vocabulary is learnt here (``learn_wordpiece_vocab``) rather than with ``tokenizers``'
WordPieceTrainer, whose tie-breaking follows hash-map order and gives a different vocab
on every run; ``tokenizers`` still does the normalising, pre-tokenizing and encoding.
"""

from __future__ import annotations

import heapq
import logging
import re
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path

from tokenizers import (
    Tokenizer,
    decoders,
    models,
    normalizers,
    pre_tokenizers,
    processors,
)

from harness.core.errors import HarnessError
from harness.stages import artifacts

log = logging.getLogger(__name__)

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
PREFIX = "##"
# Letters/digits runs, or one punctuation/symbol character (BertPreTokenizer's split).
_WORD = re.compile(r"[^\W_]+|[^\w\s]|_")
# clean_text: tab/newline/CR are spaces, other ASCII control characters are dropped.
_CONTROL = {c: None for c in range(32) if chr(c) not in "\t\n\r"} | {127: None}


def train_wordpiece(
    texts: Sequence[str],
    out_dir: str | Path,
    vocab_size: int = 8000,
    *,
    min_frequency: int = 2,
    limit_alphabet: int = 1000,
    model_max_length: int = 512,
    lowercase: bool = True,
) -> Path:
    """Train on ``texts`` and save a BertTokenizerFast folder; finished by its ``done.json`` marker.

    Returns ``out_dir``. ``texts`` is read twice (hash, training): pass a sequence.
    """
    from transformers import BertTokenizerFast

    if vocab_size <= len(SPECIAL_TOKENS):
        raise HarnessError(f"vocab_size must exceed {len(SPECIAL_TOKENS)}, got {vocab_size}")
    out_dir = Path(out_dir)
    config = {
        "stage": "wordpiece",
        "vocab_size": vocab_size,
        "min_frequency": min_frequency,
        "limit_alphabet": limit_alphabet,
        "model_max_length": model_max_length,
        "lowercase": lowercase,
        "special_tokens": list(SPECIAL_TOKENS),
        "trainer": "harness-bpe-merges-v1",
    }
    inputs = {"texts": artifacts.hash_texts(texts)}
    key = artifacts.builder_key(config, inputs)
    if artifacts.is_finished(out_dir, key):
        return out_dir
    artifacts.clear_finished(out_dir)

    counts = count_words(texts, lowercase)
    vocab = learn_wordpiece_vocab(counts, vocab_size, min_frequency, limit_alphabet)
    tok = Tokenizer(
        models.WordPiece({t: i for i, t in enumerate(vocab)}, unk_token="[UNK]", continuing_subword_prefix="##")
    )
    tok.normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=lowercase
    )
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece(prefix="##")
    cls_id, sep_id = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS]:0 $A:0 [SEP]:0",
        pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)],
    )
    fast = BertTokenizerFast(
        tokenizer_object=tok,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
        do_lower_case=lowercase,
        strip_accents=None,
        tokenize_chinese_chars=True,
        model_max_length=model_max_length,
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(str(out_dir))
    artifacts.atomic_write_text(out_dir / "vocab.txt", "".join(t + "\n" for t in vocab))
    artifacts.mark_finished(
        out_dir,
        {"key": key, "config": config, "inputs": inputs, "actual_vocab_size": len(vocab), "num_words": len(counts)},
    )
    log.info("trained WordPiece vocabulary of %d tokens -> %s", len(vocab), out_dir)
    return out_dir


def count_words(texts: Sequence[str], lowercase: bool = True) -> Counter[str]:
    """Word frequencies for vocabulary learning, BERT-style (lower case, accents stripped,
    punctuation split off).

    A pure-Python stand-in for ``BertNormalizer`` + ``BertPreTokenizer``, which are ~10x
    slower when called text by text from Python. It is exact for ASCII text and close
    otherwise (symbols such as "°" are split off here, kept by BERT); it only decides
    which merges are learnt -- encoding always uses the real ``tokenizers`` pipeline.
    """
    counts: Counter[str] = Counter()
    for t in texts:
        if not t:
            continue
        t = t.translate(_CONTROL)
        if lowercase:
            t = t.lower()
            if not t.isascii():  # BERT strips accents when lower-casing
                t = "".join(ch for ch in unicodedata.normalize("NFD", t) if unicodedata.category(ch) != "Mn")
        counts.update(_WORD.findall(t))
    return counts


def _merged(a: str, b: str) -> str:
    return a + b[len(PREFIX) :]


def _spelt_words(word_counts: Mapping[str, int], limit_alphabet: int) -> tuple[set[str], list[list[str]], list[int]]:
    """The ``limit_alphabet`` most frequent characters (ties by spelling), and every word spelt in them (its
    first character, then "##" continuations), in sorted order, with its count."""
    char_freq: Counter[str] = Counter()
    for w, c in word_counts.items():
        for ch in w:
            char_freq[ch] += c
    alphabet = set(sorted(char_freq, key=lambda ch: (-char_freq[ch], ch))[:limit_alphabet])
    words: list[list[str]] = []
    freqs: list[int] = []
    for w in sorted(word_counts):
        if all(ch in alphabet for ch in w):  # words with rare characters stay [UNK]
            words.append([w[0]] + [PREFIX + ch for ch in w[1:]])
            freqs.append(word_counts[w])
    return alphabet, words, freqs


def _merge_in(syms: list[str], a: str, b: str, new: str) -> tuple[list[str], list[int], list[int]]:
    """``syms`` with every adjacent (a, b) replaced by ``new`` (left to right), the indices of the new
    symbols in the result, and where each merged span started in ``syms``."""
    n = len(syms)
    out: list[str] = []
    merged: list[int] = []
    starts: list[int] = []
    j = 0
    while j < n:
        if syms[j] == a and j + 1 < n and syms[j + 1] == b:
            merged.append(len(out))
            starts.append(j)
            out.append(new)
            j += 2
        else:
            out.append(syms[j])
            j += 1
    return out, merged, starts


def learn_wordpiece_vocab(
    word_counts: Mapping[str, int],
    vocab_size: int,
    min_frequency: int = 2,
    limit_alphabet: int = 1000,
    special_tokens: Sequence[str] = SPECIAL_TOKENS,
) -> list[str]:
    """WordPiece vocabulary by BPE-style merges, with fully deterministic tie-breaking.

    Same recipe as ``tokenizers``' WordPieceTrainer (characters, "##" continuations,
    merge the most frequent adjacent pair until ``vocab_size``), but ties are broken by
    the pair's spelling instead of hash-map order -- that trainer returns different
    vocabularies from run to run. Order: special tokens, alphabet (sorted), merges.
    """
    alphabet, words, freqs = _spelt_words(word_counts, limit_alphabet)
    vocab = list(special_tokens)
    seen = set(vocab)
    initial = set(alphabet) | {s for syms in words for s in syms}
    for t in sorted(initial - seen):
        vocab.append(t)
        seen.add(t)

    pair_counts: dict[tuple[str, str], int] = defaultdict(int)
    where: dict[tuple[str, str], set[int]] = defaultdict(set)
    for i, syms in enumerate(words):
        for p in zip(syms, syms[1:]):
            pair_counts[p] += freqs[i]
            where[p].add(i)
    heap = [(-c, p) for p, c in pair_counts.items()]
    heapq.heapify(heap)
    while len(vocab) < vocab_size and heap:
        neg, pair = heapq.heappop(heap)
        count = pair_counts.get(pair, 0)
        if count <= 0 or count != -neg:
            continue  # stale heap entry
        if count < min_frequency:
            break
        a, b = pair
        new = _merged(a, b)
        changed: set[tuple[str, str]] = set()
        for i in sorted(where.pop(pair, ())):
            syms = words[i]
            n = len(syms)
            out, merged, starts = _merge_in(syms, a, b, new)
            if not merged:
                continue  # stale index entry
            f = freqs[i]
            # Only pairs next to a merged span change; every other pair maps one-to-one.
            for pos in sorted({q for s in starts for q in (s - 1, s, s + 1) if 0 <= q < n - 1}):
                p = (syms[pos], syms[pos + 1])
                pair_counts[p] -= f
                changed.add(p)
            for pos in sorted({q for k in merged for q in (k - 1, k) if 0 <= q < len(out) - 1}):
                p = (out[pos], out[pos + 1])
                pair_counts[p] += f
                where[p].add(i)
                changed.add(p)
            words[i] = out
        pair_counts.pop(pair, None)
        changed.discard(pair)
        for p in sorted(changed):
            if pair_counts[p] > 0:
                heapq.heappush(heap, (-pair_counts[p], p))
            else:
                pair_counts.pop(p, None)
        if new not in seen:
            vocab.append(new)
            seen.add(new)
    return vocab
