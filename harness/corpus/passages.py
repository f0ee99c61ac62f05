"""Documents -> sentences -> passages of at most ``max_tokens`` tokens (QC paper §4.1).

"We use NLTK to split each document into sentences, and group these sentences into
passages of no more than 144 consecutive tokens." Rules, so the corpus is reproducible:

* Tokens are counted with the given HF fast tokenizer *without* special tokens; the
  pre-training sequence length adds [CLS]/[SEP] on top.
* Sentences are packed greedily in order; a passage is closed when the next sentence
  would overflow it. Every passage is re-tokenized at the end and regrouped if a
  non-additive tokenizer (SentencePiece/BPE) made the joined text longer than the sum.
* A single sentence longer than ``max_tokens`` is cut into pieces of at most
  ``max_tokens`` tokens, at word boundaries where possible (character offsets of the
  fast tokenizer), and each piece is then packed like a sentence.
* Titles (``title_mode``): ``"sentence"`` (default) makes a non-empty title the first
  sentence of the document, kept apart from Punkt so a title without a final period never
  merges with the first body sentence; it shares the first passage's token budget.
  ``"drop"`` ignores titles.
* ``short_span_prob`` (default 0, the paper's wording): with this probability a passage's
  target length is drawn uniformly from [2, max_tokens] instead, as the official
  CoT-MAE/QC script does with 0.15. The draw is seeded per document (seed, doc id).
* Passage ids are ``f"{doc_id}#{i}"`` (i = 0, 1, ... within the document); unique even if
  doc ids contain ``#`` because the suffix after the last ``#`` is all digits.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from harness.core.errors import DataFormatError, HarnessError, UnknownNameError
from harness.corpus.sentences import SentenceSplitter, load_or_train_punkt
from harness.stages import artifacts

log = logging.getLogger(__name__)

TITLE_MODES = ("sentence", "drop")
PASSAGES_FILE = "passages.jsonl"


@dataclass(frozen=True)
class Passage:
    pid: str
    doc_id: str
    text: str


def load_tokenizer(tokenizer: Any):
    """Accept a tokenizer object or a local folder (never the Hub)."""
    if isinstance(tokenizer, (str, Path)):
        from transformers import AutoTokenizer

        path = Path(tokenizer)
        if not path.is_dir():
            raise HarnessError(
                f"tokenizer folder not found: {path} (build it first, e.g. with harness.corpus.tokenizer)"
            )
        tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    if not getattr(tokenizer, "is_fast", False):
        raise HarnessError("passage building needs a fast (tokenizers-backed) tokenizer for character offsets")
    return tokenizer


def tokenizer_fingerprint(tokenizer: Any) -> str:
    """Hash of the full tokenizer pipeline (vocab, normaliser, pre-tokenizer)."""
    return hashlib.sha256(tokenizer.backend_tokenizer.to_str().encode("utf-8")).hexdigest()


def corpus_fingerprint(corpus: Mapping[str, Mapping[str, str]]) -> str:
    def parts() -> Iterable[str]:
        for doc_id, doc in corpus.items():
            yield str(doc_id)
            yield doc.get("title") or ""
            yield doc.get("text") or ""

    return artifacts.hash_texts(parts())


def _count(tokenizer: Any, texts: Sequence[str]) -> list[int]:
    if not texts:
        return []
    enc = tokenizer(list(texts), add_special_tokens=False, return_attention_mask=False, return_token_type_ids=False)
    return [len(ids) for ids in enc["input_ids"]]


def split_long_sentence(sentence: str, tokenizer: Any, max_tokens: int) -> list[str]:
    """Cut a sentence into pieces of <= max_tokens tokens, preferring word boundaries."""
    enc = tokenizer(sentence, add_special_tokens=False, return_offsets_mapping=True)
    offsets = enc["offset_mapping"]
    words = enc.word_ids()
    n = len(offsets)
    pieces: list[str] = []
    start = 0
    while start < n:
        end = min(start + max_tokens, n)
        if end < n:
            # Back off to the last word start inside the window, if there is one.
            for e in range(end, start, -1):
                if words[e] is None or words[e] != words[e - 1]:
                    end = e
                    break
        while True:
            piece = sentence[offsets[start][0] : offsets[end - 1][1]].strip()
            # A cut inside a word can re-tokenize longer; shrink until it fits.
            if end - start <= 1 or _count(tokenizer, [piece])[0] <= max_tokens:
                break
            end -= 1
        if piece:
            pieces.append(piece)
        start = end
    return pieces


def _target_length(rng: random.Random | None, max_tokens: int, short_span_prob: float) -> int:
    if rng is not None and short_span_prob > 0 and rng.random() < short_span_prob:
        return rng.randint(2, max_tokens)
    return max_tokens


def group_sentences(
    sentences: Sequence[str],
    tokenizer: Any,
    max_tokens: int,
    short_span_prob: float = 0.0,
    rng: random.Random | None = None,
) -> list[list[str]]:
    """Pack consecutive sentences into groups whose joined text has <= max_tokens tokens."""
    units: list[str] = []
    lengths: list[int] = []
    for s, n in zip(sentences, _count(tokenizer, sentences)):
        if n == 0:
            continue
        if n > max_tokens:
            pieces = split_long_sentence(s, tokenizer, max_tokens)
            units.extend(pieces)
            lengths.extend(_count(tokenizer, pieces))
        else:
            units.append(s)
            lengths.append(n)

    groups: list[list[str]] = []
    cur: list[str] = []
    cur_len = 0
    target = _target_length(rng, max_tokens, short_span_prob)
    for s, n in zip(units, lengths):
        if cur and cur_len + n > target:
            groups.append(cur)
            cur, cur_len = [], 0
            target = _target_length(rng, max_tokens, short_span_prob)
        cur.append(s)
        cur_len += n
    if cur:
        groups.append(cur)

    # Verify with the real joined text; regroup exactly where the sum under-estimated.
    actual = _count(tokenizer, [" ".join(g) for g in groups])
    if all(a <= max_tokens for a in actual):
        return groups
    fixed: list[list[str]] = []
    for g, a in zip(groups, actual):
        if a <= max_tokens:
            fixed.append(g)
            continue
        cur = []
        for s in g:
            if cur and _count(tokenizer, [" ".join(cur + [s])])[0] > max_tokens:
                fixed.append(cur)
                cur = []
            cur.append(s)
        fixed.append(cur)
    return fixed


def document_sentences(doc: Mapping[str, str], splitter: SentenceSplitter, title_mode: str = "sentence") -> list[str]:
    if title_mode not in TITLE_MODES:
        raise UnknownNameError("title mode", title_mode, list(TITLE_MODES))
    sents: list[str] = []
    title = " ".join((doc.get("title") or "").split())
    if title_mode == "sentence" and title:
        sents.append(title)
    sents.extend(splitter.split(doc.get("text") or ""))
    return sents


def doc_rng(seed: int, doc_id: str) -> random.Random:
    """The seeded draw of one document's short spans (its passages do not depend on the others')."""
    digest = hashlib.sha256(f"{seed}\0{doc_id}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "little"))


def build_passages(
    corpus: Mapping[str, Mapping[str, str]],
    tokenizer: Any,
    max_tokens: int = 144,
    *,
    splitter: SentenceSplitter | None = None,
    title_mode: str = "sentence",
    short_span_prob: float = 0.0,
    seed: int = 42,
    punkt_cache_dir: str | Path | None = None,
    max_passages: int | None = None,
    punkt_train_chars: int | None = None,
) -> list[Passage]:
    """Split the documents of ``corpus`` ({doc_id: {"title", "text"}}) into passages.

    Without ``splitter``, Punkt is trained on the corpus' texts (the first ``punkt_train_chars``
    characters when given; cached under ``punkt_cache_dir``). With ``max_passages``, whole
    documents are taken in a seeded random order until that many passages exist, so a small
    corpus keeps every passage of the documents it holds (span pairs need two passages of one
    document) and only those documents are split. Passages come in corpus order, then
    document order.
    """
    if max_tokens < 2:
        raise HarnessError(f"max_tokens must be >= 2, got {max_tokens}")
    if title_mode not in TITLE_MODES:
        raise UnknownNameError("title mode", title_mode, list(TITLE_MODES))
    tokenizer = load_tokenizer(tokenizer)
    doc_ids = [str(d) for d in corpus]
    order = list(range(len(doc_ids)))
    if max_passages is not None:
        if max_passages < 1:
            raise HarnessError(f"max_passages must be positive, got {max_passages}")
        random.Random(seed).shuffle(order)
    docs = list(corpus.values())
    if splitter is None:
        texts = [docs[i].get("text") or "" for i in order]
        kwargs = {} if punkt_train_chars is None else {"max_train_chars": punkt_train_chars}
        splitter = load_or_train_punkt(texts, punkt_cache_dir, **kwargs)
    by_doc: dict[int, list[Passage]] = {}
    total = 0
    for i in order:
        if max_passages is not None and total >= max_passages:
            break
        doc_id, doc = doc_ids[i], docs[i]
        rng = doc_rng(seed, doc_id) if short_span_prob > 0 else None
        groups = group_sentences(
            document_sentences(doc, splitter, title_mode), tokenizer, max_tokens, short_span_prob, rng
        )
        by_doc[i] = [Passage(pid=f"{doc_id}#{k}", doc_id=doc_id, text=" ".join(g)) for k, g in enumerate(groups)]
        total += len(by_doc[i])
    out = [p for i in sorted(by_doc) for p in by_doc[i]]
    return out[:max_passages] if max_passages is not None else out


def passage_line(passage: Passage) -> str:
    """One line of ``passages.jsonl``."""
    return json.dumps(asdict(passage), ensure_ascii=False) + "\n"


def save_passages(passages: Iterable[Passage], path: str | Path) -> None:
    artifacts.atomic_write_text(path, "".join(passage_line(p) for p in passages))


def load_passages(path: str | Path) -> list[Passage]:
    path = Path(path)
    if path.is_dir():
        path = path / PASSAGES_FILE
    out: list[Passage] = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                d = json.loads(line)
                out.append(Passage(pid=str(d["pid"]), doc_id=str(d["doc_id"]), text=str(d["text"])))
            except (ValueError, KeyError, TypeError) as exc:
                raise DataFormatError(
                    path, n, f"not a passage record ({exc})", 'one JSON object {"pid", "doc_id", "text"} per line'
                ) from exc
    return out


def build_passages_cached(
    corpus: Mapping[str, Mapping[str, str]],
    tokenizer: Any,
    out_dir: str | Path,
    max_tokens: int = 144,
    *,
    splitter: SentenceSplitter | None = None,
    title_mode: str = "sentence",
    short_span_prob: float = 0.0,
    seed: int = 42,
) -> list[Passage]:
    """``build_passages`` with ``out_dir/passages.jsonl`` + ``done.json``; reloads when unchanged."""
    tokenizer = load_tokenizer(tokenizer)
    out_dir = Path(out_dir)
    config = {
        "stage": "passages",
        "max_tokens": max_tokens,
        "title_mode": title_mode,
        "short_span_prob": short_span_prob,
        "seed": seed,
        "sentence_splitter": "nltk-punkt-trained-on-corpus" if splitter is None else "given",
    }
    inputs = {"corpus": corpus_fingerprint(corpus), "tokenizer": tokenizer_fingerprint(tokenizer)}
    if splitter is not None:
        inputs["splitter"] = artifacts.hash_json(splitter.to_json())
    key = artifacts.builder_key(config, inputs)
    if artifacts.is_finished(out_dir, key):
        return load_passages(out_dir / PASSAGES_FILE)
    artifacts.clear_finished(out_dir)
    passages = build_passages(
        corpus,
        tokenizer,
        max_tokens,
        splitter=splitter,
        title_mode=title_mode,
        short_span_prob=short_span_prob,
        seed=seed,
        punkt_cache_dir=out_dir,
    )
    save_passages(passages, out_dir / PASSAGES_FILE)
    artifacts.mark_finished(
        out_dir,
        {
            "key": key,
            "config": config,
            "inputs": inputs,
            "n_docs": len(corpus),
            "n_passages": len(passages),
            "file": PASSAGES_FILE,
        },
    )
    log.info("built %d passages from %d documents", len(passages), len(corpus))
    return passages
