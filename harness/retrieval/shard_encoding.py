"""Sharded, resumable corpus encoding: each rank writes its slice of the corpus in chunk files.

    # 2 CPU processes (gloo); on N GPUs the same line with --nproc_per_node N (nccl)
    torchrun --nproc_per_node 2 -m harness.evaluation.sharded --model models/all-MiniLM-L6-v2 \\
        --dataset msmarco-dl19-subset --out cache/shards/minilm-dl19 --shard-size 10000 --json summary.json

    # the same command again after a crash or a kill resumes: complete chunks are skipped

    from harness.retrieval.shard_encoding import encode_corpus_sharded
    from harness.retrieval.shard_merge import merge_shards
    encode_corpus_sharded(encoder, corpus, "shards/", rank=r, world_size=w, shard_size=10_000)
    ids, emb = merge_shards("shards/")  # corpus order, float32 (n, dim)

``out_dir`` holds:

- ``manifest.json`` (:mod:`harness.retrieval.shard_manifest`): what the chunks were encoded from; a run
  with other settings is refused in one line instead of mixing embeddings.
- ``rank{r}-chunk{k:05d}.npy`` + ``.json``: rank r's contiguous slice
  (:func:`harness.retrieval.encoder.shard_bounds`) cut into chunks of ``shard_size`` passages.
  Both are written atomically (:mod:`harness.core.fsutil`), the ``.json`` (doc ids, bounds, sha256
  of the ``.npy``) last, so a ``.json`` marks a complete chunk.

A resumed run encodes the missing chunks with the same inputs and batches as an uninterrupted
run, so the result is byte-identical (same device, precision and thread count; batch size is
part of the manifest). A per-rank ``flock`` keeps two processes of one rank from writing at once.
Merging is :mod:`harness.retrieval.shard_merge`'s, the index :mod:`harness.retrieval.shard_index`'s, the
torchrun driver :mod:`harness.retrieval.shard_distributed`'s.
"""

from __future__ import annotations

import collections
import hashlib
import io
import itertools
import json
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from harness.core.errors import HarnessError
from harness.core.fsutil import atomic_write_bytes, atomic_write_json, exclusive_lock, is_temp
from harness.retrieval.encoder import default_batch_size, shard_bounds
from harness.retrieval.shard_layout import (
    CorpusSource,
    corpus_pairs,
    encoder_fingerprint,
    rank_and_world,
    survey_corpus,
)
from harness.retrieval.shard_manifest import build_manifest, check_or_write_manifest, chunks_in_order
from harness.stages.artifacts import hash_texts


@dataclass
class ShardReport:
    """What one rank did: its slice, how many chunks were already complete, how fast it encoded."""

    rank: int
    world_size: int
    start: int
    end: int
    chunks: int
    chunks_skipped: int
    passages_encoded: int
    seconds: float

    @property
    def passages_per_second(self) -> float | None:
        return self.passages_encoded / self.seconds if self.seconds > 0 else None


def _chunk_complete(out: Path, name: str, entry: Mapping[str, Any], dim: int) -> bool:
    """True when both files exist and agree with the manifest (a damaged chunk is encoded again)."""

    meta_path, npy_path = out / f"{name}.json", out / f"{name}.npy"
    if not meta_path.is_file():
        return False
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        rows = np.load(npy_path, mmap_mode="r")  # reads the header only
        ok = (
            (meta["start"], meta["end"]) == (entry["start"], entry["end"])
            and hash_texts(meta["ids"]) == entry["ids_sha256"]
            and rows.dtype == np.float32
            and rows.shape == (entry["end"] - entry["start"], dim)
        )
    except (OSError, ValueError, KeyError, TypeError):
        ok = False
    if not ok:
        print(f"[sharded] {name} is damaged or from another run; encoding it again", file=sys.stderr)
    return ok


def write_chunk(out: Path, name: str, ids: list[str], start: int, end: int, emb: np.ndarray) -> None:
    """One chunk's two files: the float32 ``.npy``, then the ``.json`` (bounds, ids, the ``.npy``'s sha256)."""
    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(emb, dtype=np.float32))
    data = buf.getvalue()
    atomic_write_bytes(out / f"{name}.npy", data)
    # Written last: its presence means the .npy beside it is complete.
    atomic_write_json(
        out / f"{name}.json", {"start": start, "end": end, "ids": ids, "npy_sha256": hashlib.sha256(data).hexdigest()}
    )


