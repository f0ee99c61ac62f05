"""The values of a resolved spec, checked before any stage runs: every check a run would otherwise
make only when the stage that reads the value starts (on the paper profile, hours in).

``validate`` runs these over every spec and profile (:func:`validate_all`); ``run`` (and ``run
--dry-run``) runs them over the spec it resolved before anything else (:func:`require_valid`). Each
value is checked against what is declared once elsewhere, never restated here:

- its type, and the ranges no trainer config holds: the typed blocks of harness.spec.stage_settings and
  harness.spec.block_settings (``PretrainSettings``, ``StageSettings``, ``RetrievalSettings``, ...), as harness.spec.kinds;
- its range: the trainer configs a run builds (``TrainConfig``, ``DenseTrainConfig``,
  ``SpladeTrainConfig``, ``RerankerTrainConfig``: their ``need(...)`` checks), built here the same way;
- the objective's name and parameters: harness.pretrain.objective_params, per objective;
- names: the papers of the reported registry, the catalog's benchmarks and splits, the data variants;
- the learning-rate schedule: a training stage whose every step would be at lr 0 (one step under
  linear warm-up, :func:`harness.training.config.every_step_at_zero_lr`) trains nothing (:func:`_warmup`).

A problem names where the value is written (``file:line``, found in the spec, the specs it extends
or the fragments they include), its key path, and what would be right::

    baselines/cotmae.yaml:21: pretrain.steps: 'four hundred' is not a whole number (e.g. steps: 400)
"""

from __future__ import annotations

import difflib
import math
from pathlib import Path
from typing import Any, NamedTuple

from harness.core.errors import HarnessError, SpecProblems, UnknownNameError
from harness.core.seeds import DEFAULT_SEED
from harness.data.catalog import benchmark_split, get_benchmark, list_benchmarks
from harness.data.setting import PASSAGE_VARIANTS, resolve_mirror
from harness.papers.registry import paper_keys
from harness.pretrain.objective_params import NONE
from harness.pretrain.objectives import objective_problems, objectives
from harness.spec.block_settings import CorpusSettings
from harness.spec.checks import locate
from harness.spec.keys import KEY_KINDS, NEGATIVE_POOLS
from harness.spec.kinds import example_text, one_of
from harness.spec.method import MethodSpec, validate_specs
from harness.spec.run_settings import DataSettings, FinetuneSettings
from harness.spec.schema import DERIVED_PROFILE
from harness.spec.stage_settings import (
    BI_ENCODER_TEACHER,
    TINY_RERANKER,
    PretrainSettings,
    RerankerSettings,
    RerankerTrainSettings,
    StageSettings,
    checkable,
    finetune_settings,
)
from harness.training.config import ConfigError, every_step_at_zero_lr

# fine-tuning step in `stages:` -> the stage block it reads
FINETUNE_STEPS = {"finetune_r1": "retriever1", "finetune_r2": "retriever2", "finetune_r3": "retriever3"}


class Finding(NamedTuple):
    """A value problem: the key path it is about (in the resolved spec) and what is wrong."""

    path: tuple[str, ...]
    problem: str
    # where the value may be written, the one that wins first (default: path itself)
    written: tuple[tuple[str, ...], ...] = ()


def _config_findings(prefix: tuple[str, ...], exc: Any, values: dict[str, Any]) -> list[Finding]:
    """A trainer config's failed checks (ConfigError: field, "field must be ...") as findings at
    ``prefix + field``, naming the spec's value (``-1 is out of range: must be positive``)."""
    found = []
    for key, problem in exc.problems:
        rule = problem.removeprefix(f"{key} ").split(", got ")[0]
        found.append(Finding((*prefix, key), f"{values[key]!r} is out of range: {rule}" if key in values else rule))
    return found


def value_problems(spec: MethodSpec) -> list[str]:
    """Every problem of ``spec``'s values, one printable line each (``file:line: key.path: problem``)."""
    return list(dict.fromkeys(_message(spec, f) for f in findings(spec)))  # a shared stage key: once


def require_valid(spec: MethodSpec) -> None:
    """What ``run`` checks first: a spec with a wrong value stops before any stage (exit 2, a line a problem)."""
    problems = value_problems(spec)
    if problems:
        raise SpecProblems(problems)


def validate_all(root: Path | None = None) -> list[str]:
    """Every problem of every spec and profile: its structure (harness.spec.method) and its values."""
    return validate_specs(root, value_problems)


