"""The corpus vectors of (model, corpus, vector settings), encoded once and shared.

Every dense search reads its corpus vectors from here: the pipeline's ``dense_retrieve`` stages
(mining with retriever 1 and evaluating retriever 1 on the same corpus read one encoding),
``eval --model`` and ``reproduce``. The cache folder is ``cache_dir()/embeddings/<key>/``
(``embeddings.npy``, ``doc_ids.json`` and the finished marker of :mod:`harness.stages.artifacts`; the
folder is written whole; the ``.npy`` is filled chunk by chunk and read back as a memory map, which the
dense search reads in chunks: the matrix is never held whole in memory), ``key`` = sha256 of (the model
folder's file contents, the settings that decide passage vectors (:func:`harness.retrieval.encoder.vector_settings`, precision
included) and the corpus's own files (``benchmark.corpus_files()``, their checksums): content, never
paths or benchmark names, so two checkouts and two commands share it, and so do the benchmarks over
one corpus: MS MARCO's training queries (mining), dev, DL19 and DL20 read one encoding of the 8.8M
passages per model (:func:`vectors_tag` names that sharing in the plan and the record). Batch size,
batching (on CUDA token-sorted batches of 2048, :meth:`harness.retrieval.encoder.Encoder.batching`) and
device are not part of the key: they change vectors only at float rounding level; the cache's marker
and ``info["batching"]`` state the batching the vectors were encoded with.

A corpus is encoded in chunk files of :data:`CHUNK_PASSAGES` first (:mod:`harness.retrieval.shard_encoding`),
so an interrupted encoding of a big corpus resumes from its last complete chunk; torchrun ranks
may fill the chunks (:func:`encode_corpus_shards`). A corpus of up to one chunk is encoded in one
call, exactly as ``Encoder.encode_corpus`` would.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from harness.core import ranks
from harness.core.errors import HarnessError
from harness.core.fsutil import PARTIAL, atomic_dir, temp_name
from harness.core.paths import cache_dir
from harness.retrieval.encoder import default_batch_size, vector_settings
from harness.retrieval.shard_encoding import encode_corpus_sharded
from harness.retrieval.shard_manifest import chunk_world_size, shards_complete
from harness.retrieval.shard_merge import merge_shards_to_file
from harness.stages.artifacts import DIGESTS, changed_output, finished_meta, hash_json, mark_finished, output_digests

# Bump when a change to encoding makes cached corpus embeddings stale.
EMBEDDINGS_FORMAT = 1
CHUNK_PASSAGES = 10_000  # passages per resumable chunk; corpora up to this size are encoded in one piece


def embeddings_key(fingerprint: str, encoder: Any, benchmark: Any) -> str:
    """The cache folder's name: the model's content, its vector settings and the corpus's files, not the
    benchmark's name (every benchmark over one corpus shares the vectors)."""
    return hash_json(
        {
            "format": EMBEDDINGS_FORMAT,
            "model": fingerprint,
            "settings": vector_settings(encoder),
            "corpus": benchmark.corpus_files(),
        }
    )


def vectors_tag(model_key: str, encoding: dict[str, Any] | None, benchmark: Any) -> str:
    """Which encoding a search reads, known before the model exists (a dry-run): the model's stage input
    key, the encoding it is read with and the corpus's files. Two searches with one tag read one cache
    folder of :func:`embeddings_key`, so a plan and a record show each corpus encoded once per model."""
    return hash_json({"model": model_key, "encoding": encoding or {}, "corpus": benchmark.corpus_files()})[:16]


EMBEDDINGS_FILE, IDS_FILE = "embeddings.npy", "doc_ids.json"


def _read_cached(folder: Path) -> tuple[list[str], np.ndarray, dict[str, Any]] | None:
    info = finished_meta(folder)
    if info is None:
        return None
    npy = folder / EMBEDDINGS_FILE
    # The digests taken when it was written (a sampled one for a paper-scale .npy); a folder written
    # before they were kept is accepted this once and given them, as stage folders are (StageCache.changed_output).
    if not isinstance(digests := info.get(DIGESTS), dict):
        with contextlib.suppress(OSError):  # a read-only cache stays usable, unchecked as before
            mark_finished(folder, {**info, DIGESTS: output_digests(folder)})
    elif (changed := changed_output(folder, digests)) is not None:
        print(f"[embeddings] cached output changed since it was built ({changed}): rebuilding", flush=True)
        return None
    try:
        emb = np.load(npy, mmap_mode="r")
        ids = json.loads((folder / IDS_FILE).read_text(encoding="utf-8"))
        if emb.ndim != 2 or emb.shape[0] != len(ids):
            raise ValueError(f"{emb.shape[0]} vectors for {len(ids)} doc ids")
        if emb.dtype != np.float32:
            raise ValueError(f"{emb.dtype} vectors, not float32")
        return ids, emb, info  # the memory map: searched in place, never loaded whole
    except (OSError, ValueError, KeyError, json.JSONDecodeError) as exc:
        print(f"warning: ignoring a damaged embedding cache {npy} ({exc}); encoding again", file=sys.stderr)
        return None


