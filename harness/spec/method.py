"""Method specs: one YAML per method in baselines/, with `extends:` inheritance and profiles.

A spec is resolved in three steps: load the YAML (keeping line numbers for errors),
deep-merge it over the spec it `extends`, then deep-merge the chosen profile's block
(`profiles: {paper: ..., tiny: ...}`) over the top-level keys. The resolved dict is
hashed (canonical JSON) so every run record names exactly what ran.
"""

from __future__ import annotations

import copy
import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, NamedTuple

import yaml

from harness.core.errors import (
    DataFormatError,
    HarnessError,
    SpecProblems,
    UnknownNameError,
)
from harness.core.paths import BASELINES_DIR, specs_dir
from harness.papers.parsing import yaml_key_lines
from harness.papers.schema import CONDITION_KEYS
from harness.spec import rehearsal
from harness.spec.conditions import RECIPE
from harness.spec.keys import BLOCKS, OPEN, Block, Keys
from harness.spec.stage_settings import NEGATIVE_DEPTH
from harness.stages.artifacts import config_hash
from harness.stages.graph import FAMILIES, FAMILY_STEPS, SPEC_STEPS, STEP_NEEDS

PROFILES = ("paper", "rehearsal", "mini", "tiny")
# Derived from the paper profile (harness.spec.rehearsal) for every trained method that has one; a spec's
# own `profiles.rehearsal` block is merged last.
DERIVED_PROFILE = "rehearsal"
BM25_NEGATIVE_SOURCES = ("own", "msmarco-triples", "tevatron")  # data.bm25_negatives (harness.pipelines.bm25)

# key -> (required, allowed python types, one-line meaning). Checked after resolution.
SCHEMA: dict[str, tuple[bool, tuple[type, ...], str]] = {
    "name": (True, (str,), "method name, equal to the file name"),
    "description": (True, (str,), "one line shown by `ls`"),
    "family": (True, (str,), f"one of {', '.join(FAMILIES)}"),
    "papers": (True, (list,), "reported-registry paper keys whose cells this method is compared with"),
    "stages": (True, (list,), f"the method's steps, in order, from: {', '.join(SPEC_STEPS)}"),
    "datasets": (True, (list,), "benchmarks evaluated by default"),
    "hardware": (False, (dict,), "declared hardware: {devices, device_type, hours}"),
    "model": (False, (dict,), "initial encoder: a checkpoint name/path, or an architecture to build from scratch"),
    "tokenizer": (False, (dict,), "tokenizer: a checkpoint's, or a WordPiece vocabulary trained on the corpus"),
    "corpus": (False, (dict,), "pre-training corpus construction (sources, splitter, passage length, seed)"),
    "qgen": (False, (dict,), "query generation for query-as-context pre-training"),
    "retrieval": (False, (dict,), "retrieval settings"),
    "pretrain": (False, (dict,), "pre-training settings"),
    "finetune": (False, (dict,), "fine-tuning settings"),
    "conditions": (False, (dict,), "not written by hand: the conditions a run states are derived from its "
                                   "settings (harness/spec/conditions.py)"),
    "extends": (False, (str,), "parent spec name"),
    "include": (False, (str, list), "shared fragments (baselines/fragments/<name>.yaml) this spec's own keys override"),
    "profiles": (False, (dict,), "per-profile overrides"),
    "data": (False, (dict,), "where the data comes from: a mirror of the upstream files, the MS MARCO passage "
                             "variant (plain or titled)"),
    "notes": (False, (str, list), "free text"),
    "substitutions": (False, (list,), "where this setting departs from the paper's (printed with every run and recorded)"),
    "deviations": (False, (list,), "where the paper profile departs from a setting the paper states: "
                                   "{touches: [conditions] | recipe, why: text}; the cells stating a touched "
                                   "condition are NOT-COMPARABLE (listed by `validate`)"),
    "assumptions": (False, (list,), "values the papers leave unstated that the spec picks (listed by `validate`)"),
    "compare_with": (False, (list,), "the methods this one is measured against: its effects are it minus each, "
                                     "paired on the same queries in every profile (`effects`, `check`); the "
                                     "method's own, so not inherited through `extends`"),
}
# Keys that say what a method is rather than how one profile runs it: not in a profile block or a fragment.
METHOD_KEYS = ("name", "extends", "include", "profiles", "compare_with")
NOT_INHERITED = ("compare_with",)  # a spec that extends another states its own comparisons
# What a `profiles.<name>` block may override (it is deep-merged over the top level); nested keys: spec_keys.
PROFILE_KEYS = tuple(k for k in SCHEMA if k not in METHOD_KEYS)
FRAGMENTS = "fragments"  # folder of shared spec fragments, beside the specs


