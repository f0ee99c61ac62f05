"""The nested keys a method spec may hold: declared once, per block, each with a one-line meaning.

harness/spec/method.py checks every mapping block of a spec, and of each `profiles.<name>` block (which
is deep-merged over the top level), against these, so a misspelt nested key such as
`finetune.retriever2.epoch` is an error with a did-you-mean instead of a setting silently ignored.
A key is listed only when the code reads it or a spec in baselines/ states it
(tests/test_spec_nested_keys.py keeps the list from rotting). Validation only: the typed
blocks' keys, meanings, types and defaults are declared once in their settings classes
(harness.spec.stage_settings, harness.spec.block_settings, harness.spec.run_settings) and derived here;
:data:`KEY_KINDS` holds the kinds harness.run.validation checks outside the trainer-config blocks; the resolved config (and its hash) is
what the YAML says.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from harness.papers.schema import CONDITION_KEYS
from harness.spec.block_settings import CorpusSettings, QgenSettings, RetrievalSettings, TokenizerSettings
from harness.spec.kinds import Kind, one_of
from harness.spec.run_settings import DataSettings, FinetuneSettings, HardwareSettings, ModelSettings
from harness.spec.settings import BlockSettings, Settings
from harness.spec.stage_settings import PretrainSettings, RerankerSettings, StageSettings


@dataclass(frozen=True)
class Block:
    """A nested mapping: its meaning and its allowed keys (key -> meaning, or key -> sub-Block)."""

    meaning: str
    keys: Keys


Keys = dict[str, "str | Block"]
# A block whose keys are checked elsewhere: `pretrain.objective_params` against the spec's own objective,
# as that objective's module registers them (harness.pretrain.objective_params, with a did-you-mean),
# when the spec is validated (harness.run.validation); loading a spec imports no objective.
OPEN = Block("checked against the spec's objective by harness.run.validation", {})


def typed_keys(cls: type[Settings]) -> Keys:
    """A typed block's keys and meanings; a closed block it holds (``setting(keys=...)``) as a Block."""
    subs = cls.sub_blocks()
    return {
        key: Block(meaning, typed_keys(subs[key]) if isinstance(subs[key], type) else dict(subs[key]))
        if key in subs
        else meaning
        for key, meaning in cls.meanings().items()
    }


# What every fine-tuning stage reads (merged from the finetune block and the stage's own block):
# declared once, typed and with defaults, in harness.spec.stage_settings.StageSettings.
_STAGE: Keys = dict(StageSettings.meanings())
_NEGATIVES = {
    "negatives": "hard-negative pools: mined and/or bm25 (the dense retriever 2 reads it; "
    "retriever 1 always trains on BM25 negatives)"
}
_INIT = {"init": "pretrained (default) or an earlier retriever, e.g. retriever1"}

_RETRIEVER3: Keys = {
    **_STAGE,
    **_INIT,
    **typed_keys(RerankerSettings),  # the teacher: harness.spec.stage_settings.RerankerSettings
    "distill": "the teacher's kind, e.g. cross-encoder (printed by the plan; stage 3 always distils)",
    "kl": "KL divergence to the teacher's scores (not read: stage 3 always uses it)",
}

# A scalar stage key set on the finetune block is the default for every stage (finetune_settings).
_SHARED: Keys = {
    k: v for stage in (_STAGE, _NEGATIVES, _INIT, _RETRIEVER3) for k, v in stage.items() if not isinstance(v, Block)
}

# The finetune block's own keys (harness.spec.run_settings.FinetuneSettings), then those it sets for every stage.
_FINETUNE_OWN = tuple(key for key in FinetuneSettings.meanings() if key not in _STAGE)
_FINETUNE: Keys = {
    **{key: FinetuneSettings.meanings()[key] for key in _FINETUNE_OWN},
    **_SHARED,
    "retriever1": Block("stage 1: BM25 negatives", {**_STAGE, **_NEGATIVES}),
    "retriever2": Block("stage 2: mined negatives", {**_STAGE, **_NEGATIVES, **_INIT}),
    "retriever3": Block("stage 3: distils a reranker (learned-sparse)", _RETRIEVER3),
}


# Top-level block -> its keys. The meaning of each top-level block is in spec.SCHEMA.
BLOCKS: dict[str, Keys] = {
    # Typed, with defaults: harness.spec.run_settings.
    "data": typed_keys(DataSettings),
    "hardware": typed_keys(HardwareSettings),
    "model": typed_keys(ModelSettings),
    # Typed, with defaults: harness.spec.block_settings.
    "tokenizer": typed_keys(TokenizerSettings),
    "corpus": typed_keys(CorpusSettings),
    "qgen": typed_keys(QgenSettings),
    "retrieval": typed_keys(RetrievalSettings),
    # Typed, with defaults: harness.spec.stage_settings.PretrainSettings.
    "pretrain": {**PretrainSettings.meanings(), "objective_params": OPEN},
    "finetune": _FINETUNE,
    # Closed: run conditions are compared key by key with the reported cells' conditions, which
    # may only use papers.schema.CONDITION_KEYS; any other key could never match a cell.
    "conditions": {key: meaning for key, (_, meaning) in CONDITION_KEYS.items()},
}

# The blocks whose kinds harness.run.validation checks key by key (the pretrain block, a fine-tuning
# stage's keys and the teacher's reranker_train are checked whole, with the trainer config built from them).
KIND_BLOCKS: tuple[type[BlockSettings], ...] = (
    TokenizerSettings,
    CorpusSettings,
    QgenSettings,
    RetrievalSettings,
    RerankerSettings,
)
# The kinds of the keys above outside the trainer-config blocks: those of the typed blocks, with the setting's
# example (a closed block they hold is checked by harness.spec.method), and the rest, which the pipelines read or
# compare when their stage starts; checked with the resolved spec before any stage runs (harness.run.validation).
KEY_KINDS: dict[tuple[str, ...], Kind] = {
    **{("hardware", key): kind for key, kind in HardwareSettings.kinds().items()},
    # the architecture's sizes before the init (the order validation reports them in)
    **{("model", key): kind for key, kind in ModelSettings.kinds().items() if key != "init"},
    ("model", "init"): ModelSettings.kinds()["init"],
    **{
        (*cls.block, key): replace(kind, example=cls.example(key))
        for cls in KIND_BLOCKS
        for key, kind in cls.kinds().items()
        if key not in cls.sub_blocks()
    },
    **{("finetune", key): FinetuneSettings.kinds()[key] for key in _FINETUNE_OWN},
    ("finetune", "retriever2", "init"): one_of("pretrained", "retriever1"),
    ("finetune", "retriever3", "init"): one_of("pretrained", "retriever1", "retriever2"),
}
NEGATIVE_POOLS = ("mined", "bm25")  # what `negatives:` may list (the dense retriever 2 reads it)
