"""``precision: auto``: bf16 or fp32 chosen by a measurement on this CPU (not by its flags), cached per
CPU identity and shapes, overridden by ``run --precision``; stage keys hold the resolved precision, so
the tiny and mini keys are those of the fp32 references where fp32 is chosen; the gate and CI's
re-runs compare like with like (harness.training.autoprecision, harness.training.precision)."""

from __future__ import annotations

import dataclasses
import json
import shutil

import pytest

from harness.core.paths import PROJECT_ROOT
from harness.gate import rerun
from harness.gate.grading import recorded_precision, reference_rows
from harness.records.integrity import seal
from harness.records.store import load_record, load_records, load_references
from harness.spec.hashing import settings_hash
from harness.spec.method import load_method
from harness.spec.stage_settings import PretrainSettings, StageSettings
from harness.training import autoprecision
from harness.training import precision as owner
from harness.training.autoprecision import Measurement, Shapes, choose

SHAPES = Shapes(layers=2, hidden=128, heads=2, intermediate=512, batch=32, seq_len=64, vocab=8000)
FAST_BF16 = Measurement(
    matmul_fp32=2.0, matmul_bf16=1.0, forward_fp32=2.0, forward_bf16=1.0, step_fp32=1.5, step_bf16=1.0
)
SLOW_BF16 = Measurement(
    matmul_fp32=2.0, matmul_bf16=1.0, forward_fp32=2.0, forward_bf16=1.0, step_fp32=1.0, step_bf16=1.7
)  # a faster forward does not decide: the step does
RECORDS = PROJECT_ROOT / "runs" / "records"


@pytest.fixture(autouse=True)
def bf16_capable(monkeypatch):
    """Every CPU may be asked: the choice is the measurement's, whatever torch says of this one; and
    the machine counts as idle, whatever else CI runs beside the tests."""
    from harness.training import precision

    monkeypatch.setattr(precision, "cpu_bf16", lambda: True)
    monkeypatch.setattr(autoprecision, "machine_load", lambda: 0.0)


class Counting:
    def __init__(self, result: Measurement):
        self.result, self.calls = result, 0

    def __call__(self, shapes: Shapes) -> Measurement:
        self.calls += 1
        return self.result


def test_the_measurement_decides_and_a_slow_bf16_keeps_fp32(tmp_path):
    fast, slow = (
        choose(SHAPES, tmp_path / "a", Counting(FAST_BF16)),
        choose(SHAPES, tmp_path / "b", Counting(SLOW_BF16)),
    )
    assert (fast.precision, slow.precision) == ("bf16", "fp32")
    assert fast.speedup == pytest.approx(1.5) and slow.speedup == pytest.approx(1 / 1.7)
    line = slow.line(SHAPES)
    assert line.startswith("precision auto: fp32") and "step 0.59x" in line and "forward 2.00x" in line


def test_the_choice_is_cached_per_cpu_identity_and_shapes(tmp_path, monkeypatch):
    measure = Counting(FAST_BF16)
    first = choose(SHAPES, tmp_path, measure)
    again = choose(SHAPES, tmp_path, measure)
    assert measure.calls == 1 and not first.cached and again.cached and again.precision == "bf16"
    saved = json.loads(first.path.read_text())
    assert saved["choice"] == "bf16" and saved["identity"]["shapes"]["hidden"] == 128
    assert {"torch_threads", "torch"} <= set(saved["identity"])
    choose(Shapes(**{**saved["identity"]["shapes"], "batch": 8}), tmp_path, measure)  # other shapes: measured
    assert measure.calls == 2
    monkeypatch.setattr(autoprecision, "cpu_identity", lambda: {"cpu_model": "another CPU (6/207/1)"})
    choose(SHAPES, tmp_path, measure)  # another CPU: measured
    assert measure.calls == 3


