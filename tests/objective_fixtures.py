"""Tiny, Hub-free fixtures for objective tests (and the bench scripts' toy tokenizer): a
handwritten WordPiece vocabulary, a 2-layer BERT config and toy (anchor, context) pairs.

Note for transformers 5: ``BertTokenizerFast(vocab_file=...)`` silently ignores the file and
builds a 5-token vocabulary; pass ``vocab=<path>`` (or ``from_pretrained(<folder>)``).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch
from transformers import BertConfig, BertTokenizerFast

from harness.pretrain.models import bert_config_from_dict

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = (
    "the a of and to in is was for on with as by at from that this it are be "
    "surf wave reef board island pine village coral tide shore "
    "river bank money loan rate city bridge train station ticket "
    "protein cell gene virus vaccine dose trial patient study result "
    "what how why when where who does can "
).split()
PIECES = ["##s", "##ed", "##ing", "##er", "##ly"]


def toy_tokenizer(directory: str | Path) -> BertTokenizerFast:
    """A WordPiece tokenizer over ``WORDS`` written to ``directory/vocab.txt``."""
    path = Path(directory) / "vocab.txt"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(SPECIAL + WORDS + PIECES) + "\n", encoding="utf-8")
    return BertTokenizerFast(vocab=str(path))


def toy_config(vocab_size: int = 72, **overrides) -> BertConfig:
    """2 layers, hidden 32, no dropout (so recomputations match exactly)."""
    values = {
        "vocab_size": vocab_size,
        "hidden_size": 32,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "intermediate_size": 64,
        "max_position_embeddings": 64,
        "hidden_dropout_prob": 0.0,
        "attention_probs_dropout_prob": 0.0,
    }
    return bert_config_from_dict({**values, **overrides})


def toy_pairs(n: int, seed: int = 42, length: int = 12) -> list[tuple[str, str]]:
    """``n`` (passage, query-like context) pairs of random vocabulary words."""
    rng = random.Random(seed)
    content = WORDS[:-8]
    questions = WORDS[-8:]
    pairs = []
    for _ in range(n):
        passage = " ".join(rng.choice(content) for _ in range(rng.randint(length // 2, length)))
        query = " ".join([rng.choice(questions)] + rng.sample(passage.split(), 3))
        pairs.append((passage, query))
    return pairs


@contextmanager
def single_thread() -> Iterator[None]:
    """Run tiny models on one intra-op thread: on a busy 2-core machine, 2 threads made a
    12 x 14-token step ~7x slower (thread hand-off dominates such small tensors)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)
