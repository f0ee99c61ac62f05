"""Nothing wrong passes silently (issue 25): a wrong value in a spec fails `validate` (exit 1, every
problem as file:line: key path: what is wrong and what would be right) and `run` (and `run --dry-run`)
before its first stage (exit 2, one line a problem, no traceback), not when the stage that reads it
starts, hours into a paper run.

Each case breaks one key of a copy of baselines/ (HARNESS_SPECS_DIR)."""

from __future__ import annotations

import dataclasses
import inspect
import shutil
from pathlib import Path
from typing import NamedTuple

import pytest

from harness.cli import main
from harness.core.errors import HarnessError, SpecProblems
from harness.core.paths import BASELINES_DIR
from harness.spec.files import list_methods
from harness.spec.method import load_method, profiles_of


class Case(NamedTuple):
    method: str  # the spec file edited (and run)
    old: str
    new: str
    key: str  # the key path the problem names
    says: str  # and part of what it says
    profile: str = "paper"  # run with this profile
    after: str = ""  # the edit replaces the first `old` after this text
    in_profile: bool = False  # the edit is in the profile's block, and the problem says so


CASES = [
    # values of the wrong type
    Case(
        "cotmae",
        "steps: 50000",
        "steps: four hundred",
        "pretrain.steps",
        "'four hundred' is not a whole number (e.g. steps: 400)",
    ),
    Case(
        "cotmae",
        "enc_mask_ratio: 0.30",
        "enc_mask_ratio: high",
        "pretrain.objective_params.enc_mask_ratio",
        "'high' is not a number",
    ),
    Case("cotmae", "lr: 4.0e-4", 'lr: "fast"', "pretrain.lr", "'fast' is not a number (e.g. lr: 1.0e-4)"),
    # a ValueError (int('two')) only when the decoder was built, after the corpus stages
    Case(
        "cotmae",
        "n_head_layers: 1",
        "n_head_layers: two",
        "pretrain.objective_params.n_head_layers",
        "'two' is not a whole number",
    ),
    Case(
        "cpdae",
        "contrast_on: words",
        "contrast_on: tokens",
        "pretrain.objective_params.contrast_on",
        "'tokens' is not one of words, cls",
    ),
    Case(
        "lexmae",
        "retriever1: {negatives: [bm25], negative_depth: 1000",
        "retriever1: {negatives: [bm25], negative_depth: deep",
        "finetune.retriever1.negative_depth",
        "'deep' is not a whole number",
    ),
    Case(
        "cotmae",
        "retriever1: {negatives: [bm25], negative_depth: 200",
        "retriever1: {negatives: [bm25], negative_depth: two hundred",
        "finetune.retriever1.negative_depth",
        "is not a whole number",
    ),
    Case("cotmae", "devices: 16", "devices: sixteen", "hardware.devices", "'sixteen' is not a whole number"),
    Case(
        "lexmae",
        "teacher_scale: 20",
        "teacher_scale: big",
        "finetune.retriever3.teacher_scale",
        "is not a number",
        "mini",
        "  mini:",
        True,
    ),
    # values out of range: the trainer configs' own checks
    Case("cotmae", "steps: 50000", "steps: -5", "pretrain.steps", "-5 is out of range: must be a positive integer"),
    Case("cotmae", "lr: 4.0e-4", "lr: -1", "pretrain.lr", "-1 is out of range: must be positive"),
    Case(
        "cotmae",
        "warmup_ratio: 0.1",
        "warmup_ratio: 2",
        "pretrain.warmup_ratio",
        "2 is out of range: must be in [0, 1]",
    ),
    Case(
        "cotmae",
        "  warmup_ratio: 0.1",
        "  warmup_ratio: 2",
        "finetune.warmup_ratio",
        "must be in [0, 1]",
        after="finetune:",
    ),
    Case("cotmae", "epochs: 3}", "epochs: 0}", "finetune.retriever1.epochs", "0 is out of range: must be a positive"),
    Case(
        "cotmae",
        "retriever1: {epochs: 2}",
        "retriever1: {epochs: -1}",
        "finetune.retriever1.epochs",
        "must be a positive integer",
        "tiny",
        "  tiny:",
        True,
    ),
    Case(
        "cotmae",
        "pretrain: {steps: 400,",
        "pretrain: {steps: 0,",
        "pretrain.steps",
        "0 is out of range",
        "tiny",
        "  tiny:",
        True,
    ),
    Case(
        "cotmae",
        "  global_queries: 64",
        "  global_queries: 0",
        "finetune.global_queries",
        "0 is out of range: must be >= 1",
    ),
    Case("cotmae", "precision: fp16", "precision: fp8", "pretrain.precision", "must be one of fp32, bf16, fp16"),
    Case(
        "lexmae",
        "query_flops_ratio: 0.75",
        "query_flops_ratio: -1",
        "finetune.query_flops_ratio",
        "-1 is out of range: must be >= 0",
    ),
    Case(
        "lexmae",
        "contrastive_weight: 0.2,",
        "contrastive_weight: -0.2,",
        "finetune.retriever3.contrastive_weight",
        "-0.2 is out of range: must be >= 0",
    ),
    # values out of range: declared with the setting (no trainer config holds them)
    Case("cotmae", "steps: 50000", "epochs: 0", "pretrain.epochs", "0 is out of range: must be > 0"),
    Case(
        "cotmae",
        "enc_mask_ratio: 0.30",
        "enc_mask_ratio: 1.5",
        "pretrain.objective_params.enc_mask_ratio",
        "1.5 is out of range: must be in (0, 1)",
    ),
    Case(
        "cocondenser", "mask_ratio: 0.15", "mask_ratio: 0", "pretrain.objective_params.mask_ratio", "must be in (0, 1)"
    ),
    Case(
        "lexmae",
        "dec_mask_ratio: 0.50",
        "dec_mask_ratio: 0.20",
        "pretrain.objective_params.dec_mask_ratio",
        "must be >= enc_mask_ratio (0.3)",
    ),
    Case(
        "lexmae",
        "quantization: 100",
        "quantization: -1",
        "retrieval.quantization",
        "-1 is out of range: must be > 0 (e.g. quantization: 100)",
    ),
    Case(
        "lexmae",
        "max_query_terms: 64}",
        "max_query_terms: 2048}",
        "retrieval.max_query_terms",
        "2048 is out of range: must be in [1, 1024]",
        "mini",
        "  mini:",
        True,
    ),
    # non-finite numbers and sizes no machine holds (issue 40): `lr: .inf` ran to a NaN loss at step 2
    Case("cotmae", "lr: 4.0e-4", "lr: .inf", "pretrain.lr", "inf is not a finite number"),
    Case("cotmae", "lr: 4.0e-4", "lr: .nan", "pretrain.lr", "nan is not a finite number"),
    Case(
        "cotmae",
        "  global_queries: 64",
        "  global_queries: 99999999999999999999999",
        "finetune.global_queries",
        "99999999999999999999999 is out of range: must be in [1, 1e+12]",
    ),
    Case(
        "cotmae",
        "  seed: 42",
        "  seed: 99999999999999999999999",
        "corpus.seed",
        "is out of range: must be in [0, 4294967295]",
    ),
    # unknown names, each with a did-you-mean where one is close
    Case(
        "cotmae",
        "objective: cotmae",
        "objective: cotmea",
        "pretrain.objective",
        "unknown objective 'cotmea' (did you mean cotmae?; known: cocondenser, cotmae, cpdae, lexmae, mlm, none)",
    ),
    Case(
        "cotmae",
        "dec_loss_coef: 1.0}",
        "dec_loss_coef: 1.0, mask_ratio: 0.3}",
        "pretrain.objective_params.mask_ratio",
        "objective cotmae has no parameter 'mask_ratio' (did you mean enc_mask_ratio?; it takes: enc_mask_ratio=0.3",
    ),
    Case("cotmae", "papers: [qc-v2, qc-v1]", "papers: [qc-v2, qc-v9]", "papers", "unknown paper 'qc-v9' (did you mean"),
    Case("cotmae", "papers: [qc-v2, qc-v1]", "papers: [qc-v2, {qc-v1: table 1}]", "papers", "is not a paper key"),
    Case(
        "cotmae",
        "datasets: [msmarco-dev, dl19, dl20]",
        "datasets: [msmarco-dev, dl19, dl2O]",
        "datasets",
        "unknown benchmark 'dl2O' (did you mean dl20?",
    ),
    Case(
        "cotmae",
        "train_queries: msmarco-passage-train",
        "train_queries: msmarco-pasage-train",
        "finetune.train_queries",
        "unknown benchmark 'msmarco-pasage-train' (did you mean msmarco-passage-train?",
    ),
    Case(
        "cotmae",
        "train_queries: nfcorpus-train",
        "train_queries: nfcorpus-tran",
        "finetune.train_queries",
        "the catalog has no 'tran' queries of 'nfcorpus'",
        "mini",
        "  mini:",
        True,
    ),
    Case(
        "cocondenser",
        "retriever2: {init: pretrained,",
        "retriever2: {init: retriver1,",
        "finetune.retriever2.init",
        "'retriver1' is not one of pretrained, retriever1",
    ),
    Case(
        "cotmae",
        "negatives: [mined]",
        "negatives: [mind]",
        "finetune.retriever2.negatives",
        "'mind' is not one of mined, bm25",
        "mini",
        "retriever2: {",
    ),  # the paper profile sets its own
    Case(
        "cotmae",
        "data: {msmarco_passages: titled",
        "data: {msmarco_passages: title",
        "data.msmarco_passages",
        "'title' is not one of plain, titled",
        in_profile=True,
    ),
    Case(
        "lexmae",
        "reranker: bi-encoder, reranker_checkpoint: all-minilm-l6-v2,",
        "reranker: bi-encoder,",
        "finetune.retriever3.reranker_checkpoint",
        "is required with reranker: bi-encoder",
        "mini",
        "  mini:",
        True,
    ),
]