@dataclass(frozen=True)
class MethodSpec:
    name: str
    profile: str
    path: Path
    config: dict[str, Any] = field(repr=False)

    @property
    def spec_hash(self) -> str:
        return settings_hash(self.config)

    def get(self, dotted: str, default: Any = None) -> Any:
        node: Any = self.config
        for part in dotted.split("."):
            if not isinstance(node, dict) or part not in node:
                return default
            node = node[part]
        return node


# What a spec says about a run rather than what runs: never part of its identity.
DOCUMENTATION_KEYS = ("description", "notes", "papers", "deviations", "assumptions", "substitutions", "conditions",
                      "compare_with")


# Keys a spec may no longer state, with what now decides what they said (``validate`` names it).
RETIRED = {("finetune", "mine"): "is retired: mining searches each training query to the negative_depth of the "
                                 "stage that trains on the mined run (finetune.retriever2.negative_depth; "
                                 "retriever3's for learned-sparse's second mining), so state that instead"}


def _negative_depth(config: dict[str, Any], stage: str) -> Any:
    """A fine-tuning stage's negative_depth in a resolved spec's config: its block's, the finetune block's, the default."""
    finetune = config.get("finetune") or {}
    return ((finetune.get(stage) or {}).get("negative_depth") or finetune.get("negative_depth") or NEGATIVE_DEPTH)


def _without_redundant_mine(config: dict[str, Any]) -> dict[str, Any]:
    """A record made before ``finetune.mine`` was retired (RETIRED) ran the same settings as today's spec when
    its block says what the rule now derives (depth = retriever 2's negative_depth, mined with retriever 1):
    then the block is dropped before hashing; otherwise kept, so the hash tells the two runs apart."""
    finetune = config.get("finetune")
    mine = finetune.get("mine") if isinstance(finetune, dict) else None
    if not isinstance(mine, dict) or set(mine) - {"depth", "with"}:
        return config
    if mine.get("depth", NEGATIVE_DEPTH) != _negative_depth(config, "retriever2") \
            or mine.get("with") not in (None, "retriever1"):
        return config
    return {**config, "finetune": {k: v for k, v in finetune.items() if k != "mine"}}


def settings_hash(config: dict[str, Any]) -> str:
    """16 hex digits of the settings that run (documentation keys left out, a redundant retired block too)."""
    return config_hash({k: v for k, v in _without_redundant_mine(config or {}).items() if k not in DOCUMENTATION_KEYS})


def deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def spec_path(name: str, root: Path | None = None) -> Path:
    """``<specs folder>/<name>.yaml``; a name is a file name there, never a path (``../x`` is refused)."""
    if not name or "/" in name or "\\" in name or name.startswith("."):
        raise HarnessError(f"method '{name}': a method is named by its spec's file name in baselines/, without "
                           "folder or .yaml (see `python -m harness ls methods`)")
    return (root or specs_dir()) / f"{name}.yaml"


def list_methods(root: Path | None = None) -> list[str]:
    return sorted(p.stem for p in (root or specs_dir()).glob("*.yaml"))


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key given twice in one mapping: PyYAML would keep the last silently
    (a second top-level `pretrain:` would replace the first, objective and all)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            line = key_node.start_mark.line + 1
            if isinstance(key, (str, int, float, bool)) and key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key '{key}' given twice (lines {seen[key]} and {line}); keep one", key_node.start_mark)
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


def _read_text(path: Path) -> str:
    """A spec file's text; a file that is not UTF-8 is one error naming it and the line of the first bad byte."""
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise DataFormatError(path, line, f"not UTF-8 text (byte 0x{data[exc.start]:02x})",
                              "save the file as UTF-8") from None


