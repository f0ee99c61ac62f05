"""The reported-scores registry: every cell of every results table of the papers, as printed.

One YAML file per paper file lives in ``baselines/reported/`` (the runtime never reads the
papers themselves). A table lists its ``columns`` and ``rows`` as printed; each row's
``values`` are the printed strings in column order:

- ``"-"``: printed as missing; ``""``: a blank cell (needs a doubt);
- ``null``: the cell exists in our reading of the table but is not legible in the text
  extraction (needs a doubt at cell, row, column or table level);
- a mapping carries per-cell flags: ``{value: "40.2", bold: true, underline: true,
  marks: "*†", doubt: "...", note: "..."}``. ``marks`` are printed significance or footnote
  marks that follow the number; ``value`` never contains markup.

Row-header columns that are not results (e.g. "Query Number", "Pre-trained model") are
``descriptor_columns``; each row gives its ``descriptors`` in that order.

Mapping to the harness: a row or a column may set ``method`` (a harness method name),
``benchmark``, ``measure`` (an ir-measures string), ``unit`` and ``conditions``; a cell takes
each from whichever axis sets it (both axes setting different values is an error).
Units "points" (38.2) and "fraction" (0.441) are retrieval-metric units: a cell with a
measure gets ``score`` = its number normalised once to a fraction in [0, 1]. Any other unit
("%", "GB", "bytes", "QPS", "count", "text") marks a non-metric cell (score None).

Besides tables a paper file may record ``claims`` (numbers stated in the text, re-checked by
harness.consistency), ``text_values`` (numbers only given in the text), ``known_issues``,
``text_differences`` against another version, and ``notes``.

For grading, :func:`load_reported_cells` gives the cells as dicts (from the registry, or from a
JSON snapshot of it) with an error message instead of an exception, and :func:`paper_key` names
the paper of such a cell or of a comparison made against one.
"""

from __future__ import annotations

import difflib
import functools
import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable

import yaml

from harness.data.catalog import AGGREGATES, reported_benchmarks
from harness.errors import DataFormatError, HarnessError, UnknownNameError
from harness.paths import BASELINES_DIR, REPORTED_DIR
from harness.stages import FINETUNE_STAGES  # the fine-tuning stages' names, which cells use too

SCHEMA_VERSION = 1
# The methods a cell may name: the committed method specs (one YAML each in baselines/), so a new
# method is known to the registry the moment its spec exists. nopretrain, the control, has no cells.
KNOWN_METHODS = tuple(sorted(p.stem for p in BASELINES_DIR.glob("*.yaml")))
# The benchmarks a cell may name: the catalog's, as the papers' tables report them, and the averages they print.
BENCHMARKS = tuple(reported_benchmarks())
METRIC_UNITS = {"points": 100.0, "fraction": 1.0}

# Run conditions a cell may carry: name -> (type, meaning). Unknown names are schema errors
# so a typo can never silently make two cells look comparable or not.
CONDITION_KEYS: dict[str, tuple[type, str]] = {
    "pretrain_steps": (str, "pre-training steps as printed, e.g. '120K'"),
    "pretrain_corpus": (str, "pre-training corpus when not the method's default"),
    "checkpoint": (str, "pre-trained weights released by the named authors, not pre-trained in the table's own setting"),
    "finetune_stage": (str, "retriever1 (BM25 negatives) | retriever2 (mined hard negatives) | retriever3 (reranker-distilled)"),
    "finetune_data": (str, "fine-tuning data when not the benchmark's own, e.g. BEIR protocol"),
    "msmarco_passages": (str, "MS MARCO passages fine-tuned and evaluated on: plain (collection.tsv) | titled "
                              "(RocketQA's titles joined to it, as Tevatron reads MS MARCO)"),
    "finetune_queries": (str, "number of training queries in a low-resource setting, as printed"),
    "query_number": (int, "generated queries per passage (query-as-context)"),
    "mixed": (bool, "passage-query and passage-passage pairs mixed in pre-training"),
    "reproduction_by_authors": (bool, "dagger rows: the authors' reproduction with public code"),
    "cited": (str, "the paper copied this number from the named publication"),
    "runs_averaged": (int, "the printed number is a mean over this many runs"),
    "sparsify_top_k": (int, "documents keep only their top-k weighted terms"),
    "hybrid": (str, "combined with a dense retriever: pipeline | ensemble"),
    "reranker": (str, "a re-ranker is applied after retrieval"),
    "reranker_teacher": (str, "the cross-encoder distilled into retriever 3 (a checkpoint name)"),
    "init": (str, "the initial encoder's checkpoint"),
    "bm25_negatives": (str, "where retriever 1's BM25 negatives come from: own | msmarco-triples | tevatron"),
    "ablation": (str, "a variant of the method that the harness does not implement"),
}

_TOP_KEYS = {
    "schema_version": True, "paper": True, "title": True, "authors": True, "venue": True,
    "year": True, "paper_file": True, "original_file": True, "version": True, "family": True,
    "tables": True, "notes": False, "claims": False, "text_values": False,
    "known_issues": False, "text_differences": False,
}
_TABLE_KEYS = {
    "label": True, "caption": True, "unit": True, "columns": True, "rows": True,
    "bold_groups": True, "systems": False, "bold_note": False, "bold_extracted": False,
    "underline": False, "descriptor_columns": False, "counterparts": False,
    "conditions": False, "doubt": False, "note": False,
}
_AXIS_KEYS = {"label", "key", "method", "benchmark", "measure", "unit", "conditions", "doubt", "note"}
_COLUMN_KEYS = _AXIS_KEYS | {"group"}
_ROW_KEYS = _AXIS_KEYS | {"section", "canonical", "descriptors", "values", "label_bold", "derived"}
_CELL_KEYS = {"value", "bold", "underline", "marks", "doubt", "note"}
_BOLD_GROUP_KEYS = {"by", "within", "exclude", "rule"}
_CLAIM_KEYS = {"id", "text", "section", "number", "check"}
_CHECK_KINDS = {
    "count_greater": {"kind", "paper", "table", "axis", "a", "b", "over"},
    "count_best": {"kind", "paper", "table", "axis", "target", "over", "among"},
    "difference": {"kind", "paper", "table", "a", "b"},
    "greater": {"kind", "paper", "table", "a", "b"},
    "equals": {"kind", "paper", "table", "a"},
}
_TEXT_VALUE_KEYS = {"id", "source", "text", "value", "unit", "method", "benchmark", "measure", "conditions", "doubt"}
_NUMBER = re.compile(r"^-?\d+(\.\d+)?$")


