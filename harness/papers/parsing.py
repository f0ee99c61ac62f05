"""Reading one reported-scores file (``baselines/reported/<paper>.yaml``) and checking it against the
schema (:mod:`harness.papers.schema`): every problem names the file, its line and key path, and
says how to fix it where it can.

:func:`parse_file` reads one file; :func:`cross_file_problems` checks what one file says of
another (counterparts, claims into another paper's tables, text differences).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ir_measures  # light ~0.1 s; the authority on measure spelling
import yaml

from harness.core import yamlsafe
from harness.core.errors import DataFormatError
from harness.data.catalog import AGGREGATES
from harness.papers.schema import (
    AXIS_KEYS,
    BENCHMARKS,
    BOLD_GROUP_KEYS,
    CELL_KEYS,
    CHECK_KINDS,
    CLAIM_KEYS,
    COLUMN_KEYS,
    CONDITION_KEYS,
    KNOWN_METHODS,
    METRIC_UNITS,
    NUMBER,
    ROW_KEYS,
    SCHEMA_VERSION,
    TABLE_KEYS,
    TEXT_VALUE_KEYS,
    TOP_KEYS,
    Doubt,
    PaperInfo,
    ReportedCell,
    TableInfo,
    canonical_label,
)
from harness.stages.graph import (
    FINETUNE_STAGES,  # the fine-tuning stages' names, which cells use too
)


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
class Problems:
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
            more = (
                f" [and {len(self.items) - 1} more problem(s); run 'python -m harness validate']"
                if len(self.items) > 1
                else ""
            )
            raise DataFormatError(self.path, line, msg + more, fix)


def _unknown_keys(pr: Problems, data: dict, allowed: Iterable[str], keypath: tuple, hint: str = "") -> None:
    allowed = list(allowed)
    for key in data:
        if key not in allowed:
            close = difflib.get_close_matches(str(key), allowed, n=1, cutoff=0.6)
            fix = f"did you mean '{close[0]}'?" if close else f"known keys: {', '.join(sorted(allowed))}"
            pr.add(keypath + (key,), f"unknown key '{key}'", fix, hint)


def _check_conditions(pr: Problems, cond: Any, keypath: tuple, hint: str) -> dict[str, Any]:
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


def _check_measure(pr: Problems, measure: Any, keypath: tuple, hint: str) -> None:
    if measure is None:
        return

    try:
        parsed = str(ir_measures.parse_measure(str(measure)))
    except Exception:  # noqa: BLE001 - ir_measures raises several types for bad strings
        pr.add(keypath, f"'{measure}' is not an ir-measures measure", "use e.g. RR@10, R@1000, nDCG@10", hint)
        return
    if parsed != measure:
        pr.add(keypath, f"measure '{measure}' is spelled '{parsed}' by ir-measures", f"write '{parsed}'", hint)


def _check_axis(pr: Problems, item: Any, keypath: tuple, allowed: set[str], hint: str) -> dict[str, Any] | None:
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
        pr.add(
            keypath + ("method",),
            f"unknown harness method '{method}'",
            f"did you mean '{close[0]}'?" if close else "use one of " + ", ".join(KNOWN_METHODS) + " or null",
            hint,
        )
    bench = item.get("benchmark")
    if bench is not None and bench not in BENCHMARKS:
        close = difflib.get_close_matches(str(bench), BENCHMARKS, n=1)
        pr.add(
            keypath + ("benchmark",),
            f"unknown benchmark '{bench}'",
            f"did you mean '{close[0]}'?" if close else "use a harness benchmark name or null",
            hint,
        )
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


def _merge(pr: Problems, name: str, row_val: Any, col_val: Any, keypath: tuple, hint: str) -> Any:
    if row_val is not None and col_val is not None and row_val != col_val:
        pr.add(keypath, f"row sets {name} '{row_val}' but its column sets '{col_val}'", hint=hint)
    return row_val if row_val is not None else col_val


def _parse_cell_value(pr: Problems, raw: Any, keypath: tuple, hint: str) -> dict[str, Any]:
    cell = {"value": raw, "bold": False, "underline": False, "marks": "", "doubt": None}
    if isinstance(raw, dict):
        _unknown_keys(pr, raw, CELL_KEYS, keypath, hint)
        if "value" not in raw:
            pr.add(keypath, "a cell mapping needs 'value' (null when not legible)", hint=hint)
        cell = {
            "value": raw.get("value"),
            "bold": raw.get("bold", False),
            "underline": raw.get("underline", False),
            "marks": raw.get("marks", "") or "",
            "doubt": raw.get("doubt"),
        }
        for flag in ("bold", "underline"):
            if not isinstance(cell[flag], bool):
                pr.add(keypath + (flag,), f"'{flag}' must be true or false", hint=hint)
    elif raw is not None and not isinstance(raw, str):
        pr.add(
            keypath,
            f"value {raw!r} must be a quoted string exactly as printed",
            f'write "{raw}" so YAML keeps the printed digits',
            hint,
        )
        cell["value"] = str(raw)
    value = cell["value"]
    if value is not None and not isinstance(value, str):
        pr.add(keypath, f"value {value!r} must be a quoted string exactly as printed", hint=hint)
        cell["value"] = str(value)
    if isinstance(cell["value"], str) and re.search(r"</?(b|u|i|sub|sup)>|\*\*", cell["value"]):
        pr.add(keypath, f"value '{cell['value']}' contains markup", "use {value: ..., bold: true} instead", hint)
    return cell


def _check_bold_groups(pr: Problems, groups: Any, rows: list[str], cols: list[str], keypath: tuple, hint: str) -> None:
    if groups is None:
        return
    if not isinstance(groups, dict):
        pr.add(
            keypath,
            "bold_groups must be a mapping {by: column|row, within: [[keys]], exclude: [keys], rule: text} or null",
            hint=hint,
        )
        return
    _unknown_keys(pr, groups, BOLD_GROUP_KEYS, keypath, hint)
    by = groups.get("by")
    if by not in ("column", "row"):
        pr.add(keypath + ("by",), "'by' must be 'column' (compare down each column) or 'row'", hint=hint)
        return
    other = rows if by == "column" else cols
    for i, part in enumerate(groups.get("within") or []):
        for key in part if isinstance(part, list) else [part]:
            if key not in other:
                pr.add(
                    keypath + ("within", i),
                    f"'{key}' is not a {'row' if by == 'column' else 'column'} key of this table",
                    hint=hint,
                )
    for key in groups.get("exclude") or []:
        if key not in other:
            pr.add(
                keypath + ("exclude",),
                f"'{key}' is not a {'row' if by == 'column' else 'column'} key of this table",
                hint=hint,
            )
    if not isinstance(groups.get("rule"), str):
        pr.add(keypath + ("rule",), "say in 'rule' how the paper forms its comparison groups", hint=hint)


def _parse_table(
    pr: Problems, meta: dict[str, Any], t: Any, tp: tuple
) -> tuple[TableInfo, list[ReportedCell], list[Doubt]] | None:
    """One table of a file: its layout, every cell (with its mapping, conditions and score) and its
    doubts; None when it cannot be read at all (its problems are in ``pr``)."""
    if not isinstance(t, dict):
        pr.add(tp, "a table must be a mapping")
        return None
    label = _check_table_keys(pr, t, tp)
    if label is None:
        return None
    table = _table_settings(pr, t, tp, label)
    axes = _table_axes(pr, t, tp, label)
    if axes is None:
        return None
    columns, col_keys, rows, row_keys = axes
    _check_table_marks(pr, t, tp, row_keys, col_keys, label)
    counterparts = t.get("counterparts") or {}
    if not isinstance(counterparts, dict):
        pr.add(tp + ("counterparts",), "counterparts must map a paper key to a table label", hint=label)
        counterparts = {}

    cells: list[ReportedCell] = []
    doubts: list[Doubt] = []
    col_doubt_cells: dict[int, list[str]] = {j: [] for j in range(len(columns))}
    col_conds = [
        _check_conditions(pr, c.get("conditions"), tp + ("columns", j, "conditions"), f"{label} / {col_keys[j]}")
        for j, c in enumerate(columns)
    ]
    derived: dict[str, dict[str, Any]] = {}
    for i, (row, rkey) in enumerate(zip(rows, row_keys)):
        rp = tp + ("rows", i)
        checked = _check_row(pr, row, rp, f"{label} / {rkey}", len(columns), table["descriptor_columns"], row_keys)
        if checked is None:
            continue
        rcond, values, descr, how = checked
        if how is not None:
            derived[rkey] = how
        row_cells: list[str] = []
        for j, (col, ckey) in enumerate(zip(columns, col_keys)):
            cell, doubt = _table_cell(
                pr, meta, t, table, (row, rkey, rcond, descr), (col, ckey, col_conds[j]), values[j], rp + ("values", j)
            )
            cells.append(cell)
            row_cells.append(cell.cell_id)
            col_doubt_cells[j].append(cell.cell_id)
            if doubt:
                doubts.append(Doubt(meta["paper"], label, "cell", f"{rkey} / {ckey}", str(doubt), (cell.cell_id,)))
        if row.get("doubt"):
            doubts.append(Doubt(meta["paper"], label, "row", rkey, str(row["doubt"]), tuple(row_cells)))
    for j, col in enumerate(columns):
        if col.get("doubt"):
            doubts.append(
                Doubt(meta["paper"], label, "column", col_keys[j], str(col["doubt"]), tuple(col_doubt_cells[j]))
            )
    if t.get("doubt"):
        doubts.insert(0, Doubt(meta["paper"], label, "table", label, str(t["doubt"]), tuple(c.cell_id for c in cells)))
    info = TableInfo(
        paper=meta["paper"],
        label=label,
        caption=t["caption"],
        unit=table["unit"],
        systems=table["systems"],
        row_keys=tuple(row_keys),
        column_keys=tuple(col_keys),
        row_labels={k: r["label"] for k, r in zip(row_keys, rows)},
        column_labels={k: c["label"] for k, c in zip(col_keys, columns)},
        row_canonical={k: r.get("canonical") or canonical_label(r["label"]) for k, r in zip(row_keys, rows)},
        column_canonical={k: c.get("canonical") or canonical_label(k) for k, c in zip(col_keys, columns)},
        column_groups={k: c.get("group") for k, c in zip(col_keys, columns)},
        descriptor_columns=tuple(table["descriptor_columns"]),
        bold_groups=t.get("bold_groups"),
        bold_extracted=bool(t.get("bold_extracted", True)),
        underline=t.get("underline"),
        counterparts={str(k): str(v) for k, v in counterparts.items()},
        derived=derived,
    )
    return info, cells, doubts


def _check_table_keys(pr: Problems, t: dict[str, Any], tp: tuple) -> str | None:
    """Unknown and missing keys of a table; its label, or None without a label and caption."""
    label = t.get("label")
    hint = str(label) if label else ""
    _unknown_keys(pr, t, TABLE_KEYS, tp, hint)
    for key, required in TABLE_KEYS.items():
        if required and key not in t:
            pr.add(tp + (key,), f"missing required key '{key}'", hint=hint)
    if not isinstance(label, str) or not isinstance(t.get("caption"), str):
        return None
    return label


def _table_settings(pr: Problems, t: dict[str, Any], tp: tuple, hint: str) -> dict[str, Any]:
    """The table-wide unit, systems axis, conditions and descriptor columns (checked; a bad one
    replaced by its default, so the cells can still be read)."""
    unit = t.get("unit")
    if not isinstance(unit, str) or not unit:
        pr.add(tp + ("unit",), "unit must be 'points', 'fraction', 'mixed' or another unit string", hint=hint)
        unit = "mixed"
    systems = t.get("systems", "rows")
    if systems not in ("rows", "columns"):
        pr.add(tp + ("systems",), "systems must be 'rows' or 'columns' (the axis that names the retrievers)", hint=hint)
        systems = "rows"
    conditions = _check_conditions(pr, t.get("conditions"), tp + ("conditions",), hint)
    descr_cols = t.get("descriptor_columns") or []
    if not isinstance(descr_cols, list) or not all(isinstance(d, str) for d in descr_cols):
        pr.add(tp + ("descriptor_columns",), "descriptor_columns must be a list of printed labels", hint=hint)
        descr_cols = []
    return {"label": hint, "unit": unit, "systems": systems, "conditions": conditions, "descriptor_columns": descr_cols}


def _table_axes(
    pr: Problems, t: dict[str, Any], tp: tuple, hint: str
) -> tuple[list[dict[str, Any]], list[str], list[dict[str, Any]], list[str]] | None:
    """(columns, their keys, rows, their keys), each axis item checked and every key unique; None
    when either list is missing or empty."""
    if not isinstance(t.get("columns"), list) or not t["columns"]:
        pr.add(tp + ("columns",), "columns must be a non-empty list", hint=hint)
        return None
    if not isinstance(t.get("rows"), list) or not t["rows"]:
        pr.add(tp + ("rows",), "rows must be a non-empty list", hint=hint)
        return None
    columns: list[dict[str, Any]] = []
    for j, c in enumerate(t["columns"]):
        item = _check_axis(pr, c, tp + ("columns", j), COLUMN_KEYS, hint)
        columns.append(item or {"label": f"?{j}"})
    col_keys = [_axis_key(c) for c in columns]
    rows: list[dict[str, Any]] = []
    for i, r in enumerate(t["rows"]):
        item = _check_axis(pr, r, tp + ("rows", i), ROW_KEYS, hint)
        rows.append(item or {"label": f"?{i}", "values": []})
    row_keys = [_axis_key(r) for r in rows]
    for name, keys, sub in (("column", col_keys, "columns"), ("row", row_keys, "rows")):
        seen: set[str] = set()
        for idx, key in enumerate(keys):
            if key in seen:
                pr.add(tp + (sub, idx), f"duplicate {name} key '{key}'", f"give the {name} a unique 'key'", hint)
            seen.add(key)
    return columns, col_keys, rows, row_keys


def _check_table_marks(
    pr: Problems, t: dict[str, Any], tp: tuple, row_keys: list[str], col_keys: list[str], hint: str
) -> None:
    """How the table's bold and underline marks are to be read: its ``bold_groups`` (or why it has
    none) and ``underline``."""
    _check_bold_groups(pr, t.get("bold_groups"), row_keys, col_keys, tp + ("bold_groups",), hint)
    if t.get("bold_groups") is None and not t.get("bold_note"):
        pr.add(tp + ("bold_groups",), "bold_groups is null: say why in 'bold_note'", hint=hint)
    if t.get("underline") not in (None, "second_best"):
        pr.add(tp + ("underline",), "underline may only be 'second_best'", hint=hint)


def _check_row(
    pr: Problems, row: dict[str, Any], rp: tuple, rhint: str, n_columns: int, descr_cols: list[str], row_keys: list[str]
) -> tuple[dict[str, Any], list[Any], list[Any], dict[str, Any] | None] | None:
    """A row's conditions, values (one per column), descriptors and how it is derived from other
    rows (or None); None when its values cannot be read."""
    rcond = _check_conditions(pr, row.get("conditions"), rp + ("conditions",), rhint)
    values = row.get("values")
    if not isinstance(values, list):
        pr.add(rp + ("values",), "missing 'values' list (one printed string per column)", hint=rhint)
        return None
    if len(values) != n_columns:
        pr.add(rp + ("values",), f"expected {n_columns} values (one per column), got {len(values)}", hint=rhint)
        return None
    descr = row.get("descriptors") or []
    if len(descr) != len(descr_cols):
        pr.add(
            rp + ("descriptors",),
            f"expected {len(descr_cols)} descriptors ({', '.join(descr_cols) or 'none'}), got {len(descr)}",
            hint=rhint,
        )
        descr = list(descr) + [""] * len(descr_cols)
    how = None
    if row.get("derived") is not None:
        d = row["derived"]
        if (
            not isinstance(d, dict)
            or d.get("kind") not in ("mean", "count_best")
            or not isinstance(d.get("over"), list)
        ):
            pr.add(rp + ("derived",), "derived must be {kind: mean|count_best, over: [row keys]}", hint=rhint)
        else:
            for key in d["over"]:
                if key not in row_keys:
                    pr.add(rp + ("derived", "over"), f"'{key}' is not a row key of this table", hint=rhint)
            how = d
    if row.get("benchmark") in AGGREGATES and not row.get("derived"):
        pr.add(
            rp + ("derived",), "a BEIR average row must say how it is derived: {kind: mean, over: [...]}", hint=rhint
        )
    return rcond, values, descr, how


def _table_cell(
    pr: Problems,
    meta: dict[str, Any],
    t: dict[str, Any],
    table: dict[str, Any],
    row_of: tuple[dict[str, Any], str, dict[str, Any], list[Any]],
    col_of: tuple[dict[str, Any], str, dict[str, Any]],
    raw: Any,
    vp: tuple,
) -> tuple[ReportedCell, Any]:
    """One printed cell with the mapping, unit and conditions its row and column give it, and its
    cell-level doubt. ``row_of``: (row, key, conditions, descriptors); ``col_of``: (column, key, conditions)."""
    (row, rkey, rcond, descr), (col, ckey, ccond) = row_of, col_of
    label = table["label"]
    vhint = f"{label} / {rkey} / {ckey}"
    cell = _parse_cell_value(pr, raw, vp, vhint)
    method = _merge(pr, "method", row.get("method"), col.get("method"), vp, vhint)
    bench = _merge(pr, "benchmark", row.get("benchmark"), col.get("benchmark"), vp, vhint)
    measure = _merge(pr, "measure", row.get("measure"), col.get("measure"), vp, vhint)
    cunit = row.get("unit") or col.get("unit") or table["unit"]
    if cunit == "mixed":
        pr.add(vp, "the table unit is 'mixed': set a unit on this row or column", hint=vhint)
    cond = _cell_conditions(pr, table["conditions"], ccond, rcond, vp, vhint)
    if bench is not None and measure is None:
        pr.add(vp, f"benchmark '{bench}' without a measure", hint=vhint)
    if measure is not None and cunit not in METRIC_UNITS:
        pr.add(vp, f"a retrieval measure needs unit points or fraction, not '{cunit}'", hint=vhint)
    levels = (
        ("table", t.get("doubt")),
        ("column", col.get("doubt")),
        ("row", row.get("doubt")),
        ("cell", cell["doubt"]),
    )
    scopes = tuple(s for s, d in levels if d)
    texts = [f"{s}: {d}" for s, d in levels if d]
    value = cell["value"]
    if value in (None, "") and not scopes:
        what = "null (not legible)" if value is None else "blank"
        pr.add(vp, f"a {what} cell needs a doubt saying why", hint=vhint)
    score = _cell_score(pr, value, measure, cunit, vp, vhint)
    paper = meta["paper"]
    col_label = f"{col['group']} {col['label']}" if col.get("group") else col["label"]
    return ReportedCell(
        cell_id=f"{paper}/{label}/{rkey}/{ckey}",
        paper=paper,
        paper_file=meta["paper_file"],
        version=meta["version"],
        table=label,
        row=row["label"],
        column=col_label,
        value=value,
        score=score,
        unit=cunit,
        method=method,
        benchmark=bench,
        measure=measure,
        conditions=cond,
        bold=bool(cell["bold"]),
        underline=bool(cell["underline"]),
        marks=str(cell["marks"]),
        doubt="; ".join(texts) or None,
        row_key=rkey,
        column_key=ckey,
        section=row.get("section"),
        descriptors={d: str(v) for d, v in zip(table["descriptor_columns"], descr)},
        doubt_scopes=scopes,
        source=str(pr.path),
    ), cell["doubt"]


def _cell_conditions(
    pr: Problems, table: dict[str, Any], column: dict[str, Any], row: dict[str, Any], vp: tuple, vhint: str
) -> dict[str, Any]:
    """The table's conditions, then the column's, then the row's, in the documented order; one axis
    contradicting another is a problem."""
    cond = dict(table)
    for src in (column, row):
        for k, v in src.items():
            if k in cond and cond[k] != v:
                pr.add(vp, f"condition '{k}' is {cond[k]!r} on one axis and {v!r} on another", hint=vhint)
            cond[k] = v
    return _ordered(cond)


def _cell_score(pr: Problems, value: Any, measure: str | None, unit: str, vp: tuple, vhint: str) -> float | None:
    """A metric cell's printed number as a fraction in [0, 1] (None for other cells, '-' and blanks)."""
    if measure is None or unit not in METRIC_UNITS or not isinstance(value, str) or value in ("-", ""):
        return None
    if not NUMBER.match(value):
        pr.add(vp, f"metric value '{value}' is not a number", "put marks in 'marks', or '-' for missing", vhint)
        return None
    score = float(value) / METRIC_UNITS[unit]
    if unit == "points" and "." in value and len(value.split(".")[1]) >= 3:
        pr.add(
            vp, f"value {value} has 3+ decimals: it looks like a fraction, not points", "check the table's unit", vhint
        )
    if not 0.0 <= score <= 1.0:
        pr.add(
            vp, f"value {value} in unit '{unit}' gives score {score:g} outside [0, 1]", "check the table's unit", vhint
        )
    return score


