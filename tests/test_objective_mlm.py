"""Plain MLM: Eq. (4) of the query-as-context paper, recomputed."""

from __future__ import annotations

import math

import pytest
import torch
from objective_fixtures import single_thread, toy_config, toy_pairs, toy_tokenizer

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
    obj = build_objective("mlm", toy_config(), **params)
    batch = obj.collate(toy_pairs(n), tokenizer, 32, torch.Generator().manual_seed(42))
    return obj, batch


def test_loss_is_eq4_mean_cross_entropy_at_masked_positions(tokenizer):
    obj, batch = make(tokenizer)
    losses, extras = obj.compute(batch)
    with torch.no_grad():
        h = obj.encoder()(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden_state
        logits = obj.lm.cls(h)  # phi(h_i^L) at every position
    terms = []
    for row, col in (batch["labels"] != -100).nonzero().tolist():
        scores = logits[row, col].double()
        log_z = math.log(sum(math.exp(float(s)) for s in scores))
        terms.append(log_z - float(scores[batch["labels"][row, col]]))  # CE(phi(h_i), x_i)
    assert len(terms) == extras["targets"].numel() > 0
    assert losses["mlm"].item() == pytest.approx(sum(terms) / len(terms), rel=1e-5)
    assert losses["loss"].item() == losses["mlm"].item()


def test_only_the_anchor_is_used(tokenizer):
    obj, batch = make(tokenizer)
    other = obj.collate([(a, "") for a, _ in toy_pairs(6)], tokenizer, 32, torch.Generator().manual_seed(42))
    assert all(torch.equal(batch[k], other[k]) for k in batch)


def test_mask_ratio_is_configurable(tokenizer):
    _, batch = make(tokenizer, mask_ratio=0.4)
    words = (batch["attention_mask"].sum(1) - 2).double()
    assert torch.equal((batch["labels"] != -100).sum(1), torch.floor(words * 0.4 + 0.5).clamp(min=1).long())


def test_optimisation_reduces_the_loss(tokenizer):
    obj, batch = make(tokenizer)
    opt = torch.optim.Adam(obj.parameters(), lr=3e-3)
    first = obj(batch)["loss"].item()
    for _ in range(8):
        opt.zero_grad()
        obj(batch)["loss"].backward()
        opt.step()
    assert obj(batch)["loss"].item() < first - 0.5
