"""BERT-style masking for masked language modelling (Devlin et al. 2019, §3.1 "Task #1").

A fraction ``ratio`` of each sequence's maskable tokens is selected; of those, 80 % become
[MASK], 10 % a random token and 10 % stay unchanged. Labels hold the original token at the
selected positions and -100 everywhere else. Special tokens ([CLS], [SEP]) and padding are
never selected.

Choices where the papers are silent (documented so the numbers can be traced):
- The number of selected tokens is exact per sequence, ``round(ratio x n_maskable)`` (at least
  1 when the sequence has a maskable token), like Google's original ``create_pretraining_data``
  rather than HF's per-token Bernoulli draw: the encoder really sees 30 % masked for CoT-MAE.
- Random replacements are drawn uniformly from the non-special vocabulary (HF draws from the
  whole vocabulary, special tokens included).
- ``choose_positions(..., include=...)`` extends an existing selection to a larger total ratio:
  LexMAE's decoder masks "an extra beta %" on top of the encoder's alpha % (alpha + beta = 50 %).

Every draw comes from the ``torch.Generator`` passed in, so a seed fixes the masks.
"""

from __future__ import annotations

import torch
from torch import Tensor

from harness.core.errors import HarnessError

IGNORE_INDEX = -100
MASK_PROB = 0.8
RANDOM_PROB = 0.1


def _check_ratio(ratio: float) -> None:
    if not 0.0 < ratio < 1.0:
        raise HarnessError(f"mask ratio must be in (0, 1), got {ratio}")


def choose_positions(
    maskable: Tensor, ratio: float, generator: torch.Generator, include: Tensor | None = None
) -> Tensor:
    """Bool [B, L]: ``round(ratio x n)`` positions per row among ``maskable`` (n = its row sum).

    Positions in ``include`` (a subset of ``maskable``) are always kept, and new ones are added
    until the row reaches the target; a row never shrinks below ``include``.
    """
    _check_ratio(ratio)
    maskable = maskable.bool()
    n = maskable.sum(dim=1)
    target = torch.floor(n.to(torch.float64) * ratio + 0.5).long()
    target = torch.where(n > 0, target.clamp(min=1), target)
    # Random priorities in [0, 1); forced positions sort first, unmaskable ones last.
    priority = torch.rand(maskable.shape, generator=generator)
    priority = priority.masked_fill(~maskable, 2.0)
    if include is not None:
        include = include.bool() & maskable
        priority = priority.masked_fill(include, -1.0)
        target = torch.maximum(target, include.sum(dim=1))
    rank = priority.argsort(dim=1).argsort(dim=1)
    return rank < target.unsqueeze(1)


def corrupt(
    input_ids: Tensor,
    positions: Tensor,
    generator: torch.Generator,
    mask_token_id: int,
    random_ids: Tensor,
) -> Tensor:
    """Apply 80 % [MASK] / 10 % random token / 10 % unchanged at ``positions``; new ids."""
    draw = torch.rand(input_ids.shape, generator=generator)
    replacement = random_ids[torch.randint(len(random_ids), input_ids.shape, generator=generator)]
    out = input_ids.clone()
    to_mask = positions & (draw < MASK_PROB)
    to_random = positions & (draw >= MASK_PROB) & (draw < MASK_PROB + RANDOM_PROB)
    out[to_mask] = mask_token_id
    out[to_random] = replacement[to_random]
    return out


def labels_at(input_ids: Tensor, positions: Tensor) -> Tensor:
    """Original ids at ``positions``, -100 elsewhere."""
    return input_ids.masked_fill(~positions, IGNORE_INDEX)


def mask_tokens(
    input_ids: Tensor,
    special_mask: Tensor,
    ratio: float,
    generator: torch.Generator,
    mask_token_id: int,
    random_ids: Tensor,
) -> tuple[Tensor, Tensor]:
    """BERT masking of ``input_ids`` [B, L]: (masked input_ids, labels with -100 unmasked).

    ``special_mask`` is True at special tokens and padding (never masked).
    """
    positions = choose_positions(~special_mask.bool(), ratio, generator)
    return corrupt(input_ids, positions, generator, mask_token_id, random_ids), labels_at(input_ids, positions)


def random_token_ids(tokenizer) -> Tensor:
    """Ids a random replacement may take: the whole vocabulary minus special tokens."""
    special = set(tokenizer.all_special_ids)
    ids = [i for i in range(len(tokenizer)) if i not in special]
    if not ids:
        raise HarnessError("the tokenizer's vocabulary has no non-special token to sample from")
    return torch.tensor(ids, dtype=torch.long)


def tokenize(tokenizer, texts: list[str], max_length: int) -> dict[str, Tensor]:
    """Tokenise, truncate to ``max_length``, pad to the longest: input_ids, attention_mask and
    special_mask (bool, True at [CLS]/[SEP]/padding)."""
    if tokenizer.mask_token_id is None:
        raise HarnessError("the tokenizer has no [MASK] token; MLM needs one")
    enc = tokenizer(
        list(texts),
        max_length=max_length,
        truncation=True,
        padding="longest",
        return_tensors="pt",
        return_special_tokens_mask=True,
        return_token_type_ids=False,
    )
    special = enc["special_tokens_mask"].bool() | (enc["attention_mask"] == 0)
    return {
        "input_ids": enc["input_ids"].long(),
        "attention_mask": enc["attention_mask"].long(),
        "special_mask": special,
    }
