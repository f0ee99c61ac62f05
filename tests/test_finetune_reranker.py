"""The cross-encoder teacher: training from random init, scoring, teacher scores for stage 3."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest
import torch

from harness.core.errors import HarnessError
from harness.finetune.reranker import (
    RerankerTrainConfig,
    load_cross_encoder,
    score_candidates,
    score_pairs,
    train_cross_encoder,
)
from harness.spec.stage_settings import RerankerTrainSettings

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_finetune_splade import ATTRS, FRUITS, VOCAB, make_tiny_mlm


def _tiny_config() -> dict:
    return dict(
        vocab_size=len(VOCAB),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )


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


def test_cross_encoder_trains_from_random_init_and_scores(tmp_path, one_thread):
    tok_dir = make_tiny_mlm(tmp_path / "tok")  # only its tokenizer is used
    examples, passages = sweet_data()
    settings = RerankerTrainSettings(
        queries_per_device=4, passages_per_query=4, lr=5e-3, epochs=4, warmup_ratio=0.0, max_length=24, progress=False
    )
    cfg = RerankerTrainConfig(**settings.trainer_kwargs())
    stats = train_cross_encoder(_tiny_config(), examples, cfg, tmp_path / "rk", passages=passages, tokenizer=tok_dir)
    assert stats["init"] == "random" and stats["steps"] == 16
    assert stats["epoch_losses"][-1] < 0.8 * stats["epoch_losses"][0]
    assert (
        train_cross_encoder(_tiny_config(), examples, cfg, tmp_path / "rk", passages=passages, tokenizer=tok_dir)[
            "cached"
        ]
        is True
    )

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


def test_bi_encoder_teacher_scores_are_scaled_similarities_and_rank_the_relevant_passage():
    """The mini profile's teacher: MiniLM's scale x cosine, recomputed here, and a real teacher
    (it puts the passage that answers the query above unrelated ones)."""
    import numpy as np

    from harness.finetune.reranker import score_candidates_bi_encoder
    from harness.retrieval.encoder import load_zero_shot_encoder
    from harness.stages.checkpoints import resolve_checkpoint

    path = resolve_checkpoint("all-minilm-l6-v2")
    queries = {"q1": "does vitamin d reduce the risk of bone fractures", "q2": "what do honey bees eat"}
    passages = {
        "p1": {"title": "Vitamin D", "text": "Vitamin D supplements lower hip fracture risk in the elderly."},
        "p2": {"title": "", "text": "Bees feed on nectar and pollen collected from flowers."},
        "p3": {"title": "Trains", "text": "The railway timetable changes every December."},
    }
    cands = {"q1": ["p1", "p2", "p3"], "q2": ["p3", "p2", "p1", "p2"]}
    scores = score_candidates_bi_encoder(path, queries, cands, passages, scale=20.0, passage_max_length=64)
    assert set(scores["q1"]) == {"p1", "p2", "p3"} and set(scores["q2"]) == {"p1", "p2", "p3"}
    assert max(scores["q1"], key=scores["q1"].get) == "p1" and max(scores["q2"], key=scores["q2"].get) == "p2"
    enc = load_zero_shot_encoder(Path(path), passage_max_length=64)
    assert enc.similarity == "cosine"
    q = enc.encode([queries["q1"]], kind="query", show_progress=False)[0]
    d = enc.encode(enc.passage_texts([passages["p3"]]), kind="passage", show_progress=False)[0]
    assert scores["q1"]["p3"] == pytest.approx(20.0 * float(np.dot(q, d)), rel=1e-5)
    with pytest.raises(HarnessError, match="'p9' of query 'q1' is not in passages"):
        score_candidates_bi_encoder(path, queries, {"q1": ["p9"]}, passages, scale=20.0, passage_max_length=64)
