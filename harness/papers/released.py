"""The released-checkpoint registry (baselines/released/checkpoints.yaml) and which reported cells each one reproduces.

    ckpt = get_checkpoint("co-condenser-marco-retriever")
    for cell, reason in map_cells(ckpt, cells):   # reason "" = compare; else NOT-COMPARABLE because ...

A checkpoint reproduces a cell only where the paper's row is that checkpoint (listed under
``reproduces``); any other cell of its method is NOT-COMPARABLE with the reason the registry
gives. ``HARNESS_CHECKPOINTS`` names another registry file (tests, a user's own checkpoints).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from harness.core import yamlsafe
from harness.core.errors import DataFormatError, HarnessError, UnknownNameError
from harness.core.paths import BASELINES_DIR
from harness.papers.parsing import yaml_key_lines
from harness.papers.registry import paper_key

SCHEMA_VERSION = 1
CHECKPOINT_PROFILE = "checkpoint"  # the profile of a released checkpoint's run record (`harness reproduce`)
KINDS = ("retriever", "pretrained")
_CHECKPOINT_KEYS = {
    "source",
    "method",
    "kind",
    "description",
    "encoder",
    "benchmarks",
    "reproduces",
    "not_comparable",
    "other_cells",
    "notes",
}
_ENCODER_KEYS = {"pooling": str, "normalize": bool, "query_max_length": int, "passage_max_length": int}
_SELECTOR_KEYS = ("paper", "table", "row")


def registry_path() -> Path:
    return Path(os.environ.get("HARNESS_CHECKPOINTS", BASELINES_DIR / "released" / "checkpoints.yaml"))


@dataclass(frozen=True)
class Checkpoint:
    """One released checkpoint and the reported rows it is (or is not) the system of."""

    name: str
    source: str
    method: str | None
    kind: str
    description: str
    encoder: dict[str, Any]
    benchmarks: tuple[str, ...]
    reproduces: tuple[tuple[str, str, str], ...]  # (paper, table, row)
    not_comparable: dict[tuple[str, str, str], str] = field(default_factory=dict)
    other_cells: str = "not a row of this checkpoint"
    notes: str = ""

    @property
    def record_method(self) -> str:
        """The method a run record of this checkpoint is filed under (its own name when it has none)."""
        return self.method or self.name

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "source": self.source,
            "method": self.method,
            "kind": self.kind,
            "description": self.description,
            "encoder": dict(self.encoder),
            "notes": self.notes,
            "reproduces": [dict(zip(_SELECTOR_KEYS, s)) for s in self.reproduces],
        }


@dataclass(frozen=True)
class Registry:
    path: Path
    checkpoints: dict[str, Checkpoint]
    unreleased: dict[str, str]


def _selector(
    path: Path, lines: Mapping[tuple, int], keypath: tuple, item: Any, extra: Sequence[str] = ()
) -> tuple[str, str, str]:
    allowed = (*_SELECTOR_KEYS, *extra)
    if not isinstance(item, dict) or any(k not in item for k in _SELECTOR_KEYS) or set(item) - set(allowed):
        raise DataFormatError(
            path,
            lines.get(keypath),
            f"{'.'.join(map(str, keypath))} must be a mapping with exactly {', '.join(allowed)}",
            "e.g. {paper: qc-v1, table: Table 1, row: ...}",
        )
    return (str(item["paper"]), str(item["table"]), str(item["row"]))


def _checkpoint(path: Path, lines: Mapping[tuple, int], name: str, raw: Any) -> Checkpoint:
    key = ("checkpoints", name)

    def bad(sub: tuple, problem: str, fix: str | None = None) -> DataFormatError:
        return DataFormatError(path, lines.get(key + sub) or lines.get(key), f"checkpoint '{name}': {problem}", fix)

    if not isinstance(raw, dict):
        raise bad((), "must be a mapping of source, method, kind, encoder, ...")
    unknown = sorted(set(raw) - _CHECKPOINT_KEYS)
    if unknown:
        raise bad((unknown[0],), f"unknown key '{unknown[0]}'", f"allowed: {', '.join(sorted(_CHECKPOINT_KEYS))}")
    for required in ("source", "kind", "encoder"):
        if required not in raw:
            raise bad((), f"missing '{required}'")
    if raw["kind"] not in KINDS:
        raise bad(("kind",), f"kind '{raw['kind']}' is not one of {', '.join(KINDS)}")
    encoder = raw["encoder"]
    if not isinstance(encoder, dict):
        raise bad(("encoder",), "encoder must be a mapping")
    for k, v in encoder.items():
        if k not in _ENCODER_KEYS:
            raise bad(("encoder", k), f"unknown encoder key '{k}'", f"allowed: {', '.join(_ENCODER_KEYS)}")
        if not isinstance(v, _ENCODER_KEYS[k]) or (k == "pooling" and v not in ("cls", "mean")):
            raise bad(
                ("encoder", k),
                f"encoder.{k} = {v!r} is not a valid {_ENCODER_KEYS[k].__name__}"
                + (" (cls or mean)" if k == "pooling" else ""),
            )
    reproduces = tuple(
        _selector(path, lines, key + ("reproduces", i), item) for i, item in enumerate(raw.get("reproduces") or [])
    )
    not_comparable = {}
    for i, item in enumerate(raw.get("not_comparable") or []):
        sel = _selector(path, lines, key + ("not_comparable", i), item, ("reason",))
        if not item.get("reason"):
            raise bad(("not_comparable", i), "a not_comparable row needs a reason")
        not_comparable[sel] = str(item["reason"])
    if raw["kind"] == "pretrained" and reproduces:
        raise bad(("reproduces",), "a pre-trained (not fine-tuned) checkpoint cannot reproduce a retrieval cell")
    return Checkpoint(
        name,
        str(raw["source"]),
        raw.get("method"),
        raw["kind"],
        str(raw.get("description") or ""),
        dict(encoder),
        tuple(str(b) for b in raw.get("benchmarks") or ()),
        reproduces,
        not_comparable,
        str(raw.get("other_cells") or Checkpoint.other_cells),
        str(raw.get("notes") or ""),
    )


@functools.lru_cache(maxsize=4)
def _load(path_str: str, mtime_ns: int) -> Registry:
    path = Path(path_str)
    text = path.read_text(encoding="utf-8")
    try:
        node, data = yamlsafe.load_with_node(text)  # aliases bounded
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise DataFormatError(path, mark.line + 1 if mark else None, f"not valid YAML: {exc}") from None

    lines = yaml_key_lines(node) if node is not None else {}
    if not isinstance(data, dict) or data.get("schema_version") != SCHEMA_VERSION:
        raise DataFormatError(path, 1, f"expected a mapping with schema_version: {SCHEMA_VERSION}")
    unknown = sorted(set(data) - {"schema_version", "checkpoints", "unreleased"})
    if unknown:
        raise DataFormatError(
            path,
            lines.get((unknown[0],)),
            f"unknown top-level key '{unknown[0]}'",
            "allowed: schema_version, checkpoints, unreleased",
        )
    checkpoints = {str(n): _checkpoint(path, lines, str(n), raw) for n, raw in (data.get("checkpoints") or {}).items()}
    return Registry(path, checkpoints, {str(k): str(v) for k, v in (data.get("unreleased") or {}).items()})


def load_checkpoints(path: str | Path | None = None) -> Registry:
    """The registry (cached by file and mtime); malformed files raise naming the file and line."""
    path = Path(path) if path is not None else registry_path()
    if not path.is_file():
        raise HarnessError(f"checkpoint registry {path} not found (HARNESS_CHECKPOINTS names another file)")
    return _load(str(path), path.stat().st_mtime_ns)


def get_checkpoint(name: str, registry: Registry | None = None) -> Checkpoint:
    """A checkpoint by name; a method name with nothing released says so, anything else did-you-mean."""
    registry = registry or load_checkpoints()
    if name in registry.checkpoints:
        return registry.checkpoints[name]
    if name in registry.unreleased:
        raise HarnessError(
            f"{name}: {registry.unreleased[name]}; nothing to reproduce "
            f"(released checkpoints: {', '.join(registry.checkpoints)})"
        )
    by_method = [c.name for c in registry.checkpoints.values() if c.method == name]
    if by_method:
        raise HarnessError(f"'{name}' is a method; its released checkpoints are: {', '.join(by_method)}")
    raise UnknownNameError("checkpoint", name, list(registry.checkpoints))


def _key(cell: Mapping[str, Any]) -> tuple[str, str, str]:
    return (paper_key(cell), str(cell.get("table") or ""), str(cell.get("row") or ""))


def map_cells(ckpt: Checkpoint, cells: Sequence[Mapping[str, Any]]) -> list[tuple[Mapping[str, Any], str]]:
    """``(cell, reason)`` for every cell of the checkpoint's rows and method; reason "" means compare."""
    wanted = set(ckpt.reproduces)
    out = []
    for cell in cells:
        key = _key(cell)
        if key in wanted:
            out.append((cell, ""))
        elif key in ckpt.not_comparable:
            out.append((cell, ckpt.not_comparable[key]))
        elif ckpt.method and cell.get("method") == ckpt.method:
            out.append((cell, ckpt.other_cells))
    return out


def unmatched_selectors(ckpt: Checkpoint, cells: Sequence[Mapping[str, Any]]) -> list[tuple[str, str, str]]:
    """Rows the checkpoint names that no reported cell has (a typo in the registry, or a renamed row)."""
    have = {_key(c) for c in cells}
    return [s for s in (*ckpt.reproduces, *ckpt.not_comparable) if s not in have]