@dataclass(frozen=True)
class ReportedCell:
    """One printed cell with its provenance, its harness mapping and its run conditions."""

    cell_id: str
    paper: str
    paper_file: str
    version: str
    table: str
    row: str
    column: str
    value: str | None
    score: float | None
    unit: str
    method: str | None
    benchmark: str | None
    measure: str | None
    conditions: dict[str, Any] = field(default_factory=dict, hash=False)
    bold: bool = False
    underline: bool = False
    marks: str = ""
    doubt: str | None = None
    row_key: str = ""
    column_key: str = ""
    section: str | None = None
    descriptors: dict[str, str] = field(default_factory=dict, hash=False)
    doubt_scopes: tuple[str, ...] = ()
    source: str = ""

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["doubt_scopes"] = list(self.doubt_scopes)
        return out

    @property
    def number(self) -> float | None:
        """The printed number in the printed unit ('56.5%' -> 56.5), or None for '-', blanks, text."""
        if self.value is None:
            return None
        text = self.value[:-1] if self.unit == "%" and self.value.endswith("%") else self.value
        return float(text) if _NUMBER.match(text) else None


@dataclass(frozen=True)
class TableInfo:
    """A table's layout and comparison rules (its values are in ReportedCell objects)."""

    paper: str
    label: str
    caption: str
    unit: str
    systems: str
    row_keys: tuple[str, ...]
    column_keys: tuple[str, ...]
    row_labels: dict[str, str] = field(hash=False)
    column_labels: dict[str, str] = field(hash=False)
    row_canonical: dict[str, str] = field(hash=False)
    column_canonical: dict[str, str] = field(hash=False)
    column_groups: dict[str, str | None] = field(hash=False)
    descriptor_columns: tuple[str, ...]
    bold_groups: dict[str, Any] | None = field(hash=False)
    bold_extracted: bool
    underline: str | None
    counterparts: dict[str, str] = field(hash=False)
    derived: dict[str, dict[str, Any]] = field(hash=False)


@dataclass(frozen=True)
class Doubt:
    """An extraction doubt recorded in a YAML file, with the cells it concerns."""

    paper: str
    table: str | None
    scope: str
    where: str
    text: str
    cells: tuple[str, ...]


@dataclass(frozen=True)
class PaperInfo:
    """Everything one registry file says about one paper file."""

    paper: str
    title: str
    authors: tuple[str, ...]
    venue: str
    year: int
    paper_file: str
    original_file: str
    version: str
    family: str
    path: str
    tables: tuple[TableInfo, ...]
    cells: tuple[ReportedCell, ...]
    claims: tuple[dict[str, Any], ...]
    text_values: tuple[ReportedCell, ...]
    known_issues: tuple[dict[str, Any], ...]
    text_differences: dict[str, Any] | None = field(hash=False)
    doubts: tuple[Doubt, ...]
    notes: tuple[str, ...]

    def table(self, label: str) -> TableInfo | None:
        return next((t for t in self.tables if t.label == label), None)


# ---------------------------------------------------------------- YAML with line numbers


def yaml_key_lines(node: yaml.Node, path: tuple = (), out: dict[tuple, int] | None = None) -> dict[tuple, int]:
    """Map each key path (('tables', 0, 'rows', 3)) to its 1-based line in the file."""
    out = {} if out is None else out
    out.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            sub = path + (k.value,)
            out[sub] = k.start_mark.line + 1
            yaml_key_lines(v, sub, out)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            sub = path + (i,)
            out[sub] = item.start_mark.line + 1
            yaml_key_lines(item, sub, out)
    return out


def _dotted(path: tuple) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(top level)"


@dataclass
class _Problems:
    """Collects schema problems of one file, each naming the file, line and key path."""

    path: Path
    lines: dict[tuple, int] = field(default_factory=dict)
    items: list[tuple[int | None, str, str | None]] = field(default_factory=list)

    def add(self, keypath: tuple, problem: str, fix: str | None = None, hint: str = "") -> None:
        line = None
        for cut in range(len(keypath), -1, -1):
            if keypath[:cut] in self.lines:
                line = self.lines[keypath[:cut]]
                break
        where = _dotted(keypath) + (f" ({hint})" if hint else "")
        self.items.append((line, f"{where}: {problem}", fix))

    def strings(self) -> list[str]:
        out = []
        for line, msg, fix in self.items:
            loc = f"{self.path}:{line}" if line else str(self.path)
            out.append(f"{loc}: {msg}" + (f" (fix: {fix})" if fix else ""))
        return out

    def raise_first(self) -> None:
        if self.items:
            line, msg, fix = self.items[0]
            more = f" [and {len(self.items) - 1} more problem(s); run 'python -m harness validate']" if len(self.items) > 1 else ""
            raise DataFormatError(self.path, line, msg + more, fix)