def test_a_measurement_on_a_busy_machine_decides_but_is_not_cached(tmp_path, monkeypatch):
    monkeypatch.setattr(autoprecision, "machine_load", lambda: 2.4)
    measure = Counting(FAST_BF16)
    busy = choose(SHAPES, tmp_path, measure)
    assert busy.precision == "bf16" and busy.path is None and not list(tmp_path.glob("*.json"))
    assert "not cached: the machine was busy (load average 2.4)" in busy.line(SHAPES)
    choose(SHAPES, tmp_path, measure)
    assert measure.calls == 2  # measured again next time
    monkeypatch.setattr(autoprecision, "machine_load", lambda: 0.3)
    assert choose(SHAPES, tmp_path, measure).path is not None and choose(SHAPES, tmp_path, measure).cached


def test_without_bf16_kernels_nothing_is_measured(tmp_path, monkeypatch):
    from harness.training import precision

    def never(shapes):
        raise AssertionError("nothing to measure without bf16 kernels")

    monkeypatch.setattr(precision, "cpu_bf16", lambda: False)
    monkeypatch.setattr(autoprecision, "measure", never)
    said: list[str] = []
    assert precision.measured_precision(SHAPES, said.append) == "fp32" and "nothing measured" in said[0]


def auto_spec(method: str = "cotmae_qc", profile: str = "tiny"):
    """The profile with ``precision: auto`` stated for pre-training and fine-tuning (the profiles state fp32
    until bf16's accuracy on mini is checked against fp32's seed spread)."""
    spec = load_method(method, profile)
    config = json.loads(json.dumps(spec.config))
    config["pretrain"]["precision"] = "auto"
    config["finetune"]["precision"] = "auto"
    return type(spec)(spec.name, spec.profile, spec.path, config)


def test_auto_resolves_the_stage_settings_and_keys_and_the_flag_overrides(monkeypatch, capsys):
    spec = auto_spec()
    assert PretrainSettings.from_spec(spec).precision == "auto"  # unresolved: the spec says auto
    monkeypatch.setattr(autoprecision, "measure", Counting(FAST_BF16))
    fast = owner.resolve_precision(spec)
    assert (fast.precision, fast.precision_source) == ("bf16", "measured")
    assert "precision auto: bf16" in capsys.readouterr().out
    assert StageSettings.from_spec(fast, "retriever2").precision == "bf16"
    assert PretrainSettings.from_spec(fast).key()["precision"] == "bf16"
    assert fast.spec_hash == spec.spec_hash  # the config keeps auto: one hash whatever was chosen

    def never(shapes):
        raise AssertionError("the flag must not measure")

    monkeypatch.setattr(autoprecision, "measure", never)
    flagged = owner.resolve_precision(spec, "fp32")
    assert (flagged.precision, flagged.precision_source) == ("fp32", "flag")
    assert "--precision fp32" in capsys.readouterr().out
    with pytest.raises(Exception, match="fp32, bf16"):
        owner.resolve_precision(spec, "fp16")


def test_fp32_chosen_gives_the_keys_of_the_fp32_profile(monkeypatch):
    """The tiny/mini references were recorded with `precision: fp32` stated: where auto resolves to
    fp32 every stage key and the spec hash are theirs."""
    monkeypatch.setattr(autoprecision, "measure", Counting(SLOW_BF16))
    for profile in ("tiny", "mini"):
        spec = auto_spec("cotmae_qc", profile)
        resolved = owner.resolve_precision(spec, say=lambda line: None)
        config = json.loads(json.dumps(spec.config))
        config["pretrain"]["precision"] = config["finetune"]["precision"] = "fp32"
        assert resolved.precision == "fp32" and settings_hash(config) == spec.spec_hash
        assert (
            PretrainSettings.from_spec(resolved).key() == PretrainSettings.from_mapping(config["pretrain"], "p").key()
        )
        assert StageSettings.from_spec(resolved, "retriever1").key()["precision"] == "fp32"


def test_a_stated_precision_is_not_auto(monkeypatch):
    monkeypatch.setattr(autoprecision, "measure", Counting(FAST_BF16))
    spec = load_method("cotmae_qc", "tiny")
    config = json.loads(json.dumps(spec.config))
    config["pretrain"]["precision"] = "fp32"
    config["finetune"]["precision"] = "fp32"
    stated = type(spec)(spec.name, spec.profile, spec.path, config)
    said: list[str] = []
    assert owner.resolve_precision(stated, "bf16", said.append) is stated and "ignored" in said[0]


