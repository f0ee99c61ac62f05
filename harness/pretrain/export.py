"""Export a pre-trained encoder as a plain Hugging Face BERT folder.

Fine-tuning, encoding and anyone outside the harness load the result with
``transformers.AutoModel.from_pretrained(out_dir)`` / ``AutoTokenizer.from_pretrained``:
``config.json`` + ``model.safetensors`` + the tokenizer files. Objective-specific parts
(MLM heads, CoT-MAE / coCondenser head layers, LexMAE decoders) are not exported: only
``objective.encoder()`` is saved.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from torch import nn

from harness.core import ranks
from harness.core.errors import HarnessError
from harness.core.fsutil import atomic_dir
from harness.training import distributed as D

MODEL_FILE = "model.safetensors"
METADATA_FILE = "harness_export.json"


def export_encoder(
    objective: nn.Module,
    tokenizer: Any,
    out_dir: str | Path,
    metadata: dict[str, Any] | None = None,
) -> Path:
    """Save ``objective.encoder()`` and ``tokenizer`` to ``out_dir`` (replaced atomically).

    ``metadata`` (e.g. method, step, config hash) goes to ``harness_export.json`` next to the
    weights. Under DDP only rank 0 writes; other ranks return at once, so callers that need
    the folder on every rank follow this with ``distributed.barrier()``.
    """
    out_dir = Path(out_dir)
    if not ranks.is_main():
        return out_dir
    module = D.unwrap(objective)
    encoder_fn = getattr(module, "encoder", None)
    if not callable(encoder_fn):
        raise HarnessError(f"{type(module).__name__} has no encoder() method: nothing to export")
    encoder = encoder_fn()
    if not hasattr(encoder, "save_pretrained") or not hasattr(encoder, "config"):
        raise HarnessError(
            f"{type(module).__name__}.encoder() returned {type(encoder).__name__}, not a transformers model"
        )

    with atomic_dir(out_dir) as tmp:
        encoder.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        if not (tmp / MODEL_FILE).is_file():
            raise HarnessError(f"transformers did not write {MODEL_FILE} in {tmp}; check the transformers version")
        if metadata is not None:
            (tmp / METADATA_FILE).write_text(json.dumps(metadata, indent=2, sort_keys=True, default=str) + "\n")
    return out_dir