def findings(spec: MethodSpec) -> list[Finding]:
    family = spec.get("family")
    found = _papers(spec) + _datasets(spec) + _data(spec) + _keys(spec)
    if family == "lexical":
        return found
    objective = PretrainSettings.values(spec).get("objective")  # as stated: the checks below vouch for it
    if objective not in (None, NONE):
        found += _pretrain(spec)
    steps = spec.get("stages") or []
    stages = [stage for step, stage in FINETUNE_STEPS.items() if step in steps]
    if stages:
        found += _finetune_keys(spec)
    for stage in stages:
        found += _stage(spec, stage, family)
    if not found:  # the step counts below read the settings the checks above vouched for
        found += _warmup(spec, objective not in (None, NONE), stages)
    return found


# --- the checks -----------------------------------------------------------------------------------


def _papers(spec: MethodSpec) -> list[Finding]:
    """`papers:` names the registry's papers whose cells the method is compared with: an unknown one
    would leave the method without those cells and say nothing."""

    papers = spec.get("papers")
    if not isinstance(papers, list):
        return []  # harness.spec.method reports a papers block that is not a list
    known = paper_keys()
    found = []
    for paper in papers:
        if not isinstance(paper, str):
            found.append(Finding(("papers",), f"{paper!r} is not a paper key (e.g. papers: [{known[0]}])"))
        elif paper not in known:
            found.append(Finding(("papers",), _unknown("paper", paper, known)))
    return found


def _datasets(spec: MethodSpec) -> list[Finding]:
    found = []
    for name in spec.get("datasets") or []:
        try:
            get_benchmark(str(name))
        except UnknownNameError as exc:
            found.append(Finding(("datasets",), _unknown("benchmark", str(name), exc)))
    return found


def _data(spec: MethodSpec) -> list[Finding]:
    """The data block, as harness.data.setting applies it when a run starts."""

    found = []
    stated = DataSettings.values(spec)  # as stated: this checks it
    passages = stated.get("msmarco_passages")
    problem = passages is not None and one_of(*PASSAGE_VARIANTS).problem(passages)
    if problem:
        found.append(Finding(("data", "msmarco_passages"), problem))
    mirror = stated.get("mirror")
    try:
        if mirror:
            resolve_mirror(str(mirror))
    except HarnessError as exc:  # "data.mirror <value>: no such folder ..."
        found.append(Finding(("data", "mirror"), str(exc).split(": ", 1)[-1]))
    return found


def _pretrain(spec: MethodSpec) -> list[Finding]:
    """The pretrain block: its types (PretrainSettings), the objective and its parameters
    (objective_params), and the ranges of the pre-training trainer's config, built as the stage builds it."""
    pre = spec.get("pretrain") or {}
    kinds = PretrainSettings.problems(pre)
    found = [Finding(("pretrain", key), problem) for key, problem in kinds]
    objective = pre.get("objective")
    # The registry imports the objectives (and torch): only for a spec that names one.
    known = objectives() if isinstance(objective, str) and objective != NONE else {}
    if isinstance(objective, str) and objective != NONE and objective not in known:
        found.append(Finding(("pretrain", "objective"), _unknown("objective", objective, [*known, NONE])))
    elif objective in known and isinstance(pre.get("objective_params") or {}, dict):
        found += [
            Finding(("pretrain", "objective_params", key), problem)
            for key, problem in objective_problems(objective, pre.get("objective_params") or {})
        ]
    if any(key != "objective_params" for key, _ in kinds):
        return found  # a config of values of the wrong kind cannot be built
    settings = checkable(
        PretrainSettings.from_mapping({k: v for k, v in pre.items() if k != "objective_params"}, "pretrain")
    )
    if settings.steps is None and settings.epochs is None:
        return found + [
            Finding(
                ("pretrain", "steps"),
                "is required: set steps (optimiser steps, e.g. steps: 400) or epochs (passes over the passages)",
                (("pretrain",),),
            )
        ]
    from harness.pretrain.trainer import TrainConfig

    try:  # as harness.pipelines.pretrain.pretrain_stage builds it; steps from epochs are at least 1
        TrainConfig(
            **settings.trainer_kwargs(1 if settings.steps is None else settings.steps),
            seed=DEFAULT_SEED,
            output_dir=".",
        )
    except ConfigError as exc:
        found += _config_findings(("pretrain",), exc, pre)
    return found


def _keys(spec: MethodSpec) -> list[Finding]:
    """Each key of KEY_KINDS the spec sets (null: the pipeline's default) against its kind."""
    found = []
    for path, kind in KEY_KINDS.items():
        value = _get(spec.config, path)
        problem = value is not None and kind.problem(value)
        if problem:
            found.append(Finding(path, f"{problem} (e.g. {path[-1]}: {example_text(kind.example)})"))
    return found


