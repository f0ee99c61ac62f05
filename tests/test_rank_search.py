"""harness/retrieval/rank_search.py: 2 gloo processes each search their rows of the vector cache and rank 0
merges. With duplicate vectors (exact ties everywhere, small integers: exact scores in every scorer) the run
file equals brute force keeping the lowest doc ids at a tie on the k-th place, and the one-process faiss
search's file byte for byte (both cut ties by doc id: harness.retrieval.exact_search.doc_id_order); with ties
only inside the lists it equals the one-process search's run file (same ids and order; scores within 1e-5)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from gloo import run_forked

from harness.data.formats import write_trec_run
from harness.retrieval.dense import retrieve_vectors
from harness.retrieval.rank_search import rank_rows

K = 10


def _data(folder: Path, tied: bool | None) -> tuple[list[str], np.ndarray, list[str], np.ndarray]:
    """Duplicate vectors, saved as the cache's .npy: small integers (exact ties everywhere, ``tied``),
    a pair of copies of each Gaussian vector (two-way ties, never across the k-th place: K is even), or
    (None) 2,500 Gaussian vectors of 24 dims: two ranks' rows in several faiss blocks, near ties in float."""
    rng = np.random.default_rng(3)
    if tied is None:
        docs = rng.standard_normal((2500, 24)).astype(np.float32)
        queries = rng.standard_normal((45, 24)).astype(np.float32)
    elif tied:
        base = rng.integers(-2, 3, size=(5, 8)).astype(np.float32)
        docs = base[rng.integers(0, len(base), size=31)]
        queries = rng.integers(-2, 3, size=(6, 8)).astype(np.float32)
    else:
        docs = np.repeat(rng.standard_normal((16, 8)).astype(np.float32), 2, axis=0)[rng.permutation(32)]
        queries = rng.standard_normal((6, 8)).astype(np.float32)
    np.save(folder / "embeddings.npy", docs)
    return [f"d{i:02d}" for i in range(len(docs))][::-1], docs, [f"q{i}" for i in range(len(queries))], queries


def _worker(rank: int, world: int, folder: str, tied: bool) -> None:
    import json

    import torch
    import torch.distributed as dist

    from harness.core import ranks
    from harness.retrieval.rank_search import local_shard, search_ranks

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{folder}/rendezvous", rank=rank, world_size=world)
    try:
        doc_ids, docs, qids, queries = _data(Path(folder), tied)
        main = ranks.is_main()
        shard = local_shard(doc_ids if main else [], docs if main else docs[:0], f"{folder}/embeddings.npy", "cpu")
        assert (shard.offset, shard.offset + len(shard.vectors)) == rank_rows(len(docs), rank, world)
        run, stats = search_ranks(qids, queries, shard, K, chunk=4)
        if main:
            write_trec_run(run, Path(folder) / "two.trec", tag="t")
            (Path(folder) / "stats.json").write_text(json.dumps(stats))
    finally:
        dist.destroy_process_group()


def _brute_force(qids: list[str], queries: np.ndarray, doc_ids: list[str], docs: np.ndarray) -> dict:
    scores = queries @ docs.T
    by_id = np.argsort(np.argsort(np.array(doc_ids)))  # each row's doc id rank
    top = np.lexsort((np.broadcast_to(by_id, scores.shape), -scores), axis=1)[:, :K]
    return {q: {doc_ids[i]: float(scores[r, i]) for i in top[r]} for r, q in enumerate(qids)}


def test_ties_at_the_kth_place_keep_the_lowest_doc_ids_in_1_and_2_processes(tmp_path):
    run_forked(_worker, (2, str(tmp_path), True), nprocs=2)
    doc_ids, docs, qids, queries = _data(tmp_path, True)
    write_trec_run(_brute_force(qids, queries, doc_ids, docs), tmp_path / "brute.trec", tag="t")
    two = (tmp_path / "two.trec").read_text()
    assert two == (tmp_path / "brute.trec").read_text()
    for rows in (None, 8):  # one faiss call, and chunks of 8 rows (ties across chunks)
        one, _ = retrieve_vectors(qids, queries, doc_ids, docs, k=K, rows=rows)
        write_trec_run(one, tmp_path / "one.trec", tag="t")
        assert (tmp_path / "one.trec").read_text() == two, rows


def test_two_processes_give_the_one_process_run(tmp_path):
    import json

    run_forked(_worker, (2, str(tmp_path), False), nprocs=2)
    doc_ids, docs, qids, queries = _data(tmp_path, False)
    one, _ = retrieve_vectors(qids, queries, doc_ids, docs, k=K)
    write_trec_run(one, tmp_path / "one.trec", tag="t")
    two_lines = (tmp_path / "two.trec").read_text().splitlines()
    one_lines = (tmp_path / "one.trec").read_text().splitlines()
    assert [line.split()[:4] for line in two_lines] == [line.split()[:4] for line in one_lines]
    np.testing.assert_allclose(
        [float(line.split()[4]) for line in two_lines], [float(line.split()[4]) for line in one_lines], atol=1e-5
    )
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert stats["search_processes"] == 2 and stats["search_devices"] == ["cpu", "cpu"]
    assert stats["docs"] == len(docs) and stats["queries"] == len(qids)


def test_two_processes_write_the_one_process_run_file_byte_for_byte(tmp_path):
    """Rank slices on FAISS_BLOCK edges, each CPU rank scanning its rows with the one-process faiss code: the
    same float scores, so the same file, scores included (no tolerance)."""
    run_forked(_worker, (2, str(tmp_path), None), nprocs=2)
    doc_ids, docs, qids, queries = _data(tmp_path, None)
    assert rank_rows(len(docs), 0, 2) == (0, 1024)  # both ranks hold rows
    one, _ = retrieve_vectors(qids, queries, doc_ids, docs, k=K)
    write_trec_run(one, tmp_path / "one.trec", tag="t")
    assert (tmp_path / "two.trec").read_text() == (tmp_path / "one.trec").read_text()


def test_rank_rows_cover_the_corpus_once():
    assert [rank_rows(10, r, 3, align=1) for r in range(3)] == [(0, 3), (3, 6), (6, 10)]
    assert [rank_rows(3633, r, 2) for r in range(2)] == [(0, 2048), (2048, 3633)]  # on faiss's 1024-row blocks
    assert [rank_rows(100, r, 2) for r in range(2)] == [(0, 0), (0, 100)]  # a corpus under one block: one rank
    for total, world in ((10**6, 16), (8_841_823, 8), (5000, 3)):
        edges = [rank_rows(total, r, world) for r in range(world)]
        assert edges[0][0] == 0 and edges[-1][1] == total
        assert all(a[1] == b[0] and a[0] <= a[1] for a, b in zip(edges, edges[1:]))
        assert all(start % 1024 == 0 for start, _ in edges)
