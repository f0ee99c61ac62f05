"""Parts (b) and (c) of bench/gpu_check.py, on a randomly initialised BERT (bert-base's shape on CUDA, 2 x 64 in
the CPU smoke test; nothing downloaded, the tokenizer's vocabulary synthetic).

(b) encoding: the harness's Encoder end to end (tokenising, token-sorted batching, padding, the copies to the
device and back) against forward-only at the same shapes (the same padded batches already on the device, only
the model and the pooling timed); the end-to-end rate must be at least ``min_rate`` of forward-only on CUDA, and
its vectors must agree with an fp32 encoding of the same passages (cosine).

(c) fine-tuning: one in-batch contrastive step (queries x passages, the dense fine-tuning's loss) in the
harness's half precision (fp16 with its loss scaler on CUDA, bf16 autocast on a CPU) against fp32 from the same
weights: loss and gradient direction must agree."""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from gpu_check_result import CheckResult, judged

WORDS = [f"w{i}" for i in range(2000)]
SMALL = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 128}


@dataclass(frozen=True)
class ModelShape:
    passages: int  # encoded by (b)
    batch: int  # (b)'s batch; (c)'s queries and passages per step
    agreement_passages: int  # (b)'s fp32 reference subset
    full: bool  # bert-base's shape, else SMALL


CUDA_MODELS = ModelShape(passages=32_768, batch=2048, agreement_passages=512, full=True)
SMOKE_MODELS = ModelShape(passages=200, batch=16, agreement_passages=32, full=False)


def save_random_bert(folder: Path, full: bool) -> None:
    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=len(vocab), **({} if full else SMALL))).save_pretrained(folder)
    BertTokenizerFast(vocab={w: i for i, w in enumerate(vocab)}).save_pretrained(folder)


def _texts(n: int) -> list[str]:
    rng = np.random.default_rng(0)
    return [" ".join(rng.choice(WORDS, size=int(rng.integers(8, 200)))) for _ in range(n)]


def _sync(device: Any) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize()


def _forward_only(encoder: Any, texts: list[str], batch: int) -> float:
    """Seconds of the model and pooling alone over the batches the encoder would make of ``texts``."""
    from harness.retrieval.encoder import length_batches

    enc = encoder.tokenizer(texts, truncation=True, max_length=encoder.spec.passage_max_length, padding=False)
    rows = {k: enc[k] for k in ("input_ids", "token_type_ids") if k in enc}
    batches = [encoder._pad(rows, idx) for idx in length_batches([len(r) for r in rows["input_ids"]], batch)]
    on_device = [{k: v.to(encoder.device) for k, v in b.items()} for b in batches]
    encoder._forward(on_device[0])  # warm-up
    _sync(encoder.device)
    started = time.perf_counter()
    for b in on_device:
        encoder._forward(b)
    _sync(encoder.device)
    return time.perf_counter() - started


def encode_check(cuda: bool, smoke: bool, min_rate: float, min_cosine: float) -> CheckResult:
    from harness.retrieval.encoder import load_encoder

    shape = SMOKE_MODELS if smoke else CUDA_MODELS
    device = "cuda" if cuda else "cpu"
    texts = _texts(shape.passages)
    with tempfile.TemporaryDirectory() as tmp:
        save_random_bert(Path(tmp), shape.full)
        half = load_encoder(tmp, device=device, precision="fp16" if cuda else "fp32")
        half.sort_by = "tokens"  # the CUDA path, forced in the smoke test too
        half.encode(texts[: shape.batch], batch_size=shape.batch, kind="passage", show_progress=False)  # warm-up
        _sync(half.device)
        started = time.perf_counter()
        vectors = half.encode(texts, batch_size=shape.batch, kind="passage", show_progress=False)
        end_to_end = time.perf_counter() - started
        forward = _forward_only(half, texts, shape.batch)
        full = load_encoder(tmp, device=device, precision="fp32")
        ref = full.encode(texts[: shape.agreement_passages], batch_size=64, kind="passage", show_progress=False)
    got = vectors[: shape.agreement_passages]
    cos = np.sum(got * ref, 1) / (np.linalg.norm(got, axis=1) * np.linalg.norm(ref, axis=1))
    ratio = forward / end_to_end
    enforced = cuda and not smoke
    figures = {
        "passages": shape.passages,
        "batch": shape.batch,
        "precision": half.precision,
        "end_to_end_passages_per_second": round(shape.passages / end_to_end, 1),
        "forward_only_passages_per_second": round(shape.passages / forward, 1),
        "rate_ratio": round(ratio, 3),
        "min_rate": min_rate,
        "rate_enforced": enforced,
        "min_cosine_with_fp32": float(cos.min()),
        "min_cosine": min_cosine,
    }
    ok = float(cos.min()) >= min_cosine and (ratio >= min_rate or not enforced)
    line = (
        f"end to end {figures['end_to_end_passages_per_second']:,.0f} passages/s = {ratio:.2f} of forward-only "
        f"{figures['forward_only_passages_per_second']:,.0f} (target >= {min_rate}"
        f"{'' if enforced else ', not enforced off CUDA'}); {half.precision} vectors vs fp32: min cosine "
        f"{cos.min():.5f} (threshold >= {min_cosine}); {shape.passages:,} passages, batch {shape.batch}, on {device}"
    )
    return judged("encode", ok, line, figures)


