"""The reported-scores registry: every file of ``baselines/reported/`` (one per paper file) loaded,
schema-checked and cached by the files' names, times and sizes.

For grading, :func:`load_reported_cells` gives the cells as dicts (from the registry, or from a
JSON snapshot of it) with an error message instead of an exception, and :func:`paper_key` names
the paper of such a cell or of a comparison made against one.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.core.errors import DataFormatError, HarnessError, UnknownNameError
from harness.core.paths import REPORTED_DIR
from harness.papers.parsing import cross_file_problems, parse_file
from harness.papers.schema import BENCHMARKS, KNOWN_METHODS, PaperInfo, ReportedCell


def _signature(root: Path) -> tuple:
    files = sorted(root.glob("*.yaml"))
    return tuple((str(p), p.stat().st_mtime_ns, p.stat().st_size) for p in files)


@functools.lru_cache(maxsize=16)
def _load_cached(root: str, signature: tuple) -> tuple[PaperInfo, ...]:
    papers, lines = [], {}
    for path_str, _, _ in signature:
        paper, pr = parse_file(Path(path_str))
        pr.raise_first()
        assert paper is not None
        papers.append(paper)
        lines[paper.paper] = pr.lines
    by_key = {p.paper: p for p in papers}
    for p in papers:
        cross_file_problems(p, by_key, lines[p.paper], set(by_key)).raise_first()
    return tuple(papers)


def load_papers(dir: str | Path = REPORTED_DIR) -> list[PaperInfo]:
    """All registry files, schema-validated (DataFormatError naming file, line and key path)."""
    root = Path(dir)
    if not root.is_dir():
        raise DataFormatError(
            root, None, "reported-scores registry folder not found", "pass the baselines/reported folder"
        )
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
        paper, pr = parse_file(path)
        problems.extend(pr.strings())
        if paper is not None:
            papers.append(paper)
            lines[paper.paper] = pr.lines
    by_key = {p.paper: p for p in papers}
    stems = {path.stem for path in files}
    for p in papers:
        problems.extend(cross_file_problems(p, by_key, lines[p.paper], stems).strings())
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