def test_ci_reruns_ask_for_the_reference_precision():
    """Every committed tiny reference trained in fp32 (the mini ones before stages said so), and CI's
    re-runs pass it, so a machine where bf16 measures faster still re-runs what the reference ran."""
    refs = load_references(RECORDS)
    mini = load_record(RECORDS / f"{refs[('cotmae_qc', 'mini')]['run_id']}.json")
    assert recorded_precision(mini) == "fp32"
    assert recorded_precision(load_record(RECORDS / f"{refs[('bm25', 'paper')]['run_id']}.json")) is None
    commands = {item.label: rerun.rerun_command(item, RECORDS) for item in rerun.RERUNS}
    assert commands["cotmae_qc [tiny]"][-2:] == ["--precision", "fp32"]
    assert "--precision" not in commands["bm25 [paper]"]
    assert "--precision" not in rerun.rerun_command(rerun.RERUNS[1], None)


def test_the_gate_refuses_a_bf16_rerun_against_an_fp32_reference(tmp_path):
    ref_path = RECORDS / f"{load_references(RECORDS)[('cotmae_qc', 'tiny')]['run_id']}.json"
    folder = tmp_path / "records"
    folder.mkdir()
    shutil.copy(ref_path, folder / ref_path.name)
    data = json.loads(ref_path.read_text())
    data["run_id"] = "cotmae_qc__tiny__20261126T000000-abcdef"
    for entry in data["stages"]:
        if isinstance(entry.get("output"), dict) and entry["output"].get("precision"):
            entry["output"].update(precision="bf16", precision_source="measured")
    (folder / f"{data['run_id']}.json").write_text(json.dumps(seal(data)))
    records, _ = load_records(folder)
    ref, fresh = sorted(records, key=lambda r: r.run_id != ref_path.stem)
    rows = reference_rows(fresh, ref)
    assert [r.status for r in rows] == ["NOT-COMPARABLE"]
    assert "pretrain fp32 -> bf16 (measured)" in rows[0].note and "--precision fp32" in rows[0].note
    assert {r.status for r in reference_rows(ref, ref)} == {"PASS"}  # same precision: compared


def test_a_run_encodes_in_the_precision_its_auto_chose(monkeypatch):
    """One run, one precision: where auto resolved to bf16 (measured, or the flag) the corpus and the
    queries are encoded in bf16 too; a stated precision (the papers' fp16 training, the fp32 profiles)
    and a GPU profile's auto encode in fp32, with the keys they had."""
    from harness.training.precision import encode_precision

    spec = auto_spec()
    monkeypatch.setattr(autoprecision, "measure", Counting(FAST_BF16))
    assert encode_precision(owner.resolve_precision(spec, say=lambda line: None)) == "bf16"
    assert encode_precision(owner.resolve_precision(spec, "fp32", lambda line: None)) == "fp32"
    assert encode_precision(dataclasses.replace(spec, precision="fp32", precision_source="measured")) == "fp32"
    assert encode_precision(load_method("cotmae_qc", "paper")) == "fp32"
    assert encode_precision(load_method("cotmae_qc", "tiny")) == "fp32"


def test_the_main_job_says_auto_and_its_fp32_references_still_compare():
    """cotmae_qc [mini] (the README's main job) trains in what this CPU measures faster; its committed
    fp32 records carry the same settings hash (auto and an unstated fine-tuning precision hash as fp32)."""
    spec = load_method("cotmae_qc", "mini")
    assert spec.get("pretrain.precision") == spec.get("finetune.precision") == "auto"
    assert spec.declares_auto_precision()
    refs = load_references(RECORDS)
    reference = load_record(RECORDS / f"{refs[('cotmae_qc', 'mini')]['run_id']}.json")
    assert settings_hash(reference.spec) == spec.spec_hash
    assert recorded_precision(reference) == "fp32"
