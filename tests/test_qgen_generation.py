"""Query generation: a tiny T5 trained in-harness, C queries per passage, resumable, sharded."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from harness.core.errors import HarnessError
from harness.corpus.passage_file import PassageFile
from harness.corpus.passages import Passage, save_passages
from harness.corpus.qgen import (
    generate_queries,
    generation_dtype,
    load_queries,
    merge_query_shards,
    query_grounding,
    shard_indices,
    shard_path,
)
from harness.corpus.tiny_t5 import pairs_from_qrels, train_tiny_t5
from harness.corpus.tokenizer import train_wordpiece
from harness.stages import artifacts

DOCS = {
    f"d{i}": {
        "title": f"Topic {i}",
        "text": f"{w} therapy reduces {v} in patients with {w} disease. The {v} effect was large.",
    }
    for i, (w, v) in enumerate(
        [
            ("aspirin", "stroke"),
            ("insulin", "glucose"),
            ("statin", "cholesterol"),
            ("vitamin", "fracture"),
            ("exercise", "weight"),
            ("coffee", "fatigue"),
            ("sleep", "stress"),
            ("diet", "obesity"),
        ]
    )
}
QUERIES = {f"q{i}": f"does {d['text'].split()[0]} reduce {d['text'].split()[3]}" for i, d in enumerate(DOCS.values())}
QRELS = {f"q{i}": {f"d{i}": 1, "missing-doc": 1} for i in range(len(DOCS))} | {"q-unknown": {"d0": 1}}
TINY = dict(
    d_model=32,
    d_ff=64,
    num_heads=2,
    steps=40,
    batch_size=8,
    lr=3e-3,
    max_input_tokens=48,
    max_target_tokens=12,
    log_every=0,
    num_threads=1,
)


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Tiny models are overhead-bound: one thread is faster and immune to CPU contention."""
    import torch

    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


@pytest.fixture(scope="module")
def t5_dir(one_thread, tmp_path_factory):
    root = tmp_path_factory.mktemp("qgen")
    texts = [d["title"] + " " + d["text"] for d in DOCS.values()] + list(QUERIES.values())
    tok = train_wordpiece(texts, root / "wp", vocab_size=200, min_frequency=1)
    pairs = pairs_from_qrels(DOCS, QUERIES, QRELS)
    result = train_tiny_t5(pairs, tok, root / "t5", **TINY)
    return root, result


@pytest.fixture
def passages():
    return [Passage(f"{d}#0", d, doc["title"] + " " + doc["text"]) for d, doc in DOCS.items()] + [
        Passage("d0#1", "d0", "A second passage about aspirin and stroke risk.")
    ]


def test_pairs_from_qrels_skips_unknowns():
    pairs = pairs_from_qrels(DOCS, QUERIES, QRELS)
    assert len(pairs) == len(DOCS)
    assert pairs[0] == (QUERIES["q0"], "Topic 0 " + DOCS["d0"]["text"])


def test_tiny_t5_trains_loss_falls_and_is_cached(t5_dir):
    root, result = t5_dir
    losses = result.losses
    assert len(losses) == TINY["steps"] and not result.cached
    assert sum(losses[-5:]) / 5 < 0.7 * sum(losses[:5]) / 5
    assert (result.model_dir / "done.json").exists() and (result.model_dir / "config.json").exists()
    again = train_tiny_t5(pairs_from_qrels(DOCS, QUERIES, QRELS), root / "wp", root / "t5", **TINY)
    assert again.cached and again.losses == losses


def test_tiny_t5_is_a_regular_seq2seq_checkpoint(t5_dir):
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    _, result = t5_dir
    model = AutoModelForSeq2SeqLM.from_pretrained(str(result.model_dir))
    tok = AutoTokenizer.from_pretrained(str(result.model_dir))
    assert model.config.model_type == "t5" and model.config.d_model == 32
    assert model.config.decoder_start_token_id == tok.cls_token_id
    assert model.config.eos_token_id == tok.sep_token_id and model.config.pad_token_id == tok.pad_token_id


@pytest.mark.parametrize("num_queries", [1, 5])
def test_generates_c_queries_per_passage(t5_dir, passages, tmp_path, num_queries):
    _, result = t5_dir
    out = tmp_path / "q.jsonl"
    res = generate_queries(
        result.model_dir,
        passages,
        num_queries=num_queries,
        batch_size=4,
        max_new_tokens=8,
        out_path=out,
        show_progress=False,
    )
    got = load_queries(out)
    assert list(got) == [p.pid for p in passages]
    assert all(len(qs) == num_queries and all(isinstance(q, str) for q in qs) for qs in got.values())
    assert any(q.strip() for qs in got.values() for q in qs)
    assert res.num_generated == len(passages) and res.samples and res.samples[0]["pid"] == passages[0].pid
    assert artifacts.finished_meta(tmp_path, name="q.jsonl.done.json")["config"]["top_k"] == 25
    # Finished: a second call generates nothing and leaves the file alone.
    before = out.read_bytes()
    again = generate_queries(
        result.model_dir,
        passages,
        num_queries=num_queries,
        batch_size=4,
        max_new_tokens=8,
        out_path=out,
        show_progress=False,
    )
    assert again.num_generated == 0 and out.read_bytes() == before and again.samples