@pytest.fixture
def specs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of baselines/ that the harness reads instead (the reported registry stays the project's)."""
    root = tmp_path / "specs"
    shutil.copytree(BASELINES_DIR, root)
    monkeypatch.setenv("HARNESS_SPECS_DIR", str(root))
    monkeypatch.setenv("HARNESS_RUNS_DIR", str(tmp_path / "runs"))
    return root


def edit(path: Path, old: str, new: str, after: str = "") -> int:
    """Replace the first `old` (after the first `after`) in `path`; the 1-based line of the change."""
    text = path.read_text()
    at = text.index(old, text.index(after) if after else 0)
    path.write_text(text[:at] + new + text[at + len(old) :])
    return text.count("\n", 0, at) + 1


def error_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.strip()]


@pytest.mark.parametrize("case", CASES, ids=[f"{c.method}:{c.new}" for c in CASES])
def test_a_wrong_value_fails_validate_and_the_run_before_its_first_stage(case: Case, specs: Path, capsys):
    line = edit(specs / f"{case.method}.yaml", case.old, case.new, case.after)
    where = f"{specs / case.method}.yaml:{line}: {case.key}" + (
        f" in profile '{case.profile}'" if case.in_profile else ""
    )

    assert main(["validate"]) == 1
    out = capsys.readouterr().out
    section = out.split("== method specs: ", 1)[1].split("\n== ", 1)[0]
    listed = [ln.strip() for ln in section.splitlines()[1:]]
    # one problem, listed once (not once per profile or per spec that extends the one written)
    assert len(listed) == 1, listed
    assert listed[0].startswith(f"{where}: ") and case.says in listed[0], listed[0]

    assert main(["run", "--method", case.method, "--profile", case.profile, "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert error_lines(err) == [f"error: {listed[0]}"]


def test_validate_lists_every_problem_of_every_spec_and_still_counts_the_others_deviations(specs: Path, capsys):
    line_steps = edit(specs / "cotmae.yaml", "steps: 50000", "steps: -5")
    line_lr = edit(specs / "cotmae.yaml", "lr: 4.0e-4", "lr: fast")
    line_ratio = edit(specs / "cpdae.yaml", "mask_ratio: 0.15", "mask_ratio: 1.5")
    assert main(["validate"]) == 1
    out = capsys.readouterr().out
    assert f"cotmae.yaml:{line_steps}: pretrain.steps: -5 is out of range" not in out  # lr is not a number:
    assert f"cotmae.yaml:{line_lr}: pretrain.lr: 'fast' is not a number" in out  # the config is not built
    assert f"cpdae.yaml:{line_ratio}: pretrain.objective_params.mask_ratio: 1.5 is out of range" in out
    assert "specs: 2 problem(s)" in out
    # lexmae's deviation and cpdae's are counted though other specs have problems (it said 0 before)
    assert "== lexmae [paper]: 1 deviation(s)" in out
    deviations = int(out.rsplit("paper profiles: ", 1)[1].split()[0])
    assert deviations > 0


def test_run_refuses_a_spec_with_a_problem_before_anything_runs(specs: Path, monkeypatch):
    from harness.run import runner

    edit(specs / "cotmae.yaml", "enc_mask_ratio: 0.30, dec_mask_ratio: 0.45", "enc_mask_ratio: 1.5, dec_mask_ratio: 2")
    monkeypatch.setattr(runner, "_run_spec", lambda *a, **k: pytest.fail("a stage started"))
    for profile in ("tiny", None):  # with no profile, the paper profile's declared hardware picks one
        with pytest.raises(SpecProblems) as err:
            runner.run_method("cotmae", profile)
        assert [p.split(": ", 2)[1] for p in err.value.problems] == [
            "pretrain.objective_params.enc_mask_ratio",
            "pretrain.objective_params.dec_mask_ratio",
        ]


def test_a_spec_file_that_is_not_utf8_is_one_line_naming_it(specs: Path, capsys):
    path = specs / "cotmae.yaml"
    path.write_bytes(path.read_bytes().replace(b"Wu et al. 2022", "Wu et al. 2022, café".encode("latin-1")))
    for argv in (["ls", "methods"], ["run", "--method", "cotmae", "--profile", "tiny", "--dry-run"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert error_lines(err) == [f"error: {path}:1: not UTF-8 text (byte 0xe9) (fix: save the file as UTF-8)"]
    assert main(["validate"]) == 1
    out = capsys.readouterr().out
    assert f"{path}:1: not UTF-8 text" in out and "specs: 1 problem(s)" in out  # cotmae_qc extends it: listed once
    assert main(["run", "--method", "cocondenser", "--profile", "tiny", "--dry-run"]) == 0  # the others still run


def test_every_committed_spec_and_profile_has_no_value_problem():
    from harness.run.validation import validate_all, value_problems

    assert validate_all() == []
    for name in list_methods():
        for profile in profiles_of(name):
            assert value_problems(load_method(name, profile)) == []


# --- the declarations stay true to the code -----------------------------------------------------


def test_an_objective_takes_its_parameters_from_its_declaration_only():
    """Defaults live in the registration: a constructor that declares its own would be a second source."""
    from harness.pretrain.objectives import objectives

    for name, decl in objectives().items():
        signature = inspect.signature(decl.cls.__init__).parameters
        assert [k for k in signature if k not in ("self", "bert_config")] == ["params"], name


def test_an_objective_is_built_only_with_parameters_of_their_declared_kind():
    from objective_fixtures import toy_config

    from harness.pretrain.objectives import build_objective

    with pytest.raises(HarnessError, match=r"objective cotmae: n_head_layers: 'two' is not a whole number"):
        build_objective("cotmae", toy_config(), n_head_layers="two")
    with pytest.raises(HarnessError, match=r"dec_mask_ratio: 0.2 is the decoder's total .* >= enc_mask_ratio \(0.3\)"):
        build_objective("lexmae", toy_config(), dec_mask_ratio=0.2)


def test_a_trainer_config_reports_every_range_problem_with_its_field():
    from harness.pretrain.trainer import TrainConfig
    from harness.spec.stage_settings import PretrainSettings
    from harness.training.config import ConfigError

    settings = PretrainSettings(objective="mlm", global_batch=8, per_device_batch=8, lr=-1.0, warmup_ratio=2.0)
    with pytest.raises(ConfigError) as err:
        TrainConfig(**settings.trainer_kwargs(0), output_dir=".")
    assert [key for key, _ in err.value.problems] == ["lr", "warmup_ratio", "steps"]
    assert str(err.value) == (
        "invalid training config: lr must be positive; warmup_ratio must be in [0, 1]; "
        "steps must be a positive integer, got 0"
    )


def test_every_key_with_a_kind_is_a_declared_spec_key():
    from harness.spec.keys import BLOCKS, KEY_KINDS, Block

    for path in KEY_KINDS:
        keys = BLOCKS[path[0]]
        for key in path[1:-1]:
            keys = keys[key].keys if isinstance(keys[key], Block) else pytest.fail(f"{path}: {key} is not a block")
        assert path[-1] in keys, path


def test_the_settings_kinds_cover_every_field():
    from harness.spec.block_settings import CorpusSettings, QgenSettings, RetrievalSettings, TokenizerSettings
    from harness.spec.kinds import Kind
    from harness.spec.settings import default_of, spec_key
    from harness.spec.stage_settings import PretrainSettings, RerankerSettings, RerankerTrainSettings, StageSettings

    for cls in (
        PretrainSettings,
        StageSettings,
        RerankerSettings,
        RerankerTrainSettings,
        TokenizerSettings,
        CorpusSettings,
        QgenSettings,
        RetrievalSettings,
    ):
        for f in dataclasses.fields(cls):
            key = spec_key(f)
            assert isinstance(f.metadata["kind"], Kind), f.name
            assert f.metadata["kind"].problem(cls.example(key)) is None, f.name  # its example is right
            default = default_of(f)
            assert default in (None, dataclasses.MISSING) or f.metadata["kind"].problem(default) is None, f.name


# --- a stage that would train at lr 0 -----------------------------------------------------------


def test_a_one_step_stage_under_warm_up_is_refused_naming_warmup_ratio(specs: Path, capsys):
    """Linear warm-up starts at lr 0: one step under any warm-up trains nothing (the rehearsal's did)."""
    edit(specs / "cotmae.yaml", "pretrain: {steps: 400,", "pretrain: {steps: 1,", "  tiny:")
    assert main(["validate"]) == 1
    out = capsys.readouterr().out
    listed = [ln.strip() for ln in out.split("== method specs: ", 1)[1].split("\n== ", 1)[0].splitlines()[1:]]
    assert len(listed) == 1 and "pretrain.warmup_ratio" in listed[0], listed
    assert "0.1 leaves pre-training's only optimiser step (steps 1) at lr 0" in listed[0]
    assert "set warmup_ratio: 0" in listed[0]
    assert main(["run", "--method", "cotmae", "--profile", "tiny", "--dry-run"]) == 2
    assert error_lines(capsys.readouterr().err) == [f"error: {listed[0]}"]
    # no warm-up: the one step trains at the peak lr
    edit(specs / "cotmae.yaml", "pretrain: {steps: 1,", "pretrain: {steps: 1, warmup_ratio: 0,", "  tiny:")
    assert main(["validate"]) == 0


def test_one_step_fine_tuning_stages_and_teacher_are_refused_under_warm_up(specs: Path):
    from harness.run.validation import value_problems

    # 16 training queries: retrievers 1 and 2 take one step of 16; retriever 3 two of 8
    edit(specs / "lexmae.yaml", "max_train_queries: 600", "max_train_queries: 16", "  tiny:")
    problems = value_problems(load_method("lexmae", "tiny"))
    assert [p.split(": ", 2)[1].split()[0] for p in problems] == [
        "finetune.retriever1.warmup_ratio",
        "finetune.retriever2.warmup_ratio",
    ]
    assert "retriever1's only optimiser step (1 epoch(s) of at most 16 training groups, 16 a step)" in problems[0]
    # no warm-up on the retrievers; the tiny cross-encoder teacher in one step of 16 queries
    edit(specs / "lexmae.yaml", "max_train_queries: 16", "max_train_queries: 16\n      warmup_ratio: 0", "  tiny:")
    edit(
        specs / "lexmae.yaml",
        "retriever3: {reranker: tiny-cross-encoder,",
        "retriever3: {reranker: tiny-cross-encoder, reranker_train: {epochs: 1, queries_per_device: 16},",
        "  tiny:",
    )
    problems = value_problems(load_method("lexmae", "tiny"))
    assert [p.split(": ", 2)[1].split()[0] for p in problems] == ["finetune.retriever3.reranker_train.warmup_ratio"]


def test_a_stage_on_two_negative_pools_is_not_refused_for_one_query_batch(specs: Path):
    """One group per query and pool: retriever 2 on mined + BM25 negatives takes two steps of 16 queries."""
    from harness.run.validation import value_problems

    edit(specs / "cotmae.yaml", "max_train_queries: 600", "max_train_queries: 16", "  tiny:")
    edit(specs / "cotmae.yaml", "retriever1: {epochs: 2}", "retriever1: {epochs: 1}", "  tiny:")
    edit(
        specs / "cotmae.yaml", "retriever2: {epochs: 2}", "retriever2: {epochs: 1, negatives: [mined, bm25]}", "  tiny:"
    )
    spec = load_method("cotmae", "tiny")
    assert spec.get("finetune.retriever2.negatives") == ["mined", "bm25"] and spec.get("finetune.global_queries") == 16
    problems = value_problems(spec)  # retriever 1 (BM25 negatives only): one step of its 16 groups
    assert len(problems) == 1 and "finetune.warmup_ratio: 0.1 leaves retriever1's only optimiser step" in problems[0]


def test_every_rehearsal_stage_trains_at_a_positive_lr():
    """Each rehearsal stage takes one step: the rehearsal sets no warm-up on any of them."""
    from harness.run.validation import value_problems
    from harness.spec.stage_settings import PretrainSettings, RerankerSettings, StageSettings

    for name in list_methods():
        if "rehearsal" not in profiles_of(name):
            continue
        spec = load_method(name, "rehearsal")
        assert value_problems(spec) == []
        if spec.get("pretrain.objective") not in (None, "none"):
            assert PretrainSettings.from_spec(spec).warmup_ratio == 0
        for stage in ("retriever1", "retriever2", "retriever3"):
            if spec.get(f"finetune.{stage}") is not None:
                assert StageSettings.from_spec(spec, stage).warmup_ratio == 0, (name, stage)
        if spec.get("finetune.retriever3.reranker_train"):
            assert RerankerSettings.from_spec(spec).train().warmup_ratio == 0
