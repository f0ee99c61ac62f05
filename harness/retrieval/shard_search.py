"""Exact search over a merged passage matrix: one index of it (:mod:`harness.retrieval.shard_index`), searched
by :func:`harness.retrieval.dense.retrieve`; ``fp16`` stores the vectors in half precision (half the
memory, scores rounded), and the stats say which index was used and where."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from harness.retrieval.dense import Shard, retrieve
from harness.retrieval.faiss_gpu import faiss_gpus, placement
from harness.retrieval.shard_index import build_search_index


def search_merged(
    doc_ids: Sequence[str],
    doc_emb: np.ndarray,
    query_ids: Sequence[str],
    query_emb: np.ndarray,
    k: int = 1000,
    *,
    fp16: bool = False,
    device: Any = None,
) -> tuple[dict[str, dict[str, float]], dict[str, Any]]:
    """:func:`harness.retrieval.dense.retrieve` over one index of the merged matrix (on the GPUs for a CUDA
    ``device`` with a GPU faiss); stats say which index and where."""

    gpus = 0 if fp16 else faiss_gpus(device)
    index, label = build_search_index(doc_emb, fp16=fp16, device=device if gpus else None)
    run, stats = retrieve(query_ids, query_emb, Shard(index, list(doc_ids), placement(gpus, device, fp16=fp16)), k=k)
    stats["index"] = label
    return run, stats