def _check_claims(pr: Problems, claims: Any, tables: dict[str, TableInfo], paper: str) -> list[dict[str, Any]]:
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
        _unknown_keys(pr, c, CLAIM_KEYS, cp)
        hint = str(c.get("id", ""))
        for key in ("id", "text", "check"):
            if key not in c:
                pr.add(cp + (key,), f"missing '{key}'", hint=hint)
        if c.get("id") in seen:
            pr.add(cp + ("id",), f"duplicate claim id '{c.get('id')}'", hint=hint)
        seen.add(c.get("id"))
        chk = c.get("check")
        if not isinstance(chk, dict) or chk.get("kind") not in CHECK_KINDS:
            pr.add(cp + ("check",), f"check needs kind: one of {', '.join(CHECK_KINDS)}", hint=hint)
            continue
        _unknown_keys(pr, chk, CHECK_KINDS[chk["kind"]], cp + ("check",), hint)
        if chk["kind"] != "greater" and not isinstance(c.get("number"), (int, float)):
            pr.add(cp + ("number",), "the claim's number is required for this check", hint=hint)
        # References into another paper's tables are checked by cross_file_problems.
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


def _parse_text_values(pr: Problems, items: Any, meta: dict[str, Any]) -> list[ReportedCell]:
    out: list[ReportedCell] = []
    for i, tv in enumerate(items or []):
        tp = ("text_values", i)
        if not isinstance(tv, dict):
            pr.add(tp, "a text value must be a mapping")
            continue
        _unknown_keys(pr, tv, TEXT_VALUE_KEYS, tp)
        hint = str(tv.get("id", ""))
        for key in ("id", "source", "text", "value", "unit"):
            if not isinstance(tv.get(key), str):
                pr.add(tp + (key,), f"'{key}' must be a string", hint=hint)
        if not all(isinstance(tv.get(k), str) for k in ("id", "source", "text", "value", "unit")):
            continue
        _check_axis(
            pr, {"label": tv["id"], **{k: tv.get(k) for k in ("method", "benchmark", "measure")}}, tp, AXIS_KEYS, hint
        )
        cond = _ordered(_check_conditions(pr, tv.get("conditions"), tp + ("conditions",), hint))
        score = None
        if tv.get("measure") and tv["unit"] in METRIC_UNITS and NUMBER.match(tv["value"]):
            score = float(tv["value"]) / METRIC_UNITS[tv["unit"]]
        out.append(
            ReportedCell(
                cell_id=f"{meta['paper']}/text/{tv['id']}",
                paper=meta["paper"],
                paper_file=meta["paper_file"],
                version=meta["version"],
                table=f"text: {tv['source']}",
                row=tv["id"],
                column=tv["text"],
                value=tv["value"],
                score=score,
                unit=tv["unit"],
                method=tv.get("method"),
                benchmark=tv.get("benchmark"),
                measure=tv.get("measure"),
                conditions=cond,
                doubt=tv.get("doubt"),
                row_key=tv["id"],
                column_key="value",
                source=str(pr.path),
            )
        )
    return out