@functools.lru_cache(maxsize=512)
def _parsed(text: str) -> Any:
    """A spec text's data, parsed once: validating every profile of every spec resolves each file
    many times (keyed by the text itself, so an edited file is parsed again)."""
    return yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 (a SafeLoader)


@functools.lru_cache(maxsize=512)
def _key_lines(text: str) -> dict[tuple, int]:
    node = yaml.compose(text)
    return {} if node is None else yaml_key_lines(node)


def _load_yaml(path: Path) -> dict[str, Any]:
    try:
        text = _read_text(path)
    except FileNotFoundError:
        raise HarnessError(f"{path}: spec file not found") from None
    try:
        data = copy.deepcopy(_parsed(text))  # a copy: callers may change what they get
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc)
        fix = "merge the two into one" if "given twice" in problem else "fix the indentation/quoting there"
        raise DataFormatError(path, line, f"invalid YAML: {problem}", fix) from None
    if not isinstance(data, dict):
        raise DataFormatError(path, 1, "a spec must be a YAML mapping of keys to values")
    return data


def key_line(path: Path, key: str | tuple[str, ...]) -> int | None:
    """1-based line of a key, so errors can point at it: a top-level key ("extends") or a nested
    path ("finetune.retriever2.epochs", or a tuple of keys such as ("profiles", "mini", "model"))."""
    try:
        lines = _key_lines(_read_text(path))
    except (yaml.YAMLError, OSError, HarnessError):  # unreadable: the load reports it
        return None
    parts = tuple(key.split(".")) if isinstance(key, str) else tuple(str(k) for k in key)
    return lines.get(parts)  # a repeated key: the last one, as yaml.safe_load keeps


def _with_fragments(raw: dict[str, Any], path: Path) -> dict[str, Any]:
    """``raw`` over the fragments it includes, in order (a later one and the spec itself win). A
    fragment is looked up beside the spec (``fragments/``), then among the project's (so a spec in
    HARNESS_SPECS_DIR can include them). ``include`` is text, like a macro: it is not part of the
    resolved spec or its hash."""
    names = raw.get("include")
    if names is None:
        return raw
    merged: dict[str, Any] = {}
    folders = list(dict.fromkeys([path.parent / FRAGMENTS, BASELINES_DIR / FRAGMENTS]))  # beside the spec first
    for name in [names] if isinstance(names, str) else list(names):
        fragment = next((f / f"{name}.yaml" for f in folders if (f / f"{name}.yaml").is_file()), None)
        if fragment is None:
            known = sorted({p.stem for f in folders for p in f.glob("*.yaml")})
            raise DataFormatError(path, key_line(path, "include"),
                                  f"include: no fragment '{name}' ({UnknownNameError('fragment', str(name), known)})")
        body = _load_yaml(fragment)
        bad = sorted(set(body) - set(PROFILE_KEYS) - {"profiles"})
        if bad:
            raise DataFormatError(fragment, key_line(fragment, bad[0]), f"a fragment may not set '{bad[0]}'")
        merged = deep_merge(merged, body)
    return deep_merge(merged, {k: v for k, v in raw.items() if k != "include"})


def _resolve_raw(name: str, root: Path | None, seen: tuple[str, ...] = ()) -> dict[str, Any]:
    path = spec_path(name, root)
    if not path.exists():
        raise UnknownNameError("method", name, list_methods(root))
    raw = _with_fragments(_load_yaml(path), path)
    parent = raw.get("extends")
    if parent is None:
        return raw
    if parent in seen + (name,):
        raise DataFormatError(path, key_line(path, "extends"), f"circular extends: {' -> '.join(seen + (name, parent))}")
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