def test_resume_gives_identical_file(t5_dir, passages, tmp_path):
    _, result = t5_dir
    kw = dict(num_queries=5, batch_size=3, max_new_tokens=8, show_progress=False)
    full = tmp_path / "full.jsonl"
    generate_queries(result.model_dir, passages, out_path=full, **kw)

    part = tmp_path / "part.jsonl"
    first = generate_queries(result.model_dir, passages, out_path=part, stop_after_batches=1, **kw)
    assert first.num_generated == 3 and len(part.read_text().splitlines()) == 3
    assert not (tmp_path / "part.jsonl.done.json").exists()
    with open(part, "a") as f:  # killed in the middle of writing a line
        f.write('{"pid": "d3#0", "queries": ["tor')
    second = generate_queries(result.model_dir, passages, out_path=part, **kw)
    assert second.num_resumed == 3 and second.num_generated == len(passages) - 3
    assert part.read_bytes() == full.read_bytes()


def test_partial_file_from_other_config_is_discarded(t5_dir, passages, tmp_path):
    _, result = t5_dir
    out = tmp_path / "q.jsonl"
    generate_queries(
        result.model_dir,
        passages,
        num_queries=5,
        batch_size=3,
        max_new_tokens=8,
        out_path=out,
        stop_after_batches=1,
        show_progress=False,
    )
    generate_queries(
        result.model_dir, passages, num_queries=1, batch_size=3, max_new_tokens=8, out_path=out, show_progress=False
    )
    assert all(len(qs) == 1 for qs in load_queries(out).values())


def test_sharded_generation_covers_all_passages(t5_dir, passages, tmp_path):
    _, result = t5_dir
    out = tmp_path / "shards" / "queries.jsonl"
    files = []
    for rank in range(2):
        res = generate_queries(
            result.model_dir,
            passages,
            num_queries=2,
            batch_size=2,
            max_new_tokens=6,
            rank=rank,
            world_size=2,
            out_path=out,
            show_progress=False,
        )
        files.append(res.path)
        # global batches of 2: rank 0 takes batches 0, 2, 4 (passages 0-1, 4-5, 8), rank 1 batches 1, 3
        assert res.path == shard_path(out, rank, 2) and res.num_passages == (5, 4)[rank]
    pids = [[json.loads(line)["pid"] for line in f.read_text().splitlines()] for f in files]
    assert set(pids[0]).isdisjoint(pids[1]) and sorted(pids[0] + pids[1]) == sorted(p.pid for p in passages)
    assert set(load_queries(out.parent)) == {p.pid for p in passages}


def test_shard_indices_are_whole_global_batches():
    assert shard_indices(9, 2, 0, 2) == [0, 1, 4, 5, 8] and shard_indices(9, 2, 1, 2) == [2, 3, 6, 7]
    assert shard_indices(9, 2, 0, 1) == list(range(9)) and shard_indices(3, 4, 1, 2) == []


def test_two_ranks_merged_write_the_bytes_of_one_process(t5_dir, passages, tmp_path):
    """What a 2-process qgen stage writes (each rank its global batches, merged on rank 0 in passage
    order) is byte for byte the one-process file: each batch is seeded by its first passage's index."""
    _, result = t5_dir
    kwargs = dict(num_queries=2, batch_size=2, max_new_tokens=6, show_progress=False)
    one = tmp_path / "one" / "queries.jsonl"
    generate_queries(result.model_dir, passages, out_path=one, **kwargs)
    two = tmp_path / "two" / "queries.jsonl"
    for rank in range(2):
        generate_queries(result.model_dir, passages, rank=rank, world_size=2, out_path=two, **kwargs)
    assert merge_query_shards(two, passages, 2) == len(passages)
    assert two.read_bytes() == one.read_bytes()
    assert sorted(f.name for f in two.parent.iterdir()) == ["queries.jsonl"]  # shard files and markers gone


def test_any_seq2seq_checkpoint_works(t5_dir, passages, tmp_path):
    """An (untrained) BART goes through the same code path: nothing T5-specific."""
    import torch
    from transformers import AutoTokenizer, BartConfig, BartForConditionalGeneration

    root, _ = t5_dir
    tok = AutoTokenizer.from_pretrained(str(root / "wp"))
    torch.manual_seed(0)
    cfg = BartConfig(
        vocab_size=len(tok),
        d_model=16,
        encoder_layers=1,
        decoder_layers=1,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=32,
        decoder_ffn_dim=32,
        max_position_embeddings=64,
        pad_token_id=tok.pad_token_id,
        bos_token_id=tok.cls_token_id,
        eos_token_id=tok.sep_token_id,
        decoder_start_token_id=tok.cls_token_id,
        forced_bos_token_id=None,
        forced_eos_token_id=None,
    )
    BartForConditionalGeneration(cfg).save_pretrained(str(tmp_path / "bart"))
    tok.save_pretrained(str(tmp_path / "bart"))
    generate_queries(
        tmp_path / "bart",
        passages[:3],
        num_queries=2,
        batch_size=2,
        max_new_tokens=5,
        max_input_tokens=60,
        out_path=tmp_path / "b.jsonl",
        show_progress=False,
    )
    assert all(len(qs) == 2 for qs in load_queries(tmp_path / "b.jsonl").values())


