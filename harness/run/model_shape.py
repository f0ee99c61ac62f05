"""The encoder shape a spec trains, and how its FLOPs per sequence compare with bert-base at 144 tokens:
the scale :mod:`harness.run.projection` puts on the steps it measured at bert-base shape (issue 41 item 7:
a 2-layer tiny spec was projected with bert-base's FLOPs).

The ratio is analytic, the measurement stays the anchor: a transformer layer's forward over ``s`` tokens
costs ``s (8 h^2 + 4 h i) + 4 s^2 h`` FLOPs (the four attention projections, the feed-forward pair, the
attention scores and their weighted sum), a masked-language head ``s (2 h^2 + 2 h V)``; a measured step
is scaled by (that sum at the spec's shape and lengths) / (the same at bert-base and the measured
lengths). At bert-base and the measured lengths the ratio is exactly 1, so the paper profiles'
projections and calibrations are the measurement's own. Backward and optimizer cost the same multiple
of the forward at any shape, so training steps scale by the same ratio.

The shape comes from the spec's ``model`` block (layers, hidden, intermediate), else the initial
checkpoint's config.json where it is on this machine, else a known published shape; the vocabulary from
the spec's own WordPiece tokenizer, else the checkpoint's, else bert-base's 30,522.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.core.errors import HarnessError
from harness.spec.run_settings import FinetuneSettings
from harness.spec.stage_settings import PretrainSettings
from harness.stages.checkpoints import resolve_checkpoint

# The lengths of the measured steps (bench/paper_shape_smoke.py): 144-token inputs, 32-token queries,
# each query with 16 passages in a fine-tuning step.
MEASURED_LENGTH = 144
MEASURED_QUERY_LENGTH = 32
MEASURED_PASSAGES_PER_QUERY = 16


@dataclass(frozen=True)
class Shape:
    layers: int
    hidden: int
    intermediate: int
    vocab: int
    source: str = "bert-base"

    def describe(self) -> str:
        return (
            f"{self.layers} layers, hidden {self.hidden}, intermediate {self.intermediate}, "
            f"vocabulary {self.vocab:,} ({self.source})"
        )


BERT_BASE = Shape(12, 768, 3072, 30_522)
# Published shapes of the initial checkpoints the specs name, for a machine that has not fetched them.
KNOWN = {
    "bert-base-uncased": BERT_BASE,
    "Luyu/condenser": BERT_BASE,
    "all-minilm-l6-v2": Shape(6, 384, 1536, 30_522, "all-MiniLM-L6-v2's published config"),
}


def _checkpoint_config(name: str) -> dict[str, Any]:
    """The initial checkpoint's config.json where it is on this machine; else {}."""
    with contextlib.suppress(HarnessError, OSError, ValueError):
        path = Path(resolve_checkpoint(name, "initial encoder")) / "config.json"
        return json.loads(path.read_text())
    return {}


def shape_of(spec: Any) -> Shape:
    """The encoder shape `spec` trains (module docstring for where each number comes from)."""
    model = spec.get("model") or {}
    tokenizer = spec.get("tokenizer") or {}
    init = str(model.get("init") or "")
    vocab_own = tokenizer.get("vocab_size") if tokenizer.get("from") == "wordpiece" else None
    if model.get("layers") and model.get("hidden"):
        hidden = int(model["hidden"])
        return Shape(
            int(model["layers"]),
            hidden,
            int(model.get("intermediate") or 4 * hidden),
            int(vocab_own or BERT_BASE.vocab),
            "the spec's model block",
        )
    config = _checkpoint_config(init) if init and init != "scratch" else {}
    if config.get("num_hidden_layers") and config.get("hidden_size"):
        return Shape(
            int(config["num_hidden_layers"]),
            int(config["hidden_size"]),
            int(config.get("intermediate_size") or 4 * config["hidden_size"]),
            int(vocab_own or config.get("vocab_size") or BERT_BASE.vocab),
            f"{init}'s config.json",
        )
    known = KNOWN.get(init)
    if known is not None:
        return (
            known
            if vocab_own is None
            else Shape(known.layers, known.hidden, known.intermediate, int(vocab_own), known.source)
        )
    return Shape(
        BERT_BASE.layers,
        BERT_BASE.hidden,
        BERT_BASE.intermediate,
        int(vocab_own or BERT_BASE.vocab),
        f"bert-base assumed: {init or 'no init'} is not on this machine and its shape is not known",
    )


def layer_flops(shape: Shape, tokens: int) -> float:
    """One transformer layer's forward over a sequence of `tokens` (module docstring)."""
    h, i = shape.hidden, shape.intermediate
    return tokens * (8 * h * h + 4 * h * i) + 4 * tokens * tokens * h


def head_flops(shape: Shape, tokens: int) -> float:
    """A masked-language head (dense transform + vocabulary projection) over `tokens`."""
    return tokens * (2 * shape.hidden**2 + 2 * shape.hidden * shape.vocab)


def _pretrain(shape: Shape, tokens: int, head_layers: int) -> float:
    return (shape.layers + head_layers) * layer_flops(shape, tokens) + head_flops(shape, tokens)


def _encode(shape: Shape, tokens: int) -> float:
    return shape.layers * layer_flops(shape, tokens)


def flop_ratio(spec: Any, kind: str) -> float:
    """FLOPs of one sequence of a step of `kind` (an objective, ``finetune`` or ``encode``) at the spec's
    shape and lengths over the same at bert-base and the measured lengths; 1.0 for a bert-base spec."""
    shape = shape_of(spec)
    if kind == "encode":
        length = _passage_length(spec)
        return _encode(shape, length) / _encode(BERT_BASE, MEASURED_LENGTH)
    if kind == "finetune":
        q_len, p_len = _query_length(spec), _passage_length(spec)
        n = MEASURED_PASSAGES_PER_QUERY
        return (_encode(shape, q_len) + n * _encode(shape, p_len)) / (
            _encode(BERT_BASE, MEASURED_QUERY_LENGTH) + n * _encode(BERT_BASE, MEASURED_LENGTH)
        )
    pre = PretrainSettings.as_stated(spec)
    head_layers = int((pre.objective_params or {}).get("n_head_layers") or 0)
    return _pretrain(shape, pre.max_length, head_layers) / _pretrain(BERT_BASE, MEASURED_LENGTH, head_layers)


def _passage_length(spec: Any) -> int:
    """The finetune block's passage length (every stage's unless its own block sets one)."""
    return FinetuneSettings.from_spec(spec).max_p_len


def _query_length(spec: Any) -> int:
    return FinetuneSettings.from_spec(spec).max_q_len
