"""Toy objectives + tiny BERT fixtures shared by the tests/test_pretrain_*.py files.

The toys follow the objectives' contract (forward -> dict with "loss", encoder(), collate(),
supports_accumulation, grad_cache_step) so the trainer is tested independently of the real
objectives. Other test files import this module by path-independent name
(``sys.path`` gets this folder), and subprocess workers do the same.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from transformers import BertConfig, BertModel, BertTokenizer

TESTS_DIR = Path(__file__).resolve().parent
PROJECT_ROOT = TESTS_DIR.parent

WORDS = (
    "the a of and to in is for on with as by at from that this it be are was were has have had not but or "
    "an which their its can more most other some such into than then there these they we our one two three "
    "first new used based model models retrieval dense passage passages query queries document documents "
    "search index vector vectors training pre trained encoder decoder bert token tokens mask masked loss "
    "contrastive batch negative negatives positive score scores rank ranking corpus data set sets result "
    "results paper method methods table test dev large small fine tune tuned learning representation "
    "span spans context question answer text word words language"
).split()
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def write_vocab(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.txt").write_text("\n".join(SPECIAL + sorted(set(WORDS))) + "\n")
    return folder


def make_tokenizer(folder: Path) -> BertTokenizer:
    # transformers 5 ignores BertTokenizer(vocab_file=...): load the folder instead.
    return BertTokenizer.from_pretrained(str(write_vocab(folder)))


def tiny_config(vocab_size: int, dropout: float = 0.1) -> BertConfig:
    return BertConfig(
        vocab_size=vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
        hidden_dropout_prob=dropout,
        attention_probs_dropout_prob=dropout,
    )


def make_examples(n: int, epoch: int = 0, seed: int = 0) -> list[tuple[str, str]]:
    """n (anchor, context) pairs; the context changes with the epoch, like QC's sampled query."""
    rng = random.Random(seed * 1000 + n)
    passages = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 14))) for _ in range(n)]
    out = []
    for i, passage in enumerate(passages):
        q = random.Random(f"{seed}/{i}/{epoch}")
        out.append((passage, " ".join(q.choice(passage.split()) for _ in range(4))))
    return out


def examples_fn_for(n: int):
    def examples_fn(epoch: int, rank: int, world_size: int) -> list[tuple[str, str]]:
        return make_examples(n, epoch)

    return examples_fn


def _encode(tokenizer, texts, max_length):
    return tokenizer(texts, padding=True, truncation=True, max_length=max_length, return_tensors="pt")


class ToyObjective(nn.Module):
    """MLM on the masked anchor + pulling the anchor's CLS towards the context's CLS."""

    supports_accumulation = True

    def __init__(self, config: BertConfig, mask_ratio: float = 0.3):
        super().__init__()
        self.bert = BertModel(config, add_pooling_layer=False)
        self.head = nn.Linear(config.hidden_size, config.vocab_size)  # dropped at export
        self.mask_ratio = mask_ratio

    def encoder(self) -> BertModel:
        return self.bert

    def collate(self, examples, tokenizer, max_length, generator):
        anchors = _encode(tokenizer, [a for a, _ in examples], max_length)
        contexts = _encode(tokenizer, [c for _, c in examples], max_length)
        ids = anchors["input_ids"].clone()
        special = torch.tensor(
            [[t in tokenizer.all_special_ids for t in row] for row in ids.tolist()], dtype=torch.bool
        )
        masked = (torch.rand(ids.shape, generator=generator) < self.mask_ratio) & ~special
        labels = torch.where(masked, ids, torch.full_like(ids, -100))
        ids[masked] = tokenizer.mask_token_id
        return {
            "a_ids": ids,
            "a_mask": anchors["attention_mask"],
            "labels": labels,
            "c_ids": contexts["input_ids"],
            "c_mask": contexts["attention_mask"],
        }

    def forward(self, batch):
        a = self.bert(input_ids=batch["a_ids"], attention_mask=batch["a_mask"]).last_hidden_state
        c = self.bert(input_ids=batch["c_ids"], attention_mask=batch["c_mask"]).last_hidden_state[:, 0]
        logits = self.head(a).flatten(0, 1)
        labels = batch["labels"].flatten()
        mlm = F.cross_entropy(logits, labels, ignore_index=-100, reduction="sum") / (labels != -100).sum().clamp(min=1)
        align = F.mse_loss(a[:, 0], c)
        return {"loss": mlm + align, "mlm": mlm, "align": align}