def encode_corpus_sharded(
    encoder: Any,
    passages: CorpusSource,
    out_dir: str | Path,
    *,
    rank: int | None = None,
    world_size: int | None = None,
    shard_size: int = 10_000,
    batch_size: int | None = None,
    show_progress: bool = True,
    fingerprint: str | None = None,
) -> ShardReport:
    """Encode rank ``rank``'s slice of ``passages`` (``{doc_id: {"title", "text"}}``, corpus order, or a
    function returning such (doc id, doc) pairs, e.g. ``benchmark.iter_corpus``) into chunk files under
    ``out_dir``, skipping chunks already complete.

    The corpus is read as a stream: one pass fingerprints it (two with several ranks), one reads this
    rank's chunks, each held alone while it is encoded (sorted longest first within the chunk, as before),
    so memory is one chunk, not the corpus.

    ``rank``/``world_size`` default to RANK/WORLD_SIZE (torchrun), else 0 of 1. ``fingerprint``
    (of the encoder) may be given to skip hashing the model folder on every rank. ``batch_size`` None is
    the encoder's device default (64 on a CPU, 2048 token-sorted on CUDA: ``encoder.batching()``).
    """

    rank, world_size = rank_and_world(rank, world_size)
    batch_size = default_batch_size(encoder.device) if batch_size is None else batch_size
    if shard_size < 1 or batch_size < 1:
        raise HarnessError(f"shard_size and batch_size must be positive, got {shard_size} and {batch_size}")
    out, manifest, count = _start_folder(encoder, passages, out_dir, world_size, shard_size, batch_size, fingerprint)
    mine = {n: c for n, c in chunks_in_order(manifest) if c["rank"] == rank}
    start, end = shard_bounds(count, rank, world_size)
    with exclusive_lock(out / f".rank{rank}.lock", f"sharded encoding rank {rank}"):
        for stale in out.glob(f".rank{rank}-chunk*"):  # temp files of a killed writer of this rank
            if is_temp(stale):
                stale.unlink(missing_ok=True)
        todo = [(n, c) for n, c in mine.items() if not _chunk_complete(out, n, c, encoder.dim)]
        left = sum(c["end"] - c["start"] for _, c in todo)
        print(
            f"[sharded] rank {rank}/{world_size}: passages [{start:,}, {end:,}) in {len(mine)} chunk(s) of "
            f"{shard_size:,}; {len(mine) - len(todo)} already complete, {left:,} passages to encode",
            file=sys.stderr,
            flush=True,
        )
        bar = tqdm(
            total=end - start,
            initial=end - start - left,
            desc=f"encode rank {rank}/{world_size}",
            unit="passage",
            disable=not show_progress,
            dynamic_ncols=True,
        )  # rate + ETA
        started = time.perf_counter()
        try:
            _encode_chunks(encoder, passages, out, todo, batch_size, bar)
        finally:
            bar.close()
        seconds = time.perf_counter() - started
    report = ShardReport(rank, world_size, start, end, len(mine), len(mine) - len(todo), left, seconds)
    rate = f"{report.passages_per_second:,.1f} passages/s" if report.passages_per_second else "nothing to encode"
    print(
        f"[sharded] rank {rank}/{world_size}: encoded {left:,} passages in {seconds:.1f} s ({rate})",
        file=sys.stderr,
        flush=True,
    )
    return report


def _start_folder(
    encoder: Any,
    passages: CorpusSource,
    out_dir: str | Path,
    world_size: int,
    shard_size: int,
    batch_size: int,
    fingerprint: str | None,
) -> tuple[Path, dict[str, Any], int]:
    """(folder, manifest, passages): the corpus surveyed, its manifest written into ``out_dir`` or checked
    against the one there (a folder started with other settings is refused)."""
    survey = survey_corpus(passages, world_size, shard_size)
    if not survey.passages:
        raise HarnessError("the corpus to encode is empty")
    out = Path(out_dir)
    manifest = build_manifest(
        survey, fingerprint or encoder_fingerprint(encoder), encoder, world_size, shard_size, batch_size
    )
    check_or_write_manifest(out, manifest)
    return out, manifest, survey.passages


def _encode_chunks(
    encoder: Any, passages: CorpusSource, out: Path, todo: list[tuple[str, dict[str, Any]]], batch_size: int, bar: Any
) -> None:
    """Encode and write the ``todo`` chunks (corpus order) from one fresh stream of the corpus, skipping the
    passages between them; each chunk's ids must be the ones the survey hashed."""
    stream, position = corpus_pairs(passages), 0
    for name, c in todo:  # corpus order
        collections.deque(itertools.islice(stream, c["start"] - position), maxlen=0)  # skip
        chunk = list(itertools.islice(stream, c["end"] - c["start"]))
        position = c["end"]
        chunk_ids = [d for d, _ in chunk]
        if hash_texts(chunk_ids) != c["ids_sha256"]:
            raise HarnessError(
                f"the corpus changed while {out} was encoded (chunk {name} holds other doc "
                "ids than the first pass read)"
            )
        texts = encoder.passage_texts([doc for _, doc in chunk])
        del chunk
        emb = encoder.encode(texts, batch_size=batch_size, kind="passage", show_progress=False)
        write_chunk(out, name, chunk_ids, c["start"], c["end"], emb)
        bar.update(len(chunk_ids))
