"""A fine-tuning stage's settings: typed, defaults declared once, errors that name file and key path."""

from __future__ import annotations

import pytest

from harness.errors import HarnessError
from harness.spec import load_method, profiles_of
from harness.spec_keys import BLOCKS
from harness.stage_settings import StageSettings

BASE = {"lr": 1e-5, "global_queries": 8, "passages_per_query": 4, "epochs": 1}


def test_absent_keys_take_the_declared_defaults_and_a_null_clip_is_off():
    s = StageSettings.from_mapping(BASE, "spec.yaml: finetune.retriever1")
    assert (s.max_q_len, s.max_p_len, s.warmup_ratio, s.weight_decay, s.negative_depth) == (32, 144, 0.1, 0.0, 200)
    assert s.grad_clip == 1.0 and s.precision == "fp32" and s.start_terms is None
    assert StageSettings.from_mapping({**BASE, "grad_clip": None}, "x").grad_clip is None
    assert StageSettings.from_mapping({**BASE, "max_q_len": None}, "x").max_q_len == 32  # null = default


@pytest.mark.parametrize("key, value, kind", [("epochs", "two", "a whole number"), ("epochs", 1.5, "a whole number"),
                                              ("lr", True, "a number"), ("fit_head", "yes", "true or false"),
                                              ("precision", 16, "text")])
def test_a_value_of_the_wrong_type_names_file_and_key_path(key, value, kind):
    with pytest.raises(HarnessError, match=rf"^spec.yaml: finetune.retriever2.{key}: {value!r} is not {kind} \(e.g. "):
        StageSettings.from_mapping({**BASE, key: value}, "spec.yaml: finetune.retriever2")


def test_a_missing_required_key_is_named():
    with pytest.raises(HarnessError, match=r"finetune.retriever1.lr: is required \(peak learning rate; e.g. lr: 2.0e-5\)"):
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
