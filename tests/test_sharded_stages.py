"""Encoding stages sharded over every rank of a launched run give the one-process output: corpus vectors
(harness/retrieval/corpus_vectors.py) and query vectors (harness/pipelines/dense.py) encoded by 2 gloo
processes, merged in id order on rank 0, against one process. Query generation's 1-vs-2 equality is
pinned in tests/test_qgen_generation.py."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from gloo import run_forked

from harness.data.catalog import get_benchmark
from tests.test_shared_corpus_vectors import _tiny_encoder

BENCH = "dl19"


def _encode(model: Path, out: Path) -> None:
    """Corpus and query vectors of BENCH as this process's rank encodes them; rank 0 saves what it got."""
    from harness.core import ranks
    from harness.evaluation.dense_run import judged_queries
    from harness.pipelines.dense import sharded_queries
    from harness.retrieval.corpus_vectors import corpus_embeddings
    from harness.retrieval.encoder import load_encoder
    from harness.stages.checkpoints import model_fingerprint

    encoder = load_encoder(model, query_max_length=16, passage_max_length=16)
    bench = get_benchmark(BENCH)
    ids, emb, info = corpus_embeddings(encoder, bench, model_fingerprint(model), 4, show_progress=False)
    qids, q_emb, _ = sharded_queries(encoder, judged_queries(bench, None))
    if ranks.is_main():
        np.savez(out, ids=np.array(ids), emb=np.array(emb), qids=np.array(qids), q_emb=q_emb)
        (out.parent / "processes").write_text(str(info["processes"]))


def _worker(rank: int, world: int, folder: str) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{folder}/rendezvous", rank=rank, world_size=world)
    try:
        _encode(Path(folder) / "model", Path(folder) / "two" / "vectors.npz")
    finally:
        dist.destroy_process_group()


def test_two_ranks_encode_the_vectors_of_one_process(mirror, tmp_path, monkeypatch):
    import torch

    _tiny_encoder(tmp_path / "model")
    (tmp_path / "two").mkdir()
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache-two"))
    # fork: the children reuse the imported torch/transformers; a deadline guards a hung rendezvous
    run_forked(_worker, (2, str(tmp_path)), nprocs=2)
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache-one"))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        (tmp_path / "one").mkdir()
        _encode(tmp_path / "model", tmp_path / "one" / "vectors.npz")
    finally:
        torch.set_num_threads(threads)
    one, two = np.load(tmp_path / "one" / "vectors.npz"), np.load(tmp_path / "two" / "vectors.npz")
    assert (tmp_path / "two" / "processes").read_text() == "2" and (tmp_path / "one" / "processes").read_text() == "1"
    assert len(one["ids"]) > 1 and list(two["ids"]) == list(one["ids"]) and list(two["qids"]) == list(one["qids"])
    # Each rank sorts and pads its own slice: other batch shapes, fp32 rounding only (stated tolerance 1e-5).
    np.testing.assert_allclose(two["emb"], one["emb"], rtol=0, atol=1e-5)
    np.testing.assert_allclose(two["q_emb"], one["q_emb"], rtol=0, atol=1e-5)