def _finetune_keys(spec: MethodSpec) -> list[Finding]:
    """Keys the pipelines read outside the typed stage blocks, and the training queries' catalog entry."""
    ft = spec.get("finetune") or {}
    found = []
    for stage in ("retriever1", "retriever2", "retriever3"):
        for pool in finetune_settings(spec, stage).get("negatives") or []:
            if pool not in NEGATIVE_POOLS:
                found.append(_in_stage(spec, stage, "negatives", f"{pool!r} is not one of {', '.join(NEGATIVE_POOLS)}"))
    train = ft.get("train_queries")
    if train is None:
        found.append(
            Finding(
                ("finetune", "train_queries"),
                "is required: the <benchmark>-<split> whose queries and qrels train every stage (e.g. nfcorpus-train)",
                (("finetune",),),
            )
        )
    elif isinstance(train, str):
        found += _train_queries(train)
    return found


def _train_queries(value: str) -> list[Finding]:
    """As harness.pipelines.dense.check_train_queries, which a run makes before its first stage."""

    name, split = benchmark_split(value)
    try:
        bench = get_benchmark(name)
    except UnknownNameError:
        known = list_benchmarks()  # a misspelt msmarco-passage-train parses as benchmark 'msmarco': match the whole
        close = difflib.get_close_matches(value, known, n=1, cutoff=0.5) or difflib.get_close_matches(name, known, n=1)
        hint = f"did you mean {close[0]}?; " if close else ""
        return [
            Finding(
                ("finetune", "train_queries"),
                f"unknown benchmark {value!r} ({hint}<benchmark>-<split>, "
                f"e.g. nfcorpus-train; benchmarks: {', '.join(sorted(known))})",
            )
        ]
    if not bench.has_split(split):
        return [
            Finding(
                ("finetune", "train_queries"),
                f"the catalog has no '{split}' queries of '{name}' (its splits: {', '.join(bench.splits()) or 'none'})",
            )
        ]
    return []


def _stage(spec: MethodSpec, stage: str, family: Any) -> list[Finding]:
    """One fine-tuning stage: its types (StageSettings) and its trainer config's ranges, built as the
    family's pipeline builds it; stage 3's tiny cross-encoder's config too."""
    values = finetune_settings(spec, stage)
    found = [_in_stage(spec, stage, key, problem) for key, problem in StageSettings.problems(values)]
    if found:
        return found

    settings = checkable(StageSettings.from_mapping(values, stage))
    try:  # queries per device from global_queries, >= 1 on any device count
        if family == "learned-sparse":  # as harness.pipelines.learned_sparse.splade_train_stage
            from harness.finetune.splade import SpladeTrainConfig

            SpladeTrainConfig(**settings.splade_kwargs(1), distill=stage == "retriever3", seed=DEFAULT_SEED)
        else:  # as harness.pipelines.dense.train_stage
            from harness.finetune.dense import DenseTrainConfig

            DenseTrainConfig(**settings.trainer_kwargs(1), seed=DEFAULT_SEED)
    except ConfigError as exc:
        found += [
            _in_stage(spec, stage, "global_queries" if f.path[0] == "queries_per_device" else f.path[0], f.problem)
            for f in _config_findings((), exc, values)
        ]
    if stage == "retriever3":
        found += _reranker_train(spec)
        if values.get("reranker") == BI_ENCODER_TEACHER and not values.get("reranker_checkpoint"):
            # as harness.pipelines.learned_sparse.configured_reranker, before the first stage
            found.append(
                _in_stage(
                    spec,
                    stage,
                    "reranker_checkpoint",
                    "is required with reranker: bi-encoder (a local bi-encoder, e.g. all-minilm-l6-v2)",
                )
            )
    return found


def _reranker_train(spec: MethodSpec) -> list[Finding]:
    """``finetune.retriever3.reranker_train``: the tiny cross-encoder's settings, their kinds
    (RerankerTrainSettings) and the ranges of the RerankerTrainConfig built from them."""
    from harness.finetune.reranker import RerankerTrainConfig

    train = _get(spec.get("finetune") or {}, ("retriever3", "reranker_train"))
    if not isinstance(train, dict):
        return []
    path = ("finetune", "retriever3", "reranker_train")
    found = [Finding((*path, key), problem) for key, problem in RerankerTrainSettings.problems(train)]
    if found:
        return found
    try:
        RerankerTrainConfig(
            **RerankerTrainSettings.from_mapping(train, ".".join(path)).trainer_kwargs(), seed=DEFAULT_SEED
        )
    except ConfigError as exc:
        found += _config_findings(path, exc, train)
    return found