def _unknown_keys(pr: _Problems, data: dict, allowed: Iterable[str], keypath: tuple, hint: str = "") -> None:
    allowed = list(allowed)
    for key in data:
        if key not in allowed:
            close = difflib.get_close_matches(str(key), allowed, n=1, cutoff=0.6)
            fix = f"did you mean '{close[0]}'?" if close else f"known keys: {', '.join(sorted(allowed))}"
            pr.add(keypath + (key,), f"unknown key '{key}'", fix, hint)


def canonical_label(label: str) -> str:
    """A version-independent name for a printed label: no citation, dagger or case."""
    text = re.sub(r"[\(\[][^\)\]]*\d{4}[a-z]?[^\)\]]*[\)\]]", "", label)
    text = text.replace("$\\dagger$", "").replace("†", "")
    return re.sub(r"\s+", " ", text).strip().lower()


def _check_conditions(pr: _Problems, cond: Any, keypath: tuple, hint: str) -> dict[str, Any]:
    if cond is None:
        return {}
    if not isinstance(cond, dict):
        pr.add(keypath, "conditions must be a mapping", hint=hint)
        return {}
    for key, value in cond.items():
        if key not in CONDITION_KEYS:
            close = difflib.get_close_matches(str(key), list(CONDITION_KEYS), n=1, cutoff=0.6)
            fix = f"did you mean '{close[0]}'?" if close else f"known: {', '.join(CONDITION_KEYS)}"
            pr.add(keypath + (key,), f"unknown condition '{key}'", fix, hint)
            continue
        typ, meaning = CONDITION_KEYS[key]
        if not isinstance(value, typ) or (typ is int and isinstance(value, bool)):
            pr.add(keypath + (key,), f"condition '{key}' must be {typ.__name__} ({meaning})", hint=hint)
        elif key == "finetune_stage" and value not in FINETUNE_STAGES:
            pr.add(keypath + (key,), f"finetune_stage '{value}' is not one of {', '.join(FINETUNE_STAGES)}", hint=hint)
    return dict(cond)


def _ordered(cond: dict[str, Any]) -> dict[str, Any]:
    """Conditions in the documented order, so printed cells read the same everywhere."""
    rank = {k: i for i, k in enumerate(CONDITION_KEYS)}
    return dict(sorted(cond.items(), key=lambda kv: rank.get(kv[0], len(rank))))


def _check_measure(pr: _Problems, measure: Any, keypath: tuple, hint: str) -> None:
    if measure is None:
        return
    import ir_measures  # light (~0.1 s); the authority on measure spelling

    try:
        parsed = str(ir_measures.parse_measure(str(measure)))
    except Exception:  # ir_measures raises several types for bad strings
        pr.add(keypath, f"'{measure}' is not an ir-measures measure", "use e.g. RR@10, R@1000, nDCG@10", hint)
        return
    if parsed != measure:
        pr.add(keypath, f"measure '{measure}' is spelled '{parsed}' by ir-measures", f"write '{parsed}'", hint)


def _check_axis(pr: _Problems, item: Any, keypath: tuple, allowed: set[str], hint: str) -> dict[str, Any] | None:
    if not isinstance(item, dict):
        pr.add(keypath, "must be a mapping with at least 'label'", hint=hint)
        return None
    _unknown_keys(pr, item, allowed, keypath, hint)
    if not isinstance(item.get("label"), str):
        pr.add(keypath + ("label",), "missing or non-string 'label' (the printed label)", hint=hint)
        return None
    method = item.get("method")
    if method is not None and method not in KNOWN_METHODS:
        close = difflib.get_close_matches(str(method), KNOWN_METHODS, n=1)
        pr.add(keypath + ("method",), f"unknown harness method '{method}'",
               f"did you mean '{close[0]}'?" if close else "use one of " + ", ".join(KNOWN_METHODS) + " or null", hint)
    bench = item.get("benchmark")
    if bench is not None and bench not in BENCHMARKS:
        close = difflib.get_close_matches(str(bench), BENCHMARKS, n=1)
        pr.add(keypath + ("benchmark",), f"unknown benchmark '{bench}'",
               f"did you mean '{close[0]}'?" if close else "use a harness benchmark name or null", hint)
    _check_measure(pr, item.get("measure"), keypath + ("measure",), hint)
    for key in ("doubt", "note", "unit", "group", "section", "canonical", "key"):
        if key in item and item[key] is not None and not isinstance(item[key], str):
            pr.add(keypath + (key,), f"'{key}' must be a string", hint=hint)
    return item


def _axis_key(item: dict[str, Any]) -> str:
    if item.get("key"):
        return str(item["key"])
    group = item.get("group")
    return f"{group} {item['label']}" if group else str(item["label"])


def _merge(pr: _Problems, name: str, row_val: Any, col_val: Any, keypath: tuple, hint: str) -> Any:
    if row_val is not None and col_val is not None and row_val != col_val:
        pr.add(keypath, f"row sets {name} '{row_val}' but its column sets '{col_val}'", hint=hint)
    return row_val if row_val is not None else col_val


def _parse_cell_value(pr: _Problems, raw: Any, keypath: tuple, hint: str) -> dict[str, Any]:
    cell = {"value": raw, "bold": False, "underline": False, "marks": "", "doubt": None}
    if isinstance(raw, dict):
        _unknown_keys(pr, raw, _CELL_KEYS, keypath, hint)
        if "value" not in raw:
            pr.add(keypath, "a cell mapping needs 'value' (null when not legible)", hint=hint)
        cell = {
            "value": raw.get("value"), "bold": raw.get("bold", False), "underline": raw.get("underline", False),
            "marks": raw.get("marks", "") or "", "doubt": raw.get("doubt"),
        }
        for flag in ("bold", "underline"):
            if not isinstance(cell[flag], bool):
                pr.add(keypath + (flag,), f"'{flag}' must be true or false", hint=hint)
    elif raw is not None and not isinstance(raw, str):
        pr.add(keypath, f"value {raw!r} must be a quoted string exactly as printed",
               f"write \"{raw}\" so YAML keeps the printed digits", hint)
        cell["value"] = str(raw)
    value = cell["value"]
    if value is not None and not isinstance(value, str):
        pr.add(keypath, f"value {value!r} must be a quoted string exactly as printed", hint=hint)
        cell["value"] = str(value)
    if isinstance(cell["value"], str) and re.search(r"</?(b|u|i|sub|sup)>|\*\*", cell["value"]):
        pr.add(keypath, f"value '{cell['value']}' contains markup", "use {value: ..., bold: true} instead", hint)
    return cell


