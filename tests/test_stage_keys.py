"""A stage's cache key covers every setting that reaches it, and nothing that only steers the run.

For every spec and profile, each setting of each typed block (harness.spec.block_settings,
harness.spec.stage_settings) is changed in turn, the run is planned again (``run --dry-run``'s code, which
computes every stage key as a run does), and:

- a keyed setting moves the key of every planned stage that reads it (the block's ``reads``, or the
  setting's own ``stages``);
- a setting declared ``keyed=False`` (a run control, or one that is not read) moves no key at all.

The trainers' resume identities follow the same rule (``LoopConfig.identity``).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest

from harness.core.errors import HarnessError
from harness.data.setting import data_setting
from harness.run.runner import plan_method
from harness.spec.block_settings import CorpusSettings, QgenSettings, RetrievalSettings, TokenizerSettings
from harness.spec.files import list_methods
from harness.spec.kinds import MAPPING
from harness.spec.method import MethodSpec, load_method, profiles_of
from harness.spec.settings import Settings, default_of, spec_key
from harness.spec.stage_settings import (
    PretrainSettings,
    RerankerSettings,
    RerankerTrainSettings,
    StageSettings,
    finetune_settings,
)

BLOCKS: tuple[type[Settings], ...] = (
    TokenizerSettings,
    CorpusSettings,
    QgenSettings,
    RetrievalSettings,
    PretrainSettings,
    RerankerSettings,
)
RETRIEVERS = ("retriever1", "retriever2", "retriever3")
# Settings of a block that a family's stages never read, with why.
NOT_READ_BY = {
    # trained methods' BM25 runs are their training negatives, searched to the stage's negative_depth
    "dense": {("retrieval", "depth")},
    "learned-sparse": {("retrieval", "depth")},
}


def plans() -> list[tuple[str, str]]:
    return [(method, profile) for method in list_methods() for profile in profiles_of(method)]


def planned_keys(spec: MethodSpec) -> dict[tuple[str, str | None], str]:
    with data_setting(spec):
        ctx = plan_method(spec, list(spec.get("datasets") or []))
    return {(e["stage"], e["dataset"]): e["key"] for e in ctx.stages.entries if e.get("key")}


def blocks_of(
    spec: MethodSpec, planned: set[str]
) -> Iterator[tuple[type[Settings], tuple[str, ...], Settings, tuple[str, ...]]]:
    """(class, where the block sits in the spec, its settings, the stages that read it), for each block
    that a stage of the plan reads."""
    for cls in BLOCKS:
        if planned & set(cls.reads):
            yield cls, cls.block, cls.from_spec(spec), cls.reads  # type: ignore[attr-defined]  # every block class declares `block`
    for stage in RETRIEVERS:
        if stage in planned:
            yield StageSettings, ("finetune", stage), StageSettings.from_spec(spec, stage), (stage,)
    if "reranker" in planned:
        yield (
            RerankerTrainSettings,
            ("finetune", "retriever3", "reranker_train"),
            RerankerSettings.from_spec(spec).train(),
            RerankerTrainSettings.reads,
        )


def candidates(f: dataclasses.Field, value: Any) -> list[Any]:
    """Other values of setting `f` its kind accepts, most likely to plan first."""
    kind = f.metadata["kind"]
    if isinstance(value, bool):
        found = [not value]
    elif isinstance(value, int):
        found = [value + 1, value * 2, value // 2]
    elif isinstance(value, float):
        found = [value / 2 if value else 0.5, value * 2, value + 0.25]
    elif isinstance(value, dict) or kind is MAPPING:
        value = value or {}
        found = [{k: v for k, v in list(value.items())[:-1]}, {**value, "lr": 0.5}, {"x": 1}]
    else:  # text, or unset
        found = [*kind.choices, f.metadata["example"], default_of(f), kind.example, "bf16", "scifact-train", "x"]
    return [
        c for c in found if c is not None and c is not dataclasses.MISSING and c != value and kind.problem(c) is None
    ]


def with_value(spec: MethodSpec, where: tuple[str, ...], key: str, value: Any) -> MethodSpec:
    config = copy.deepcopy(spec.config)
    node = config
    for part in where:
        if not isinstance(node.get(part), dict):
            node[part] = {}
        node = node[part]
    node[key] = value
    return MethodSpec(spec.name, spec.profile, spec.path, config)


@pytest.mark.parametrize("method,profile", plans())
def test_each_setting_moves_the_keys_of_the_stages_that_read_it(method, profile, tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    spec = load_method(method, profile)
    before = planned_keys(spec)
    planned = {stage for stage, _ in before}
    problems = []
    for _cls, where, settings, reads in blocks_of(spec, planned):
        for f in dataclasses.fields(settings):  # type: ignore[arg-type]  # settings are dataclasses
            readers = planned & set(f.metadata["stages"] or reads)
            if not readers and f.metadata["keyed"]:
                continue  # no stage of this plan reads it
            key, value = spec_key(f), getattr(settings, f.name)
            tried, others = [], candidates(f, value)
            if not others:
                continue  # its kind admits no other value (e.g. the one implemented representation)
            name = f"{'.'.join(where)}.{key}"
            if (where[0], key) in NOT_READ_BY.get(spec.get("family"), ()):
                readers = set()  # the family's stages never read it (a keyed=False setting still must not move keys)
            still = set(readers)  # readers whose key no value has moved yet
            planned_any = False
            for other in others:
                try:
                    after = planned_keys(with_value(spec, where, key, other))
                except HarnessError as exc:
                    tried.append(f"{other!r}: {str(exc)[:120]}")
                    continue
                planned_any = True
                moved = {stage for (stage, dataset), k in before.items() if after.get((stage, dataset)) != k}
                if not f.metadata["keyed"] and moved:
                    problems.append(f"{name} -> {other!r}: declared keyed=False, but moved the keys of {sorted(moved)}")
                still -= moved
                if not still:
                    break  # every reader moved (a keyed=False setting: one value planned is enough)
            if not planned_any:
                problems.append(f"{name}: no other value could be planned ({'; '.join(tried)})")
            elif f.metadata["keyed"] and still:
                problems.append(f"{name} {value!r} -> {others}: the keys of {sorted(still)} did not move")
    assert not problems, f"{method} [{profile}]:\n" + "\n".join(problems)


def test_the_cases_the_issue_found_move_the_fine_tuning_keys(tmp_path, monkeypatch):
    """A changed `finetune.grad_clip` or `precision` reused a stale retriever (issue 36)."""
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    spec = load_method("nopretrain", "tiny")
    before = planned_keys(spec)
    for key, value in (("grad_clip", 0.05), ("precision", "bf16")):
        after = planned_keys(with_value(spec, ("finetune",), key, value))
        for stage in ("retriever1", "retriever2"):
            assert all(after[k] != v for k, v in before.items() if k[0] == stage), (key, stage)
        assert all(after[k] == v for k, v in before.items() if k[0] in ("tokenizer", "random_init")), key


def test_a_stage_block_overrides_the_shared_fine_tuning_keys():
    spec = load_method("cotmae", "tiny")
    assert finetune_settings(spec, "retriever1").get("epochs") == StageSettings.from_spec(spec, "retriever1").epochs


def test_trainer_identities_leave_out_run_controls_only():
    from harness.finetune.dense import DenseTrainConfig
    from harness.pretrain.trainer import TrainConfig
    from harness.training.config import LoopConfig

    controls = {f.name for f in dataclasses.fields(TrainConfig) if f.metadata.get("run_control")}
    assert controls == {
        "checkpoint_every",
        "keep_checkpoints",
        "stop_after",
        "log_every",
        "progress",
        "device",
        "output_dir",
        "find_unused_parameters",
    }
    stage = StageSettings.from_mapping({"lr": 1e-4, "global_queries": 4, "passages_per_query": 4, "epochs": 1}, "x")
    config = DenseTrainConfig(**stage.trainer_kwargs(1))
    base = config.identity()
    for f in dataclasses.fields(LoopConfig):
        if f.metadata.get("run_control"):
            assert f.name not in base
    for name in ("grad_clip", "precision", "lr", "max_p_len", "temperature", "seed"):
        assert name in base
    changed = dataclasses.replace(config, grad_clip=0.05, log_every=3, progress=False)
    assert changed.identity() == {**base, "grad_clip": 0.05}
