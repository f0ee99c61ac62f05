"""A faiss index over passage vectors: exact inner product (fp32) or fp16 storage, from one matrix
(:func:`build_search_index`) or chunk by chunk from a sharded encoding (:func:`index_shards`, never
holding the fp32 matrix), on the GPUs of a CUDA device with a GPU faiss; the memory it takes said first."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

from harness.core.errors import HarnessError
from harness.core.hardware import total_memory_gib
from harness.retrieval.dense import build_index
from harness.retrieval.faiss_gpu import faiss_gpus, placement, to_gpus
from harness.retrieval.shard_manifest import read_manifest
from harness.retrieval.shard_merge import iter_shards


def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024:
            return f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n:,.1f} TiB"


def build_search_index(embeddings: np.ndarray, *, fp16: bool = False, device: Any = None) -> tuple[Any, str]:
    """(faiss index, label): exact ``IndexFlatIP`` by default, fp16 storage on request. On a CUDA
    ``device`` with a GPU faiss the exact index moves to the GPUs (:mod:`harness.retrieval.faiss_gpu`;
    fp16 storage stays on the CPU) and the label says so.

    Prints the memory figure (n x dim x bytes) before building, and a hint when fp32 would not
    fit in this machine's RAM.
    """

    n, dim = embeddings.shape
    width = 2 if fp16 else 4
    gpus = 0 if fp16 else faiss_gpus(device)
    label = _index_label(fp16, gpus)
    print(f"index: {label}: {n:,} x {dim} x {width} B = {_human(n * dim * width)}", flush=True)
    ram = (total_memory_gib() or 0) * 2**30
    if not fp16 and ram and n * dim * 4 > 0.8 * ram:
        print(
            f"index: {_human(n * dim * 4)} is more than 80% of this machine's {_human(ram)} RAM; "
            "fp16 storage halves it",
            file=sys.stderr,
        )
    if not fp16:
        return build_index(embeddings, device if gpus else None), label
    import faiss

    if not np.isfinite(embeddings).all():
        raise HarnessError("passage embeddings contain NaN or infinite values")
    index = faiss.IndexScalarQuantizer(dim, faiss.ScalarQuantizer.QT_fp16, faiss.METRIC_INNER_PRODUCT)
    index.add(np.ascontiguousarray(embeddings, dtype=np.float32))
    return index, label


def index_shards(
    out_dir: str | Path, *, fp16: bool = False, verify: bool = True, device: Any = None
) -> tuple[list[str], Any, str]:
    """(doc ids, faiss index, label) built chunk by chunk from the shards, never holding the fp32
    matrix: the peak is the index (n x dim x 4, or x 2 with ``fp16``) plus one chunk. The exact index
    then moves to the GPUs as :func:`build_search_index`'s does."""
    import faiss

    gpus = 0 if fp16 else faiss_gpus(device)
    manifest = read_manifest(Path(out_dir))
    ids: list[str] = []
    index: Any = None
    label = ""
    for _, chunk_ids, rows in iter_shards(out_dir, verify=verify):
        if index is None:
            n, dim = int(manifest["passages"]), rows.shape[1]
            label = _index_label(fp16, gpus)
            print(
                f"index: {label}: {n:,} x {dim} x {2 if fp16 else 4} B = {_human(n * dim * (2 if fp16 else 4))} "
                "(built chunk by chunk)",
                flush=True,
            )
            index = (
                faiss.IndexScalarQuantizer(dim, faiss.ScalarQuantizer.QT_fp16, faiss.METRIC_INNER_PRODUCT)
                if fp16
                else faiss.IndexFlatIP(dim)
            )
        if not np.isfinite(rows).all():
            raise HarnessError(f"{out_dir}: passage embeddings contain NaN or infinite values")
        index.add(np.ascontiguousarray(rows, dtype=np.float32))
        ids.extend(chunk_ids)
    return ids, (to_gpus(index) if gpus and index is not None else index), label


def _index_label(fp16: bool, gpus: int = 0) -> str:
    """What the index is; where it lies only when that is not the CPU (a CPU label reads as before)."""
    return (
        "faiss.IndexScalarQuantizer fp16 (exhaustive inner product over fp16-stored vectors; scores rounded)"
        if fp16
        else "faiss.IndexFlatIP (exact inner product, fp32)" + (f" on {placement(gpus)}" if gpus else "")
    )
