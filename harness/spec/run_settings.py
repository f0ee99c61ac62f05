"""The blocks of a spec that say where a run's data comes from and what it runs on, typed
(harness.spec.settings) so that no module outside harness/spec/ reads them by a dotted path with a
default of its own: the ``data`` block, the declared ``hardware``, the initial ``model`` and the
``finetune`` block's own keys (the training queries, and the lengths every stage inherits unless its
own block sets them).

None of them is a stage's cache key on its own (``reads`` is empty): the stages that depend on one key
it themselves (the training queries in harness.pipelines.chain.training_key). Their kinds are also
checked by harness.run.validation (harness.spec.keys.KEY_KINDS), which reads the values as stated,
before a run builds these classes.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from harness.spec.kinds import FLAG, NON_NEGATIVE, POSITIVE_WHOLE, TEXT, one_of
from harness.spec.schema import HARD_NEGATIVE_FILES
from harness.spec.settings import BlockSettings, default_of, setting
from harness.spec.stage_settings import StageSettings


@dataclass(frozen=True)
class DataSettings(BlockSettings):
    """``data``: a mirror of the upstream files, the MS MARCO passage variant, retriever 1's BM25 negatives."""

    block = ("data",)

    mirror: str | None = setting(
        "a folder (relative to the project) or URL serving the upstream data files under their own "
        "names, instead of the publishers (sets HARNESS_DATA_MIRROR for the run; docs/data.md)",
        None,
        TEXT,
    )
    # unset: plain; checked against harness.data.setting.PASSAGE_VARIANTS where a run applies it (a layer above)
    msmarco_passages: str | None = setting(
        "plain (collection.tsv) or titled (RocketQA's para.title.txt joined to it, as "
        "Tevatron's coCondenser/CoT-MAE fine-tuning and evaluation read MS MARCO)",
        None,
        TEXT,
    )
    # one of harness.spec.schema.BM25_NEGATIVE_SOURCES (harness.spec.checks.check_bm25_negatives)
    bm25_negatives: str = setting(
        "where retriever 1's BM25 negatives come from: own (BM25 here over the training "
        "queries), msmarco-triples (the official qidpidtriples, coCondenser's / Tevatron's "
        "recipe) or tevatron (Tevatron's published training set)",
        "own",
        TEXT,
    )


@dataclass(frozen=True)
class HardwareSettings(BlockSettings):
    """``hardware``: what the paper ran on, as the spec declares it (the projection prices it)."""

    block = ("hardware",)

    device_type: str | None = setting("cuda | cpu", None, one_of("cuda", "cpu"))
    devices: int = setting("number of devices", 1, POSITIVE_WHOLE)
    gpu: str | None = setting("GPU model as the paper states it", None, TEXT)
    hours: float | None = setting("training hours as the paper states them", None, NON_NEGATIVE)


@dataclass(frozen=True)
class ModelSettings(BlockSettings):
    """``model``: the initial encoder, a checkpoint or an architecture built from scratch."""

    block = ("model",)

    init: str = setting("checkpoint name or path, or scratch", "scratch", TEXT)
    layers: int | None = setting("encoder layers (scratch)", None, POSITIVE_WHOLE)
    hidden: int | None = setting("hidden size (scratch)", None, POSITIVE_WHOLE)
    heads: int | None = setting("attention heads (scratch)", None, POSITIVE_WHOLE)
    intermediate: int | None = setting("feed-forward size (scratch)", None, POSITIVE_WHOLE)


def _stage_setting(name: str) -> Any:
    """StageSettings' setting ``name`` (meaning, default, kind), declared there once."""
    f = next(f for f in dataclasses.fields(StageSettings) if f.name == name)
    meta = f.metadata
    return setting(
        meta["meaning"], default_of(f), meta["kind"], meta["nullable"], meta["example"], meta["keys"], meta["keyed"]
    )


@dataclass(frozen=True)
class FinetuneSettings(BlockSettings):
    """The ``finetune`` block's own scalar keys: the training queries of every stage, and the lengths the
    block sets for every stage (a stage's own block may override them: StageSettings.from_spec)."""

    block = ("finetune",)

    train_queries: str | None = setting("<benchmark>-<split> whose queries and qrels train every stage", None, TEXT)
    max_train_queries: int | None = setting(
        "a seeded subsample of that many judged training queries (null: all)", None, POSITIVE_WHOLE
    )
    evaluate_start: bool = setting("also score the encoder fine-tuning starts from (zero-shot)", False, FLAG)
    # one of harness.spec.schema.HARD_NEGATIVE_FILES (harness.spec.checks.check_hard_negatives)
    hard_negatives: str | None = setting(
        "retriever 1 trains on the negatives of a published hard-negative file instead of BM25's: "
        "msmarco-sbert-hard-negatives (sentence-transformers' msmarco-hard-negatives.jsonl.gz, selected "
        "as Thakur et al.'s BEIR recipe; QC v2's BEIR table); null: BM25 negatives (data.bm25_negatives)",
        None,
        one_of(*HARD_NEGATIVE_FILES),
    )
    max_q_len: int = _stage_setting("max_q_len")
    max_p_len: int = _stage_setting("max_p_len")
