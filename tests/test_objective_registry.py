"""The objective registry and the contract every objective keeps (collate, forward, export)."""

from __future__ import annotations

import pytest
import torch
from objective_fixtures import single_thread, toy_config, toy_pairs, toy_tokenizer
from transformers import BertForMaskedLM, BertModel

from harness.core.errors import HarnessError, UnknownNameError
from harness.pretrain.objectives import build_objective, objective_params, objectives

# Every registered objective keeps the contract: the tests below loop over the registry.
REGISTERED = sorted(objectives())


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    with single_thread():
        yield


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    return toy_tokenizer(tmp_path_factory.mktemp("vocab"))


def test_registry_names_and_accumulation_flags():
    classes = {name: d.cls for name, d in objectives().items()}
    assert set(classes) >= {"mlm", "cocondenser", "cotmae", "cpdae", "lexmae"}  # the papers' objectives
    assert all(cls.name == name for name, cls in classes.items())
    no_accumulation = {n for n, cls in classes.items() if not cls.supports_accumulation}
    assert no_accumulation >= {"cocondenser", "cpdae"}  # contrastive over the whole batch
    assert all(callable(getattr(classes[n], "grad_cache_step", None)) for n in no_accumulation)
    assert classes["cocondenser"].gathers_across_ranks and not classes["cotmae"].gathers_across_ranks
    assert objective_params("cotmae") == {
        "enc_mask_ratio": 0.30,
        "dec_mask_ratio": 0.45,
        "n_head_layers": 2,
        "dec_loss_coef": 1.0,
    }


def test_unknown_names_and_parameters_are_user_errors():
    with pytest.raises(UnknownNameError, match="cotmae"):
        build_objective("cotmea", toy_config())
    with pytest.raises(HarnessError, match="n_head_layers"):
        build_objective("cotmae", toy_config(), n_layers=1)
    with pytest.raises(HarnessError):
        build_objective("mlm", toy_config(), mask_ratio=0.0)


@pytest.mark.parametrize("name", REGISTERED)
def test_collate_is_deterministic_per_seed(tokenizer, name):
    obj = build_objective(name, toy_config())
    pairs = toy_pairs(4)
    a = obj.collate(pairs, tokenizer, 24, torch.Generator().manual_seed(42))
    b = obj.collate(pairs, tokenizer, 24, torch.Generator().manual_seed(42))
    c = obj.collate(pairs, tokenizer, 24, torch.Generator().manual_seed(7))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert any(not torch.equal(a[k], c[k]) for k in a)
    assert all(isinstance(v, torch.Tensor) for v in a.values())
    assert a["input_ids"].shape[1] <= 24


@pytest.mark.parametrize("name", REGISTERED)
def test_forward_returns_loss_and_components(tokenizer, name):
    torch.manual_seed(0)
    obj = build_objective(name, toy_config())
    batch = obj.collate(toy_pairs(4), tokenizer, 24, torch.Generator().manual_seed(42))
    losses = obj(batch)
    assert set(losses) == {"loss", *objectives()[name].losses}
    assert all(v.dim() == 0 and torch.isfinite(v) for v in losses.values())


@pytest.mark.parametrize("name", REGISTERED)
def test_encoder_exports_as_plain_hf_bert(tokenizer, name, tmp_path):
    torch.manual_seed(0)
    obj = build_objective(name, toy_config()).eval()
    encoder = obj.encoder()
    assert type(encoder) is BertModel
    # Heads and decoders are not part of the exported backbone.
    assert sum(p.numel() for p in encoder.parameters()) == sum(
        p.numel() for p in BertModel(obj.config, add_pooling_layer=False).parameters()
    )
    encoder.save_pretrained(tmp_path / "enc")
    loaded = BertModel.from_pretrained(tmp_path / "enc", add_pooling_layer=False).eval()
    enc = tokenizer(["the surf wave on the reef"], return_tensors="pt")
    with torch.no_grad():
        assert torch.allclose(loaded(**enc).last_hidden_state, encoder(**enc).last_hidden_state, atol=1e-6)
    assert isinstance(obj.masked_lm(), BertForMaskedLM) and obj.masked_lm().bert is encoder


def test_tokenizer_larger_than_model_vocabulary_is_a_user_error(tokenizer):
    obj = build_objective("mlm", toy_config(vocab_size=32))
    with pytest.raises(HarnessError, match="vocab_size"):
        obj.collate(toy_pairs(2), tokenizer, 16, torch.Generator().manual_seed(0))
