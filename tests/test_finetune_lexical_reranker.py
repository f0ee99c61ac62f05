"""The cross-encoder teacher: training from random init, scoring, teacher scores for stage 3."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest
import torch

from harness.errors import HarnessError
from harness.finetune.reranker import (
    RerankerTrainConfig,
    load_cross_encoder,
    score_candidates,
    score_pairs,
    train_cross_encoder,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_finetune_lexical import ATTRS, FRUITS, VOCAB, make_tiny_mlm  # noqa: E402


def _tiny_config() -> dict:
    return dict(vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                intermediate_size=64, max_position_embeddings=64, hidden_dropout_prob=0.0,
                attention_probs_dropout_prob=0.0)


def sweet_data() -> tuple[list, dict]:
    """A signal a tiny cross-encoder learns from scratch in a few steps: positives say "sweet"."""
    rng = random.Random(0)
    plain = [a for a in ATTRS if a != "sweet"]
    passages, examples = {}, []
    for i in range(16):
        fruit = FRUITS[i % len(FRUITS)]
        passages[f"p{i}"] = {"title": fruit, "text": "sweet " + " ".join(rng.sample(plain, 2))}
        negs = []
        for j in range(6):
            passages[f"n{i}-{j}"] = {"title": rng.choice(FRUITS), "text": " ".join(rng.sample(plain, 3))}
            negs.append(f"n{i}-{j}")
        examples.append((f"{fruit} {rng.choice(plain)}", [f"p{i}"], negs))
    return examples, passages


@pytest.fixture
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_cross_encoder_trains_from_random_init_and_scores(tmp_path, one_thread):
    tok_dir = make_tiny_mlm(tmp_path / "tok")  # only its tokenizer is used
    examples, passages = sweet_data()
    cfg = RerankerTrainConfig(queries_per_device=4, passages_per_query=4, lr=5e-3, epochs=4, warmup_ratio=0.0,
                              max_length=24, progress=False)
    stats = train_cross_encoder(_tiny_config(), examples, cfg, tmp_path / "rk", passages=passages, tokenizer=tok_dir)
    assert stats["init"] == "random" and stats["steps"] == 16
    assert stats["epoch_losses"][-1] < 0.8 * stats["epoch_losses"][0]
    assert train_cross_encoder(_tiny_config(), examples, cfg, tmp_path / "rk", passages=passages,
                               tokenizer=tok_dir)["cached"] is True

    pairs = [("apple red", "apple sweet pie"), ("apple red", "mango sour seed"), ("lemon", "lemon tree")]
    scores = score_pairs(tmp_path / "rk", pairs, batch_size=2)
    assert len(scores) == 3 and all(isinstance(s, float) for s in scores)
    # Length-sorted batching must not change a pair's score.
    assert score_pairs(tmp_path / "rk", pairs[::-1], batch_size=1) == pytest.approx(scores[::-1], abs=1e-5)

    queries = {str(i): q for i, (q, _, _) in enumerate(examples)}
    cands = {str(i): ex[1] + ex[2] for i, ex in enumerate(examples)}
    teacher = score_candidates(tmp_path / "rk", queries, cands, passages, batch_size=8, show_progress=False)
    assert set(teacher) == set(cands) and all(len(teacher[q]) == 7 for q in teacher)
    # The trained teacher ranks each positive above all of its negatives.
    assert all(teacher[str(i)][ex[1][0]] > max(teacher[str(i)][d] for d in ex[2]) for i, ex in enumerate(examples))


def test_configured_checkpoint_with_two_labels_scores_relevance_log_probability(tmp_path):
    from transformers import BertConfig, BertForSequenceClassification

    tok_dir = make_tiny_mlm(tmp_path / "tok")
    torch.manual_seed(0)
    model = BertForSequenceClassification(BertConfig(**_tiny_config(), num_labels=2))
    model.save_pretrained(tmp_path / "mono")
    for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json"):
        if (tok_dir / name).exists():
            (tmp_path / "mono" / name).write_bytes((tok_dir / name).read_bytes())
    enc = load_cross_encoder(tmp_path / "mono", max_length=16)
    score = enc.score([("apple", "apple pie")])[0]
    assert score < 0  # a log-probability
    # A query longer than max_length is truncated, not an error.
    assert len(enc.score([(" ".join(["apple"] * 40), "apple pie")])) == 1
    with pytest.raises(HarnessError, match="no reranker"):
        load_cross_encoder(tmp_path / "missing")
