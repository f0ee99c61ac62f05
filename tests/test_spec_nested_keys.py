"""Nested spec keys (harness/spec/keys.py): a misspelt key anywhere in a spec, a profile included,
is an error naming the file, the line and the key path, with a did-you-mean; the declared keys
cover every spec in baselines/ and none of them is dead."""

from __future__ import annotations

import ast
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.core.errors import HarnessError
from harness.core.paths import BASELINES_DIR, PROJECT_ROOT
from harness.spec.files import key_line, list_methods
from harness.spec.keys import BLOCKS, Block, Keys
from harness.spec.method import load_method, profiles_of, validate_specs

HARNESS = PROJECT_ROOT / "harness"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A specs root holding copies of baselines/*.yaml and their fragments."""
    for spec in BASELINES_DIR.glob("*.yaml"):
        shutil.copy(spec, tmp_path)
    shutil.copytree(BASELINES_DIR / "fragments", tmp_path / "fragments")
    return tmp_path


def edit(path: Path, old: str, new: str, after: str = "") -> int:
    """Replace the first `old` (after the first `after`) in `path`; the 1-based line of the change."""
    text = path.read_text()
    at = text.index(old, text.index(after) if after else 0)
    path.write_text(text[:at] + new + text[at + len(old) :])
    return text.count("\n", 0, at) + 1


def load_error(name: str, profile: str, root: Path) -> str:
    with pytest.raises(HarnessError) as err:
        load_method(name, profile, root)
    return str(err.value)


# --- the project's specs ------------------------------------------------------------------------


def test_every_spec_and_profile_loads_without_problems():
    assert validate_specs() == []
    for name in list_methods():
        for profile in profiles_of(name):
            load_method(name, profile)


# --- misspelt and mistyped keys -----------------------------------------------------------------


def test_misspelt_key_in_a_profile_names_file_line_and_path(root: Path):
    line = edit(root / "cotmae.yaml", "retriever2: {epochs: 1}", "retriever2: {epoch: 1}", after="  mini:")
    message = load_error("cotmae", "mini", root)
    assert f"{root / 'cotmae.yaml'}:{line}: unknown key 'finetune.retriever2.epoch'" in message
    assert "did you mean finetune.retriever2.epochs" in message
    assert len(message.splitlines()) == 2  # "invalid spec:" and the one problem
    # A spec that inherits the key points at the file where it is written.
    assert f"{root / 'cotmae.yaml'}:{line}:" in load_error("cotmae_qc", "paper", root)
    assert sum("finetune.retriever2.epoch'" in p for p in validate_specs(root)) == 1  # once, not per spec/profile


def test_the_retired_mining_block_names_the_setting_that_replaced_it(root: Path):
    line = edit(root / "cotmae.yaml", "  retriever2:", "  mine: {depth: 50}\n  retriever2:")
    message = load_error("cotmae", "paper", root)
    assert f"{root / 'cotmae.yaml'}:{line}: unknown key 'finetune.mine' is retired" in message
    assert "finetune.retriever2.negative_depth" in message


def test_a_record_with_a_redundant_mining_block_hashes_as_todays_spec():
    """Records made before `finetune.mine` was retired stated `mine: {depth: 200, with: retriever1}`: the
    same run as today's spec (mining to retriever 2's negative_depth), so the same settings hash; another
    depth ran other settings and keeps another hash."""
    from harness.spec.hashing import settings_hash

    config = load_method("cotmae", "tiny").config
    finetune = config["finetune"]
    same = {**config, "finetune": {**finetune, "mine": {"depth": 200, "with": "retriever1"}}}
    other = {**config, "finetune": {**finetune, "mine": {"depth": 30}}}
    assert settings_hash(same) == settings_hash(config) != settings_hash(other)


def test_misspelt_key_at_block_depth(root: Path):
    line = edit(root / "cotmae.yaml", "  steps: 50000", "  stepz: 50000")
    message = load_error("cotmae", "paper", root)
    assert f"{root / 'cotmae.yaml'}:{line}: unknown key 'pretrain.stepz' (did you mean pretrain.steps?)" in message


def test_misspelt_objective_param(root: Path, monkeypatch):
    """The objective's own registration decides its parameters: checked when the spec is validated (what
    `run` does first), so loading a spec imports no objective."""
    from harness.run.validation import value_problems

    monkeypatch.setenv("HARNESS_SPECS_DIR", str(root))
    line = edit(root / "cotmae.yaml", "dec_mask_ratio: 0.45", "dec_mask_ration: 0.45")
    problems = value_problems(load_method("cotmae", "tiny"))
    assert any(
        p.startswith(
            f"{root / 'cotmae.yaml'}:{line}: pretrain.objective_params.dec_mask_ration: objective "
            "cotmae has no parameter 'dec_mask_ration' (did you mean dec_mask_ratio?"
        )
        for p in problems
    )


def test_misspelt_top_level_key_of_a_profile(root: Path):
    line = edit(root / "lexmae.yaml", "datasets: [nfcorpus, scifact]", "datasetz: [nfcorpus, scifact]", after="  tiny:")
    message = load_error("lexmae", "tiny", root)
    assert f"lexmae.yaml:{line}: unknown key 'datasetz' in profile 'tiny' (did you mean datasets?)" in message


def test_misspelt_key_in_fields_and_deviations(root: Path):
    edit(root / "bm25.yaml", "fields: {contents: 1.0, title: 1.0}", "fields: {contents: 1.0, titel: 1.0}")
    assert "unknown key 'retrieval.fields.titel' (did you mean retrieval.fields.title?)" in load_error(
        "bm25", "paper", root
    )
    edit(root / "cpdae.yaml", "touches: recipe,", "touches: [recipie],")
    assert "touches unknown condition(s) ['recipie'] (known: recipe, " in load_error("cpdae", "paper", root)


def test_a_block_that_must_be_a_mapping(root: Path):
    line = edit(
        root / "cotmae.yaml", "retriever1: {negatives: [bm25], negative_depth: 200, epochs: 3}", "retriever1: 3"
    )
    message = load_error("cotmae", "paper", root)
    assert f"cotmae.yaml:{line}: 'finetune.retriever1' must be a mapping (" in message and "not int" in message
    line = edit(root / "cotmae.yaml", "hardware: {device_type: cpu, devices: 1}", "hardware: 3", after="  tiny:")
    assert f"cotmae.yaml:{line}: 'hardware' in profile 'tiny' must be dict (" in load_error("cotmae", "tiny", root)


def test_validation_adds_nothing_to_the_config():
    """Every key path of a resolved config is written in a baselines YAML (a spec or a fragment): no
    schema default is added (the conditions a run states are derived apart, harness/spec/conditions.py)."""
    files = [*BASELINES_DIR.glob("*.yaml"), *(BASELINES_DIR / "fragments").glob("*.yaml")]
    raws = [yaml.safe_load(p.read_text()) for p in files]
    written = {
        path for raw in raws for top in [raw, *(raw.get("profiles") or {}).values()] for path in yaml_paths(top, ())
    }
    from harness.spec import rehearsal

    for name in list_methods():
        for profile in profiles_of(name):
            config = load_method(name, profile).config
            allowed = set(written)
            if profile == "rehearsal":  # derived from the paper profile by harness/spec/rehearsal.py's rules
                allowed |= set(yaml_paths(rehearsal.rehearsal_overrides(load_method(name, "paper").config), ()))
            assert set(yaml_paths(config, ())) - allowed == {("profile",)}


def test_key_line_finds_nested_paths():
    spec = BASELINES_DIR / "cotmae.yaml"
    text = spec.read_text().splitlines()
    assert text[key_line(spec, "finetune.retriever2") - 1].lstrip().startswith("retriever2:")
    line = key_line(spec, ("profiles", "mini", "finetune", "retriever2", "epochs"))
    assert "retriever2: {epochs: 1}" in text[line - 1] and line > key_line(spec, "profiles.mini")
    assert key_line(spec, "extends") is None and key_line(spec, "finetune.retriever9") is None
    assert text[key_line(spec, "name") - 1] == "name: cotmae"


# --- the declared keys stay true to the code ------------------------------------------------------


def schema_paths(keys: Keys, prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    for key, rule in keys.items():
        yield prefix + (key,)
        if isinstance(rule, Block):
            yield from schema_paths(rule.keys, prefix + (key,))


def yaml_paths(node: Any, prefix: tuple[str, ...]) -> Iterator[tuple[str, ...]]:
    for key, value in node.items() if isinstance(node, dict) else ():
        yield prefix + (key,)
        yield from yaml_paths(value, prefix + (key,))


def used_in_baselines() -> set[tuple[str, ...]]:
    """Nested key paths the baselines state, at the top level or in a profile (prefix dropped)."""
    used: set[tuple[str, ...]] = set()
    for spec in BASELINES_DIR.glob("*.yaml"):
        raw = yaml.safe_load(spec.read_text())
        for top in [raw, *(raw.get("profiles") or {}).values()]:
            for block in BLOCKS:
                used.update(yaml_paths((top or {}).get(block), (block,)))
    return used


def quoted_in_code(leaf: str, source: str) -> bool:
    """`leaf` in a string literal, alone or as a part of a dotted path ("finetune.mine"), or read as
    an attribute of a typed block (``settings.checkpoint_every``, harness/spec/stage_settings.py)."""
    quoted = re.search(rf"""["'](?:[\w.]*\.)?{re.escape(leaf)}(?:\.[\w.]*)?["']""", source) is not None
    return quoted or re.search(rf"\.{re.escape(leaf)}\b", source) is not None


# Blocks passed on as keyword arguments: their keys are checked against the signatures below.
KWARG_BLOCKS = (("pretrain", "objective_params"), ("finetune", "retriever3", "reranker_train"))


def test_no_declared_key_is_dead():
    source = "\n".join(p.read_text() for p in HARNESS.rglob("*.py") if p.name not in ("spec.py", "spec_keys.py"))
    used = used_in_baselines()
    dead = [
        ".".join(path)
        for block, keys in BLOCKS.items()
        for path in schema_paths(keys, (block,))
        if path not in used and not quoted_in_code(path[-1], source) and path[:-1] not in KWARG_BLOCKS
    ]
    assert dead == []


def init_params(module: Path, class_name: str | None = None) -> dict[str, set[str]]:
    """Constructor parameters (or dataclass fields) per class of `module`, read without importing torch."""
    out: dict[str, set[str]] = {}
    for cls in ast.parse(module.read_text()).body:
        if not isinstance(cls, ast.ClassDef) or class_name not in (None, cls.name):
            continue
        fields = {s.target.id for s in cls.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}
        inits = [f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"]
        args = {a.arg for f in inits for a in f.args.args + f.args.kwonlyargs} - {"self", "bert_config", "config"}
        out[cls.name] = args if inits else fields
    return out


def test_reranker_train_keys_are_trainer_config_fields():
    import dataclasses

    from harness.finetune.reranker import RerankerTrainConfig

    fields = {f.name for f in dataclasses.fields(RerankerTrainConfig)}
    declared = set(BLOCKS["finetune"]["retriever3"].keys["reranker_train"].keys)
    # Every key a spec may set reaches the trainer; the seed is the harness's, never the spec's.
    assert declared <= fields - {"seed"}
    assert {"lr", "epochs", "queries_per_device", "passages_per_query", "max_length"} <= declared
