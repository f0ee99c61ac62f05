"""LexMAE: Eq. (1)-(7) of Shen et al. (ICLR 2023), recomputed; the stop-gradient of Eq. (4)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from objective_fixtures import single_thread, toy_config, toy_pairs, toy_tokenizer

from harness.core.errors import HarnessError
from harness.pretrain.models import run_layers
from harness.pretrain.objectives import build_objective, lexmae
from harness.pretrain.objectives.lexmae import cbow_bottleneck, lexicon_importance


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    with single_thread():
        yield


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    return toy_tokenizer(tmp_path_factory.mktemp("vocab"))


def make(tokenizer, n=6, **params):
    torch.manual_seed(0)
    obj = build_objective("lexmae", toy_config(), **params)
    batch = obj.collate(toy_pairs(n), tokenizer, 32, torch.Generator().manual_seed(42))
    return obj, batch


def test_lexicon_importance_eq3_on_hand_built_logits():
    # 1 text, 4 positions ([CLS], w1, w2, [PAD]) over |V| = 3; [CLS] and [PAD] hold the maxima
    # that must NOT be pooled.
    logits = torch.tensor([[[9.0, 9.0, 9.0], [1.0, 0.0, 2.0], [0.5, 3.0, -1.0], [7.0, 7.0, 7.0]]])
    pool_mask = torch.tensor([[0, 1, 1, 0]])
    pooled = [1.0, 3.0, 2.0]  # max over w1, w2
    expected = [math.exp(v) / sum(math.exp(u) for u in pooled) for v in pooled]
    a = lexicon_importance(logits, pool_mask)
    assert a[0].tolist() == pytest.approx(expected, rel=1e-6)
    assert a.sum().item() == pytest.approx(1.0)
    # A text with no text position (empty passage) pools everything instead of NaN.
    assert torch.isfinite(lexicon_importance(logits, torch.zeros(1, 4))).all()


def test_cbow_bottleneck_eq4_stops_the_gradient_into_w_we():
    torch.manual_seed(0)
    w = torch.nn.Parameter(torch.randn(5, 3))  # HF layout [|V|, d]
    a = torch.softmax(torch.randn(2, 5), -1).requires_grad_(True)
    b = cbow_bottleneck(a, w)
    assert torch.allclose(b, a @ w, atol=1e-7)  # b = W_we a (Eq. (4), column convention)
    b.pow(2).sum().backward()
    assert w.grad is None
    assert a.grad is not None and a.grad.abs().sum() > 0


def test_collate_masks_30_then_50_percent(tokenizer):
    obj, batch = make(tokenizer)
    words = batch["pool_mask"].sum(1).double()
    enc = batch["labels"] != -100
    dec = batch["decoder_labels"] != -100
    assert torch.equal(enc.sum(1), torch.floor(words * 0.3 + 0.5).clamp(min=1).long())
    assert torch.equal(dec.sum(1), torch.floor(words * 0.5 + 0.5).clamp(min=1).long())
    assert (dec | ~enc).all()  # M_enc is a subset of M_dec
    # x_tilde = x_bar further masked: identical outside the extra positions.
    assert torch.equal(batch["decoder_input_ids"][~dec], batch["input_ids"][~dec])
    assert torch.equal(batch["decoder_input_ids"][enc], batch["input_ids"][enc])
    assert torch.equal(batch["labels"][enc], batch["decoder_labels"][enc])
    # pool mask: text positions only ([CLS], [SEP], padding excluded).
    ids = batch["input_ids"]
    special = torch.isin(ids, torch.tensor([tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id]))
    assert torch.equal(batch["pool_mask"].bool(), ~special)
    with pytest.raises(HarnessError):
        build_objective("lexmae", toy_config(), enc_mask_ratio=0.5, dec_mask_ratio=0.3)


def test_total_loss_recomputed_from_eq1_to_eq7(tokenizer):
    obj, batch = make(tokenizer)
    losses, extras = obj.compute(batch)
    with torch.no_grad():
        h = obj.encoder()(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden_state
        s_enc = obj.lm.cls(h)  # Eq. (1)
        l_elm = F.cross_entropy(s_enc.flatten(0, 1), batch["labels"].flatten(), ignore_index=-100)  # Eq. (2)
        a = []
        for row in range(s_enc.shape[0]):
            text = batch["pool_mask"][row].bool()
            a.append(torch.softmax(s_enc[row][text].max(dim=0).values, dim=-1))  # Eq. (3)
        a = torch.stack(a)
        b = a @ obj.lm.bert.embeddings.word_embeddings.weight  # Eq. (4)
        emb = obj.lm.bert.embeddings(input_ids=batch["decoder_input_ids"])
        d0 = torch.cat([b.unsqueeze(1), emb[:, 1:]], 1)  # b replaces [CLS]
        d = run_layers(obj.decoder_layers, obj.config, d0, batch["attention_mask"])
        s_dec = obj.decoder_head(d)  # Eq. (5)
        l_dlm = F.cross_entropy(s_dec.flatten(0, 1), batch["decoder_labels"].flatten(), ignore_index=-100)  # Eq. (6)
    assert torch.allclose(extras["a"], a, atol=1e-6)
    assert torch.allclose(extras["b"], b, atol=1e-6)
    assert losses["mlm"].item() == pytest.approx(l_elm.item(), rel=1e-5)
    assert losses["dec_mlm"].item() == pytest.approx(l_dlm.item(), rel=1e-5)
    assert losses["loss"].item() == pytest.approx(l_elm.item() + l_dlm.item(), rel=1e-5)  # Eq. (7)


def test_word_embeddings_get_no_gradient_through_the_bottleneck(tokenizer, monkeypatch):
    """The only W_we gradient missing is the bottleneck's: grad(no stop) - grad(stop) = a^T dL/db."""
    obj, batch = make(tokenizer)
    w = obj.lm.bert.embeddings.word_embeddings.weight
    # Tied everywhere else: embeddings, encoder head, decoder head share W_we.
    assert obj.lm.cls.predictions.decoder.weight is w and obj.decoder_head.predictions.decoder.weight is w

    losses, extras = obj.compute(batch)
    extras["b"].retain_grad()
    losses["dec_mlm"].backward()
    with_stop = w.grad.clone()
    d_b, a = extras["b"].grad, extras["a"].detach()

    obj.zero_grad(set_to_none=True)
    monkeypatch.setattr(lexmae, "cbow_bottleneck", lambda a_, w_: a_ @ w_)
    obj(batch)["dec_mlm"].backward()
    without_stop = w.grad.clone()
    assert torch.allclose(without_stop - with_stop, a.T @ d_b, atol=1e-6)
    assert (a.T @ d_b).abs().max() > 1e-6  # the path exists, so the check can fail


def test_optimisation_reduces_the_loss(tokenizer):
    obj, batch = make(tokenizer)
    opt = torch.optim.Adam(obj.parameters(), lr=3e-3)
    first = obj(batch)["loss"].item()
    for _ in range(8):
        opt.zero_grad()
        obj(batch)["loss"].backward()
        opt.step()
    assert obj(batch)["loss"].item() < first - 0.5
