"""Method specs: one YAML per method in baselines/, with `extends:` inheritance and profiles.

A spec is resolved in three steps: load the YAML (keeping line numbers for errors; files.py),
deep-merge it over the spec it `extends`, then deep-merge the chosen profile's block
(`profiles: {paper: ..., tiny: ...}`) over the top-level keys, checking it on the way (checks.py,
against schema.py). The resolved dict's settings are hashed (hashing.py) so every run record names
exactly what ran.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.core.errors import (
    DataFormatError,
    HarnessError,
    SpecProblems,
    UnknownNameError,
)
from harness.core.fsutil import is_plain_name
from harness.spec import rehearsal
from harness.spec.block_settings import CorpusSettings
from harness.spec.checks import check_bm25_negatives, check_hard_negatives, structure_problems
from harness.spec.conditions import graded_method
from harness.spec.files import (
    deep_merge,
    key_line,
    list_methods,
    load_yaml,
    spec_path,
    with_fragments,
)
from harness.spec.hashing import settings_hash
from harness.spec.run_settings import DataSettings, FinetuneSettings
from harness.spec.schema import DERIVED_PROFILE, NOT_INHERITED, PROFILES
from harness.spec.stage_settings import declares_auto, precision_shapes, pretrains
from harness.training.autoprecision import Shapes


@dataclass(frozen=True)
class MethodSpec:
    name: str
    profile: str
    path: Path
    config: dict[str, Any] = field(repr=False)
    # What `precision: auto` resolved to for this run (harness.training.precision) and how: "measured" (timed
    # on this CPU), "flag" (`run --precision`) or "spec" (a GPU profile's fp32); None: not resolved.
    # The config keeps `auto`, so the spec hash is the same whatever a machine chose.
    precision: str | None = field(default=None, compare=False)
    precision_source: str | None = field(default=None, compare=False)

    @property
    def spec_hash(self) -> str:
        return settings_hash(self.config)

    @property
    def graded_method(self) -> str:
        """The method whose papers' cells this spec's runs are graded against (a variant's: its parent's)."""
        return graded_method(self.config, self.name)

    def get(self, dotted: str, default: Any = None) -> Any:
        node: Any = self.config
        for part in dotted.split("."):
            if not isinstance(node, dict) or part not in node:
                return default
            node = node[part]
        return node

    # The typed blocks that modules below harness.spec read (they cannot import the classes).

    def data_block(self) -> DataSettings:
        """The ``data`` block: mirror, MS MARCO passage variant, BM25 negatives."""
        return DataSettings.from_spec(self)

    def finetune_block(self) -> FinetuneSettings:
        """The ``finetune`` block's own keys: the training queries."""
        return FinetuneSettings.from_spec(self)

    def corpus_block(self) -> CorpusSettings:
        """The ``corpus`` block: what pre-training reads."""
        return CorpusSettings.from_spec(self)

    def pretrains(self) -> bool:
        """Whether the spec pre-trains (a ``pretrain`` block whose objective is not ``none``)."""
        return pretrains(self)

    def declares_auto_precision(self) -> bool:
        """Whether a training stage says ``precision: auto`` (stated, or by default)."""
        return declares_auto(self)

    def precision_shapes(self) -> Shapes:
        """The encoder and batch at which ``auto`` measures on a CPU."""
        return precision_shapes(self)


def _resolve_raw(name: str, root: Path | None, seen: tuple[str, ...] = ()) -> dict[str, Any]:
    path = spec_path(name, root)
    if not path.exists():
        raise UnknownNameError("method", name, list_methods(root))
    raw = with_fragments(load_yaml(path), path)
    parent = raw.get("extends")
    if parent is None:
        return raw
    if not is_plain_name(parent):  # a path would resolve a spec outside the specs folder
        raise DataFormatError(
            path,
            key_line(path, "extends"),
            f"extends: {parent!r} is not a spec's name (a spec is named by its file name in "
            "the specs folder, without folder or .yaml)",
            "name a method of `python -m harness ls methods`, e.g. extends: cotmae",
        )
    if parent in seen + (name,):
        raise DataFormatError(
            path, key_line(path, "extends"), f"circular extends: {' -> '.join(seen + (name, parent))}"
        )
    if not spec_path(parent, root).exists():
        close = UnknownNameError("method", parent, list_methods(root))
        raise DataFormatError(path, key_line(path, "extends"), f"extends unknown spec: {close}")
    inherited = {k: v for k, v in _resolve_raw(parent, root, seen + (name,)).items() if k not in NOT_INHERITED}
    merged = deep_merge(inherited, {k: v for k, v in raw.items() if k != "extends"})
    merged["extends"] = parent
    return merged