def test_errors(tmp_path, passages):
    with pytest.raises(HarnessError, match="query generator not found"):
        generate_queries(tmp_path / "nope", passages, out_path=tmp_path / "q.jsonl")
    with pytest.raises(HarnessError):
        train_tiny_t5([], tmp_path, tmp_path / "t5")
    with pytest.raises(HarnessError):
        load_queries(tmp_path / "absent.jsonl")


def test_tiny_t5_training_is_deterministic(t5_dir, tmp_path):
    import torch
    from transformers import AutoModelForSeq2SeqLM

    root, _ = t5_dir
    pairs = pairs_from_qrels(DOCS, QUERIES, QRELS)
    cfg = dict(TINY, steps=3)
    a = train_tiny_t5(pairs, root / "wp", tmp_path / "a", **cfg)
    b = train_tiny_t5(pairs, root / "wp", tmp_path / "b", **cfg)
    assert a.losses == b.losses
    sa = AutoModelForSeq2SeqLM.from_pretrained(str(a.model_dir)).state_dict()
    sb = AutoModelForSeq2SeqLM.from_pretrained(str(b.model_dir)).state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    c = train_tiny_t5(pairs, root / "wp", tmp_path / "c", **dict(cfg, seed=7))
    assert c.losses != a.losses


def test_query_grounding_tells_copied_words_from_generic_ones():
    ps = [
        Passage(f"d{i}#0", f"d{i}", text)
        for i, text in enumerate(
            [
                "vitamin intake and bone density",
                "statin therapy muscle pain",
                "soya protein breast cancer",
                "coffee drinking liver enzymes",
            ]
        )
    ]
    grounded = {p.pid: [p.text.split()[0] + " effects"] for p in ps}
    generic = {p.pid: ["health effects"] for p in ps}
    g = query_grounding(ps, grounded)
    assert g["query_word_overlap_own"] == pytest.approx(0.5) and g["query_word_overlap_other"] == 0.0
    g = query_grounding(ps, generic)
    assert g["query_word_overlap_own"] == g["query_word_overlap_other"] == 0.0


class OwnBatchesOnly(Sequence[Passage]):
    """Passages that may be read by index only (iterating them, i.e. materialising the corpus, fails),
    recording each index read with how many queries the output file held at that moment."""

    def __init__(self, items: list[Passage], out: Path):
        self.items, self.out, self.reads = items, out, []

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i):  # type: ignore[override]  # a stand-in for a list that refuses slices
        if isinstance(i, slice):
            raise AssertionError("a slice of the corpus was read")
        written = len(self.out.read_text().splitlines()) if self.out.exists() else 0
        self.reads.append((i, written))
        return self.items[i]

    def __iter__(self):
        raise AssertionError("the corpus was iterated (materialised)")


def test_each_rank_reads_its_own_batches_one_at_a_time(t5_dir, passages, tmp_path):
    """A rank reads only its shard's passages, each batch just before generating it (the batches
    before it already written): it never holds the corpus, nor its whole share."""
    _, result = t5_dir
    for rank in range(2):
        out = shard_path(tmp_path / "queries.jsonl", rank, 2)
        strict = OwnBatchesOnly(passages, out)
        generate_queries(
            result.model_dir,
            strict,
            num_queries=1,
            batch_size=2,
            max_new_tokens=4,
            rank=rank,
            world_size=2,
            out_path=tmp_path / "queries.jsonl",
            show_progress=False,
            num_samples=0,
            passages_key="fixture",
        )
        own = shard_indices(len(passages), 2, rank, 2)
        assert [i for i, _ in strict.reads] == own
        assert [written for _, written in strict.reads] == [own.index(i) // 2 * 2 for i in own]


def test_passage_file_on_two_ranks_gives_the_one_process_file(t5_dir, passages, tmp_path):
    """The pipeline's reader (PassageFile, by index from passages.jsonl) on 2 ranks, merged: the bytes a
    one-process run over the in-memory list writes."""
    _, result = t5_dir
    save_passages(passages, tmp_path / "passages.jsonl")
    kwargs = dict(num_queries=2, batch_size=3, max_new_tokens=5, show_progress=False)
    one = tmp_path / "one" / "queries.jsonl"
    generate_queries(result.model_dir, passages, out_path=one, **kwargs)
    two = tmp_path / "two" / "queries.jsonl"
    file = PassageFile(tmp_path / "passages.jsonl")
    for rank in range(2):
        generate_queries(result.model_dir, file, rank=rank, world_size=2, out_path=two, passages_key="k", **kwargs)
    merge_query_shards(two, file, 2)
    assert two.read_bytes() == one.read_bytes()


def test_half_precision_on_cuda_only(monkeypatch):
    import torch

    assert generation_dtype("cpu") == "fp32"
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    assert generation_dtype("cuda:1") == "bf16"
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)
    assert generation_dtype("cuda") == "fp16"  # a V100