def _warmup(spec: MethodSpec, pretrains: bool, stages: list[str]) -> list[Finding]:
    """Each training stage whose declared plan has one optimiser step under a warm-up that puts that
    step at lr 0: it would leave its weights where they started (the rehearsal's one-step stages did,
    before the rehearsal set warmup_ratio 0). Steps as the stage counts them on the spec's declared
    devices, at most: a fine-tuning stage's (and the tiny teacher's) are bounded only when
    ``finetune.max_train_queries`` caps the training queries, and a stage trains on one group per
    query and negative pool (harness.finetune.negatives.make_examples: retriever 2 of the dense
    rehearsals, on mined and BM25 negatives, takes two steps of its 4 queries)."""
    found = []
    devices = max(1, int((spec.get("hardware") or {}).get("devices") or 1))
    if pretrains:
        pre = PretrainSettings.from_spec(spec)
        passages = CorpusSettings.from_spec(spec).max_passages
        steps = pre.steps or (math.ceil(pre.epochs * passages / pre.global_batch) if pre.epochs and passages else None)
        problem = _zero_lr(
            pre.warmup_ratio,
            steps,
            "pre-training",
            f"steps {pre.steps}"
            if pre.steps
            else f"{pre.epochs} epoch(s) of at most {passages} passages in batches of {pre.global_batch}",
        )
        if problem:
            found.append(Finding(("pretrain", "warmup_ratio"), problem, (("pretrain", "warmup_ratio"), ("pretrain",))))
    most = FinetuneSettings.values(spec).get("max_train_queries")  # as stated: an int caps the steps
    if not isinstance(most, int):
        return found
    for stage in stages:
        s = StageSettings.from_spec(spec, stage)
        batch = devices * max(1, s.global_queries // devices)
        groups = most * max(1, len(finetune_settings(spec, stage).get("negatives") or []))
        problem = _zero_lr(
            s.warmup_ratio,
            s.epochs * (groups // batch),
            stage,
            f"{s.epochs} epoch(s) of at most {groups} training groups, {batch} a step",
        )
        if problem:
            found.append(_in_stage(spec, stage, "warmup_ratio", problem))
        if stage == "retriever3" and RerankerSettings.from_spec(spec).reranker == TINY_RERANKER:
            r = RerankerSettings.from_spec(spec).train()
            batch = devices * r.queries_per_device
            problem = _zero_lr(
                r.warmup_ratio,
                r.epochs * (most // batch),
                "the stage-3 teacher",
                f"{r.epochs} epoch(s) of at most {most} training groups, {batch} a step",
            )
            path = ("finetune", "retriever3", "reranker_train")
            if problem:
                found.append(Finding((*path, "warmup_ratio"), problem, ((*path, "warmup_ratio"), path)))
    return found


def _zero_lr(ratio: float, steps: int | None, stage: str, how: str) -> str | None:
    """The problem of ``stage`` taking ``steps`` steps (``how``: where the count comes from) under warm-up ``ratio``."""
    if steps is None or not every_step_at_zero_lr(steps, ratio):
        return None
    return (
        f"{ratio!r} leaves {stage}'s only optimiser step ({how}) at lr 0, where linear warm-up starts, so it "
        "would train nothing; set warmup_ratio: 0 (or train more than one step)"
    )


# --- helpers --------------------------------------------------------------------------------------


def _get(block: dict[str, Any], path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(block, dict):
            return None
        block = block.get(key)
    return block


def _in_stage(spec: MethodSpec, stage: str, key: str, problem: str) -> Finding:
    """A stage setting's finding: the stage's own block sets it, or the shared finetune block does."""
    own = isinstance(spec.get(f"finetune.{stage}"), dict) and key in spec.get(f"finetune.{stage}")
    shared = key in (spec.get("finetune") or {})
    path = ("finetune", stage, key) if own or not shared else ("finetune", key)
    return Finding(path, problem, () if own or shared else (("finetune", stage), ("finetune",)))


def _unknown(kind: str, name: str, known: Any) -> str:
    """``unknown objective 'cotmea' (did you mean cotmae?; known: ...)`` from a list or an UnknownNameError."""
    err = known if isinstance(known, UnknownNameError) else UnknownNameError(kind, name, list(known))
    close = f"did you mean {err.suggestions[0]}?; " if err.suggestions else ""
    listed = str(err).split(" Known: ", 1)[-1]
    return f"unknown {kind} {name!r} ({close}known: {listed})"


def _message(spec: MethodSpec, finding: Finding) -> str:
    """``file:line: key.path: problem``, the line where the value is written for this profile: the
    profile's block first (for the derived rehearsal: its own block, then the paper's), then the top level."""
    profiles = [spec.profile] + (["paper"] if spec.profile == DERIVED_PROFILE else [])
    written = finding.written or (finding.path,)
    candidates = [("profiles", p, *keys) for keys in written for p in profiles] + list(written)
    where, keys = locate(spec.path, candidates)
    label = f" in profile '{keys[1]}'" if keys and keys[0] == "profiles" else ""
    return f"{where}: {'.'.join(finding.path)}{label}: {finding.problem}"