def _write_cache(folder: Path, chunks: Path, info: dict[str, Any]) -> None:
    """The chunk files merged into the cache folder's one ``.npy``, chunk by chunk (never the whole
    matrix in memory)."""
    with atomic_dir(folder) as tmp:  # a complete folder or none
        merge_shards_to_file(chunks, tmp / EMBEDDINGS_FILE, tmp / IDS_FILE)
        mark_finished(tmp, {"key": folder.name, **info, DIGESTS: output_digests(tmp)})


def corpus_embeddings(
    encoder: Any,
    benchmark: Any,
    fingerprint: str,
    batch_size: int | None,
    use_cache: bool = True,
    show_progress: bool = True,
) -> tuple[list[str], np.ndarray, dict[str, Any]]:
    """(doc ids, float32 vectors, info) for ``benchmark``'s corpus; info holds encode seconds, the cache path
    and the batching the vectors were encoded with (``batch_size`` None: the encoder's device default).

    In a launched run every rank calls this together: each encodes its slice of the corpus into the
    chunk folder, rank 0 merges the chunks into the cache and gets the vectors; another rank gets no
    vectors (``[]``, a 0-row matrix) and the same ``cached``/``processes`` answer."""
    folder = _embeddings_folder(fingerprint, encoder, benchmark)
    npy = folder / EMBEDDINGS_FILE
    batch_size = default_batch_size(encoder.device) if batch_size is None else batch_size
    batching = encoder.batching(batch_size)
    world, main = (ranks.world_size(), ranks.is_main()) if use_cache else (1, True)
    hit = _read_cached(folder) if use_cache and main else None
    if world > 1:
        from harness.training import distributed as D

        cached = D.control_broadcast(hit is not None)  # one answer for every rank: they meet below
        if not main:
            if not cached:
                _encode_chunks(encoder, benchmark, _chunks_folder(folder), batch_size, show_progress)
            return [], np.zeros((0, int(encoder.dim)), dtype=np.float32), {"cached": cached, "processes": world}
    if hit is not None:
        return _from_cache(hit, benchmark.name, folder, world)
    # A non-embedded corpus is downloaded on first read (clear error offline); the cached path reads it
    # as a stream (benchmark.iter_corpus), one chunk of CHUNK_PASSAGES in memory, never the whole dict.
    print(
        f"{benchmark.name}: encoding the corpus as a stream (batch {batch_size} sorted by {batching['sorted_by']}, max length "
        f"{encoder.spec.passage_max_length}, {encoder.device}, {encoder.precision}, {world} process(es); "
        "counts on stderr)"
    )
    started = time.perf_counter()
    if use_cache:
        ids, emb, seconds = _encode_to_cache(
            encoder, benchmark, folder, fingerprint, batch_size, batching, world, show_progress
        )
    else:  # the vectors are returned whole anyway: the corpus dict is no larger than they are
        corpus = benchmark.corpus()
        if not corpus:
            raise HarnessError(f"the corpus of '{benchmark.name}' is empty")
        ids, emb = encoder.encode_corpus(corpus, batch_size=batch_size, show_progress=show_progress)
        seconds = time.perf_counter() - started
    info = {
        "cached": False,
        "cache_file": str(npy) if use_cache else None,
        "encode_seconds": seconds,
        "key": folder.name,
        "processes": world,
        "batching": batching,
    }
    return ids, emb, info


