"""CPDAE's pairwise fine-tuning loss (harness/finetune/pairwise.py): by hand, its gradient's sign, its
pairs (no in-batch negatives), and a few steps through the dense trainer on the fruit fixtures."""

from __future__ import annotations

import math

import pytest
import torch

from harness.core.errors import HarnessError
from harness.finetune.dense import DenseTrainConfig, train_dense
from harness.finetune.pairwise import pairwise_loss
from harness.spec.stage_settings import StageSettings
from tests.test_finetune_dense import fruit_data, make_tiny_bert


def test_pairwise_loss_matches_hand_computation():
    # query 0: s+ = 2, negatives 1 and 0; query 1: s+ = q1 . [0, 1] = -1, negatives 0.5 and 3
    q = torch.tensor([[1.0, 0.0], [0.5, -1.0]])
    p = torch.tensor([[2.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 1.0], [1.0, 0.0], [6.0, 0.0]])
    pairs = [(2.0, 1.0), (2.0, 0.0), (-1.0, 0.5), (-1.0, 3.0)]
    expected = sum(math.log(1 + math.exp(neg - pos)) for pos, neg in pairs) / len(pairs)
    assert pairwise_loss(q, p, passages_per_query=3).item() == pytest.approx(expected, rel=1e-6)
    # one pair written out: log(1 + e^(1 - 2)) = 0.313262
    assert pairwise_loss(q[:1], p[:2], 2).item() == pytest.approx(0.3132617, rel=1e-6)


def test_gradient_raises_the_positive_score_and_lowers_the_negative():
    q = torch.tensor([[1.0, 0.5]])
    p = torch.tensor([[0.2, 0.1], [0.4, -0.3]], requires_grad=True)
    pairwise_loss(q, p, 2).backward()
    # a gradient step (-grad) moves the positive towards the query and the negative away from it
    assert torch.dot(-p.grad[0], q[0]).item() > 0
    assert torch.dot(-p.grad[1], q[0]).item() < 0
    scores = torch.tensor([[0.3, 1.2]], requires_grad=True)  # [s+, s-]: dl/ds+ = -sigmoid(s- - s+)
    torch.nn.functional.softplus(scores[:, 1:] - scores[:, :1]).mean().backward()
    assert scores.grad[0, 0].item() == pytest.approx(-torch.sigmoid(torch.tensor(0.9)).item(), rel=1e-6)


def test_other_queries_passages_do_not_enter_a_pair():
    """InfoNCE reads every passage of the batch; a pair reads its own two only."""
    q = torch.randn(2, 4, generator=torch.Generator().manual_seed(1))
    p = torch.randn(4, 4, generator=torch.Generator().manual_seed(2))
    p2 = p.clone()
    p2[3] += 5 * q[0]  # query 1's negative, close to query 0: moves only query 1's pair
    base, moved = pairwise_loss(q, p, 2), pairwise_loss(q, p2, 2)
    own = torch.nn.functional.softplus(q[1] @ p2[3] - q[1] @ p2[2]) / 2
    assert moved.item() == pytest.approx((torch.nn.functional.softplus(q[0] @ p[1] - q[0] @ p[0]) / 2 + own).item())
    assert moved.item() != base.item()
    with pytest.raises(HarnessError, match="passage vectors"):
        pairwise_loss(q, p[:3], 2)
    with pytest.raises(HarnessError, match="needs a negative"):
        pairwise_loss(q, p[:2], 1)


def test_the_loss_is_a_stage_setting_and_the_trainer_refuses_another():
    stage = StageSettings(lr=1e-3, global_queries=4, passages_per_query=3, epochs=1, loss="pairwise")
    assert stage.trainer_kwargs(1)["loss"] == "pairwise" and stage.key()["loss"] == "pairwise"
    # at its default the key is what it was before the setting existed (cached stages stay valid)
    assert "loss" not in StageSettings(lr=1e-3, global_queries=4, passages_per_query=3, epochs=1).key()
    config = DenseTrainConfig(**stage.trainer_kwargs(1))
    assert config.identity()["loss"] == "pairwise"
    assert "loss" not in DenseTrainConfig(**{**stage.trainer_kwargs(1), "loss": "infonce"}).identity()
    with pytest.raises(HarnessError, match="loss must be one of infonce, pairwise"):
        DenseTrainConfig(**{**stage.trainer_kwargs(1), "loss": "hinge"})


def test_a_few_pairwise_steps_through_the_trainer_lower_the_loss(tmp_path, one_thread):
    init = make_tiny_bert(tmp_path / "init", dropout=0.0)
    examples, passages = fruit_data()  # 30 queries, 10 negatives each: 7 steps of 4 queries an epoch
    stage = StageSettings(lr=2e-3, global_queries=4, passages_per_query=8, epochs=3, loss="pairwise")
    config = DenseTrainConfig(**{**stage.trainer_kwargs(1), "progress": False})
    stats = train_dense(init, examples, config, tmp_path / "out", passages=passages)
    assert stats["steps"] == 3 * 7 and stats["config"]["loss"] == "pairwise"
    assert any("pairwise loss: each query is scored against 7 pairs" in line for line in stats["notes"])
    # a random encoder scores positive and negatives alike: log(1 + e^0) = ln 2 per pair
    assert stats["epoch_losses"][0] == pytest.approx(math.log(2), abs=0.1)
    assert stats["epoch_losses"][-1] < stats["epoch_losses"][0] - 0.1
    infonce = train_dense(
        init,
        examples,
        DenseTrainConfig(**{**config.to_dict(), "loss": "infonce", "epochs": 1}),
        tmp_path / "n",
        passages=passages,
    )
    assert infonce["fingerprint"] != stats["fingerprint"]  # another loss is another model
