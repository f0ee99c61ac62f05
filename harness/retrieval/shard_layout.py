"""What a sharded encoding is laid out from: the corpus read as a fresh stream and fingerprinted without
holding it (one pass, two with several ranks), the encoder's fingerprint, and every rank's chunks.

Rank r encodes its contiguous slice (:func:`harness.retrieval.encoder.shard_bounds`) cut into chunks of
``shard_size`` passages, named ``rank{r}-chunk{k:05d}``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.core import ranks
from harness.core.errors import HarnessError
from harness.retrieval.encoder import shard_bounds, vector_settings
from harness.stages.artifacts import TextHasher, hash_json, hash_texts
from harness.stages.checkpoints import model_fingerprint

Passages = Mapping[str, Mapping[str, str] | str]
# A corpus to encode: a dict, or a function returning a fresh stream of (doc id, doc) pairs in corpus
# order (a benchmark's ``iter_corpus``), read three times or fewer and never held whole.
CorpusSource = Passages | Callable[[], Iterable[tuple[str, Mapping[str, str] | str]]]


def corpus_pairs(source: CorpusSource) -> Iterator[tuple[str, Mapping[str, str] | str]]:
    """A fresh stream of (doc id, doc) pairs in corpus order."""
    return iter(source.items()) if isinstance(source, Mapping) else iter(source())


def _fields(doc_id: str, doc: Mapping[str, str] | str) -> tuple[str, str, str]:
    return (doc_id, "", doc) if isinstance(doc, str) else (doc_id, doc.get("title") or "", doc.get("text") or "")


def corpus_fingerprint(passages: CorpusSource) -> str:
    """sha256 over every (id, title, text) in order: a changed, added or reordered passage changes it."""
    return hash_texts(itertools.chain.from_iterable(_fields(d, doc) for d, doc in corpus_pairs(passages)))


@dataclass
class Survey:
    """What the manifest needs of a corpus, read from one stream (two when ``world_size`` > 1)."""

    passages: int
    corpus: str
    ids_sha256: str
    chunk_ids_sha256: dict[str, str]  # chunk name -> hash_texts of its doc ids


def survey_corpus(source: CorpusSource, world_size: int, shard_size: int) -> Survey:
    """Count and fingerprint the corpus without holding it. One process's chunks start at multiples of
    ``shard_size``, so their id hashes come from the same pass; with several ranks the layout depends on
    the count, so a second pass reads the ids again."""
    corpus, ids, block = TextHasher(), TextHasher(), TextHasher()
    blocks: list[str] = []
    n = 0
    for doc_id, doc in corpus_pairs(source):
        for text in _fields(doc_id, doc):
            corpus.update(text)
        ids.update(doc_id)
        block.update(doc_id)
        n += 1
        if n % shard_size == 0:
            blocks.append(block.hexdigest())
            block = TextHasher()
    if n % shard_size:
        blocks.append(block.hexdigest())
    layout = chunk_layout(n, world_size, shard_size)
    if world_size == 1:
        chunk_sha = dict(zip(layout, blocks))
    else:
        chunk_sha = {}
        bounds = iter(layout.items())
        name, (_, a, b) = next(bounds, ("", (0, 0, 0)))
        hasher = TextHasher()
        for i, (doc_id, _) in enumerate(corpus_pairs(source)):
            while name and i >= b:  # empty slices (more ranks than passages) have no chunks
                name, (_, a, b) = next(bounds, ("", (0, 0, 0)))
            hasher.update(doc_id)
            if i == b - 1:
                chunk_sha[name] = hasher.hexdigest()
                hasher = TextHasher()
        if len(chunk_sha) != len(layout):
            raise HarnessError("the corpus changed while it was read (a second pass gave other passages)")
    return Survey(n, corpus.hexdigest(), ids.hexdigest(), chunk_sha)


def encoder_fingerprint(encoder: Any) -> str:
    """sha256 of the model folder's files and the settings that decide passage vectors."""

    return hash_json({"model": model_fingerprint(Path(encoder.spec.model_dir)), "settings": vector_settings(encoder)})


def _chunk_name(rank: int, k: int) -> str:
    return f"rank{rank}-chunk{k:05d}"


def chunk_layout(n: int, world_size: int, shard_size: int) -> dict[str, tuple[int, int, int]]:
    """Every chunk: name -> (rank, start, end), in corpus order."""
    out: dict[str, tuple[int, int, int]] = {}
    for r in range(world_size):
        start, end = shard_bounds(n, r, world_size)
        for k, a in enumerate(range(start, end, shard_size)):
            out[_chunk_name(r, k)] = (r, a, min(a + shard_size, end))
    return out


def rank_and_world(rank: int | None, world_size: int | None) -> tuple[int, int]:
    """(rank, world size): the ones given, else this process's (RANK / WORLD_SIZE), checked."""
    rank = ranks.rank() if rank is None else rank  # RANK / WORLD_SIZE when set
    world_size = ranks.world_size() if world_size is None else world_size
    shard_bounds(1, rank, world_size)  # validates
    return rank, world_size