def _from_cache(
    hit: tuple[list[str], np.ndarray, dict[str, Any]], name: str, folder: Path, world: int
) -> tuple[list[str], np.ndarray, dict[str, Any]]:
    """The cached vectors of corpus ``name`` with their info (what encoding filled the cache)."""
    ids, emb, info = hit
    npy = folder / EMBEDDINGS_FILE
    print(f"{name}: {len(ids):,} passage embeddings read from the cache ({npy})")
    return (
        ids,
        emb,
        {
            "cached": True,
            "cache_file": str(npy),
            "encode_seconds": 0.0,
            "key": folder.name,
            "original_encode_seconds": info.get("encode_seconds"),
            "batching": info.get("batching"),  # the encoding's that filled the cache (None before it was kept)
            "processes": world,
        },
    )


def _encode_to_cache(
    encoder: Any,
    benchmark: Any,
    folder: Path,
    fingerprint: str,
    batch_size: int,
    batching: dict[str, Any],
    world: int,
    show_progress: bool,
) -> tuple[list[str], np.ndarray, float]:
    """Encode the corpus into the cache ``folder``; its ids, its vectors (memory-mapped) and the seconds taken.

    Encoded in chunk files first, so an interrupted encoding of a big corpus resumes from its last complete
    chunk (harness.retrieval.shard_encoding); merged into the cache file, then removed. Chunks that torchrun ranks
    finished (encode_corpus_shards) are merged as they are."""
    started = time.perf_counter()
    chunks = _chunks_folder(folder)
    if world > 1 or not shards_complete(chunks):
        _encode_chunks(encoder, benchmark, chunks, batch_size, show_progress)
    seconds = time.perf_counter() - started
    _write_cache(
        folder,
        chunks,
        {
            "encode_seconds": seconds,
            "first_benchmark": benchmark.name,
            "settings": vector_settings(encoder),
            "model": fingerprint,
            "processes": world,
            "batching": batching,
        },
    )
    shutil.rmtree(chunks, ignore_errors=True)
    ids = json.loads((folder / IDS_FILE).read_text(encoding="utf-8"))
    emb = np.load(folder / EMBEDDINGS_FILE, mmap_mode="r")  # searched in place (harness.retrieval.dense.search_vectors)
    return ids, emb, seconds


def _encode_chunks(encoder: Any, benchmark: Any, chunks: Path, batch_size: int, show_progress: bool) -> None:
    """This rank's slice of the corpus into ``chunks`` (the whole corpus in one process); with several
    ranks, every rank returns once all the chunks are written. Chunks of an interrupted encoding by
    another number of processes are discarded first (their slices differ)."""
    world = ranks.world_size()
    if world > 1:
        from harness.training import distributed as D

        if ranks.is_main() and chunk_world_size(chunks) not in (None, world):
            shutil.rmtree(chunks, ignore_errors=True)
        D.control_barrier()
    encode_corpus_sharded(
        encoder,
        benchmark.iter_corpus,
        chunks,
        rank=ranks.rank(),
        world_size=world,
        shard_size=CHUNK_PASSAGES,
        batch_size=batch_size,
        show_progress=show_progress,
    )
    if world > 1:
        D.control_barrier()  # every rank's chunks are complete: rank 0 may merge


def encode_corpus_shards(
    encoder: Any,
    benchmark: Any,
    fingerprint: str,
    batch_size: int,
    rank: int,
    world_size: int,
    show_progress: bool = True,
) -> None:
    """This torchrun rank's slice of ``benchmark``'s corpus into the chunk folder that
    :func:`corpus_embeddings` merges (nothing to do when the embeddings are cached already)."""

    for part in benchmark.sub_benchmarks() or [benchmark]:
        folder = _embeddings_folder(fingerprint, encoder, part)
        if _read_cached(folder) is not None:
            continue
        encode_corpus_sharded(
            encoder,
            part.iter_corpus,
            _chunks_folder(folder),
            rank=rank,
            world_size=world_size,
            shard_size=CHUNK_PASSAGES,
            batch_size=batch_size,
            show_progress=show_progress,
        )


def _embeddings_dir() -> Path:
    return cache_dir() / "embeddings"


def _embeddings_folder(fingerprint: str, encoder: Any, benchmark: Any) -> Path:
    """The cache folder of these vectors (``.<key>.partial.tmp/`` beside it while being encoded)."""
    return _embeddings_dir() / embeddings_key(fingerprint, encoder, benchmark)


def _chunks_folder(folder: Path) -> Path:
    """The resumable work folder of ``folder``'s vectors (a temp name: never read as the cache)."""
    return temp_name(folder, PARTIAL)
