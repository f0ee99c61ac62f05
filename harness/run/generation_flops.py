"""FLOPs of seq2seq query generation (doc2query-T5, harness/corpus/qgen.py), by an analytic model that
bench/bench_qgen.py checks against ``torch.utils.flop_counter`` on a generation step of the tiny T5.

Per passage of ``input_tokens`` tokens with ``returns`` sampled queries of ``new_tokens`` tokens each
(multiply-add = 2 FLOPs; norms, softmax and sampling left out):
* encoder, once per passage (generate encodes before expanding to the returned sequences):
  per layer 2 * tokens * (4 * d * inner + 2 * d * d_ff) + attention 2 * 2 * tokens^2 * inner;
* decoder, per generated token of each returned sequence (key/value cache on: one new position):
  self-attention 2 * 4 * d * inner, cross-attention queries and output 2 * 2 * d * inner, feed-forward
  2 * 2 * d * d_ff, attention scores and values 2 * 2 * inner * (position + input_tokens);
  plus the LM head 2 * d * vocab;
* cross-attention keys and values over the encoder output, once per returned sequence's first step:
  2 * 2 * d * inner * input_tokens per decoder layer.
``new_tokens`` is the generation cap (qgen.max_new_tokens): queries end earlier, so this is an upper bound.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class T5Shape:
    d_model: int
    d_ff: int
    d_kv: int
    heads: int
    encoder_layers: int
    decoder_layers: int
    vocab: int

    @property
    def inner(self) -> int:
        return self.d_kv * self.heads

    @classmethod
    def from_config(cls, config: object) -> T5Shape:
        """The shape of a transformers T5Config (or any object with its attribute names)."""
        get = config.__getattribute__
        return cls(
            get("d_model"),
            get("d_ff"),
            get("d_kv"),
            get("num_heads"),
            get("num_layers"),
            get("num_decoder_layers"),
            get("vocab_size"),
        )


# t5-base, the shape of doc2query/all-with-prefix-t5-base-v1 (its config.json).
T5_BASE = T5Shape(d_model=768, d_ff=3072, d_kv=64, heads=12, encoder_layers=12, decoder_layers=12, vocab=32128)


def encoder_flops(shape: T5Shape, input_tokens: int, attention: bool = True) -> float:
    d, inner, n = shape.d_model, shape.inner, input_tokens
    per_layer = 2 * n * (4 * d * inner + 2 * d * shape.d_ff) + (4 * n * n * inner if attention else 0)
    return float(shape.encoder_layers * per_layer)


def decoder_flops(shape: T5Shape, input_tokens: int, new_tokens: int, attention: bool = True) -> float:
    """One returned sequence's decoding of ``new_tokens`` tokens, cross-attention keys/values included."""
    d, inner = shape.d_model, shape.inner
    dense = 2 * (4 * d * inner + 2 * d * inner + 2 * d * shape.d_ff)
    scores = sum(4 * inner * (pos + 1 + input_tokens) for pos in range(new_tokens)) if attention else 0
    cross_kv = 4 * d * inner * input_tokens
    layers = shape.decoder_layers * (new_tokens * dense + scores + cross_kv)
    return float(layers + new_tokens * 2 * d * shape.vocab)


def generation_flops(shape: T5Shape, input_tokens: int, returns: int, new_tokens: int, attention: bool = True) -> float:
    """FLOPs of generating ``returns`` queries of up to ``new_tokens`` tokens for one passage.

    ``attention=False`` leaves out the attention scores and values (the terms in ``tokens^2``):
    ``torch.utils.flop_counter`` does not count CPU scaled-dot-product attention, so the bench
    compares that part with its count and states the whole."""
    return encoder_flops(shape, input_tokens, attention) + returns * decoder_flops(
        shape, input_tokens, new_tokens, attention
    )


# The tiny profile's in-harness T5 (harness/corpus/tiny_t5.py defaults, d_kv = d_model / heads) over a BERT-sized vocabulary (it reuses the run's tokenizer).
TINY_T5 = T5Shape(d_model=128, d_ff=256, d_kv=32, heads=4, encoder_layers=2, decoder_layers=2, vocab=30522)


def training_flops(shape: T5Shape, input_tokens: int, target_tokens: int) -> float:
    """FLOPs of one training sequence (teacher forcing over ``target_tokens``): a forward of the encoder
    and of the decoder's ``target_tokens`` positions (the same dense products as generating them one by
    one), times 3 for the backward pass (twice the forward's products)."""
    return 3 * generation_flops(shape, input_tokens, 1, target_tokens)
