"""Reading spec files: YAML with line numbers and unique keys, fragments (``include:``), deep merging, where a
method's spec lives.
"""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

import yaml

from harness.core import yamlsafe
from harness.core.errors import (
    DataFormatError,
    HarnessError,
    UnknownNameError,
)
from harness.core.fsutil import NO_SUCH_FILE, file_problem, is_plain_name
from harness.core.paths import BASELINES_DIR, specs_dir
from harness.papers.parsing import yaml_key_lines
from harness.spec.declarations import DECLARATIONS, merge_declarations
from harness.spec.schema import FRAGMENTS, PROFILE_KEYS


def deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``over`` merged over ``base``: mappings key by key, any other value replaced, except the
    declaration lists (``deviations``, ``assumptions``), which merge entry by entry (harness.spec.declarations)."""
    out = copy.deepcopy(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        elif key in DECLARATIONS and isinstance(value, list) and isinstance(out.get(key), list):
            out[key] = merge_declarations(out[key], copy.deepcopy(value))
        else:
            out[key] = copy.deepcopy(value)
    return out


def spec_path(name: str, root: Path | None = None) -> Path:
    """``<specs folder>/<name>.yaml``; a name is a file name there, never a path (``../x`` is refused)."""
    if not is_plain_name(name):
        raise HarnessError(
            f"method '{name}': a method is named by its spec's file name in baselines/, without "
            "folder or .yaml (see `python -m harness ls methods`)"
        )
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
                    None, None, f"key '{key}' given twice (lines {seen[key]} and {line}); keep one", key_node.start_mark
                )
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


def _read_text(path: Path) -> str:
    """A spec file's text; a file that is not UTF-8 is one error naming it and the line of the first bad byte."""
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise DataFormatError(
            path, line, f"not UTF-8 text (byte 0x{data[exc.start]:02x})", "save the file as UTF-8"
        ) from None


@functools.lru_cache(maxsize=512)
def _parsed(text: str) -> Any:
    """A spec text's data, parsed once: validating every profile of every spec resolves each file
    many times (keyed by the text itself, so an edited file is parsed again)."""
    return yamlsafe.load(text, _UniqueKeyLoader)  # aliases bounded before it constructs


@functools.lru_cache(maxsize=512)
def _key_lines(text: str) -> dict[tuple, int]:
    node = yamlsafe.compose(text)  # checked: yaml_key_lines walks every alias's expansion
    return {} if node is None else yaml_key_lines(node)


def load_yaml(path: Path) -> dict[str, Any]:
    problem = file_problem(path)
    if problem == NO_SUCH_FILE:
        raise HarnessError(f"{path}: spec file not found")
    if problem:  # a folder fails with a traceback, a pipe would block the read forever
        raise HarnessError(
            f"{path}: {problem}; a spec or fragment is a YAML file (fix: move it away, or put the file itself there)"
        )
    try:
        text = _read_text(path)
    except FileNotFoundError:  # removed since
        raise HarnessError(f"{path}: spec file not found") from None
    try:
        data = copy.deepcopy(_parsed(text))  # a copy: callers may change what they get
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc)
        fix = (
            "merge the two into one"
            if "given twice" in problem
            else exc.FIX
            if isinstance(exc, yamlsafe.BoundError)
            else "fix the indentation/quoting there"
        )
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


def fragment_folders(spec_file: Path) -> list[Path]:
    """Where a spec's fragments are looked up: beside it (``fragments/``), then among the project's."""
    return list(dict.fromkeys([spec_file.parent / FRAGMENTS, BASELINES_DIR / FRAGMENTS]))


def fragment_file(name: Any, spec_file: Path) -> Path | None:
    """The file of fragment ``name`` included by ``spec_file`` (None: none there). A fragment is named
    by its file name in a fragments folder, never by a path: ``include: ../x`` or an absolute path
    once loaded YAML from outside the spec folder, and is a DataFormatError naming the spec's line."""
    if not is_plain_name(name):
        raise DataFormatError(
            spec_file,
            key_line(spec_file, "include"),
            f"include: {name!r} is not a fragment's name (a fragment is named by its file "
            f"name in {FRAGMENTS}/, without folder or .yaml)",
            "name a fragment of baselines/fragments/ (or of fragments/ beside the spec), "
            "e.g. include: [query_as_context]",
        )
    # exists(), not is_file(): a folder or a pipe named like a fragment is load_yaml's one-line error
    found = (f / f"{name}.yaml" for f in fragment_folders(spec_file))
    return next((path for path in found if path.exists()), None)


def with_fragments(raw: dict[str, Any], path: Path) -> dict[str, Any]:
    """``raw`` over the fragments it includes, in order (a later one and the spec itself win). A
    fragment is looked up beside the spec (``fragments/``), then among the project's (so a spec in
    HARNESS_SPECS_DIR can include them). ``include`` is text, like a macro: it is not part of the
    resolved spec or its hash."""
    names = raw.get("include")
    if names is None:
        return raw
    merged: dict[str, Any] = {}
    for name in [names] if isinstance(names, str) else list(names):
        fragment = fragment_file(name, path)
        if fragment is None:
            known = sorted({p.stem for f in fragment_folders(path) for p in f.glob("*.yaml")})
            raise DataFormatError(
                path,
                key_line(path, "include"),
                f"include: no fragment '{name}' ({UnknownNameError('fragment', str(name), known)})",
            )
        body = load_yaml(fragment)
        bad = sorted(set(body) - set(PROFILE_KEYS) - {"profiles"})
        if bad:
            raise DataFormatError(fragment, key_line(fragment, bad[0]), f"a fragment may not set '{bad[0]}'")
        merged = deep_merge(merged, body)
    return deep_merge(merged, {k: v for k, v in raw.items() if k != "include"})
