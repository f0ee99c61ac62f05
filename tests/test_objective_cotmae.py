"""CoT-MAE: Eq. (4), (8)-(11) of the query-as-context paper, recomputed; gradient paths."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from objective_fixtures import single_thread, toy_config, toy_pairs, toy_tokenizer

from harness.pretrain.models import run_layers
from harness.pretrain.objectives import build_objective


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    with single_thread():
        yield


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    return toy_tokenizer(tmp_path_factory.mktemp("vocab"))


def make(tokenizer, n=6, **params):
    torch.manual_seed(0)
    obj = build_objective("cotmae", toy_config(), **params)
    batch = obj.collate(toy_pairs(n), tokenizer, 32, torch.Generator().manual_seed(42))
    return obj, batch


def test_collate_anchor_to_encoder_context_to_decoder(tokenizer):
    obj, batch = make(tokenizer)
    pairs = toy_pairs(6)
    for row, (anchor, context) in enumerate(pairs):
        for prefix, text in (("", anchor), ("decoder_", context)):
            ids, labels = batch[prefix + "input_ids"][row], batch[prefix + "labels"][row]
            original = ids.where(labels == -100, labels)[batch[prefix + "attention_mask"][row].bool()]
            assert original.tolist() == tokenizer(text)["input_ids"]
    # 30 % of the anchor's words and 45 % of the context's words are masked.
    words = (batch["attention_mask"].sum(1) - 2).double()
    assert torch.equal((batch["labels"] != -100).sum(1), torch.floor(words * 0.30 + 0.5).clamp(min=1).long())
    dec_words = (batch["decoder_attention_mask"].sum(1) - 2).double()
    assert torch.equal(
        (batch["decoder_labels"] != -100).sum(1), torch.floor(dec_words * 0.45 + 0.5).clamp(min=1).long()
    )


@pytest.mark.parametrize("coef", [1.0, 0.5])
def test_total_loss_recomputed_from_eq8_to_eq11(tokenizer, coef):
    obj, batch = make(tokenizer, dec_loss_coef=coef)
    losses, extras = obj.compute(batch)
    with torch.no_grad():
        h = obj.encoder()(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden_state
        l_mlm = F.cross_entropy(obj.lm.cls(h).flatten(0, 1), batch["labels"].flatten(), ignore_index=-100)
        # Eq. (8): d^0 = {h_x, y_1..y_n}; y embedded by the (shared) embedding module.
        y = obj.lm.bert.embeddings(input_ids=batch["decoder_input_ids"])
        d0 = torch.cat([h[:, :1], y[:, 1:]], dim=1)
        dn = run_layers(obj.c_head, obj.config, d0, batch["decoder_attention_mask"])  # Eq. (9)
        logits = obj.lm.cls(dn)
        l_ctx = F.cross_entropy(logits.flatten(0, 1), batch["decoder_labels"].flatten(), ignore_index=-100)
    assert torch.allclose(extras["h_x"], h[:, 0], atol=1e-6)
    assert losses["mlm"].item() == pytest.approx(l_mlm.item(), rel=1e-5)
    assert losses["ctx_mlm"].item() == pytest.approx(l_ctx.item(), rel=1e-5)  # Eq. (10)
    assert losses["loss"].item() == pytest.approx(l_mlm.item() + coef * l_ctx.item(), rel=1e-5)  # Eq. (11)


def test_decoder_loss_reaches_encoder_layers_only_through_h_cls(tokenizer):
    obj, batch = make(tokenizer)
    captured = {}

    def keep(_module, _inputs, output):
        output.last_hidden_state.retain_grad()
        captured["h"] = output.last_hidden_state

    handle = obj.lm.bert.encoder.register_forward_hook(keep)
    losses = obj(batch)
    handle.remove()
    losses["ctx_mlm"].backward()
    grad = captured["h"].grad
    assert grad[:, 1:].abs().max().item() == 0.0  # no path from the decoder to x's tokens
    assert grad[:, 0].abs().min().item() > 0.0  # h_x carries the context signal
    encoder_layers = [p for p in obj.lm.bert.encoder.parameters()]
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in encoder_layers)

    # Cutting h_x removes every decoder gradient from the encoder's Transformer layers; the
    # embedding table and MLM head are shared with the decoder (official code) and still learn.
    obj.zero_grad(set_to_none=True)
    h = obj.encoder()(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden_state
    decoded = obj.decode(h[:, 0].detach(), batch)
    F.cross_entropy(obj.lm.cls(decoded).flatten(0, 1), batch["decoder_labels"].flatten(), ignore_index=-100).backward()
    assert all(p.grad is None for p in obj.lm.bert.encoder.parameters())
    assert obj.lm.bert.embeddings.word_embeddings.weight.grad.abs().sum() > 0


def test_head_layers_are_configurable_and_from_scratch(tokenizer):
    obj1, _ = make(tokenizer, n_head_layers=1)
    obj2, _ = make(tokenizer)
    assert len(obj1.c_head) == 1 and len(obj2.c_head) == 2
    encoder_names = {n for n, _ in obj2.encoder().named_parameters()}
    assert not any(n.startswith("c_head") for n in encoder_names)
    assert type(obj2).supports_accumulation


def test_optimisation_reduces_the_loss(tokenizer):
    obj, batch = make(tokenizer)
    opt = torch.optim.Adam(obj.parameters(), lr=3e-3)
    first = obj(batch)["loss"].item()
    for _ in range(8):
        opt.zero_grad()
        obj(batch)["loss"].backward()
        opt.step()
    assert obj(batch)["loss"].item() < first - 0.5
