"""The SPLADE-max model of a learned-sparse retriever: its representation, loading and settings file.

Shared by training (:mod:`harness.finetune.splade`, which writes the folder) and search
(:mod:`harness.retrieval.impact`, which encodes with it), so it lives below both: retrieval then
never imports fine-tuning, as :mod:`harness.retrieval.encoder` does for dense retrievers.

Representation, Eq. (8) of LexMAE (SPLADE-max, Formal et al. 2021a)
    ``v(x) = log(1 + max_t ReLU(S[t, :]))`` with S the masked-LM logits of x [L, |V|] and t
    running over the non-padding positions ([CLS] and [SEP] included, as SPLADE does). The
    saturation ``log(1 + ReLU(.))`` is monotone, so :func:`splade_max` takes the masked max of
    the raw logits first and applies it to the [B, |V|] result: the same values and gradients
    as the literal formula with one [B, L, |V|] tensor instead of three. Encoding
    (:func:`encode_splade_max`) runs the head on the non-padding positions only: the same values.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from harness.core.errors import HarnessError
from harness.core.numerics import upcast
from harness.stages.checkpoints import load_pretrained

SETTINGS_FILE = "harness_lexical.json"
REPRESENTATION = "splade_max"


def splade_max(logits: Tensor, attention_mask: Tensor) -> Tensor:
    """Eq. (8): ``max_t log(1 + ReLU(logits[:, t, :]))`` over non-padding positions -> [B, V] float32."""
    if logits.dim() != 3 or attention_mask.shape != logits.shape[:2]:
        raise HarnessError(
            f"splade_max wants logits [B, L, V] and a mask [B, L], got {tuple(logits.shape)} "
            f"and {tuple(attention_mask.shape)}"
        )
    if not torch.is_grad_enabled() and _right_padded(attention_mask):
        # Encoding: each row's max over its own positions, read in place. The same values as the
        # masked max below (a max is exact) without writing a masked [B, L, V] copy, which took a
        # quarter of an encoding batch's time (MiniLM, 32 x 144 x 30522).
        lengths = attention_mask.sum(dim=1).tolist()
        empty = logits.new_full((logits.shape[2],), float("-inf"))
        pooled = torch.stack([logits[i, :n].amax(dim=0) if n else empty for i, n in enumerate(lengths)])
    else:
        keep = attention_mask.bool().unsqueeze(-1)
        # Padding gets -inf, so it never wins the max; ReLU then maps a row with no positive logit to 0.
        # max(dim) keeps only the argmax indices for backward (amax would keep the [B, L, V] input).
        pooled = logits.masked_fill(~keep, float("-inf")).max(dim=1).values
    return torch.log1p(torch.relu(upcast(pooled)))


def encode_splade_max(model: Any, enc: dict[str, Tensor]) -> Tensor:
    """Eq. (8) of a tokenised batch without gradients: ``splade_max(model(**enc).logits, mask)``, the
    same values, with the MLM head run on the non-padding positions only.

    The head (transform + the [H, |V|] decoder) takes a fifth of an encoding batch of bert-base, and in
    the rehearsal's length-sorted batches 26-30% of its rows are padding (measured: head and pooling
    25-31% less CPU time per batch, about 5% of the batch). Each head output row depends on its own input row only, so the rows kept are the ones the masked max
    reads; ``tests/test_retrieval_impact.py`` pins that the two paths give equal tensors. A model without
    BERT's ``bert``/``cls`` parts, or left padding, takes the literal path.
    """
    mask = enc["attention_mask"]
    if torch.is_grad_enabled() or not (hasattr(model, "bert") and hasattr(model, "cls")) or not _right_padded(mask):
        return splade_max(model(**enc).logits, mask)
    hidden = model.bert(**enc, return_dict=True).last_hidden_state  # [B, L, H]
    lengths = mask.sum(dim=1).tolist()
    rows = model.cls(hidden[mask.bool()])  # [sum of lengths, V], document by document
    empty = rows.new_full((rows.shape[1],), float("-inf"))
    pooled = torch.stack([part.amax(dim=0) if n else empty for part, n in zip(rows.split(lengths), lengths)])
    return torch.log1p(torch.relu(upcast(pooled)))


def _right_padded(attention_mask: Tensor) -> bool:
    """Every row is ones then zeros (a tokenizer that pads on the right): its positions are a prefix."""
    mask = attention_mask.bool()
    return bool((mask[:, 1:] <= mask[:, :-1]).all()) if mask.shape[1] > 1 else True


def load_masked_lm(path: str | Path, allow_new_head: bool = True) -> tuple[Any, str]:
    """(BertForMaskedLM, head status) from a local folder; status is "loaded" or "initialised".

    A folder without MLM-head weights (a plain ``BertModel`` export) gets the head's projection
    from the tied word embeddings and a fresh transform and bias (seed them before calling);
    ``allow_new_head=False`` refuses that (encoding a trained retriever must never do it). Any
    missing encoder weight is an error.
    """
    from transformers import AutoConfig, BertForMaskedLM
    from transformers.utils import logging as hf_logging

    path = Path(path)
    if not (path / "config.json").is_file():
        raise HarnessError(f"{path} holds no Hugging Face model (config.json missing)")
    config = AutoConfig.from_pretrained(str(path), local_files_only=True)
    if config.model_type != "bert":
        raise HarnessError(
            f"{path}: the lexical retriever needs a BERT masked LM, found model_type {config.model_type!r}"
        )
    before = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # the expected "missing cls.predictions.*" report is not news
    try:
        model, info = load_pretrained(BertForMaskedLM, path, "a masked LM", output_loading_info=True)
    finally:
        hf_logging.set_verbosity(before)
    missing = set(info.get("missing_keys", ()))
    encoder_missing = sorted(k for k in missing if not k.startswith("cls."))
    if encoder_missing:
        raise HarnessError(
            f"{path}: {len(encoder_missing)} encoder weight(s) missing (e.g. "
            f"{', '.join(encoder_missing[:3])}); not a trained BERT checkpoint"
        )
    head_missing = sorted(k for k in missing if k.startswith("cls.") and k != "cls.predictions.decoder.weight")
    if not head_missing:
        return model, "loaded"
    if not allow_new_head:
        raise HarnessError(
            f"{path} has no MLM head weights ({', '.join(head_missing[:3])} ...): it is not a trained lexical retriever"
        )
    word = model.bert.embeddings.word_embeddings.weight
    if model.cls.predictions.decoder.weight.data_ptr() != word.data_ptr():
        model.cls.predictions.decoder.weight = word  # config.tie_word_embeddings=False would leave it random
    return model, "initialised"


def write_lexical_settings(folder: str | Path, **settings: Any) -> Path:
    """``harness_lexical.json``: how :mod:`harness.retrieval.impact` encodes with this model."""
    path = Path(folder) / SETTINGS_FILE
    payload = {"representation": REPRESENTATION, **settings}
    path.write_text(json.dumps(payload, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return path


def read_lexical_settings(folder: str | Path) -> dict[str, Any]:
    """The folder's ``harness_lexical.json`` (empty dict when absent: a SPLADE checkpoint from elsewhere)."""
    path = Path(folder) / SETTINGS_FILE
    if not path.is_file():
        return {}
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise HarnessError(f"{path} is not valid JSON ({exc.msg}); delete it or retrain") from exc
