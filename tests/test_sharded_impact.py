"""LexMAE's impact encoding sharded over every rank of a launched run (harness/retrieval/impact_shards.py):
the impact_index and impact_search stages of 2 gloo processes hand Lucene the same quantised vectors, in
the same order, as one process, and their outputs say how many processes encoded. Lucene itself is
replaced by a recorder here (its indexing and search are pinned in tests/test_retrieval_impact.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gloo import run_forked

from harness.data.catalog import get_benchmark
from harness.pipelines import learned_sparse
from harness.retrieval.splade_model import write_lexical_settings
from tests.test_finetune_splade import make_tiny_mlm

BENCH = "dl19"


def _stages(folder: Path, out: Path) -> None:
    """This rank's impact_index and impact_search of BENCH; rank 0 saves the stage outputs and entries."""
    from harness.core import ranks
    from harness.pipelines.context import RunContext, StageLog
    from harness.records.tracker import Tracker
    from harness.spec.method import load_method

    tracker = Tracker(experiment="t", run_name="t", tags={}, enabled=False)
    ctx = RunContext(load_method("lexmae", "tiny"), tracker, StageLog())
    bench = get_benchmark(BENCH)
    learned_sparse.search_stage(ctx, "retriever1", folder / "model", BENCH, bench.eval_split, 10)
    if ranks.is_main():
        entries = [{k: e.get(k) for k in ("stage", "processes", "output")} for e in ctx.stages.entries]
        (out / "entries.json").write_text(json.dumps(entries), encoding="utf-8")


def _record_index(vectors: Any, index_dir: Path, threads: int = 2) -> dict[str, Any]:
    index_dir.mkdir(parents=True)
    pairs = [[doc_id, dict(v)] for doc_id, v in vectors]
    (index_dir / "docs.json").write_text(json.dumps(pairs), encoding="utf-8")
    Path(index_dir.parents[1] / "docs.json").write_text(json.dumps(pairs), encoding="utf-8")  # kept past the test
    return {"documents": len(pairs)}


def _record_search(index_dir: Path, queries: Any, k: int, threads: int = 2) -> tuple[dict, dict[str, Any]]:
    (Path(index_dir).parents[2] / "queries.json").write_text(json.dumps(list(queries.items())), encoding="utf-8")
    return {q: {} for q in queries}, {"queries": len(queries)}


def _worker(rank: int, world: int, folder: str) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{folder}/rendezvous", rank=rank, world_size=world)
    try:
        _stages(Path(folder), Path(folder) / "two")
    finally:
        dist.destroy_process_group()


def test_two_ranks_encode_the_impact_vectors_of_one_process(mirror, tmp_path, monkeypatch):
    import torch

    model = make_tiny_mlm(tmp_path / "model", seed=3)
    write_lexical_settings(model, query_max_length=8, passage_max_length=16, title_separator=" ")
    # Small chunks, so each rank encodes several of the fixture's passages and queries (set before the fork).
    monkeypatch.setattr(learned_sparse, "ENCODE_CHUNK", 7)
    monkeypatch.setattr(learned_sparse, "QUERY_CHUNK", 3)
    monkeypatch.setattr(learned_sparse, "build_impact_index", _record_index)
    monkeypatch.setattr(learned_sparse, "search_impact", _record_search)
    runs = {}
    for name, world in (("two", 2), ("one", 1)):
        (tmp_path / name).mkdir()
        monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / name / "cache"))
        if world > 1:  # fork: the children reuse the imported torch/transformers under a deadline
            run_forked(_worker, (world, str(tmp_path)), nprocs=world)
        else:
            threads = torch.get_num_threads()
            torch.set_num_threads(1)
            try:
                _stages(tmp_path, tmp_path / name)
            finally:
                torch.set_num_threads(threads)
        entries = json.loads((tmp_path / name / "entries.json").read_text(encoding="utf-8"))
        runs[name] = (
            {e["stage"]: e for e in entries},
            json.loads((tmp_path / name / "cache" / "impact_index" / "docs.json").read_text(encoding="utf-8")),
            json.loads((tmp_path / name / "cache" / "queries.json").read_text(encoding="utf-8")),
        )
    (one, one_docs, one_queries), (two, two_docs, two_queries) = runs["one"], runs["two"]
    assert len(one_docs) > 2 * 7 and len(one_queries) > 2 * 3  # more chunks than ranks
    assert any(v for _, v in one_docs) and any(v for _, v in one_queries)
    # Same chunks, same batches: the quantised vectors are bit-identical, in corpus and query order.
    assert two_docs == one_docs and two_queries == one_queries
    for stage in ("impact_index", "impact_search"):
        assert one[stage]["output"]["encode_processes"] == 1 and one[stage]["processes"] == 1
        assert two[stage]["output"]["encode_processes"] == 2 and two[stage]["processes"] == 2
    # No shard file is left in the stage's output.
    assert not list((tmp_path / "two" / "cache").rglob("chunk*.jsonl"))
