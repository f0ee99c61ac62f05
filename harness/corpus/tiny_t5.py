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

Deterministic for a seed: parameter init, batch order (``random.Random(seed)``) and
dropout all derive from it; CPU kernels are deterministic for a fixed thread count.
"""

from __future__ import annotations

import json
import logging
import math
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from tqdm.auto import tqdm

from harness.corpus import stage_cache
from harness.corpus.qgen import DOC2QUERY_PREFIX
from harness.errors import HarnessError

log = logging.getLogger(__name__)

TRAIN_LOG = "train_log.json"


@dataclass
class TinyT5Result:
    model_dir: Path
    losses: list[float]
    cached: bool


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
    import torch
    from transformers import AutoTokenizer, T5Config, T5ForConditionalGeneration

    if not pairs:
        raise HarnessError("no (query, passage) training pairs for the tiny T5 query generator")
    if steps < 1 or batch_size < 1:
        raise HarnessError(f"steps and batch_size must be >= 1, got {steps} and {batch_size}")
    tokenizer_dir, out_dir = Path(tokenizer_dir), Path(out_dir)
    if not tokenizer_dir.is_dir():
        raise HarnessError(f"tokenizer folder not found: {tokenizer_dir}")
    config = {
        "stage": "tiny_t5", "d_model": d_model, "d_ff": d_ff, "num_layers": num_layers,
        "num_decoder_layers": num_decoder_layers, "num_heads": num_heads, "dropout": dropout,
        "steps": steps, "batch_size": batch_size, "lr": lr, "warmup_ratio": warmup_ratio,
        "weight_decay": weight_decay, "max_input_tokens": max_input_tokens,
        "max_target_tokens": max_target_tokens, "input_prefix": input_prefix, "seed": seed,
    }
    inputs = {
        "pairs": stage_cache.hash_texts(t for q, p in pairs for t in (q, p)),
        "tokenizer": stage_cache.hash_dir(tokenizer_dir),
    }
    key = stage_cache.stage_key(config, inputs)
    if stage_cache.is_done(out_dir, key):
        losses = json.loads((out_dir / TRAIN_LOG).read_text())["losses"]
        return TinyT5Result(out_dir, losses, cached=True)
    stage_cache.clear_done(out_dir)

    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir), local_files_only=True)
    pad, eos, start = _special_ids(tokenizer)

    def encode(idx: list[int]) -> tuple[list[list[int]], list[list[int]]]:
        # Per batch, so cost follows steps x batch_size, not the number of pairs.
        src = tokenizer([input_prefix + pairs[i][1] for i in idx], truncation=True,
                        max_length=max_input_tokens)["input_ids"]
        tgt = tokenizer([pairs[i][0] for i in idx], add_special_tokens=False, truncation=True,
                        max_length=max_target_tokens - 1)["input_ids"]
        return src, [t + [eos] for t in tgt]

    old_threads = torch.get_num_threads()
    if num_threads:
        torch.set_num_threads(num_threads)
    try:
        torch.manual_seed(seed)
        cfg = T5Config(
            vocab_size=len(tokenizer), d_model=d_model, d_kv=d_model // num_heads, d_ff=d_ff,
            num_layers=num_layers, num_decoder_layers=num_decoder_layers, num_heads=num_heads,
            dropout_rate=dropout, feed_forward_proj="relu", tie_word_embeddings=True,
            pad_token_id=pad, eos_token_id=eos, decoder_start_token_id=start,
        )
        model = T5ForConditionalGeneration(cfg)
        model.train()
        no_decay = [p for n, p in model.named_parameters() if "layer_norm" in n]
        decay = [p for n, p in model.named_parameters() if "layer_norm" not in n]
        opt = torch.optim.AdamW(
            [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}], lr=lr
        )
        warmup = max(1, int(steps * warmup_ratio))
        sched = torch.optim.lr_scheduler.LambdaLR(
            opt, lambda s: min((s + 1) / warmup, max(0.0, (steps - s) / max(1, steps - warmup)))
        )
        order_rng = random.Random(seed)
        order: list[int] = []
        losses: list[float] = []
        bar = tqdm(range(steps), desc="tiny T5 (query generator)", unit="step")
        for step in bar:
            if len(order) < batch_size:  # refill with a fresh permutation (epoch boundary)
                perm = list(range(len(pairs)))
                order_rng.shuffle(perm)
                order.extend(perm)
            idx, order = order[:batch_size], order[batch_size:]
            batch = _collate(*encode(idx), pad, torch)
            loss = model(**batch).loss
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            losses.append(float(loss.detach()))
            bar.set_postfix(loss=f"{losses[-1]:.3f}")
            if log_every and (step + 1) % log_every == 0:
                window = losses[-log_every:]
                log.info("tiny T5 step %d/%d loss %.3f", step + 1, steps, sum(window) / len(window))
        if not all(math.isfinite(x) for x in losses):
            raise HarnessError("tiny T5 training diverged (non-finite loss); lower the learning rate")
    finally:
        torch.set_num_threads(old_threads)

    model.eval()
    model.generation_config.decoder_start_token_id = start
    model.generation_config.eos_token_id = eos
    model.generation_config.pad_token_id = pad
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out_dir))
    tokenizer.save_pretrained(str(out_dir))
    stage_cache.atomic_write_json(out_dir / TRAIN_LOG, {"losses": losses, "num_pairs": len(pairs)})
    stage_cache.mark_done(out_dir, key, config, inputs, num_pairs=len(pairs), final_loss=losses[-1])
    return TinyT5Result(out_dir, losses, cached=False)


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