def comparisons(root: Path | None = None) -> list[tuple[str, str]]:
    """(A, B) for each method A and each method B its spec compares it with (``compare_with``): the
    effects ``effects`` and ``check`` measure, A minus B. First every method against the first it
    names (the control), then against the second (a QC method: its method without QC), ..."""
    declared = {name: list(_resolve_raw(name, root).get("compare_with") or []) for name in list_methods(root)}
    depth = max(map(len, declared.values()), default=0)
    return [(name, others[i]) for i in range(depth) for name, others in declared.items() if i < len(others)]


def variants_of(method: str, root: Path | None = None) -> list[str]:
    """The specs declared as variants of ``method`` (``variant_of.method``), sorted: the runs that grade
    the cells of its settings it does not run itself."""
    out = []
    for name in list_methods(root):
        block = _resolve_raw(name, root).get("variant_of")
        if isinstance(block, dict) and block.get("method") == method:
            out.append(name)
    return out


def pretraining_methods(profile: str | None = None, root: Path | None = None) -> list[str]:
    """The methods that pre-train (their `stages` list `pretrain`), sorted; with ``profile``, those
    that have it. What "every pre-training method" means wherever such a list is needed."""
    return [
        name
        for name in list_methods(root)
        if "pretrain" in (_resolve_raw(name, root).get("stages") or [])
        and (profile is None or profile in profiles_of(name, root))
    ]


def objective_specs(profile: str, root: Path | None = None) -> dict[str, str]:
    """Objective -> the first pre-training method (by name) whose ``profile`` pre-trains with it: one
    spec per objective (cotmae_qc shares cotmae's), for what exercises each objective once."""
    first: dict[str, str] = {}
    for name in pretraining_methods(profile, root):
        first.setdefault(str(load_method(name, profile, root).get("pretrain.objective")), name)
    return first


def profiles_of(name: str, root: Path | None = None) -> list[str]:
    """The profiles `name` defines, its `extends` chain included, and the derived rehearsal."""
    raw = _resolve_raw(name, root)
    names = list(raw.get("profiles") or {})
    if _has_rehearsal(raw) and DERIVED_PROFILE not in names:
        names.insert(names.index("paper") + 1, DERIVED_PROFILE)
    return names


def _has_rehearsal(raw: dict[str, Any]) -> bool:
    """A trained method with a paper profile gets a rehearsal of it (BM25 has nothing to rehearse)."""
    return "paper" in (raw.get("profiles") or {}) and raw.get("family") != "lexical"


def load_method(name: str, profile: str = "paper", root: Path | None = None) -> MethodSpec:
    """Resolve `name` for `profile`; raises a clear error on anything malformed."""
    raw = _resolve_raw(name, root)
    path = spec_path(name, root)
    problems = structure_problems(raw, path)
    if problems:
        raise SpecProblems(problems)
    profiles = raw.get("profiles") or {}
    if profile not in PROFILES:
        raise UnknownNameError("profile", profile, list(PROFILES))
    top = {k: v for k, v in raw.items() if k != "profiles"}
    if profile == DERIVED_PROFILE and _has_rehearsal(raw):
        try:
            resolved = rehearsal.apply(deep_merge(top, profiles["paper"] or {}), profiles.get(profile), deep_merge)
        except (TypeError, ValueError, KeyError, AttributeError) as exc:  # a paper value of the wrong kind
            raise HarnessError(
                f"{path}: profile 'rehearsal' cannot be derived from the paper profile "
                f"({type(exc).__name__}: {exc}); `python -m harness validate` names the paper "
                "profile's wrong values"
            ) from None
    elif profile not in profiles:
        raise HarnessError(
            f"{path}: method '{name}' has no '{profile}' profile (it has: {', '.join(profiles_of(name, root)) or 'none'})"
        )
    else:
        resolved = deep_merge(top, profiles[profile] or {})
    resolved["profile"] = profile
    check_bm25_negatives(resolved, path)
    check_hard_negatives(resolved, path)
    return MethodSpec(name=name, profile=profile, path=path, config=resolved)


def validate_specs(root: Path | None = None, values: Callable[[MethodSpec], list[str]] | None = None) -> list[str]:
    """Every problem in every spec (schema, extends, profiles), as printable strings; with ``values``
    (harness.run.validation.value_problems) also the problems of each resolved profile's values."""
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
        for problem in structure_problems(raw, spec_path(name, root)):
            add(problem)
        paper_ok = True
        for prof in profiles_of(name, root):
            # the derived rehearsal repeats the paper profile's problems, or fails on them
            if prof not in PROFILES or prof == DERIVED_PROFILE and not paper_ok:
                continue
            try:
                found = (values or (lambda _: []))(load_method(name, prof, root))
            except HarnessError as exc:
                found = [str(exc)]
            for problem in found:
                add(problem)
            paper_ok = paper_ok and not (prof == "paper" and found)
    return list(problems)
