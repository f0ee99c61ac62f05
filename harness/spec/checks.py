"""The structural checks of a spec before it runs: its stages outline, comparisons, deviations and
assumptions, BM25 negatives, and every nested key (a misspelt one is an error naming file, line and key path).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from harness.core.errors import (
    HarnessError,
    UnknownNameError,
)
from harness.core.fsutil import is_plain_name
from harness.papers.schema import CONDITION_KEYS
from harness.spec.conditions import RECIPE
from harness.spec.declarations import DECLARATIONS, DROP, identity, is_drop
from harness.spec.files import fragment_file, key_line, list_methods, load_yaml, spec_path
from harness.spec.keys import BLOCKS, OPEN, Block, Keys
from harness.spec.schema import (
    BM25_NEGATIVE_SOURCES,
    PROFILE_KEYS,
    PROFILES,
    RETIRED,
    SCHEMA,
)
from harness.stages.graph import FAMILIES, FAMILY_STEPS, SPEC_STEPS, STEP_NEEDS


def check_bm25_negatives(resolved: dict[str, Any], path: Path) -> None:
    source = (resolved.get("data") or {}).get("bm25_negatives", "own")
    if source not in BM25_NEGATIVE_SOURCES:
        raise HarnessError(f"{path}: data.bm25_negatives {source!r} is not one of {', '.join(BM25_NEGATIVE_SOURCES)}")


def check_hard_negatives(resolved: dict[str, Any], path: Path) -> None:
    """A published hard-negative file holds MS MARCO's training queries and passage ids: it trains on them only."""
    finetune = resolved.get("finetune") or {}
    choice, train = finetune.get("hard_negatives"), str(finetune.get("train_queries") or "")
    if choice and not train.startswith("msmarco"):  # a misspelt MS MARCO name is the train_queries check's
        raise HarnessError(
            f"{path}: finetune.hard_negatives {choice!r} lists MS MARCO passage ids of MS MARCO's training "
            f"queries, but finetune.train_queries is {train or 'unset'!r}; train on msmarco-passage-train "
            "or set finetune.hard_negatives: null"
        )


def known_key_path(path: str) -> bool:
    """Whether ``path`` (``pretrain.warmup_ratio``, ``corpus``) names a key or block a spec may state;
    anything under an open block (``pretrain.objective_params.*``, checked against the objective) is."""
    parts = path.split(".")
    if parts[0] not in SCHEMA:
        return False
    keys: Keys | None = BLOCKS.get(parts[0])
    for part in parts[1:]:
        rule = keys.get(part) if keys is not None else None
        if rule is None:
            return False
        if rule is OPEN:
            return True
        keys = rule.keys if isinstance(rule, Block) else None
    return True


def _entry_problem(key: str, item: Any) -> str | None:
    """What is wrong with one declared deviation or assumption (harness.spec.declarations), or None."""
    if is_drop(item):
        extra = sorted(set(item) - {DROP, "why"})
        if not isinstance(item[DROP], str) or extra:
            return f"must be {{{DROP}: <the about of an inherited entry>}}" + (f", not {extra}" if extra else "")
        return None
    shape = (
        (
            "{about: <key path>, touches: [conditions] | recipe, why: text}; a departure that touches no graded "
            "condition is an assumption or a note"
        )
        if key == "deviations"
        else "{about: <key path>, why: text}"
    )
    allowed = {"about", "why", "touches"} if key == "deviations" else {"about", "why"}
    touches = item.get("touches") if isinstance(item, dict) else None
    if (
        not isinstance(item, dict)
        or not isinstance(item.get("why"), str)
        or set(item) - allowed
        or not isinstance(item.get("about"), str)
        or (key == "deviations" and not touches)
    ):
        return f"must be {shape}"
    about = item["about"]
    if not known_key_path(about):
        return (
            "names no key path of a spec (e.g. pretrain.warmup_ratio, corpus): `about` is the setting the "
            "entry is about, and so which inherited entry it replaces"
        )
    if key == "deviations":
        names = [touches] if isinstance(touches, str) else list(touches or ())
        unknown = [n for n in names if n != RECIPE and str(n).partition("=")[0] not in CONDITION_KEYS]
        if unknown:
            return (
                f"touches unknown condition(s) {unknown} (known: {RECIPE}, {', '.join(CONDITION_KEYS)}; "
                "'key=value' touches only the cells stating that value)"
            )
    return None


