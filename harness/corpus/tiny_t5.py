"""A small T5 query generator trained from scratch (tiny profile stand-in for doc2query).

doc2query/all-with-prefix-t5-base-v1 cannot be downloaded here, so the tiny profile trains
a 2+2-layer T5 on (query, relevant passage) pairs -- the embedded NFCorpus/SciFact train
qrels -- with the same input prefix ("text2query: ") and saves it with ``save_pretrained``;
``harness.corpus.qgen.generate_queries`` then runs it through the very same code path.

Tokenizer: any local fast tokenizer folder (normally the corpus WordPiece from
``harness.corpus.tokenizer``), copied into the model folder. T5 needs three ids, taken
from the tokenizer: pad (padding and ignored labels), eos (end of a target; BERT's
[SEP]) and decoder start (bos, else BERT's [CLS], else pad as in original T5). Encoder
inputs get the tokenizer's own template ([CLS] x [SEP]) exactly as at generation time;
targets are the query's tokens + eos.

Training runs on the one engine (:mod:`harness.training.engine`): AdamW with the shared linear
warm-up/decay, gradient clipping at 1.0, epochs over the pairs in ``randperm(seed + epoch)``
order. Deterministic for a seed: parameter init, batch order and dropout all derive from it; CPU
kernels are deterministic for a fixed thread count.
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from harness.core.errors import HarnessError
from harness.corpus.qgen import DOC2QUERY_PREFIX
from harness.stages import artifacts
from harness.training.checkpoint import checkpoint_root
from harness.training.config import LoopConfig
from harness.training.engine import Notes, StepContext, Task, run, session

log = logging.getLogger(__name__)

TRAIN_LOG = "train_log.json"


@dataclass
class TinyT5Result:
    model_dir: Path
    losses: list[float]
    cached: bool
    weight_change: dict[str, Any] | None = None  # harness.training.engine.WeightChange.to_dict()


def pairs_from_qrels(
    corpus: Mapping[str, Mapping[str, str]],
    queries: Mapping[str, str],
    qrels: Mapping[str, Mapping[str, int]],
    min_relevance: int = 1,
) -> list[tuple[str, str]]:
    """(query text, "title text" of a relevant document), in sorted (qid, docid) order."""
    pairs: list[tuple[str, str]] = []
    for qid in sorted(qrels):
        if qid not in queries:
            continue
        for docid in sorted(qrels[qid]):
            if qrels[qid][docid] < min_relevance or docid not in corpus:
                continue
            doc = corpus[docid]
            text = " ".join(t for t in ((doc.get("title") or "").strip(), (doc.get("text") or "").strip()) if t)
            if text and queries[qid].strip():
                pairs.append((queries[qid], text))
    return pairs


def _special_ids(tokenizer: Any) -> tuple[int, int, int]:
    pad = tokenizer.pad_token_id
    eos = tokenizer.eos_token_id if tokenizer.eos_token_id is not None else tokenizer.sep_token_id
    start = next((i for i in (tokenizer.bos_token_id, tokenizer.cls_token_id, pad) if i is not None), None)
    if pad is None or eos is None or start is None:
        raise HarnessError("the T5 tokenizer needs a pad token and an eos (or [SEP]) token")
    return pad, eos, start


@dataclass(frozen=True)
class _Recipe:
    """The settings of one tiny T5 training, in the order its marker's key always listed them."""

    d_model: int
    d_ff: int
    num_layers: int
    num_decoder_layers: int
    num_heads: int
    dropout: float
    steps: int
    batch_size: int
    lr: float
    warmup_ratio: float
    weight_decay: float
    max_input_tokens: int
    max_target_tokens: int
    input_prefix: str
    seed: int

    def config(self) -> dict[str, Any]:
        """The marker's config: the stage's name, then every setting."""
        return {"stage": "tiny_t5", **asdict(self)}


