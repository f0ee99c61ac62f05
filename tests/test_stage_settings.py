"""The typed spec blocks (a fine-tuning stage's settings and the others): defaults declared once, errors
that name file and key path, the spec keys and the trainer configs derived from them."""

from __future__ import annotations

import dataclasses

import pytest

from harness.core.errors import HarnessError
from harness.spec.keys import BLOCKS
from harness.spec.method import load_method, profiles_of
from harness.spec.stage_settings import StageSettings

BASE = {"lr": 1e-5, "global_queries": 8, "passages_per_query": 4, "epochs": 1}


def test_absent_keys_take_the_declared_defaults_and_a_null_clip_is_off():
    s = StageSettings.from_mapping(BASE, "spec.yaml: finetune.retriever1")
    assert (s.max_q_len, s.max_p_len, s.warmup_ratio, s.weight_decay, s.negative_depth) == (32, 144, 0.1, 0.0, 200)
    assert s.grad_clip == 1.0 and s.precision == "fp32" and s.start_terms is None
    assert StageSettings.from_mapping({**BASE, "grad_clip": None}, "x").grad_clip is None
    assert StageSettings.from_mapping({**BASE, "max_q_len": None}, "x").max_q_len == 32  # null = default


@pytest.mark.parametrize(
    "key, value, kind",
    [
        ("epochs", "two", "a whole number"),
        ("epochs", 1.5, "a whole number"),
        ("lr", True, "a number"),
        ("fit_head", "yes", "true or false"),
        ("precision", 16, "text"),
    ],
)
def test_a_value_of_the_wrong_type_names_file_and_key_path(key, value, kind):
    with pytest.raises(HarnessError, match=rf"^spec.yaml: finetune.retriever2.{key}: {value!r} is not {kind} \(e.g. "):
        StageSettings.from_mapping({**BASE, key: value}, "spec.yaml: finetune.retriever2")


def test_a_missing_required_key_is_named():
    with pytest.raises(
        HarnessError, match=r"finetune.retriever1.lr: is required \(peak learning rate; e.g. lr: 2.0e-5\)"
    ):
        StageSettings.from_mapping({k: v for k, v in BASE.items() if k != "lr"}, "spec.yaml: finetune.retriever1")


def test_the_spec_stage_keys_are_the_settings_fields():
    assert set(StageSettings.meanings()) <= set(BLOCKS["finetune"]["retriever1"].keys)
    assert set(StageSettings.meanings()) <= set(BLOCKS["finetune"]["retriever3"].keys)


@pytest.mark.parametrize("method", ["nopretrain", "cotmae_qc", "cocondenser", "cpdae", "lexmae"])
def test_every_committed_spec_and_profile_reads_cleanly(method):
    for profile in profiles_of(method):
        spec = load_method(method, profile)
        stages = ["retriever1", "retriever2"] + (["retriever3"] if method == "lexmae" else [])
        for stage in stages:
            if spec.get(f"finetune.{stage}") is not None or stage == "retriever1":
                StageSettings.from_spec(spec, stage)


# --- the other typed blocks -----------------------------------------------------------------------