def _entry_name(item: Any) -> str:
    """How a problem names a declared entry: by what it is about (or drops), else by its text."""
    if isinstance(item, dict) and isinstance(item.get(DROP, item.get("about")), str):
        return f"{{{DROP}: {item[DROP]}}}" if DROP in item else f"the entry about '{item['about']}'"
    text = repr(item)
    return f"the entry {text[:60] + '...' if len(text) > 60 else text}"


def _declaration_problems(raw: dict[str, Any], where: Any) -> list[str]:
    """Every declared deviation names what it touches, so grading can act on it; every deviation and
    assumption names the key path it is about, once per list; a drop names an entry it inherits."""

    problems = []
    blocks = [("", raw)] + [
        (f"profiles.{n}.", p) for n, p in (raw.get("profiles") or {}).items() if isinstance(p, dict)
    ]
    for prefix, block in blocks:
        if "conditions" in block and prefix:
            problems.append(
                f"{where(('profiles', prefix.split('.')[1], 'conditions'))}: conditions are derived "
                "from the settings that run (harness/spec/conditions.py); remove 'conditions:'"
            )
        for key in DECLARATIONS:
            items = block.get(key)
            if not isinstance(items, list):  # a wrong type is reported with the schema
                continue

            # looked up (a YAML parse) only for a problem
            def here(k: str = key, prefix: str = prefix) -> Any:
                return where(("profiles", prefix.split(".")[1], k) if prefix else k)

            # a profile's drop may name an entry of the top level, which is merged under it when it resolves
            inherited = {identity(e) for e in raw.get(key) or [] if not is_drop(e)} if prefix else set()
            seen: set[str] = set()
            for item in items:  # merged from several files: an entry is named by what it says, not its index
                problem = _entry_problem(key, item)
                if problem is None and is_drop(item) and identity(item) not in inherited:
                    problem = (
                        f"drops '{identity(item)}', which neither the spec it extends, a fragment it "
                        "includes nor the top level declares"
                    )
                elif problem is None and identity(item) in seen:
                    problem = "is declared twice; keep one"
                if problem:
                    problems.append(f"{here()}: {prefix}{key}: {_entry_name(item)} {problem}")
                seen.add(identity(item))
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
            problems.append(
                f"{where('compare_with')}: compare_with[{i}]: {UnknownNameError('method', str(other), known)}"
            )
        elif others.index(other) < i:
            problems.append(f"{where('compare_with')}: compare_with[{i}]: '{other}' is listed twice")
    return problems


def _parent_variant(raw: dict[str, Any], path: Path) -> str | None:
    """The method the extended spec is itself a variant of (None when it is a method of its own)."""
    parent = path.parent / f"{raw.get('extends')}.yaml"
    block = (load_yaml(parent) or {}).get("variant_of") if raw.get("extends") and parent.is_file() else None
    return str(block["method"]) if isinstance(block, dict) and block.get("method") else None


def _variant_problems(raw: dict[str, Any], where: Callable[[str], str], path: Path) -> list[str]:
    """A ``variant_of`` names the spec it extends (or, for a variant of a variant, the method that one is a
    variant of: CPDAE Table 3's low-resource runs change cpdae_pairwise's query count and grade cpdae's cells)
    and the condition keys a cell may state (none: the variant removes a declared deviation of its parent, so
    it grades every cell of the parent its conditions meet)."""
    block = raw.get("variant_of")
    if not isinstance(block, dict):  # absent, or a wrong type reported with the schema
        return []
    problems = []
    if block.get("method") not in (raw.get("extends"), _parent_variant(raw, path)):
        problems.append(
            f"{where('variant_of')}: variant_of.method {block.get('method')!r} must be the spec this one "
            f"extends ({raw.get('extends')!r}): a variant changes its parent's settings, nothing else"
        )
    conditions = block.get("conditions")
    if conditions is not None and not isinstance(conditions, list):
        problems.append(f"{where('variant_of')}: variant_of.conditions must be a list of condition keys")
    else:
        for key in conditions or ():
            if key not in CONDITION_KEYS:
                problems.append(f"{where('variant_of')}: variant_of.conditions: {key!r} is no condition a cell states")
    unknown = sorted(set(block) - {"method", "conditions"})
    if unknown:
        problems.append(f"{where('variant_of')}: variant_of: unknown keys {', '.join(map(str, unknown))}")
    return problems