def _check_bold_groups(pr: _Problems, groups: Any, rows: list[str], cols: list[str], keypath: tuple, hint: str) -> None:
    if groups is None:
        return
    if not isinstance(groups, dict):
        pr.add(keypath, "bold_groups must be a mapping {by: column|row, within: [[keys]], exclude: [keys], rule: text} or null", hint=hint)
        return
    _unknown_keys(pr, groups, _BOLD_GROUP_KEYS, keypath, hint)
    by = groups.get("by")
    if by not in ("column", "row"):
        pr.add(keypath + ("by",), "'by' must be 'column' (compare down each column) or 'row'", hint=hint)
        return
    other = rows if by == "column" else cols
    for i, part in enumerate(groups.get("within") or []):
        for key in part if isinstance(part, list) else [part]:
            if key not in other:
                pr.add(keypath + ("within", i), f"'{key}' is not a {'row' if by == 'column' else 'column'} key of this table", hint=hint)
    for key in groups.get("exclude") or []:
        if key not in other:
            pr.add(keypath + ("exclude",), f"'{key}' is not a {'row' if by == 'column' else 'column'} key of this table", hint=hint)
    if not isinstance(groups.get("rule"), str):
        pr.add(keypath + ("rule",), "say in 'rule' how the paper forms its comparison groups", hint=hint)