def pretraining_methods(profile: str | None = None, root: Path | None = None) -> list[str]:
    """The methods that pre-train (their `stages` list `pretrain`), sorted; with ``profile``, those
    that have it. What "every pre-training method" means wherever such a list is needed."""
    return [name for name in list_methods(root) if "pretrain" in (_resolve_raw(name, root).get("stages") or [])
            and (profile is None or profile in profiles_of(name, root))]


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
    problems = _check(raw, path)
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
            raise HarnessError(f"{path}: profile 'rehearsal' cannot be derived from the paper profile "
                               f"({type(exc).__name__}: {exc}); `python -m harness validate` names the paper "
                               "profile's wrong values") from None
    elif profile not in profiles:
        raise HarnessError(
            f"{path}: method '{name}' has no '{profile}' profile (it has: {', '.join(profiles_of(name, root)) or 'none'})"
        )
    else:
        resolved = deep_merge(top, profiles[profile] or {})
    resolved["profile"] = profile
    _check_bm25_negatives(resolved, path)
    return MethodSpec(name=name, profile=profile, path=path, config=resolved)


def _check_bm25_negatives(resolved: dict[str, Any], path: Path) -> None:
    source = (resolved.get("data") or {}).get("bm25_negatives", "own")
    if source not in BM25_NEGATIVE_SOURCES:
        raise HarnessError(f"{path}: data.bm25_negatives {source!r} is not one of {', '.join(BM25_NEGATIVE_SOURCES)}")


def _deviation_problems(raw: dict[str, Any], where: Any) -> list[str]:
    """Every declared deviation names what it touches, so grading can act on it."""

    problems = []
    blocks = [("", raw)] + [(f"profiles.{n}.", p) for n, p in (raw.get("profiles") or {}).items() if isinstance(p, dict)]
    for prefix, block in blocks:
        if "conditions" in block and prefix:
            problems.append(f"{where(('profiles', prefix.split('.')[1], 'conditions'))}: conditions are derived "
                            "from the settings that run (harness/spec/conditions.py); remove 'conditions:'")
        for i, item in enumerate(block.get("deviations") or []):
            # looked up (a YAML parse) only for a problem
            here = lambda: where(("profiles", prefix.split(".")[1], "deviations") if prefix else "deviations")  # noqa: E731
            touches = item.get("touches") if isinstance(item, dict) else None
            names = [touches] if isinstance(touches, str) else touches
            if not isinstance(item, dict) or not isinstance(item.get("why"), str) or not names:
                problems.append(f"{here()}: {prefix}deviations[{i}] must be {{touches: [conditions] | recipe, why: "
                                "text}; a departure that touches no graded condition is an assumption or a note")
                continue
            unknown = [n for n in names if n != RECIPE and str(n).partition("=")[0] not in CONDITION_KEYS]
            if unknown:
                problems.append(f"{here()}: {prefix}deviations[{i}] touches unknown condition(s) {unknown} "
                                f"(known: {RECIPE}, {', '.join(CONDITION_KEYS)}; "
                                "'key=value' touches only the cells stating that value)")
    return problems


def _comparison_problems(raw: dict[str, Any], path: Path, where: Callable[[str], str]) -> list[str]:
    """Each method named in `compare_with` is another method of the same specs folder, named once."""
    others = raw.get("compare_with")
    if not isinstance(others, list):  # a wrong type is reported with the schema
        return []
    known, problems = list_methods(path.parent), []
    for i, other in enumerate(others):
        if other == path.stem:
            problems.append(f"{where('compare_with')}: compare_with[{i}]: a method is not compared with itself")
        elif not isinstance(other, str) or other not in known:
            problems.append(f"{where('compare_with')}: compare_with[{i}]: "
                            f"{UnknownNameError('method', str(other), known)}")
        elif others.index(other) < i:
            problems.append(f"{where('compare_with')}: compare_with[{i}]: '{other}' is listed twice")
    return problems