class ToyContrastive(nn.Module):
    """In-batch contrastive loss over CLS vectors with a real gradient-cache step."""

    supports_accumulation = False

    def __init__(self, config: BertConfig, temperature: float = 0.5):
        super().__init__()
        self.bert = BertModel(config, add_pooling_layer=False)
        self.temperature = temperature
        self.calls: list[tuple[int, int]] = []  # (batch size, chunk) per grad_cache_step

    def encoder(self) -> BertModel:
        return self.bert

    def collate(self, examples, tokenizer, max_length, generator):
        anchors = _encode(tokenizer, [a for a, _ in examples], max_length)
        contexts = _encode(tokenizer, [c for _, c in examples], max_length)
        return {
            "a_ids": anchors["input_ids"],
            "a_mask": anchors["attention_mask"],
            "c_ids": contexts["input_ids"],
            "c_mask": contexts["attention_mask"],
        }

    def _cls(self, ids, mask):
        return self.bert(input_ids=ids, attention_mask=mask).last_hidden_state[:, 0]

    def _loss(self, a, c):
        scores = a @ c.T / self.temperature
        return F.cross_entropy(scores, torch.arange(len(a), device=a.device))

    def forward(self, batch):
        loss = self._loss(self._cls(batch["a_ids"], batch["a_mask"]), self._cls(batch["c_ids"], batch["c_mask"]))
        return {"loss": loss}

    def grad_cache_step(self, batch, chunk_size):
        n = batch["a_ids"].shape[0]
        self.calls.append((n, chunk_size))
        spans = [(i, min(i + chunk_size, n)) for i in range(0, n, chunk_size)]
        sides = (("a_ids", "a_mask"), ("c_ids", "c_mask"))
        with torch.no_grad():
            reps = [torch.cat([self._cls(batch[i][s:e], batch[m][s:e]) for s, e in spans]) for i, m in sides]
        reps = [r.detach().requires_grad_() for r in reps]
        loss = self._loss(*reps)
        loss.backward()
        for (i, m), rep in zip(sides, reps):
            for s, e in spans:
                (self._cls(batch[i][s:e], batch[m][s:e]) * rep.grad[s:e]).sum().backward()
        return {"loss": loss.detach()}


def build(
    kind: str, vocab_size: int, dropout: float = 0.1, seed: int = 0, dtype: torch.dtype = torch.float32
) -> nn.Module:
    """A toy objective; equivalence tests ask for float64, where the identities they check hold
    to ~1e-12 whatever the CPU, BLAS kernel or thread count (float32 rounding does not)."""
    torch.manual_seed(seed)
    cls = {"toy": ToyObjective, "contrastive": ToyContrastive}[kind]
    return cls(tiny_config(vocab_size, dropout)).to(dtype)


# Tolerances of the float64 equivalence tests: float64 rounding (eps 2.2e-16) accumulated over a
# few thousand operations stays below 1e-12; a real difference in the mathematics (a missing
# scale, a dropped term, a wrong chunk) moves values by 1e-4 or more.
TIGHT = dict(rtol=1e-9, atol=1e-11)


def params_of(module: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().cpu().clone() for k, v in module.state_dict().items()}


def worker_env() -> dict[str, str]:
    """Environment for subprocess workers: the project importable, one thread, offline."""
    import os

    env = dict(os.environ)
    env["PYTHONPATH"] = f"{PROJECT_ROOT}{os.pathsep}{TESTS_DIR}{os.pathsep}{env.get('PYTHONPATH', '')}"
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1")
    return env


@pytest.fixture(autouse=True)
def one_thread():
    """One intra-op thread: tiny tensors on a busy 2-core machine are several times faster,
    and runs compared bit for bit must use the same thread count (sums can regroup)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


# --- tests of the toys themselves (they must honour the contract the trainer relies on) ---


@pytest.fixture
def tok(tmp_path):
    return make_tokenizer(tmp_path / "tok")


def test_toy_collate_is_deterministic_given_generator(tok):
    obj = build("toy", tok.vocab_size)
    ex = make_examples(4)
    b1 = obj.collate(ex, tok, 32, torch.Generator().manual_seed(1))
    b2 = obj.collate(ex, tok, 32, torch.Generator().manual_seed(1))
    b3 = obj.collate(ex, tok, 32, torch.Generator().manual_seed(2))
    assert all(torch.equal(b1[k], b2[k]) for k in b1)
    assert not torch.equal(b1["labels"], b3["labels"])
    assert (b1["labels"] != -100).any()
    assert tok.unk_token_id not in b1["c_ids"].tolist()[0]  # the vocabulary really loaded


def test_toy_grad_cache_matches_full_batch_gradient(tok):
    obj = build("contrastive", tok.vocab_size, dropout=0.0, dtype=torch.float64)
    batch = obj.collate(make_examples(6), tok, 32, torch.Generator())
    obj(batch)["loss"].backward()
    full = {n: p.grad.clone() for n, p in obj.named_parameters() if p.grad is not None}
    assert len(full) > 20 and max(g.abs().max() for g in full.values()) > 1e-3  # real gradients
    obj.zero_grad()
    obj.grad_cache_step(batch, 2)
    for n, p in obj.named_parameters():
        if n in full:
            torch.testing.assert_close(p.grad, full[n], **TIGHT)


if __name__ == "__main__":  # pragma: no cover - helper module, not a script
    sys.exit("import this module from tests; it is not a script")