def _parse_table(pr: _Problems, meta: dict[str, Any], t: Any, tp: tuple) -> tuple[TableInfo, list[ReportedCell], list[Doubt]] | None:
    if not isinstance(t, dict):
        pr.add(tp, "a table must be a mapping")
        return None
    label = t.get("label")
    hint = str(label) if label else ""
    _unknown_keys(pr, t, _TABLE_KEYS, tp, hint)
    for key, required in _TABLE_KEYS.items():
        if required and key not in t:
            pr.add(tp + (key,), f"missing required key '{key}'", hint=hint)
    if not isinstance(label, str) or not isinstance(t.get("caption"), str):
        return None
    unit = t.get("unit")
    if not isinstance(unit, str) or not unit:
        pr.add(tp + ("unit",), "unit must be 'points', 'fraction', 'mixed' or another unit string", hint=hint)
        unit = "mixed"
    systems = t.get("systems", "rows")
    if systems not in ("rows", "columns"):
        pr.add(tp + ("systems",), "systems must be 'rows' or 'columns' (the axis that names the retrievers)", hint=hint)
    tcond = _check_conditions(pr, t.get("conditions"), tp + ("conditions",), hint)
    descr_cols = t.get("descriptor_columns") or []
    if not isinstance(descr_cols, list) or not all(isinstance(d, str) for d in descr_cols):
        pr.add(tp + ("descriptor_columns",), "descriptor_columns must be a list of printed labels", hint=hint)
        descr_cols = []
    if not isinstance(t.get("columns"), list) or not t["columns"]:
        pr.add(tp + ("columns",), "columns must be a non-empty list", hint=hint)
        return None
    if not isinstance(t.get("rows"), list) or not t["rows"]:
        pr.add(tp + ("rows",), "rows must be a non-empty list", hint=hint)
        return None

    columns: list[dict[str, Any]] = []
    for j, c in enumerate(t["columns"]):
        item = _check_axis(pr, c, tp + ("columns", j), _COLUMN_KEYS, hint)
        columns.append(item or {"label": f"?{j}"})
    col_keys = [_axis_key(c) for c in columns]
    rows: list[dict[str, Any]] = []
    for i, r in enumerate(t["rows"]):
        item = _check_axis(pr, r, tp + ("rows", i), _ROW_KEYS, hint)
        rows.append(item or {"label": f"?{i}", "values": []})
    row_keys = [_axis_key(r) for r in rows]
    for name, keys, sub in (("column", col_keys, "columns"), ("row", row_keys, "rows")):
        seen: set[str] = set()
        for idx, key in enumerate(keys):
            if key in seen:
                pr.add(tp + (sub, idx), f"duplicate {name} key '{key}'", f"give the {name} a unique 'key'", hint)
            seen.add(key)
    _check_bold_groups(pr, t.get("bold_groups"), row_keys, col_keys, tp + ("bold_groups",), hint)
    if t.get("bold_groups") is None and not t.get("bold_note"):
        pr.add(tp + ("bold_groups",), "bold_groups is null: say why in 'bold_note'", hint=hint)
    if t.get("underline") not in (None, "second_best"):
        pr.add(tp + ("underline",), "underline may only be 'second_best'", hint=hint)
    counterparts = t.get("counterparts") or {}
    if not isinstance(counterparts, dict):
        pr.add(tp + ("counterparts",), "counterparts must map a paper key to a table label", hint=hint)
        counterparts = {}

    paper = meta["paper"]
    cells: list[ReportedCell] = []
    doubts: list[Doubt] = []
    col_doubt_cells: dict[int, list[str]] = {j: [] for j in range(len(columns))}
    col_conds = [_check_conditions(pr, c.get("conditions"), tp + ("columns", j, "conditions"), f"{label} / {col_keys[j]}")
                 for j, c in enumerate(columns)]
    derived: dict[str, dict[str, Any]] = {}
    for i, (row, rkey) in enumerate(zip(rows, row_keys)):
        rp = tp + ("rows", i)
        rhint = f"{label} / {rkey}"
        rcond = _check_conditions(pr, row.get("conditions"), rp + ("conditions",), rhint)
        values = row.get("values")
        if not isinstance(values, list):
            pr.add(rp + ("values",), "missing 'values' list (one printed string per column)", hint=rhint)
            continue
        if len(values) != len(columns):
            pr.add(rp + ("values",), f"expected {len(columns)} values (one per column), got {len(values)}", hint=rhint)
            continue
        descr = row.get("descriptors") or []
        if len(descr) != len(descr_cols):
            pr.add(rp + ("descriptors",), f"expected {len(descr_cols)} descriptors ({', '.join(descr_cols) or 'none'}), got {len(descr)}", hint=rhint)
            descr = list(descr) + [""] * len(descr_cols)
        if row.get("derived") is not None:
            d = row["derived"]
            if not isinstance(d, dict) or d.get("kind") not in ("mean", "count_best") or not isinstance(d.get("over"), list):
                pr.add(rp + ("derived",), "derived must be {kind: mean|count_best, over: [row keys]}", hint=rhint)
            else:
                for key in d["over"]:
                    if key not in row_keys:
                        pr.add(rp + ("derived", "over"), f"'{key}' is not a row key of this table", hint=rhint)
                derived[rkey] = d
        if row.get("benchmark") in AGGREGATES and not row.get("derived"):
            pr.add(rp + ("derived",), "a BEIR average row must say how it is derived: {kind: mean, over: [...]}", hint=rhint)
        row_cells: list[str] = []
        for j, (col, ckey) in enumerate(zip(columns, col_keys)):
            vp = rp + ("values", j)
            vhint = f"{label} / {rkey} / {ckey}"
            cell = _parse_cell_value(pr, values[j], vp, vhint)
            method = _merge(pr, "method", row.get("method"), col.get("method"), vp, vhint)
            bench = _merge(pr, "benchmark", row.get("benchmark"), col.get("benchmark"), vp, vhint)
            measure = _merge(pr, "measure", row.get("measure"), col.get("measure"), vp, vhint)
            cunit = row.get("unit") or col.get("unit") or unit
            if cunit == "mixed":
                pr.add(vp, "the table unit is 'mixed': set a unit on this row or column", hint=vhint)
            cond = dict(tcond)
            for src in (col_conds[j], rcond):
                for k, v in src.items():
                    if k in cond and cond[k] != v:
                        pr.add(vp, f"condition '{k}' is {cond[k]!r} on one axis and {v!r} on another", hint=vhint)
                    cond[k] = v
            cond = _ordered(cond)
            if bench is not None and measure is None:
                pr.add(vp, f"benchmark '{bench}' without a measure", hint=vhint)
            if measure is not None and cunit not in METRIC_UNITS:
                pr.add(vp, f"a retrieval measure needs unit points or fraction, not '{cunit}'", hint=vhint)
            scopes = tuple(s for s, d in (("table", t.get("doubt")), ("column", col.get("doubt")),
                                          ("row", row.get("doubt")), ("cell", cell["doubt"])) if d)
            texts = [f"{s}: {d}" for s, d in (("table", t.get("doubt")), ("column", col.get("doubt")),
                                              ("row", row.get("doubt")), ("cell", cell["doubt"])) if d]
            value = cell["value"]
            if value in (None, "") and not scopes:
                what = "null (not legible)" if value is None else "blank"
                pr.add(vp, f"a {what} cell needs a doubt saying why", hint=vhint)
            score = None
            if measure is not None and cunit in METRIC_UNITS and isinstance(value, str) and value not in ("-", ""):
                if not _NUMBER.match(value):
                    pr.add(vp, f"metric value '{value}' is not a number", "put marks in 'marks', or '-' for missing", vhint)
                else:
                    score = float(value) / METRIC_UNITS[cunit]
                    if cunit == "points" and "." in value and len(value.split(".")[1]) >= 3:
                        pr.add(vp, f"value {value} has 3+ decimals: it looks like a fraction, not points",
                               "check the table's unit", vhint)
                    if not 0.0 <= score <= 1.0:
                        pr.add(vp, f"value {value} in unit '{cunit}' gives score {score:g} outside [0, 1]",
                               "check the table's unit", vhint)
            cell_id = f"{paper}/{label}/{rkey}/{ckey}"
            col_label = f"{col['group']} {col['label']}" if col.get("group") else col["label"]
            cells.append(ReportedCell(
                cell_id=cell_id, paper=paper, paper_file=meta["paper_file"], version=meta["version"],
                table=label, row=row["label"], column=col_label, value=value, score=score, unit=cunit,
                method=method, benchmark=bench, measure=measure, conditions=cond, bold=bool(cell["bold"]),
                underline=bool(cell["underline"]), marks=str(cell["marks"]), doubt="; ".join(texts) or None,
                row_key=rkey, column_key=ckey, section=row.get("section"),
                descriptors={d: str(v) for d, v in zip(descr_cols, descr)}, doubt_scopes=scopes,
                source=str(pr.path),
            ))
            row_cells.append(cell_id)
            col_doubt_cells[j].append(cell_id)
            if cell["doubt"]:
                doubts.append(Doubt(paper, label, "cell", f"{rkey} / {ckey}", str(cell["doubt"]), (cell_id,)))
        if row.get("doubt"):
            doubts.append(Doubt(paper, label, "row", rkey, str(row["doubt"]), tuple(row_cells)))
    for j, col in enumerate(columns):
        if col.get("doubt"):
            doubts.append(Doubt(paper, label, "column", col_keys[j], str(col["doubt"]), tuple(col_doubt_cells[j])))
    if t.get("doubt"):
        doubts.insert(0, Doubt(paper, label, "table", label, str(t["doubt"]), tuple(c.cell_id for c in cells)))
    info = TableInfo(
        paper=paper, label=label, caption=t["caption"], unit=unit, systems=systems if systems in ("rows", "columns") else "rows",
        row_keys=tuple(row_keys), column_keys=tuple(col_keys),
        row_labels={k: r["label"] for k, r in zip(row_keys, rows)},
        column_labels={k: c["label"] for k, c in zip(col_keys, columns)},
        row_canonical={k: r.get("canonical") or canonical_label(r["label"]) for k, r in zip(row_keys, rows)},
        column_canonical={k: c.get("canonical") or canonical_label(k) for k, c in zip(col_keys, columns)},
        column_groups={k: c.get("group") for k, c in zip(col_keys, columns)},
        descriptor_columns=tuple(descr_cols), bold_groups=t.get("bold_groups"),
        bold_extracted=bool(t.get("bold_extracted", True)), underline=t.get("underline"),
        counterparts={str(k): str(v) for k, v in counterparts.items()}, derived=derived,
    )
    return info, cells, doubts