def _check(raw: dict[str, Any], path: Path) -> list[str]:
    problems: list[str] = []

    def where(key: str | tuple[str, ...]) -> str:
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
    # the location is looked up (a YAML parse) only for a spec with a problem
    if "conditions" in raw:
        problems.append(f"{where('conditions')}: conditions are derived from the settings that run "
                        "(harness/spec/conditions.py: pre-training steps and corpus, init, negatives, ...); remove "
                        "'conditions:' and declare a departure from the paper as deviations: [{touches, why}]")
    problems += _deviation_problems(raw, where)
    problems += _comparison_problems(raw, path, where)
    if isinstance(raw.get("stages"), list):
        problems += [f"{where('stages')}: {p}" for p in _step_problems(raw["stages"], raw.get("family"))]
        objective = (raw.get("pretrain") or {}).get("objective") if isinstance(raw.get("pretrain"), dict) else None
        if "pretrain" in raw["stages"] and objective in (None, "none"):
            problems.append(f"{where('stages')}: stages lists 'pretrain' but pretrain.objective is not set, so a run "
                            "would fine-tune its initial encoder without pre-training; set pretrain.objective or "
                            "drop 'pretrain' from stages")
        elif objective not in (None, "none") and "pretrain" not in raw["stages"] and raw.get("family") != "lexical":
            problems.append(f"{where('stages')}: pretrain.objective is {objective!r} but stages does not list "
                            "'pretrain'; list it (a run pre-trains whenever an objective is set)")
    for prof, block in (raw.get("profiles") or {}).items():
        if isinstance(block, dict) and isinstance(block.get("stages"), list):
            problems += [f"{where(('profiles', prof, 'stages'))}: {p} (profile {prof})"
                         for p in _step_problems(block["stages"], raw.get("family"))]
        if prof not in PROFILES:
            problems.append(f"{where('profiles')}: unknown profile '{prof}' (known: {', '.join(PROFILES)})")
    return problems + _nested_problems(raw, path)


def _step_problems(steps: list[Any], family: Any) -> list[str]:
    """An unknown, repeated, misordered or (for the family) impossible entry of `stages:`: a
    misspelt `finetune_r2` would otherwise silently skip retriever 2."""
    order = list(SPEC_STEPS)
    problems, last = [], -1
    for step in steps:
        if step not in SPEC_STEPS:
            close = UnknownNameError("stage", str(step), order).suggestions
            hint = f"did you mean {close[0]}? " if close else ""
            problems.append(f"unknown step '{step}' in stages ({hint}known: {', '.join(order)})")
        elif steps.count(step) > 1:
            return problems + [f"step '{step}' is listed {steps.count(step)} times in stages"]
        elif order.index(step) < last:
            problems.append(f"step '{step}' comes after '{order[last]}' in stages; "
                            f"the order is {', '.join(order)}")
        else:
            last = order.index(step)
    if problems or family not in FAMILY_STEPS:
        return problems
    for step in steps:
        if step not in FAMILY_STEPS[family]:
            problems.append(f"a {family} method cannot run step '{step}' "
                            f"(its steps: {', '.join(FAMILY_STEPS[family])})")
        problems += [f"step '{step}' needs '{need}' before it in stages"
                     for need in STEP_NEEDS.get(step, ()) if need not in steps]
    problems += [f"a {family} method always runs step '{step}'; list it in stages"
                 for step in FAMILIES[family].always if step not in steps]
    return problems


# --- nested keys (harness/spec/keys.py) -----------------------------------------------------------


class Finding(NamedTuple):
    """A nested-key problem: the key path in the resolved spec (no `profiles.<name>` prefix)."""

    path: tuple[str, ...]
    unknown: bool  # an unknown key, else a value of the wrong type
    detail: str  # " (did you mean a.b?)" or " must be a mapping (...)"


def _walk(block: dict[Any, Any], keys: Keys, prefix: tuple[str, ...]) -> list[Finding]:
    """Unknown keys and non-mapping sub-blocks in `block`, whose allowed keys are `keys`."""
    found: list[Finding] = []
    for key, value in block.items():
        path = prefix + (str(key),)
        rule = keys.get(key) if isinstance(key, str) else None
        if path in RETIRED:
            found.append(Finding(path, True, f" {RETIRED[path]}"))
        elif rule is None:
            close = UnknownNameError("key", str(key), list(keys)).suggestions
            found.append(Finding(path, True, f" (did you mean {'.'.join(prefix + (close[0],))}?)" if close else ""))
        elif isinstance(rule, Block) and value is not None:  # null: the code reads an absent block
            if isinstance(value, dict) and rule is OPEN:
                continue
            if isinstance(value, dict):
                found.extend(_walk(value, rule.keys, path))
            else:
                found.append(Finding(path, False, f" must be a mapping ({rule.meaning}), not {type(value).__name__}"))
    return found


def _blocks(top: dict[str, Any]) -> list[Finding]:
    """Findings in the nested blocks of the top level or of one profile block."""
    return [f for key, keys in BLOCKS.items() if isinstance(top.get(key), dict) for f in _walk(top[key], keys, (key,))]


