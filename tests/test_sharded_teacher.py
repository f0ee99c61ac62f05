"""LexMAE's teacher scoring sharded over every rank of a launched run (issue 51): 2 gloo processes run the
teacher_scores stage and rank 0's merged scores.json and groups.json are the bytes one process writes, the
entry stating 2 processes; a rank's scored chunks survive a kill (harness.finetune.teacher_shards)."""

from __future__ import annotations

import json
import string
from pathlib import Path

import pytest
from gloo import run_forked

from harness.data.catalog import get_benchmark
from harness.finetune import teacher_pairs
from harness.finetune.teacher_shards import merged_scores, remove_shards, score_shard, shard_file
from harness.pipelines.chain import train_queries
from harness.spec.method import MethodSpec
from tests.test_pipeline_learned_sparse import shrunk_spec

CHUNK = 16  # pairs per chunk here (PAIR_CHUNK at scale): ~120 pairs give both ranks chunks to score


def _teacher(folder: Path) -> None:
    """A one-layer cross-encoder (one logit) over characters, seeded: scores that differ pair by pair."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    chars = string.ascii_lowercase + string.digits
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *chars, *(f"##{c}" for c in chars)]
    folder.mkdir(parents=True)
    BertTokenizerFast(vocab={w: i for i, w in enumerate(vocab)}).save_pretrained(folder)
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=48,
        num_labels=1,
    )
    BertForSequenceClassification(config).save_pretrained(folder)


def _mined(spec: MethodSpec, path: Path) -> None:
    """A stand-in for retriever 2's search of the training queries: the same 30 passages for each."""
    bench = get_benchmark("scifact")
    queries, qrels = train_queries(bench, "train", spec.get("finetune.max_train_queries"))
    docs = sorted(bench.corpus())[:30]
    path.write_text(
        "".join(f"{q} Q0 {d} {r} {30 - r} mined\n" for q in sorted(qrels) for r, d in enumerate(docs, 1)),
        encoding="utf-8",
    )


def _score(folder: Path, name: str) -> None:
    """The teacher_scores stage as this process's rank runs it; rank 0 notes its output and entry."""
    from harness.core import ranks
    from harness.pipelines.context import RunContext, StageLog
    from harness.pipelines.learned_sparse import Teacher, teacher_stage
    from harness.records.tracker import Tracker

    ctx = RunContext(shrunk_spec(), Tracker("teacher-test", "test", {}, enabled=False), StageLog())
    out = teacher_stage(ctx, Teacher(folder / "teacher", "test-teacher"), folder / "mined.trec")
    if ranks.is_main():
        (folder / name).mkdir()
        (folder / name / "result.json").write_text(json.dumps({"dir": str(out), "entries": ctx.stages.entries}))


def _worker(rank: int, world: int, folder: str) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{folder}/rendezvous", rank=rank, world_size=world)
    try:
        _score(Path(folder), "two")
    finally:
        dist.destroy_process_group()


def test_two_ranks_write_the_teacher_scores_of_one_process(tmp_path, monkeypatch, one_thread):
    _teacher(tmp_path / "teacher")
    _mined(shrunk_spec(), tmp_path / "mined.trec")
    monkeypatch.setattr(teacher_pairs, "PAIR_CHUNK", CHUNK)
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache-two"))
    run_forked(_worker, (2, str(tmp_path)), nprocs=2)  # fork: the children reuse the imported torch
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache-one"))
    _score(tmp_path, "one")

    one, two = (json.loads((tmp_path / n / "result.json").read_text()) for n in ("one", "two"))
    one_dir, two_dir = Path(one["dir"]), Path(two["dir"])
    assert one_dir.name == two_dir.name  # the same stage key whatever the number of processes
    scores = json.loads((one_dir / "scores.json").read_text())
    assert sum(map(len, scores.values())) > 4 * CHUNK and len(set(scores)) > 1  # several chunks each rank
    for name in ("scores.json", "groups.json"):
        assert (two_dir / name).read_bytes() == (one_dir / name).read_bytes(), name
    assert sorted(p.name for p in two_dir.iterdir() if p.name.startswith("scores")) == ["scores.json"]
    (e_one,), (e_two,) = ([e for e in r["entries"] if e["stage"] == "teacher_scores"] for r in (one, two))
    assert e_two["processes"] == 2 and e_two["output"]["processes"] == 2
    assert e_one["processes"] == 1 and e_one["output"]["processes"] == 1
    assert e_two["output"]["pairs"] == e_one["output"]["pairs"] == sum(map(len, scores.values()))
    assert e_two["output"]["teacher_pairwise_accuracy"] == e_one["output"]["teacher_pairwise_accuracy"]


def test_a_ranks_scored_chunks_survive_a_kill(tmp_path):
    """Chunks written before a kill (a torn last line cut off) are not scored again; the merge gives the
    scores of one uninterrupted process, in the keys' order."""
    keys = [[(f"q{i // 3}", f"d{i}") for i in range(c * 4, c * 4 + 4)] for c in range(5)]
    scored: list[int] = []

    def make_scorer(fail_at: int | None = None):
        def score(chunk):
            first = int(chunk[0][1][1:]) // 4
            if first == fail_at:
                raise KeyboardInterrupt  # killed while scoring this chunk
            scored.append(first)
            return [float(int(d[1:])) / 7 for _, d in chunk]

        return lambda: score

    with pytest.raises(KeyboardInterrupt):
        score_shard(make_scorer(fail_at=4), keys, tmp_path, 0, 2)  # rank 0 of 2: chunks 0, 2, 4
    with open(shard_file(tmp_path, 0, 2), "a", encoding="utf-8") as torn:
        torn.write('{"chunk": 4, "scores": [0.1')
    assert scored == [0, 2]
    assert score_shard(make_scorer(), keys, tmp_path, 0, 2) == {"chunks": 3, "scored": 1, "resumed": 2}
    assert score_shard(make_scorer(), keys, tmp_path, 1, 2) == {"chunks": 2, "scored": 2, "resumed": 0}
    assert scored == [0, 2, 4, 1, 3]
    merged = dict(merged_scores(keys, tmp_path, 2))
    assert merged == {f"q{q}": {f"d{i}": i / 7 for i in range(3 * q, min(3 * q + 3, 20))} for q in range(7)}
    remove_shards(tmp_path)
    assert not list(tmp_path.iterdir())
