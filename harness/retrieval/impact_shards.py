"""Quantised impact vectors encoded by every rank of a launched run and merged in order on rank 0.

LexMAE's ``impact_index`` (the corpus) and ``impact_search`` (the queries) encode through here
(:mod:`harness.pipelines.learned_sparse`). The items, in their given order, are cut into chunks of
``chunk`` items; chunk ``k`` is encoded by rank ``k mod N`` (strided over the ranks) in exactly the
batches one process uses for it (:meth:`harness.retrieval.impact.SparseEncoder.encode` sorts a chunk by
length), so every item goes through the same arithmetic whatever N is: the vectors of an N-process run
are bit-identical to a one-process run's on the same kind of device, precision and thread count.

Each rank writes its chunks into ``folder`` as ``chunk{k:06d}.jsonl`` (one ``[id, {term: impact}]`` per
line, written atomically); after a barrier rank 0 reads them back in chunk order (the items' order),
deleting each once read, and the folder with the last one. One process writes nothing: its chunks
stream straight through, as before sharding.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from tqdm.auto import tqdm

from harness.core import ranks
from harness.core.chunks import chunked
from harness.core.errors import HarnessError
from harness.core.fsutil import atomic_write_bytes
from harness.retrieval.impact import ImpactVector

Encode = Callable[[list[str]], list[ImpactVector]]  # texts -> their quantised vectors, in order
Vectors = Iterator[tuple[str, ImpactVector]]


def _chunks(items: Iterable[tuple[str, str]], size: int) -> Iterator[list[tuple[str, str]]]:
    if size < 1:
        raise HarnessError(f"an encoding chunk holds at least one item, got {size}")
    return chunked(items, size)


def _encoded(part: list[tuple[str, str]], encode: Encode) -> list[tuple[str, ImpactVector]]:
    vectors = encode([text for _, text in part])
    if len(vectors) != len(part):
        raise HarnessError(f"the encoder returned {len(vectors)} vectors for {len(part)} texts")
    return [(item_id, vector) for (item_id, _), vector in zip(part, vectors)]


def _chunk_file(folder: Path, k: int) -> Path:
    return folder / f"chunk{k:06d}.jsonl"


def encode_impacts(
    items: Iterable[tuple[str, str]], encode: Encode, folder: Path, chunk: int, desc: str, unit: str = "doc"
) -> tuple[Vectors, int]:
    """(every item's ``(id, vector)`` in the items' order, processes that encoded).

    Every rank of a launched run calls it with the same ``items`` (read whole by each, encoded only in
    its chunks) and returns once every rank's chunks are written; rank 0 gets the merged stream, read
    from ``folder`` lazily, another rank an empty one. One process gets the chunks as it encodes them.
    """
    world, rank = ranks.world_size(), ranks.rank()
    if world == 1:
        return _streamed(items, encode, chunk, desc, unit), 1
    from harness.training import distributed as D

    folder.mkdir(parents=True, exist_ok=True)
    chunks = 0
    with tqdm(desc=f"{desc}, rank {rank}/{world}", unit=unit, dynamic_ncols=True) as bar:
        for k, part in enumerate(_chunks(items, chunk)):
            chunks = k + 1
            if k % world == rank:
                lines = (json.dumps([i, v], ensure_ascii=False) + "\n" for i, v in _encoded(part, encode))
                atomic_write_bytes(_chunk_file(folder, k), "".join(lines).encode("utf-8"))
                bar.update(len(part))
    D.control_barrier()  # every rank's chunks are on disk
    return (_merged(folder, chunks) if ranks.is_main() else iter(())), world


def _streamed(items: Iterable[tuple[str, str]], encode: Encode, chunk: int, desc: str, unit: str) -> Vectors:
    with tqdm(desc=desc, unit=unit, dynamic_ncols=True) as bar:
        for part in _chunks(items, chunk):
            yield from _encoded(part, encode)
            bar.update(len(part))


def _merged(folder: Path, chunks: int) -> Vectors:
    try:
        for k in range(chunks):
            path = _chunk_file(folder, k)
            if not path.is_file():
                raise HarnessError(f"{path} is missing: rank {k % ranks.world_size()} did not write its chunk {k}")
            with path.open(encoding="utf-8") as fh:
                for line in fh:
                    item_id, vector = json.loads(line)
                    yield item_id, vector
            path.unlink()
    finally:
        shutil.rmtree(folder, ignore_errors=True)  # never part of the stage's output