def _profile_findings(block: dict[str, Any]) -> list[Finding]:
    """A profile block holds top-level keys (PROFILE_KEYS, with SCHEMA's types) and their nested blocks."""
    found: list[Finding] = []
    for key, value in block.items():
        if key not in PROFILE_KEYS:
            close = UnknownNameError("key", str(key), list(PROFILE_KEYS)).suggestions
            found.append(Finding((str(key),), True, f" (did you mean {close[0]}?)" if close else ""))
        elif not isinstance(value, SCHEMA[key][1]):
            kinds = "/".join(t.__name__ for t in SCHEMA[key][1])
            found.append(Finding((key,), False, f" must be {kinds} ({SCHEMA[key][2]}), not {type(value).__name__}"))
    return found + _blocks(block)


def _lineage(spec_file: Path) -> list[Path]:
    """The spec file, then the files it extends: where an inherited key is written."""
    files = [spec_file]
    while True:
        try:
            parent = _load_yaml(files[-1]).get("extends")
        except HarnessError:
            return files
        nxt = spec_path(str(parent), spec_file.parent) if parent else None
        if nxt is None or nxt in files or not nxt.exists():
            return files
        files.append(nxt)


def _located(spec_file: Path, yaml_keys: tuple[str, ...]) -> str:
    """`file:line` of a key path, in the spec or in the spec it extends; the spec file when not found."""
    for file in _lineage(spec_file):
        line = key_line(file, yaml_keys)
        if line:
            return f"{file}:{line}"
    return str(spec_file)


def _sources(spec_file: Path) -> list[Path]:
    """The files a resolved spec's values come from, the one that wins first: each spec of the extends
    chain, then the fragments it includes (a later fragment over an earlier one)."""
    files: list[Path] = []
    for file in _lineage(spec_file):
        files.append(file)
        try:
            names = _load_yaml(file).get("include")
        except HarnessError:
            continue
        folders = [file.parent / FRAGMENTS, BASELINES_DIR / FRAGMENTS]
        for name in reversed([names] if isinstance(names, str) else list(names or [])):
            found = next((f / f"{name}.yaml" for f in folders if (f / f"{name}.yaml").is_file()), None)
            if found is not None:
                files.append(found)
    return files


def locate(spec_file: Path, candidates: list[tuple[str, ...]]) -> tuple[str, tuple[str, ...] | None]:
    """(`file:line`, key path) of the first of ``candidates`` (YAML key paths, the one that wins first)
    written in the spec, the specs it extends or their fragments; (the spec file, None) when none is."""
    files = _sources(spec_file)
    for keys in candidates:
        for file in files:
            line = key_line(file, keys)
            if line:
                return f"{file}:{line}", keys
    return str(spec_file), None


def _message(spec_file: Path, finding: Finding, profile: str | None) -> str:
    yaml_keys = ("profiles", profile, *finding.path) if profile else finding.path
    key = f"'{'.'.join(finding.path)}'" + (f" in profile '{profile}'" if profile else "")
    what = f"unknown key {key}" if finding.unknown else key
    return f"{_located(spec_file, yaml_keys)}: {what}{finding.detail}"


def _nested_problems(raw: dict[str, Any], spec_file: Path) -> list[str]:
    """Unknown or mistyped nested keys, at the top level and in each known profile block."""
    problems = [_message(spec_file, f, None) for f in _blocks(raw)]
    profiles = raw.get("profiles")
    for name, block in (profiles.items() if isinstance(profiles, dict) else ()):
        if name not in PROFILES or block is None:  # unknown profiles are reported above; null is empty
            continue
        if not isinstance(block, dict):
            problems.append(f"{_located(spec_file, ('profiles', name))}: profile '{name}' must be a mapping, "
                            f"not {type(block).__name__}")
            continue
        problems.extend(_message(spec_file, f, name) for f in _profile_findings(block))
    return problems


def validate_specs(root: Path | None = None,
                   values: Callable[[MethodSpec], list[str]] | None = None) -> list[str]:
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
        for problem in _check(raw, spec_path(name, root)):
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
