"""Encoder export: a plain HF BERT folder that AutoModel/AutoTokenizer load, heads dropped."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModel, AutoTokenizer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_pretrain_toy import build, examples_fn_for, make_tokenizer, one_thread  # noqa: F401 - after the sys.path line above; one_thread is an autouse fixture pytest finds by import

from harness.core.errors import HarnessError
from harness.pretrain.export import export_encoder
from harness.pretrain.trainer import TrainConfig, train


def _cls(model, tokenizer, texts):
    model.eval()
    enc = tokenizer(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        return model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"]).last_hidden_state[:, 0]


def test_export_round_trips_through_automodel(tmp_path):
    tok = make_tokenizer(tmp_path / "tok")
    obj = build("toy", tok.vocab_size)
    cfg = TrainConfig(
        steps=2,
        global_batch=4,
        per_device_batch=4,
        lr=1e-3,
        warmup_ratio=0.1,
        weight_decay=0.01,
        max_length=32,
        grad_clip=None,
        grad_cache_chunk=None,
        precision="fp32",
        log_every=10,
        checkpoint_every=0,
        progress=False,
        output_dir=tmp_path / "run",
    )
    train(obj, examples_fn_for(8), tok, cfg)  # export trained (not just initial) weights

    out = export_encoder(obj, tok, tmp_path / "encoder", metadata={"method": "toy", "step": 2})
    names = {p.name for p in out.iterdir()}
    assert {"config.json", "model.safetensors", "harness_export.json"} <= names
    assert "tokenizer.json" in names or "vocab.txt" in names
    assert json.loads((out / "harness_export.json").read_text()) == {"method": "toy", "step": 2}
    assert not any(k.startswith("head") for k in load_file(out / "model.safetensors"))  # MLM head dropped

    loaded = AutoModel.from_pretrained(out)
    loaded_tok = AutoTokenizer.from_pretrained(out)
    assert type(loaded).__name__ == "BertModel"
    texts = ["dense retrieval with a masked encoder", "the query and the passage"]
    assert loaded_tok(texts)["input_ids"] == tok(texts)["input_ids"]
    torch.testing.assert_close(_cls(loaded, loaded_tok, texts), _cls(obj.encoder(), tok, texts), rtol=0, atol=1e-6)


def test_export_replaces_an_existing_folder(tmp_path):
    tok = make_tokenizer(tmp_path / "tok")
    out = tmp_path / "encoder"
    out.mkdir()
    (out / "stale.bin").write_text("old")
    export_encoder(build("toy", tok.vocab_size), tok, out)
    assert not (out / "stale.bin").exists() and (out / "model.safetensors").is_file()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".encoder")]  # no tmp leftovers


def test_export_needs_an_encoder(tmp_path):
    tok = make_tokenizer(tmp_path / "tok")
    with pytest.raises(HarnessError, match="no encoder"):
        export_encoder(torch.nn.Linear(2, 2), tok, tmp_path / "encoder")
