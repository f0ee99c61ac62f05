"""Stage-3 teacher scoring shared by every rank of a run (issue 51), merged into the one-process output.

The pairs are cut into the chunks of :func:`harness.finetune.teacher_pairs.iter_key_chunks` (the groups in
order, ``PAIR_CHUNK`` pairs each: a chunk depends on the groups alone, never on the number of processes),
and rank r of w scores chunks ``r, r + w, r + 2w, ...`` (the global-batch pattern of query generation,
harness.corpus.qgen). A chunk is scored exactly as a one-process run scores it (the cross-encoder sorts a
chunk by length into batches; the bi-encoder encodes a chunk's queries and passages together), so the
merged scores are the same floats whatever the number of processes, on the same device and thread count.
Cutting by query instead would give each rank other batches, with other padding: fp32 rounding apart.

Each rank appends ``{"chunk": i, "scores": [...]}`` lines to its own file in the stage's work folder
(``scores.rank{r}-of-{w}.jsonl``), flushed per chunk; a killed build resumes (the stage keeps its work
folder) with the chunks its file holds, a torn last line cut off. :func:`merged_scores` reads the files
back in chunk order, one query at a time; :func:`remove_shards` clears them (any world size's) once
``scores.json`` is written. A tiny or mini run has one chunk, which rank 0 scores: the others have none.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

from harness.core.errors import DataFormatError, HarnessError
from harness.finetune.teacher_pairs import Keys, iter_query_scores

ChunkScorer = Callable[[Keys], Sequence[float]]  # one score per key of a chunk, in order


def shard_file(work: Path, rank: int, world_size: int) -> Path:
    return Path(work) / f"scores.rank{rank}-of-{world_size}.jsonl"


def _cut_torn_line(path: Path) -> None:
    """A shard file killed mid-write ends in a torn line: cut it off, the chunk is scored again."""
    if not path.exists():
        return
    with open(path, "r+b") as f:
        size = f.seek(0, os.SEEK_END)
        tail = b""
        while size > 0 and b"\n" not in tail:
            step = min(size, 1 << 16)
            size -= step
            f.seek(size)
            tail = f.read(step) + tail
        good = size + tail.rfind(b"\n") + 1
        f.truncate(good)


def _records(path: Path) -> Iterator[dict]:
    """The chunk records of a shard file, read one line at a time (a chunk's scores held, not the file's)."""
    if not path.exists():
        return
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            try:
                record = json.loads(line)
                yield {"chunk": int(record["chunk"]), "scores": [float(v) for v in record["scores"]]}
            except (ValueError, KeyError, TypeError) as exc:
                raise DataFormatError(path, n, f"not a teacher-score chunk ({exc})", "delete it to rescore") from exc


def score_shard(
    make_scorer: Callable[[], ChunkScorer], chunks: Iterable[Keys], work: Path, rank: int, world_size: int
) -> dict[str, int]:
    """Score this rank's chunks (``i % world_size == rank``) into its shard file, skipping those already
    there; the scorer is made only when a chunk is left to score. Returns the chunks it holds and scored now."""
    if world_size < 1 or not 0 <= rank < world_size:
        raise HarnessError(f"invalid shard: rank {rank} of world size {world_size}")
    path = shard_file(work, rank, world_size)
    _cut_torn_line(path)
    done = {record["chunk"] for record in _records(path)}
    scorer: ChunkScorer | None = None
    mine = scored = 0
    with open(path, "a", encoding="utf-8") as out:
        for i, keys in enumerate(chunks):
            if i % world_size != rank:
                continue
            mine += 1
            if i in done:
                continue
            scorer = scorer or make_scorer()
            values = [float(v) for v in scorer(keys)]
            if len(values) != len(keys):
                raise HarnessError(f"teacher scored {len(values)} of the {len(keys)} pairs of chunk {i}")
            out.write(json.dumps({"chunk": i, "scores": values}) + "\n")
            out.flush()
            os.fsync(out.fileno())  # a finished chunk survives a kill
            scored += 1
    return {"chunks": mine, "scored": scored, "resumed": mine - scored}


def merged_scores(chunks: Iterable[Keys], work: Path, world_size: int) -> Iterator[tuple[str, dict[str, float]]]:
    """Every rank's scores, ``(qid, {doc id: score})`` one query at a time in the chunks' order: what
    scoring all the chunks in one process yields. Each file holds its rank's chunks in increasing order."""
    files = [_records(shard_file(work, r, world_size)) for r in range(world_size)]

    def scored() -> Iterator[tuple[Keys, list[float]]]:
        for i, keys in enumerate(chunks):
            record = next(files[i % world_size], None)
            if record is None or record["chunk"] != i or len(record["scores"]) != len(keys):
                raise HarnessError(
                    f"teacher scores of chunk {i} ({len(keys)} pairs) are missing from "
                    f"{shard_file(work, i % world_size, world_size)}"
                )
            yield keys, record["scores"]

    yield from iter_query_scores(scored())


def remove_shards(work: Path) -> None:
    """The shard files of any world size (a resumed folder may hold another's): scores.json holds them now."""
    for stale in Path(work).glob("scores.rank*-of-*.jsonl"):
        stale.unlink(missing_ok=True)