def train_tiny_t5(
    pairs: Sequence[tuple[str, str]],
    tokenizer_dir: str | Path,
    out_dir: str | Path,
    *,
    d_model: int = 128,
    d_ff: int = 256,
    num_layers: int = 2,
    num_decoder_layers: int = 2,
    num_heads: int = 4,
    dropout: float = 0.1,
    steps: int = 300,
    batch_size: int = 32,
    lr: float = 2e-3,
    warmup_ratio: float = 0.05,
    weight_decay: float = 0.01,
    max_input_tokens: int = 144,
    max_target_tokens: int = 32,
    input_prefix: str = DOC2QUERY_PREFIX,
    seed: int = 42,
    num_threads: int | None = None,
    log_every: int = 100,
) -> TinyT5Result:
    """Train a T5 from scratch on (query, passage) pairs; save model + tokenizer to ``out_dir``."""
    from transformers import AutoTokenizer

    if not pairs:
        raise HarnessError("no (query, passage) training pairs for the tiny T5 query generator")
    if steps < 1 or batch_size < 1:
        raise HarnessError(f"steps and batch_size must be >= 1, got {steps} and {batch_size}")
    tokenizer_dir, out_dir = Path(tokenizer_dir), Path(out_dir)
    if not tokenizer_dir.is_dir():
        raise HarnessError(f"tokenizer folder not found: {tokenizer_dir}")
    recipe = _Recipe(
        d_model, d_ff, num_layers, num_decoder_layers, num_heads, dropout, steps, batch_size, lr, warmup_ratio,
        weight_decay, max_input_tokens, max_target_tokens, input_prefix, seed,
    )  # fmt: skip
    config = recipe.config()
    inputs = {
        "pairs": artifacts.hash_texts(t for q, p in pairs for t in (q, p)),
        "tokenizer": artifacts.hash_dir(tokenizer_dir),
    }
    key = artifacts.builder_key(config, inputs)
    if artifacts.is_finished(out_dir, key):
        saved = json.loads((out_dir / TRAIN_LOG).read_text())
        return TinyT5Result(out_dir, saved["losses"], cached=True, weight_change=saved.get("weight_change"))
    artifacts.clear_finished(out_dir)

    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir), local_files_only=True)
    model, out = _train(recipe, pairs, tokenizer, out_dir, key, num_threads, log_every)
    losses = out.loss_history
    _save_generator(model, tokenizer, out_dir)
    shutil.rmtree(checkpoint_root(out_dir), ignore_errors=True)
    moved = out.weight_change.to_dict() if out.weight_change else None
    artifacts.atomic_write_json(
        out_dir / TRAIN_LOG, {"losses": losses, "num_pairs": len(pairs), "weight_change": moved}
    )
    artifacts.mark_finished(
        out_dir, {"key": key, "config": config, "inputs": inputs, "num_pairs": len(pairs), "final_loss": losses[-1]}
    )
    return TinyT5Result(out_dir, losses, cached=False, weight_change=moved)


def _train(
    recipe: _Recipe,
    pairs: Sequence[tuple[str, str]],
    tokenizer: Any,
    out_dir: Path,
    key: str,
    num_threads: int | None,
    log_every: int,
) -> tuple[Any, Any]:
    """Train the T5 of ``recipe`` from its seed on the engine (``num_threads`` intra-op threads, restored
    after); return the model and the engine's outcome."""
    import torch

    pad, eos, start = _special_ids(tokenizer)
    encode = _batch_encoder(tokenizer, pairs, recipe, eos)
    old_threads = torch.get_num_threads()
    if num_threads:
        torch.set_num_threads(num_threads)
    loop = LoopConfig(
        lr=recipe.lr,
        warmup_ratio=recipe.warmup_ratio,
        weight_decay=recipe.weight_decay,
        grad_clip=1.0,
        seed=recipe.seed,
        log_every=log_every or 100,
    )
    notes = Notes("tiny T5")
    try:
        with session(loop) as info:
            torch.manual_seed(recipe.seed)  # the init draws from the seed
            model = _new_t5(recipe, len(tokenizer), pad, eos, start)
            task = _T5Task(model, len(pairs), recipe.steps, recipe.batch_size, recipe.seed, encode, pad)

            def logger(step: int, metrics: dict[str, float]) -> None:
                log.info("tiny T5 step %d/%d loss %.3f", step, recipe.steps, metrics["loss"])

            out = run(task, loop, info, out_dir, notes, identity={"key": key}, logger=logger if log_every else None)
    finally:
        torch.set_num_threads(old_threads)
    return task.model, out