def parse_file(path: Path) -> tuple[PaperInfo | None, Problems]:
    """One registry file parsed and checked: the paper (None when anything is wrong) and the problems found."""
    pr = Problems(path)
    data = _load_yaml(path, pr)
    if data is None or not _check_header(pr, data, path.stem) or pr.items:
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
    diffs = data.get("text_differences")
    _check_side_notes(pr, issues, diffs)
    notes = data.get("notes") or []
    if pr.items:
        return None, pr
    return PaperInfo(
        paper=data["paper"],
        title=data["title"],
        authors=tuple(data["authors"]),
        venue=data["venue"],
        year=data["year"],
        paper_file=data["paper_file"],
        original_file=data["original_file"],
        version=data["version"],
        family=data["family"],
        path=str(path),
        tables=tuple(tables),
        cells=tuple(cells),
        claims=tuple(claims),
        text_values=tuple(text_values),
        known_issues=tuple(issues),
        text_differences=diffs,
        doubts=tuple(doubts),
        notes=tuple(str(n) for n in notes),
        short_name=str(data.get("short_name") or ""),
    ), pr


def _load_yaml(path: Path, pr: Problems) -> dict[str, Any] | None:
    """The file's mapping (its keys' lines kept in ``pr``); None, with the problem in ``pr``, when it is not
    valid YAML or not a mapping."""
    text = path.read_text(encoding="utf-8")
    try:
        node, data = yamlsafe.load_with_node(text)  # libyaml where built; aliases bounded
        pr.lines = yaml_key_lines(node) if node is not None else {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        fix = exc.FIX if isinstance(exc, yamlsafe.BoundError) else "fix the quoting/indentation there"
        pr.items.append((mark.line + 1 if mark else None, f"invalid YAML: {getattr(exc, 'problem', exc)}", fix))
        return None
    if not isinstance(data, dict):
        pr.add((), "a registry file must be a YAML mapping")
        return None
    return data


def _check_header(pr: Problems, data: dict[str, Any], stem: str) -> bool:
    """Check the paper's top-level keys into ``pr``; False when it has no tables to read."""
    _unknown_keys(pr, data, TOP_KEYS, ())
    for key, required in TOP_KEYS.items():
        if required and key not in data:
            pr.add((key,), f"missing required key '{key}'")
    if data.get("schema_version") != SCHEMA_VERSION:
        pr.add(("schema_version",), f"schema_version must be {SCHEMA_VERSION}")
    if data.get("paper") != stem:
        pr.add(("paper",), f"paper '{data.get('paper')}' must equal the file name '{stem}'")
    for key in ("title", "venue", "paper_file", "original_file", "version", "family"):
        if key in data and not isinstance(data[key], str):
            pr.add((key,), f"'{key}' must be a string")
    if not isinstance(data.get("authors"), list) or not all(isinstance(a, str) for a in data.get("authors") or [None]):
        pr.add(("authors",), "authors must be a list of names")
    if not isinstance(data.get("year"), int):
        pr.add(("year",), "year must be an integer")
    if not isinstance(data.get("tables"), list) or not data.get("tables"):
        pr.add(("tables",), "tables must be a non-empty list")
        return False
    return True


def _check_side_notes(pr: Problems, issues: Any, diffs: Any) -> None:
    """Check the free-text blocks: each known issue has a message; text_differences has its shape."""
    for i, issue in enumerate(issues):
        if not isinstance(issue, dict) or not isinstance(issue.get("message"), str):
            pr.add(("known_issues", i), "a known issue needs {table: label or null, kind: text, message: text}")
    if diffs is not None and (
        not isinstance(diffs, dict)
        or not isinstance(diffs.get("against"), str)
        or not isinstance(diffs.get("items"), list)
    ):
        pr.add(
            ("text_differences",),
            "text_differences must be {against: paper key, items: [{section, this, other, note}]}",
        )


def cross_file_problems(
    p: PaperInfo, by_key: dict[str, PaperInfo], lines: dict[tuple, int], stems: set[str]
) -> Problems:
    """References between files: counterparts, claims into other papers, text_differences.

    A reference to a file that exists (``stems``) but failed its own schema check is not
    reported again here: that file's own problems say what to fix."""
    pr = Problems(Path(p.path), lines)

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
