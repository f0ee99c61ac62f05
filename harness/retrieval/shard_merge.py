"""A sharded encoding's chunks read back in corpus order, each checked against the manifest: one chunk at a
time (:func:`iter_shards`), merged into one matrix (:func:`merge_shards`) or into one ``.npy`` file
without holding it (:func:`merge_shards_to_file`)."""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from harness.core.errors import HarnessError
from harness.retrieval.shard_manifest import MANIFEST, chunks_in_order, read_manifest
from harness.stages.artifacts import TextHasher, hash_texts


def iter_shards(out_dir: str | Path, *, verify: bool = True) -> Iterator[tuple[int, list[str], np.ndarray]]:
    """(start, doc ids, float32 rows) of every chunk in corpus order, each checked against the
    manifest; a missing or inconsistent chunk is refused in one line. Holds one chunk at a time.

    ``verify`` checks each ``.npy`` against the sha256 its ``.json`` recorded (one extra hash pass).
    """

    out = Path(out_dir)
    manifest = read_manifest(out)
    all_ids, count = TextHasher(), 0  # the whole corpus's ids checked as a hash: nothing grows with it
    dim: int | None = None
    for name, c in chunks_in_order(manifest):
        meta_path, npy_path = out / f"{name}.json", out / f"{name}.npy"
        if not (meta_path.is_file() and npy_path.is_file()):
            raise HarnessError(
                f"{out}: chunk {name} (passages {c['start']:,}-{c['end']:,}, rank {c['rank']}) is "
                "missing; run the same encoding command again to resume"
            )
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
            data = npy_path.read_bytes()
            rows = np.load(io.BytesIO(data))
            chunk_ids = list(meta["ids"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise HarnessError(f"{out}: chunk {name} is unreadable ({exc}); delete its two files and resume") from None
        if hash_texts(chunk_ids) != c["ids_sha256"] or (meta.get("start"), meta.get("end")) != (c["start"], c["end"]):
            raise HarnessError(
                f"{out}: the doc ids of chunk {name} disagree with {MANIFEST}; delete its two files and resume"
            )
        if rows.ndim != 2 or rows.shape[0] != len(chunk_ids) or rows.dtype != np.float32:
            raise HarnessError(
                f"{out}: chunk {name} holds {rows.shape} {rows.dtype} vectors for {len(chunk_ids)} "
                "ids; delete its two files and resume"
            )
        if verify and hashlib.sha256(data).hexdigest() != meta.get("npy_sha256"):
            raise HarnessError(
                f"{out}: {name}.npy does not match the sha256 its .json recorded; delete its two files and resume"
            )
        if dim is not None and rows.shape[1] != dim:
            raise HarnessError(f"{out}: chunk {name} has dimension {rows.shape[1]}, others {dim}")
        dim = rows.shape[1]
        for doc_id in chunk_ids:
            all_ids.update(doc_id)
        count += len(chunk_ids)
        yield c["start"], chunk_ids, rows
    if dim is None or count != manifest["passages"] or all_ids.hexdigest() != manifest["ids_sha256"]:
        raise HarnessError(
            f"{out}: the chunks hold {count:,} doc ids, not the {manifest['passages']:,} of "
            f"{MANIFEST} in order; delete the folder and encode again"
        )


def merge_shards(out_dir: str | Path, *, verify: bool = True) -> tuple[list[str], np.ndarray]:
    """(doc ids, float32 matrix) in corpus order (see :func:`iter_shards`)."""
    passages = int(read_manifest(Path(out_dir))["passages"])
    ids: list[str] = []
    emb: np.ndarray | None = None
    for start, chunk_ids, rows in iter_shards(out_dir, verify=verify):
        if emb is None:  # one preallocated matrix: no second copy of the corpus at merge time
            emb = np.empty((passages, rows.shape[1]), dtype=np.float32)
        emb[start : start + len(chunk_ids)] = rows
        ids.extend(chunk_ids)
    assert emb is not None  # iter_shards refuses an empty folder
    return ids, emb


def merge_shards_to_file(out_dir: str | Path, npy: str | Path, ids_json: str | Path, *, verify: bool = True) -> int:
    """The chunks written into one ``.npy`` file in corpus order (the bytes ``np.save`` writes for the
    merged matrix), one chunk in memory at a time, appended with plain writes (a memory map would keep
    the written pages in this process's RSS), and their doc ids into ``ids_json`` as they come (the bytes
    of ``json.dumps(ids)``: no id list grows with the corpus); returns the count. Readers map the
    ``.npy`` (``np.load(mmap_mode="r")``)."""
    passages = int(read_manifest(Path(out_dir))["passages"])
    count = 0
    with open(npy, "wb") as f, open(ids_json, "w", encoding="utf-8") as g:
        g.write("[")
        for start, chunk_ids, rows in iter_shards(out_dir, verify=verify):
            if start == 0:  # iter_shards yields in corpus order and refuses an empty folder
                header = {
                    "descr": np.lib.format.dtype_to_descr(np.dtype(np.float32)),
                    "fortran_order": False,
                    "shape": (passages, rows.shape[1]),
                }
                np.lib.format.write_array_header_1_0(f, header)
            f.write(np.ascontiguousarray(rows, dtype="<f4").tobytes())
            g.write(("" if start == 0 else ", ") + json.dumps(chunk_ids)[1:-1])
            count += len(chunk_ids)
        g.write("]")
    return count