def test_every_block_reads_its_defaults_from_one_declaration():
    from harness.spec.block_settings import CorpusSettings, QgenSettings, RetrievalSettings, TokenizerSettings
    from harness.spec.stage_settings import RerankerSettings

    spec = load_method("bm25", "paper")  # states no tokenizer, corpus, qgen, mine or teacher block
    assert (TokenizerSettings.from_spec(spec).from_, TokenizerSettings.from_spec(spec).vocab_size) == (
        "bert-base-uncased",
        8000,
    )
    corpus = CorpusSettings.from_spec(spec)
    assert (corpus.max_tokens, corpus.seed, corpus.max_passages) == (144, 42, None)
    q = QgenSettings.from_spec(spec)
    assert (q.num_queries, q.batch_size, q.steps, q.max_input_tokens, q.smoothing, q.train_pairs, q.input_prefix) == (
        5,
        64,
        400,
        144,
        2.0,
        "nfcorpus-train",
        "",
    )
    assert q.key("qgen_model") == {
        "input_prefix": "",
        "train_pairs": "nfcorpus-train",
        "steps": 400,
        "max_input_tokens": 144,
    }  # defaults included; generation settings left out
    r = RetrievalSettings.from_spec(load_method("lexmae", "paper"))
    assert (r.k1, r.b, r.fields, r.threads, r.depth) == (0.9, 0.4, {"contents": 1.0, "title": 1.0}, 2, 1000)
    assert TokenizerSettings.from_mapping({"from": "wordpiece"}, "x").from_ == "wordpiece"  # a keyword as a key
    teacher = RerankerSettings.from_spec(spec)
    assert (teacher.reranker, teacher.teacher_scale, teacher.teacher_max_length) == ("configured-checkpoint", 20.0, 128)
    train = teacher.train()
    assert (train.queries_per_device, train.passages_per_query, train.lr, train.epochs, train.max_length) == (
        8,
        8,
        1e-4,
        2,
        192,
    )


def test_the_teacher_scores_what_retriever_3_draws_unless_stated():
    from harness.spec.stage_settings import RerankerSettings

    stage = StageSettings.from_mapping({**BASE, "epochs": 3, "passages_per_query": 5}, "x")
    assert RerankerSettings.from_mapping({}, "x").scored(stage) == (3, 12)
    assert RerankerSettings.from_mapping({"teacher_positives": 1, "teacher_negatives": 7}, "x").scored(stage) == (1, 7)


def test_a_block_key_is_its_settings_field():
    from harness.spec.block_settings import CorpusSettings, QgenSettings, RetrievalSettings, TokenizerSettings
    from harness.spec.keys import KEY_KINDS
    from harness.spec.stage_settings import RerankerSettings, RerankerTrainSettings

    for block, cls in (
        ("tokenizer", TokenizerSettings),
        ("corpus", CorpusSettings),
        ("qgen", QgenSettings),
        ("retrieval", RetrievalSettings),
    ):
        assert list(BLOCKS[block]) == list(cls.meanings()), block
    assert "mine" not in BLOCKS["finetune"]  # retired: mining searches to the next stage's negative_depth
    r3 = BLOCKS["finetune"]["retriever3"].keys
    assert set(RerankerSettings.meanings()) <= set(r3)
    assert list(r3["reranker_train"].keys) == list(RerankerTrainSettings.meanings())
    assert KEY_KINDS[("qgen", "num_queries")].example == 5  # the setting's default shown as the example
    assert ("retrieval", "fields") not in KEY_KINDS  # a closed block: its keys are checked by harness.spec.method


def required_fields(config: type) -> set[str]:
    return {
        f.name
        for f in dataclasses.fields(config)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    }


def test_a_trainer_config_declares_no_default_for_what_the_spec_sets():
    """Every value a trainer config needs from a spec comes from its settings, which declare the defaults."""
    from harness.finetune.dense import DenseTrainConfig
    from harness.finetune.reranker import RerankerTrainConfig
    from harness.finetune.splade import SpladeTrainConfig
    from harness.pretrain.trainer import TrainConfig
    from harness.spec.stage_settings import PretrainSettings, RerankerTrainSettings

    stage = StageSettings.from_mapping(BASE, "x")
    assert required_fields(DenseTrainConfig) == set(stage.trainer_kwargs(1))
    assert required_fields(SpladeTrainConfig) == set(stage.splade_kwargs(1))
    pretrain = PretrainSettings(objective="mlm", global_batch=8, per_device_batch=8, lr=1e-4)
    assert required_fields(TrainConfig) == set(pretrain.trainer_kwargs(1)) | {"output_dir"}
    train = RerankerTrainSettings()
    assert required_fields(RerankerTrainConfig) == set(train.trainer_kwargs())  # run controls: only where stated
    assert RerankerTrainSettings(progress=False).trainer_kwargs()["progress"] is False