def structure_problems(raw: dict[str, Any], path: Path) -> list[str]:
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
        problems.append(
            f"{where('conditions')}: conditions are derived from the settings that run "
            "(harness/spec/conditions.py: pre-training steps and corpus, init, negatives, ...); remove "
            "'conditions:' and declare a departure from the paper as deviations: [{touches, why}]"
        )
    problems += _declaration_problems(raw, where)
    problems += _comparison_problems(raw, path, where)
    problems += _variant_problems(raw, where, path)
    if isinstance(raw.get("stages"), list):
        problems += [f"{where('stages')}: {p}" for p in _step_problems(raw["stages"], raw.get("family"))]
        objective = (raw.get("pretrain") or {}).get("objective") if isinstance(raw.get("pretrain"), dict) else None
        if "pretrain" in raw["stages"] and objective in (None, "none"):
            problems.append(
                f"{where('stages')}: stages lists 'pretrain' but pretrain.objective is not set, so a run "
                "would fine-tune its initial encoder without pre-training; set pretrain.objective or "
                "drop 'pretrain' from stages"
            )
        elif objective not in (None, "none") and "pretrain" not in raw["stages"] and raw.get("family") != "lexical":
            problems.append(
                f"{where('stages')}: pretrain.objective is {objective!r} but stages does not list "
                "'pretrain'; list it (a run pre-trains whenever an objective is set)"
            )
    for prof, block in (raw.get("profiles") or {}).items():
        if isinstance(block, dict) and isinstance(block.get("stages"), list):
            problems += [
                f"{where(('profiles', prof, 'stages'))}: {p} (profile {prof})"
                for p in _step_problems(block["stages"], raw.get("family"))
            ]
        if prof not in PROFILES:
            problems.append(f"{where('profiles')}: unknown profile '{prof}' (known: {', '.join(PROFILES)})")
    return problems + nested_problems(raw, path)


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
            problems.append(f"step '{step}' comes after '{order[last]}' in stages; the order is {', '.join(order)}")
        else:
            last = order.index(step)
    if problems or family not in FAMILY_STEPS:
        return problems
    for step in steps:
        if step not in FAMILY_STEPS[family]:
            problems.append(
                f"a {family} method cannot run step '{step}' (its steps: {', '.join(FAMILY_STEPS[family])})"
            )
        problems += [
            f"step '{step}' needs '{need}' before it in stages"
            for need in STEP_NEEDS.get(step, ())
            if need not in steps
        ]
    problems += [
        f"a {family} method always runs step '{step}'; list it in stages"
        for step in FAMILIES[family].always
        if step not in steps
    ]
    return problems


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
            parent = load_yaml(files[-1]).get("extends")
        except HarnessError:
            return files
        nxt = spec_path(parent, spec_file.parent) if is_plain_name(parent) else None  # a path: refused on load
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
            names = load_yaml(file).get("include")
        except HarnessError:
            continue
        for name in reversed([names] if isinstance(names, str) else list(names or [])):
            found = fragment_file(name, file) if is_plain_name(name) else None  # a path: refused on load
            if found is not None and found.is_file():
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


def nested_problems(raw: dict[str, Any], spec_file: Path) -> list[str]:
    """Unknown or mistyped nested keys, at the top level and in each known profile block."""
    problems = [_message(spec_file, f, None) for f in _blocks(raw)]
    profiles = raw.get("profiles")
    for name, block in profiles.items() if isinstance(profiles, dict) else ():
        if name not in PROFILES or block is None:  # unknown profiles are reported above; null is empty
            continue
        if not isinstance(block, dict):
            problems.append(
                f"{_located(spec_file, ('profiles', name))}: profile '{name}' must be a mapping, "
                f"not {type(block).__name__}"
            )
            continue
        problems.extend(_message(spec_file, f, name) for f in _profile_findings(block))
    return problems