def _check_claims(pr: _Problems, claims: Any, tables: dict[str, TableInfo], paper: str) -> list[dict[str, Any]]:
    if claims is None:
        return []
    if not isinstance(claims, list):
        pr.add(("claims",), "claims must be a list")
        return []
    out, seen = [], set()
    for i, c in enumerate(claims):
        cp = ("claims", i)
        if not isinstance(c, dict):
            pr.add(cp, "a claim must be a mapping {id, text, section, number, check}")
            continue
        _unknown_keys(pr, c, _CLAIM_KEYS, cp)
        hint = str(c.get("id", ""))
        for key in ("id", "text", "check"):
            if key not in c:
                pr.add(cp + (key,), f"missing '{key}'", hint=hint)
        if c.get("id") in seen:
            pr.add(cp + ("id",), f"duplicate claim id '{c.get('id')}'", hint=hint)
        seen.add(c.get("id"))
        chk = c.get("check")
        if not isinstance(chk, dict) or chk.get("kind") not in _CHECK_KINDS:
            pr.add(cp + ("check",), f"check needs kind: one of {', '.join(_CHECK_KINDS)}", hint=hint)
            continue
        _unknown_keys(pr, chk, _CHECK_KINDS[chk["kind"]], cp + ("check",), hint)
        if chk["kind"] != "greater" and not isinstance(c.get("number"), (int, float)):
            pr.add(cp + ("number",), "the claim's number is required for this check", hint=hint)
        # References into another paper's tables are resolved by check_schema (cross-file).
        if chk.get("paper") in (None, paper):
            tab = tables.get(chk.get("table"))
            if tab is None:
                pr.add(cp + ("check", "table"), f"no table '{chk.get('table')}' in this file", hint=hint)
                continue
            for problem in claim_ref_problems(chk, tab):
                pr.add(cp + ("check",), problem, hint=hint)
        out.append(c)
    return out


def claim_ref_problems(chk: dict[str, Any], tab: TableInfo) -> list[str]:
    """Row/column keys a claim check names that the table does not have."""
    problems = []
    rows, cols = set(tab.row_keys), set(tab.column_keys)
    if chk["kind"] in ("difference", "greater", "equals"):
        for name in ("a", "b") if chk["kind"] != "equals" else ("a",):
            ref = chk.get(name)
            if not (isinstance(ref, list) and len(ref) == 2):
                problems.append(f"'{name}' must be [row key, column key]")
            elif ref[0] not in rows or ref[1] not in cols:
                problems.append(f"'{name}' {ref} is not a cell of {tab.label}")
    else:
        axis = chk.get("axis")
        if axis not in ("rows", "columns"):
            problems.append("axis must be 'columns' (a, b, target are columns; over lists rows) or 'rows'")
            return problems
        same, other = (cols, rows) if axis == "columns" else (rows, cols)
        names = ["a", "b"] if chk["kind"] == "count_greater" else ["target"]
        for name in names:
            if chk.get(name) not in same:
                problems.append(f"'{name}' {chk.get(name)!r} is not a {axis[:-1]} key of {tab.label}")
        for key in chk.get("among") or []:
            if key not in same:
                problems.append(f"'among' entry {key!r} is not a {axis[:-1]} key of {tab.label}")
        for key in chk.get("over") or []:
            if key not in other:
                problems.append(f"'over' entry {key!r} is not a key of {tab.label}")
        if not chk.get("over"):
            problems.append("'over' must list the keys counted over")
    return problems


def _parse_text_values(pr: _Problems, items: Any, meta: dict[str, Any]) -> list[ReportedCell]:
    out: list[ReportedCell] = []
    for i, tv in enumerate(items or []):
        tp = ("text_values", i)
        if not isinstance(tv, dict):
            pr.add(tp, "a text value must be a mapping")
            continue
        _unknown_keys(pr, tv, _TEXT_VALUE_KEYS, tp)
        hint = str(tv.get("id", ""))
        for key in ("id", "source", "text", "value", "unit"):
            if not isinstance(tv.get(key), str):
                pr.add(tp + (key,), f"'{key}' must be a string", hint=hint)
        if not all(isinstance(tv.get(k), str) for k in ("id", "source", "text", "value", "unit")):
            continue
        _check_axis(pr, {"label": tv["id"], **{k: tv.get(k) for k in ("method", "benchmark", "measure")}}, tp, _AXIS_KEYS, hint)
        cond = _ordered(_check_conditions(pr, tv.get("conditions"), tp + ("conditions",), hint))
        score = None
        if tv.get("measure") and tv["unit"] in METRIC_UNITS and _NUMBER.match(tv["value"]):
            score = float(tv["value"]) / METRIC_UNITS[tv["unit"]]
        out.append(ReportedCell(
            cell_id=f"{meta['paper']}/text/{tv['id']}", paper=meta["paper"], paper_file=meta["paper_file"],
            version=meta["version"], table=f"text: {tv['source']}", row=tv["id"], column=tv["text"],
            value=tv["value"], score=score, unit=tv["unit"], method=tv.get("method"),
            benchmark=tv.get("benchmark"), measure=tv.get("measure"), conditions=cond,
            doubt=tv.get("doubt"), row_key=tv["id"], column_key="value", source=str(pr.path),
        ))
    return out


