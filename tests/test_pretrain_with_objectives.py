"""The loop with the real objectives (harness.pretrain.objectives), not just the test toys:
MLM resumes bit-identically and exports a loadable encoder; coCondenser takes the grad-cache path."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from transformers import AutoModel

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_pretrain_toy import examples_fn_for, make_tokenizer, one_thread, params_of, tiny_config  # noqa: F401 - after the sys.path line above; one_thread is an autouse fixture pytest finds by import
from train_config import tiny_train_config

from harness.pretrain.export import export_encoder
from harness.pretrain.objectives import build_objective
from harness.pretrain.trainer import TrainConfig, train


def cfg(out: Path, **overrides) -> TrainConfig:
    return tiny_train_config(out, **{"checkpoint_every": 2, **overrides})


def _objective(name: str, vocab_size: int, seed: int = 0, dropout: float = 0.1, dtype=torch.float32, **params):
    torch.manual_seed(seed)
    return build_objective(name, tiny_config(vocab_size, dropout=dropout), **params).to(dtype)


@pytest.fixture
def tok(tmp_path):
    return make_tokenizer(tmp_path / "tok")


def test_mlm_resumes_bit_identical_and_exports(tok, tmp_path):
    ref = _objective("mlm", tok.vocab_size)
    ref_res = train(ref, examples_fn_for(16), tok, cfg(tmp_path / "ref"))
    assert {"loss", "mlm", "lr"} <= set(ref_res.metrics_history[0])

    out = tmp_path / "run"
    train(_objective("mlm", tok.vocab_size), examples_fn_for(16), tok, cfg(out, stop_after=2))
    resumed = _objective("mlm", tok.vocab_size, seed=3)
    res = train(resumed, examples_fn_for(16), tok, cfg(out))
    assert res.resumed_from == 2 and res.loss_history == ref_res.loss_history
    assert all(torch.equal(v, params_of(ref)[k]) for k, v in params_of(resumed).items())

    exported = export_encoder(resumed, tok, tmp_path / "encoder")
    loaded = AutoModel.from_pretrained(exported).eval()
    encoder = resumed.encoder().eval()
    enc = tok(["the dense passage", "a query"], padding=True, return_tensors="pt")
    with torch.no_grad():
        a = loaded(**enc).last_hidden_state[:, 0]
        b = encoder(**enc).last_hidden_state[:, 0]
    torch.testing.assert_close(a, b, rtol=0, atol=1e-6)


def test_cocondenser_goes_through_grad_cache(tok, tmp_path):
    obj = _objective("cocondenser", tok.vocab_size)
    assert obj.supports_accumulation is False
    before = params_of(obj)
    res = train(obj, examples_fn_for(16), tok, cfg(tmp_path / "run", steps=2, per_device_batch=2))
    assert res.plan["mode"] == "grad_cache" and res.plan["grad_cache_chunk"] == 2
    assert res.plan["contrastive_batch"] == 8
    assert all(torch.isfinite(torch.tensor(res.loss_history)))
    assert len(res.metrics_history[-1]) > 2  # loss components reach the logger
    assert any(not torch.equal(v, params_of(obj)[k]) for k, v in before.items())


@pytest.mark.parametrize("name", ["cocondenser", "cpdae"])
def test_one_chunk_contrastive_batch_takes_the_plain_step_with_the_same_result(name, tok, tmp_path):
    # Without dropout: chunking draws different dropout masks, the only difference between the two.
    # float64: the two paths sum the same terms in another order; Adam would turn float32
    # rounding in near-zero gradients into lr-sized steps on some CPUs.
    plain_obj = _objective(name, tok.vocab_size, dropout=0.0, dtype=torch.float64)
    cached_obj = _objective(name, tok.vocab_size, dropout=0.0, dtype=torch.float64)
    plain = train(plain_obj, examples_fn_for(16), tok, cfg(tmp_path / "plain", steps=2, per_device_batch=8))
    cached = train(
        cached_obj, examples_fn_for(16), tok, cfg(tmp_path / "cached", steps=2, per_device_batch=8, grad_cache_chunk=4)
    )
    assert plain.plan["mode"] == "accumulation" and cached.plan["mode"] == "grad_cache"
    assert plain.loss_history == pytest.approx(cached.loss_history, rel=1e-12)
    for k, v in params_of(plain_obj).items():
        torch.testing.assert_close(v, params_of(cached_obj)[k], rtol=1e-9, atol=1e-11)
