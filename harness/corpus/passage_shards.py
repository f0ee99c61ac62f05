"""Passages of a whole corpus written as a stream, resumable by shard: what the ``passages`` stage runs
when it keeps every document (no ``max_passages``), the paper profiles' case (MS MARCO documents, 3.2M).

:func:`harness.corpus.passages.build_passages` holds the corpus, every passage and the joined file at
once; this writes the same ``passages.jsonl``, byte for byte, holding one shard of documents at a time:

1. Punkt is trained on the corpus prefix that ``build_passages`` would read (the first
   ``punkt_train_chars`` characters of text in corpus order), cached in the work folder.
2. The documents are split in shards of :data:`SHARD_DOCS`, in corpus order; each shard's lines go to
   ``shards/part-<k>.jsonl`` and its counts to ``part-<k>.json``, written last: a finished shard.
3. The shards are joined into the output file, then removed.

A build killed mid-way (the stage keeps its work folder: ``resumable`` in harness/stages/graph.py)
skips the finished shards when run again and gives the same file.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from harness.core.errors import HarnessError, UnknownNameError
from harness.core.fsutil import atomic_path, atomic_write_text
from harness.corpus.passages import (
    TITLE_MODES,
    Passage,
    doc_rng,
    document_sentences,
    group_sentences,
    load_tokenizer,
    passage_line,
)
from harness.corpus.sentences import DEFAULT_MAX_TRAIN_CHARS, SentenceSplitter, load_or_train_punkt

SHARD_DOCS = 10_000  # documents per resumable shard
Docs = Iterable[tuple[str, Mapping[str, str]]]


def punkt_texts(docs: Docs, max_chars: int | None) -> list[str]:
    """The texts Punkt trains on: the corpus prefix, as :func:`harness.corpus.sentences._training_texts`
    takes it from the whole corpus (so the trained splitter, and its cache key, are the same)."""
    used, total = [], 0
    for _, doc in docs:
        if max_chars is not None and total >= max_chars:
            break
        text = doc.get("text") or ""
        used.append(text)
        total += len(text)
    return used


def _shards(docs: Docs, size: int) -> Iterator[list[tuple[str, Mapping[str, str]]]]:
    shard: list[tuple[str, Mapping[str, str]]] = []
    seen: set[str] = set()  # a repeated id would be one document in build_passages' dict
    for doc_id, doc in docs:
        doc_id = str(doc_id)
        if doc_id in seen:
            raise HarnessError(
                f"document id {doc_id!r} occurs twice in the corpus; passages need unique ids "
                "(fix the corpus file, or build from a deduplicated copy)"
            )
        seen.add(doc_id)
        shard.append((doc_id, doc))
        if len(shard) == size:
            yield shard
            shard = []
    if shard:
        yield shard


def write_passages(
    docs: Callable[[], Docs],
    tokenizer: Any,
    out: Path,
    work: Path,
    max_tokens: int = 144,
    *,
    title_mode: str = "sentence",
    short_span_prob: float = 0.0,
    seed: int = 42,
    splitter: SentenceSplitter | None = None,
    punkt_train_chars: int | None = None,
    shard_docs: int = SHARD_DOCS,
    after_shard: Callable[[int], None] | None = None,
) -> dict[str, int]:
    """Write the passages of every document of ``docs()`` (a fresh ``(doc_id, doc)`` iterator per call,
    corpus order) to ``out``, as ``build_passages`` + ``save_passages`` would; returns the counts
    (``passages``, ``documents`` with a passage, ``corpus_documents``). ``work`` keeps the finished
    shards between tries; ``after_shard(k)`` is called once shard k is finished (a test's kill)."""
    if max_tokens < 2:
        raise HarnessError(f"max_tokens must be >= 2, got {max_tokens}")
    if title_mode not in TITLE_MODES:
        raise UnknownNameError("title mode", title_mode, list(TITLE_MODES))
    if shard_docs < 1:
        raise HarnessError(f"shard_docs must be positive, got {shard_docs}")
    tokenizer = load_tokenizer(tokenizer)
    if splitter is None:
        limit = DEFAULT_MAX_TRAIN_CHARS if punkt_train_chars is None else punkt_train_chars
        splitter = load_or_train_punkt(punkt_texts(docs(), limit), work, max_train_chars=limit)
    folder = work / f"shards-{shard_docs}"
    folder.mkdir(parents=True, exist_ok=True)
    counts: list[dict[str, int]] = []
    for k, shard in enumerate(_shards(docs(), shard_docs)):
        done = folder / f"part-{k:06d}.json"
        if done.is_file():
            counts.append(json.loads(done.read_text(encoding="utf-8")))
            continue
        lines, with_passages, passages = [], 0, 0
        for doc_id, doc in shard:
            rng = doc_rng(seed, doc_id) if short_span_prob > 0 else None
            groups = group_sentences(
                document_sentences(doc, splitter, title_mode), tokenizer, max_tokens, short_span_prob, rng
            )
            lines.extend(
                passage_line(Passage(pid=f"{doc_id}#{i}", doc_id=doc_id, text=" ".join(g)))
                for i, g in enumerate(groups)
            )
            with_passages += bool(groups)
            passages += len(groups)
        atomic_write_text(folder / f"part-{k:06d}.jsonl", "".join(lines))
        counts.append({"documents": len(shard), "with_passages": with_passages, "passages": passages})
        atomic_write_text(done, json.dumps(counts[-1]))  # last: the shard is finished
        if after_shard is not None:
            after_shard(k)
    with atomic_path(out) as tmp, open(tmp, "wb") as joined:
        for k in range(len(counts)):
            with open(folder / f"part-{k:06d}.jsonl", "rb") as part:
                shutil.copyfileobj(part, joined, 1 << 20)
    shutil.rmtree(folder, ignore_errors=True)
    return {
        "passages": sum(c["passages"] for c in counts),
        "documents": sum(c["with_passages"] for c in counts),
        "corpus_documents": sum(c["documents"] for c in counts),
    }
