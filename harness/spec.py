"""Method specs: one YAML per method in baselines/, with `extends:` inheritance and profiles.

A spec is resolved in three steps: load the YAML (keeping line numbers for errors),
deep-merge it over the spec it `extends`, then deep-merge the chosen profile's block
(`profiles: {paper: ..., tiny: ...}`) over the top-level keys. The resolved dict is
hashed (canonical JSON) so every run record names exactly what ran.
"""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from harness.errors import DataFormatError, HarnessError, UnknownNameError
from harness.paths import specs_dir

PROFILES = ("paper", "mini", "tiny")
FAMILIES = ("lexical", "dense", "learned-sparse")

# key -> (required, allowed python types, one-line meaning). Checked after resolution.
SCHEMA: dict[str, tuple[bool, tuple[type, ...], str]] = {
    "name": (True, (str,), "method name, equal to the file name"),
    "description": (True, (str,), "one line shown by `ls`"),
    "family": (True, (str,), f"one of {', '.join(FAMILIES)}"),
    "papers": (True, (list,), "reported-registry paper keys whose cells this method is compared with"),
    "stages": (True, (list,), "ordered stage names"),
    "datasets": (True, (list,), "benchmarks evaluated by default"),
    "hardware": (False, (dict,), "declared hardware: {devices, device_type, hours}"),
    "model": (False, (dict,), "initial encoder: a checkpoint name/path, or an architecture to build from scratch"),
    "tokenizer": (False, (dict,), "tokenizer: a checkpoint's, or a WordPiece vocabulary trained on the corpus"),
    "corpus": (False, (dict,), "pre-training corpus construction (sources, splitter, passage length, seed)"),
    "qgen": (False, (dict,), "query generation for query-as-context pre-training"),
    "retrieval": (False, (dict,), "retrieval settings"),
    "pretrain": (False, (dict,), "pre-training settings"),
    "finetune": (False, (dict,), "fine-tuning settings"),
    "conditions": (False, (dict,), "the conditions compared against reported cells"),
    "extends": (False, (str,), "parent spec name"),
    "profiles": (False, (dict,), "per-profile overrides"),
    "notes": (False, (str, list), "free text"),
    "substitutions": (False, (list,), "where this setting departs from the paper's (printed with every run and recorded)"),
    "deviations": (False, (list,), "where the paper profile still departs from a setting the paper states "
                                   "(listed by `validate`, shown on the leaderboard's method page)"),
}


@dataclass(frozen=True)
class MethodSpec:
    name: str
    profile: str
    path: Path
    config: dict[str, Any] = field(repr=False)

    @property
    def spec_hash(self) -> str:
        return config_hash(self.config)

    def get(self, dotted: str, default: Any = None) -> Any:
        node: Any = self.config
        for part in dotted.split("."):
            if not isinstance(node, dict) or part not in node:
                return default
            node = node[part]
        return node


def config_hash(config: Any) -> str:
    blob = json.dumps(config, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def spec_path(name: str, root: Path | None = None) -> Path:
    return (root or specs_dir()) / f"{name}.yaml"


def list_methods(root: Path | None = None) -> list[str]:
    return sorted(p.stem for p in (root or specs_dir()).glob("*.yaml"))


def _load_yaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise HarnessError(f"{path}: spec file not found") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc)
        raise DataFormatError(path, line, f"invalid YAML: {problem}", "fix the indentation/quoting there") from None
    if not isinstance(data, dict):
        raise DataFormatError(path, 1, "a spec must be a YAML mapping of keys to values")
    return data


def key_line(path: Path, key: str) -> int | None:
    """1-based line of a top-level key, so errors can point at it."""
    try:
        node = yaml.compose(path.read_text())
    except yaml.YAMLError:
        return None
    if isinstance(node, yaml.MappingNode):
        for k, _ in node.value:
            if k.value == key:
                return k.start_mark.line + 1
    return None