def _step(model: Any, batch: dict[str, Any], precision: str, device: Any) -> tuple[float, Any]:
    """Loss and flattened gradients of one in-batch contrastive step (passage i is query i's positive)."""
    import torch

    from harness.training.precision import autocast, grad_scaler

    model.zero_grad(set_to_none=True)
    scaler = grad_scaler(precision) if device.type == "cuda" else None
    with autocast(precision, device):
        q = model(input_ids=batch["q"]).last_hidden_state[:, 0]
        p = model(input_ids=batch["p"]).last_hidden_state[:, 0]
    scores = q.float() @ p.float().T  # outside autocast: similar random vectors score ~700, fp16 steps 0.5 there
    loss = torch.nn.functional.cross_entropy(scores, torch.arange(len(q), device=device))
    (scaler.scale(loss) if scaler else loss).backward()
    scale = float(scaler.get_scale()) if scaler else 1.0
    grads = torch.cat([p.grad.float().flatten() / scale for p in model.parameters() if p.grad is not None])
    return float(loss), grads


def finetune_check(cuda: bool, smoke: bool, min_cosine: float, max_loss_gap: float) -> CheckResult:
    import torch
    from transformers import BertModel

    shape = SMOKE_MODELS if smoke else CUDA_MODELS
    device = torch.device("cuda" if cuda else "cpu")
    precision = "fp16" if cuda else "bf16"
    batch_size = min(shape.batch, 32)
    with tempfile.TemporaryDirectory() as tmp:
        save_random_bert(Path(tmp), shape.full)
        model = BertModel.from_pretrained(tmp).to(device).train()
    model.config.hidden_dropout_prob = model.config.attention_probs_dropout_prob = 0.0
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0  # the same function in both precisions
    gen = torch.Generator().manual_seed(3)
    vocab = model.config.vocab_size
    batch = {
        "q": torch.randint(5, vocab, (batch_size, 32), generator=gen).to(device),
        "p": torch.randint(5, vocab, (batch_size, 144), generator=gen).to(device),
    }
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = False  # the reference is true fp32
    ref_loss, ref_grads = _step(model, batch, "fp32", device)
    half_loss, half_grads = _step(model, batch, precision, device)
    finite = bool(torch.isfinite(half_grads).all())
    cos = (
        float(torch.nn.functional.cosine_similarity(ref_grads.double(), half_grads.double(), dim=0))
        if finite
        else float("nan")
    )
    gap = abs(half_loss - ref_loss) / max(abs(ref_loss), 1e-6)
    figures = {
        "precision": precision,
        "batch": batch_size,
        "fp32_loss": ref_loss,
        "half_loss": half_loss,
        "loss_relative_gap": gap,
        "max_loss_gap": max_loss_gap,
        "gradient_cosine": cos,
        "min_cosine": min_cosine,
        "finite_gradients": finite,
    }
    ok = finite and cos >= min_cosine and gap <= max_loss_gap
    line = (
        f"{precision} step vs fp32: loss {half_loss:.4f} vs {ref_loss:.4f} (relative gap {gap:.2e}, threshold <= "
        f"{max_loss_gap}); gradient cosine {cos:.5f} (threshold >= {min_cosine}); gradients finite: {finite}; "
        f"{batch_size} queries x {batch_size} passages on {device.type}"
    )
    return judged("finetune", ok, line, figures)