def _parse_file(path: Path) -> tuple[PaperInfo | None, _Problems]:
    pr = _Problems(path)
    text = path.read_text(encoding="utf-8")
    loader_cls = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml: ~50x faster
    try:
        loader = loader_cls(text)
        try:
            node = loader.get_single_node()
            data = loader.construct_document(node) if node is not None else None
        finally:
            loader.dispose()
        pr.lines = yaml_key_lines(node) if node is not None else {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        pr.items.append((mark.line + 1 if mark else None, f"invalid YAML: {getattr(exc, 'problem', exc)}", "fix the quoting/indentation there"))
        return None, pr
    if not isinstance(data, dict):
        pr.add((), "a registry file must be a YAML mapping")
        return None, pr
    _unknown_keys(pr, data, _TOP_KEYS, ())
    for key, required in _TOP_KEYS.items():
        if required and key not in data:
            pr.add((key,), f"missing required key '{key}'")
    if data.get("schema_version") != SCHEMA_VERSION:
        pr.add(("schema_version",), f"schema_version must be {SCHEMA_VERSION}")
    if data.get("paper") != path.stem:
        pr.add(("paper",), f"paper '{data.get('paper')}' must equal the file name '{path.stem}'")
    for key in ("title", "venue", "paper_file", "original_file", "version", "family"):
        if key in data and not isinstance(data[key], str):
            pr.add((key,), f"'{key}' must be a string")
    if not isinstance(data.get("authors"), list) or not all(isinstance(a, str) for a in data.get("authors") or [None]):
        pr.add(("authors",), "authors must be a list of names")
    if not isinstance(data.get("year"), int):
        pr.add(("year",), "year must be an integer")
    if not isinstance(data.get("tables"), list) or not data.get("tables"):
        pr.add(("tables",), "tables must be a non-empty list")
        return None, pr
    if pr.items:
        return None, pr
    meta = {k: data[k] for k in ("paper", "paper_file", "version")}
    tables: list[TableInfo] = []
    cells: list[ReportedCell] = []
    doubts: list[Doubt] = []
    for ti, t in enumerate(data["tables"]):
        parsed = _parse_table(pr, meta, t, ("tables", ti))
        if parsed is None:
            continue
        info, tcells, tdoubts = parsed
        if any(x.label == info.label for x in tables):
            pr.add(("tables", ti, "label"), f"duplicate table label '{info.label}'")
        tables.append(info)
        cells.extend(tcells)
        doubts.extend(tdoubts)
    claims = _check_claims(pr, data.get("claims"), {t.label: t for t in tables}, data["paper"])
    text_values = _parse_text_values(pr, data.get("text_values"), meta)
    for tv in text_values:
        if tv.doubt:
            doubts.append(Doubt(data["paper"], None, "text", tv.row, tv.doubt, (tv.cell_id,)))
    issues = data.get("known_issues") or []
    for i, issue in enumerate(issues):
        if not isinstance(issue, dict) or not isinstance(issue.get("message"), str):
            pr.add(("known_issues", i), "a known issue needs {table: label or null, kind: text, message: text}")
    diffs = data.get("text_differences")
    if diffs is not None and (not isinstance(diffs, dict) or not isinstance(diffs.get("against"), str)
                              or not isinstance(diffs.get("items"), list)):
        pr.add(("text_differences",), "text_differences must be {against: paper key, items: [{section, this, other, note}]}")
    notes = data.get("notes") or []
    if pr.items:
        return None, pr
    return PaperInfo(
        paper=data["paper"], title=data["title"], authors=tuple(data["authors"]), venue=data["venue"],
        year=data["year"], paper_file=data["paper_file"], original_file=data["original_file"],
        version=data["version"], family=data["family"], path=str(path), tables=tuple(tables),
        cells=tuple(cells), claims=tuple(claims), text_values=tuple(text_values),
        known_issues=tuple(issues), text_differences=diffs, doubts=tuple(doubts),
        notes=tuple(str(n) for n in notes),
    ), pr


def _signature(root: Path) -> tuple:
    files = sorted(root.glob("*.yaml"))
    return tuple((str(p), p.stat().st_mtime_ns, p.stat().st_size) for p in files)


@functools.lru_cache(maxsize=16)
def _load_cached(root: str, signature: tuple) -> tuple[PaperInfo, ...]:
    papers, lines = [], {}
    for path_str, _, _ in signature:
        paper, pr = _parse_file(Path(path_str))
        pr.raise_first()
        assert paper is not None
        papers.append(paper)
        lines[paper.paper] = pr.lines
    by_key = {p.paper: p for p in papers}
    for p in papers:
        _cross_file_problems(p, by_key, lines[p.paper], set(by_key)).raise_first()
    return tuple(papers)


def _cross_file_problems(p: PaperInfo, by_key: dict[str, PaperInfo], lines: dict[tuple, int],
                         stems: set[str]) -> _Problems:
    """References between files: counterparts, claims into other papers, text_differences.

    A reference to a file that exists (``stems``) but failed its own schema check is not
    reported again here: that file's own problems say what to fix."""
    pr = _Problems(Path(p.path), lines)

    def missing(other: str, keypath: tuple, hint: str = "") -> bool:
        if other in by_key:
            return False
        if other not in stems:
            pr.add(keypath, f"unknown paper '{other}'", f"known: {', '.join(sorted(stems))}", hint)
        return True

    for ti, t in enumerate(p.tables):
        for other, label in t.counterparts.items():
            keypath = ("tables", ti, "counterparts", other)
            if not missing(other, keypath, t.label) and by_key[other].table(label) is None:
                pr.add(keypath, f"paper '{other}' has no table '{label}'", hint=t.label)
    for ci, c in enumerate(p.claims):
        chk, hint = c["check"], str(c.get("id"))
        other = chk.get("paper")
        if other in (None, p.paper) or missing(other, ("claims", ci, "check", "paper"), hint):
            continue
        tab = by_key[other].table(chk.get("table"))
        if tab is None:
            pr.add(("claims", ci, "check", "table"), f"paper '{other}' has no table '{chk.get('table')}'", hint=hint)
            continue
        for problem in claim_ref_problems(chk, tab):
            pr.add(("claims", ci, "check"), problem, hint=hint)
    if p.text_differences:
        missing(p.text_differences["against"], ("text_differences", "against"))
    return pr


def load_papers(dir: str | Path = REPORTED_DIR) -> list[PaperInfo]:
    """All registry files, schema-validated (DataFormatError naming file, line and key path)."""
    root = Path(dir)
    if not root.is_dir():
        raise DataFormatError(root, None, "reported-scores registry folder not found", "pass the baselines/reported folder")
    signature = _signature(root)
    if not signature:
        raise DataFormatError(root, None, "no *.yaml files in the reported-scores registry")
    return list(_load_cached(str(root.resolve()), signature))


def load_registry(dir: str | Path = REPORTED_DIR) -> list[ReportedCell]:
    """Every table cell of every paper file, then its text values (table 'text: <source>')."""
    return [c for p in load_papers(dir) for c in list(p.cells) + list(p.text_values)]


def load_reported_cells(snapshot: str | Path | None = None) -> tuple[list[dict[str, Any]] | None, str | None]:
    """Reported cells as dicts, and an error message instead when they cannot be loaded.

    ``snapshot`` is a JSON file of cells (a list, or ``{"cells": [...]}``, as
    ``ReportedCell.to_dict()`` writes them); by default the registry in baselines/reported/.
    """
    if snapshot is not None:
        path = Path(snapshot)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            return None, f"reported cells snapshot {path}: {exc}"
        cells = data.get("cells") if isinstance(data, dict) else data
        if not isinstance(cells, list) or not all(isinstance(c, dict) for c in cells):
            return None, f"reported cells snapshot {path}: expected a list of cell objects"
        return cells, None
    try:
        return [c.to_dict() for c in load_registry()], None
    except (HarnessError, OSError) as exc:
        return None, f"reported-scores registry not loadable ({exc}); run 'python -m harness validate'"


def schema_problems(dir: str | Path = REPORTED_DIR) -> list[str]:
    """Every schema problem of every file (not just the first), as printable strings."""
    root = Path(dir)
    if not root.is_dir():
        return [f"{root}: reported-scores registry folder not found"]
    papers, problems, lines = [], [], {}
    files = sorted(root.glob("*.yaml"))
    if not files:
        return [f"{root}: no *.yaml files in the reported-scores registry"]
    for path in files:
        paper, pr = _parse_file(path)
        problems.extend(pr.strings())
        if paper is not None:
            papers.append(paper)
            lines[paper.paper] = pr.lines
    by_key = {p.paper: p for p in papers}
    stems = {path.stem for path in files}
    for p in papers:
        problems.extend(_cross_file_problems(p, by_key, lines[p.paper], stems).strings())
    seen: dict[str, str] = {}
    for p in papers:
        for c in p.cells:
            if c.cell_id in seen:
                problems.append(f"{p.path}: duplicate cell id '{c.cell_id}' (also in {seen[c.cell_id]})")
            seen[c.cell_id] = p.path
    return problems


def paper_keys(dir: str | Path = REPORTED_DIR) -> list[str]:
    return [p.paper for p in load_papers(dir)]


def paper_key(comp: Mapping[str, Any]) -> str:
    """Short paper key of a comparison or cell ('qc-v1'): the cell id's first part."""
    if comp.get("paper"):
        return str(comp["paper"])
    cell_id = str(comp.get("cell_id") or "")
    return cell_id.split("/", 1)[0] if "/" in cell_id else str(comp.get("paper_file") or "")


def cells_for(
    method: str | None = None,
    benchmark: str | None = None,
    measure: str | None = None,
    paper: str | None = None,
    dir: str | Path = REPORTED_DIR,
) -> list[ReportedCell]:
    """Cells matching every given filter; unknown method/benchmark/paper names raise with did-you-mean."""
    if method is not None and method not in KNOWN_METHODS:
        raise UnknownNameError("method", method, list(KNOWN_METHODS))
    if benchmark is not None and benchmark not in BENCHMARKS:
        raise UnknownNameError("benchmark", benchmark, list(BENCHMARKS))
    papers = load_papers(dir)
    if paper is not None and paper not in {p.paper for p in papers}:
        raise UnknownNameError("paper", paper, [p.paper for p in papers])
    out = []
    for p in papers:
        if paper is not None and p.paper != paper:
            continue
        for c in list(p.cells) + list(p.text_values):
            if method is not None and c.method != method:
                continue
            if benchmark is not None and c.benchmark != benchmark:
                continue
            if measure is not None and c.measure != measure:
                continue
            out.append(c)
    return out


def clear_cache() -> None:
    _load_cached.cache_clear()
