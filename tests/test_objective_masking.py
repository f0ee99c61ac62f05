"""BERT masking (harness.pretrain.masking) and the shared model pieces (harness.pretrain.models)."""

from __future__ import annotations

import pytest
import torch
from objective_fixtures import single_thread, toy_config, toy_tokenizer
from torch import nn

from harness.core.errors import HarnessError
from harness.pretrain import masking
from harness.pretrain.models import (
    bert_config_from_dict,
    masked_lm_loss,
    new_masked_lm,
    tied_mlm_head,
)

MASK_ID = 4
SPECIAL = {0, 1, 2, 3, 4}


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    with single_thread():
        yield


def synthetic(rows: int = 400, length: int = 64, seed: int = 0):
    """[CLS] w ... w [SEP] [PAD]...: random lengths, ids >= 5 for words."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, 1000, (rows, length), generator=g)
    lengths = torch.randint(4, length + 1, (rows,), generator=g)
    pos = torch.arange(length).unsqueeze(0)
    ids[:, 0] = 2
    ids[pos == (lengths - 1).unsqueeze(1)] = 3
    ids[pos >= lengths.unsqueeze(1)] = 0
    special = (pos == 0) | (pos >= (lengths - 1).unsqueeze(1))
    return ids, special


RANDOM_IDS = torch.arange(5, 1000)


def test_specials_never_masked_and_labels_hold_originals():
    ids, special = synthetic()
    out, labels = masking.mask_tokens(ids, special, 0.3, torch.Generator().manual_seed(1), MASK_ID, RANDOM_IDS)
    selected = labels != -100
    assert not (selected & special).any()
    assert torch.equal(out[special], ids[special])
    assert torch.equal(labels[selected], ids[selected])
    assert torch.equal(out[~selected], ids[~selected])  # unselected positions untouched


@pytest.mark.parametrize("ratio", [0.15, 0.3, 0.45])
def test_exact_ratio_per_sequence(ratio):
    ids, special = synthetic()
    _, labels = masking.mask_tokens(ids, special, ratio, torch.Generator().manual_seed(2), MASK_ID, RANDOM_IDS)
    n = (~special).sum(1).double()
    expected = torch.floor(n * ratio + 0.5).clamp(min=1).long()
    assert torch.equal((labels != -100).sum(1), expected)


def test_80_10_10_statistics():
    ids, special = synthetic(rows=600, length=64)
    out, labels = masking.mask_tokens(ids, special, 0.15, torch.Generator().manual_seed(3), MASK_ID, RANDOM_IDS)
    selected = labels != -100
    total = int(selected.sum())
    assert total > 2000
    as_mask = (out[selected] == MASK_ID).float().mean().item()
    unchanged = (out[selected] == ids[selected]).float().mean().item()
    replaced = ((out[selected] != MASK_ID) & (out[selected] != ids[selected])).float().mean().item()
    assert as_mask == pytest.approx(0.8, abs=0.03)
    assert unchanged == pytest.approx(0.1, abs=0.02)  # + ~1/995 random draws of the same id
    assert replaced == pytest.approx(0.1, abs=0.02)
    assert not any(int(t) in SPECIAL - {MASK_ID} for t in out[selected])


def test_deterministic_per_seed():
    ids, special = synthetic(rows=20)
    first = masking.mask_tokens(ids, special, 0.3, torch.Generator().manual_seed(42), MASK_ID, RANDOM_IDS)
    again = masking.mask_tokens(ids, special, 0.3, torch.Generator().manual_seed(42), MASK_ID, RANDOM_IDS)
    other = masking.mask_tokens(ids, special, 0.3, torch.Generator().manual_seed(43), MASK_ID, RANDOM_IDS)
    assert all(torch.equal(a, b) for a, b in zip(first, again))
    assert not torch.equal(first[1], other[1])


def test_choose_positions_extends_an_existing_selection():
    ids, special = synthetic(rows=50)
    g = torch.Generator().manual_seed(5)
    first = masking.choose_positions(~special, 0.3, g)
    second = masking.choose_positions(~special, 0.5, g, include=first)
    assert (second | ~first).all()  # first is a subset of second
    n = (~special).sum(1).double()
    assert torch.equal(second.sum(1), torch.floor(n * 0.5 + 0.5).clamp(min=1).long())
    assert not (second & special).any()


def test_bad_ratio_is_a_user_error():
    ids, special = synthetic(rows=2)
    with pytest.raises(HarnessError):
        masking.mask_tokens(ids, special, 1.5, torch.Generator(), MASK_ID, RANDOM_IDS)


def test_tokenize_marks_cls_sep_and_padding(tmp_path):
    tok = toy_tokenizer(tmp_path)
    enc = masking.tokenize(tok, ["the surf wave", "a reef"], max_length=16)
    ids, special = enc["input_ids"], enc["special_mask"]
    assert ids[0, 0] == tok.cls_token_id and ids[1, -1] == tok.pad_token_id
    assert torch.equal(special, torch.isin(ids, torch.tensor([tok.cls_token_id, tok.sep_token_id, tok.pad_token_id])))
    assert not torch.isin(masking.random_token_ids(tok), torch.tensor(tok.all_special_ids)).any()
    long = masking.tokenize(tok, ["the " * 50], max_length=10)
    assert long["input_ids"].shape[1] == 10


# --- models.py -------------------------------------------------------------------------


class _Recorder(nn.Module):
    def __init__(self, head):
        super().__init__()
        self.head, self.rows = head, []

    def forward(self, x):
        self.rows.append(x.shape[0])
        return self.head(x)


def test_mlm_head_projects_only_masked_positions_and_matches_full_logits():
    torch.manual_seed(0)
    model = new_masked_lm(toy_config())
    hidden = torch.randn(3, 7, 32)
    labels = torch.full((3, 7), -100)
    labels[0, 2], labels[1, 5], labels[2, 1] = 10, 11, 12
    recorder = _Recorder(model.cls)
    loss, logits, targets = masked_lm_loss(recorder, hidden, labels)
    assert recorder.rows == [3] and logits.shape == (3, model.config.vocab_size)
    full = model.cls(hidden)  # every position, as BERT does it
    reference = nn.functional.cross_entropy(full.view(-1, full.shape[-1]), labels.view(-1), ignore_index=-100)
    assert torch.allclose(loss, reference, atol=1e-6)
    empty, _, _ = masked_lm_loss(model.cls, hidden, torch.full((3, 7), -100))
    assert empty.item() == 0.0 and empty.requires_grad


def test_heads_are_tied_to_word_embeddings():
    model = new_masked_lm(toy_config(tie_word_embeddings=False))
    embeddings = model.bert.embeddings.word_embeddings.weight
    assert model.cls.predictions.decoder.weight is embeddings
    head = tied_mlm_head(model)
    assert head.predictions.decoder.weight is embeddings
    assert head.predictions.decoder.bias is head.predictions.bias
    assert head.predictions.transform.dense.weight is not model.cls.predictions.transform.dense.weight


def test_bert_config_from_dict_rejects_typos():
    config = bert_config_from_dict({"num_hidden_layers": 3})
    assert config.num_hidden_layers == 3 and config.hidden_size == 128
    with pytest.raises(HarnessError, match="num_layers"):
        bert_config_from_dict({"num_layers": 3})
    with pytest.raises(HarnessError):
        bert_config_from_dict(hidden_size=100, num_attention_heads=3)