def _resolve_raw(name: str, root: Path | None, seen: tuple[str, ...] = ()) -> dict[str, Any]:
    path = spec_path(name, root)
    if not path.exists():
        raise UnknownNameError("method", name, list_methods(root))
    raw = _load_yaml(path)
    parent = raw.get("extends")
    if parent is None:
        return raw
    if parent in seen + (name,):
        raise DataFormatError(path, key_line(path, "extends"), f"circular extends: {' -> '.join(seen + (name, parent))}")
    if not spec_path(parent, root).exists():
        close = UnknownNameError("method", parent, list_methods(root))
        raise DataFormatError(path, key_line(path, "extends"), f"extends unknown spec: {close}")
    merged = deep_merge(_resolve_raw(parent, root, seen + (name,)), {k: v for k, v in raw.items() if k != "extends"})
    merged["extends"] = parent
    return merged


def profiles_of(name: str, root: Path | None = None) -> list[str]:
    """The profiles `name` defines, its `extends` chain included."""
    return list(_resolve_raw(name, root).get("profiles") or {})


def load_method(name: str, profile: str = "paper", root: Path | None = None) -> MethodSpec:
    """Resolve `name` for `profile`; raises a clear error on anything malformed."""
    raw = _resolve_raw(name, root)
    path = spec_path(name, root)
    problems = _check(raw, path)
    if problems:
        raise HarnessError("invalid spec:\n  " + "\n  ".join(problems))
    profiles = raw.get("profiles") or {}
    if profile not in PROFILES:
        raise UnknownNameError("profile", profile, list(PROFILES))
    if profile not in profiles:
        raise HarnessError(
            f"{path}: method '{name}' has no '{profile}' profile (it has: {', '.join(profiles) or 'none'})"
        )
    resolved = deep_merge({k: v for k, v in raw.items() if k != "profiles"}, profiles[profile] or {})
    resolved["profile"] = profile
    return MethodSpec(name=name, profile=profile, path=path, config=resolved)


def _check(raw: dict[str, Any], path: Path) -> list[str]:
    problems: list[str] = []

    def where(key: str) -> str:
        line = key_line(path, key)
        return f"{path}:{line}" if line else str(path)

    for key in raw:
        if key not in SCHEMA:
            close = UnknownNameError("key", key, list(SCHEMA)).suggestions
            hint = f" (did you mean {close[0]}?)" if close else ""
            problems.append(f"{where(key)}: unknown key '{key}'{hint}")
    for key, (required, types, meaning) in SCHEMA.items():
        if key not in raw:
            if required:
                problems.append(f"{path}: missing required key '{key}' ({meaning})")
            continue
        if not isinstance(raw[key], types):
            problems.append(f"{where(key)}: '{key}' must be {'/'.join(t.__name__ for t in types)} ({meaning})")
    if isinstance(raw.get("name"), str) and raw["name"] != path.stem:
        problems.append(f"{where('name')}: name '{raw['name']}' must equal the file name '{path.stem}'")
    if isinstance(raw.get("family"), str) and raw["family"] not in FAMILIES:
        problems.append(f"{where('family')}: family '{raw['family']}' is not one of {', '.join(FAMILIES)}")
    for prof in (raw.get("profiles") or {}):
        if prof not in PROFILES:
            problems.append(f"{where('profiles')}: unknown profile '{prof}' (known: {', '.join(PROFILES)})")
    return problems


def validate_specs(root: Path | None = None) -> list[str]:
    """Every problem in every spec (schema, extends, profiles), as printable strings."""
    problems: dict[str, None] = {}  # ordered set: a spec's problem is listed once, not once per profile

    def add(message: str) -> None:
        for line in message.splitlines():
            line = line.strip()
            if line and line != "invalid spec:":
                problems.setdefault(line)

    for name in list_methods(root):
        try:
            raw = _resolve_raw(name, root)
        except HarnessError as exc:
            add(str(exc))
            continue
        for problem in _check(raw, spec_path(name, root)):
            add(problem)
        for prof in raw.get("profiles") or {}:
            if prof in PROFILES:
                try:
                    load_method(name, prof, root)
                except HarnessError as exc:
                    add(str(exc))
    return list(problems)