def _batch_encoder(
    tokenizer: Any, pairs: Sequence[tuple[str, str]], recipe: _Recipe, eos: int
) -> Callable[[list[int]], tuple[list[list[int]], list[list[int]]]]:
    """Encoder inputs (prefix + passage, the tokenizer's template) and targets (query + eos) of a batch."""

    def encode(idx: list[int]) -> tuple[list[list[int]], list[list[int]]]:
        # Per batch, so cost follows steps x batch_size, not the number of pairs.
        src = tokenizer(
            [recipe.input_prefix + pairs[i][1] for i in idx], truncation=True, max_length=recipe.max_input_tokens
        )["input_ids"]
        tgt = tokenizer(
            [pairs[i][0] for i in idx],
            add_special_tokens=False,
            truncation=True,
            max_length=recipe.max_target_tokens - 1,
        )["input_ids"]
        return src, [t + [eos] for t in tgt]

    return encode


def _new_t5(recipe: _Recipe, vocab_size: int, pad: int, eos: int, start: int) -> Any:
    """A freshly initialised T5 of the recipe's shape (init drawn from torch's current seed)."""
    from transformers import T5Config, T5ForConditionalGeneration

    cfg = T5Config(
        vocab_size=vocab_size,
        d_model=recipe.d_model,
        d_kv=recipe.d_model // recipe.num_heads,
        d_ff=recipe.d_ff,
        num_layers=recipe.num_layers,
        num_decoder_layers=recipe.num_decoder_layers,
        num_heads=recipe.num_heads,
        dropout_rate=recipe.dropout,
        feed_forward_proj="relu",
        tie_word_embeddings=True,
        pad_token_id=pad,
        eos_token_id=eos,
        decoder_start_token_id=start,
    )
    return T5ForConditionalGeneration(cfg)


def _save_generator(model: Any, tokenizer: Any, out_dir: Path) -> None:
    """Save the trained model (eval mode, generating with the tokenizer's ids) and its tokenizer."""
    pad, eos, start = _special_ids(tokenizer)
    model.eval()
    model.generation_config.decoder_start_token_id = start
    model.generation_config.eos_token_id = eos
    model.generation_config.pad_token_id = pad
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out_dir))
    tokenizer.save_pretrained(str(out_dir))


class _T5Task(Task):
    """Teacher-forced cross entropy of the query given "text2query: " + its passage."""

    name = "tiny T5 (query generator)"

    def __init__(
        self,
        model: Any,
        n_pairs: int,
        steps: int,
        batch_size: int,
        seed: int,
        encode: Callable[[list[int]], tuple[list[list[int]], list[list[int]]]],
        pad: int,
    ):
        self.model, self.total_steps, self.batch_size, self.seed = model, steps, batch_size, seed
        self.n_pairs, self.encode, self.pad = n_pairs, encode, pad
        self.steps_per_epoch = max(1, n_pairs // batch_size)  # the incomplete last batch is dropped
        self._order_epoch, self._order = -1, []

    def step(self, step: int, ctx: StepContext) -> dict[str, Any]:
        import torch

        epoch, in_epoch = divmod(step, self.steps_per_epoch)
        if epoch != self._order_epoch:
            gen = torch.Generator().manual_seed(self.seed + epoch)
            self._order, self._order_epoch = torch.randperm(self.n_pairs, generator=gen).tolist(), epoch
        idx = self._order[in_epoch * self.batch_size : (in_epoch + 1) * self.batch_size]
        batch = ctx.to_device(_collate(*self.encode(idx), self.pad, torch))
        with ctx.autocast():
            loss = ctx.engine(**batch).loss
        ctx.backward(loss)
        return {"loss": loss}

    def epoch(self, step: int) -> float:
        return step / self.steps_per_epoch


def _collate(src: list[list[int]], tgt: list[list[int]], pad: int, torch: Any) -> dict[str, Any]:
    n_src, n_tgt = max(map(len, src)), max(map(len, tgt))
    input_ids = torch.full((len(src), n_src), pad, dtype=torch.long)
    attention = torch.zeros((len(src), n_src), dtype=torch.long)
    labels = torch.full((len(tgt), n_tgt), -100, dtype=torch.long)
    for i, (s, t) in enumerate(zip(src, tgt)):
        input_ids[i, : len(s)] = torch.tensor(s)
        attention[i, : len(s)] = 1
        labels[i, : len(t)] = torch.tensor(t)
    return {"input_ids": input_ids, "attention_mask": attention, "labels": labels}
