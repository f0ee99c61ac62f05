"""Tolerances of the exact rule (deterministic systems), in points, each with its justification.

The table lives in ``tolerances.yaml`` next to this module; see its header for the
lookup order and the one rule every tolerance follows. Loading validates it: every entry needs a
non-negative ``tolerance`` and a non-empty ``why`` (and may state ``se``, the query-sampling
standard error in points); a tolerance below its own ``se`` needs a ``below_se_because``; measure
keys must be ir-measures strings.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import ir_measures
import yaml

from harness.core import benchmarks as declared
from harness.core import yamlsafe
from harness.core.errors import DataFormatError

TOLERANCES_FILE = Path(__file__).with_name("tolerances.yaml")


@dataclass(frozen=True)
class Tolerance:
    points: float
    why: str
    source: str  # where it came from, e.g. "benchmarks.dl19.nDCG@10"


def canonical_measure(text: str) -> str:
    """ir-measures' canonical spelling (``MRR@10`` -> ``RR@10``); unparsable text unchanged."""

    try:
        return str(ir_measures.parse_measure(text))
    except Exception:  # noqa: BLE001 - ir-measures raises several types for a bad string
        return text


class ToleranceTable:
    """Validated tolerance lookup."""

    def __init__(self, data: dict[str, Any], path: str | Path = "<dict>"):
        self.path = str(path)
        if not isinstance(data, dict) or "global_default" not in data:
            raise DataFormatError(
                self.path, None, "missing 'global_default'", "add global_default: {tolerance: <points>, why: <reason>}"
            )
        unknown = set(data) - {"global_default", "benchmarks", "methods"}
        if unknown:
            raise DataFormatError(
                self.path, None, f"unknown top-level keys {sorted(unknown)}", "use global_default, benchmarks, methods"
            )
        self.global_default = self._entry(data["global_default"], "global_default")
        self.benchmarks = self._table(data.get("benchmarks") or {}, "benchmarks")
        methods = data.get("methods") or {}
        if not isinstance(methods, dict):
            raise DataFormatError(self.path, None, "'methods' must be a mapping", "methods: {bm25: {...}}")
        self.methods = {m: self._table(t or {}, f"methods.{m}") for m, t in methods.items()}

    def _entry(self, raw: Any, where: str) -> Tolerance:
        if (
            not isinstance(raw, dict)
            or not {"tolerance", "why"} <= set(raw)
            or set(raw) - {"tolerance", "why", "se", "below_se_because"}
        ):
            raise DataFormatError(
                self.path,
                None,
                f"{where}: an entry needs 'tolerance' and 'why' (optionally 'se' and 'below_se_because')",
                "write {tolerance: <points>, why: <one-line reason>, se: <points>}",
            )
        tol, why = raw["tolerance"], raw["why"]
        se = raw.get("se")
        if se is not None and (isinstance(se, bool) or not isinstance(se, (int, float)) or se < 0):
            raise DataFormatError(
                self.path,
                None,
                f"{where}: se must be a number >= 0, got {se!r}",
                "the query-sampling standard error, in points",
            )
        if se is not None and isinstance(tol, (int, float)) and tol < se and not raw.get("below_se_because"):
            raise DataFormatError(
                self.path,
                None,
                f"{where}: tolerance {tol} is below its own standard error {se}",
                "raise it to the SE, or say why in below_se_because",
            )
        if isinstance(tol, bool) or not isinstance(tol, (int, float)) or tol < 0:
            raise DataFormatError(
                self.path,
                None,
                f"{where}: tolerance must be a number >= 0, got {tol!r}",
                "tolerances are in points, e.g. 0.5",
            )
        if not isinstance(why, str) or not why.strip():
            raise DataFormatError(
                self.path,
                None,
                f"{where}: 'why' must be a non-empty string",
                "say in one line why this tolerance is right",
            )
        return Tolerance(float(tol), why.strip(), where)

    def _table(self, raw: Any, where: str) -> dict[str, dict[str, Tolerance]]:
        if not isinstance(raw, dict):
            raise DataFormatError(self.path, None, f"'{where}' must be a mapping", "see tolerances.yaml")
        out: dict[str, dict[str, Tolerance]] = {}
        for bench, entries in raw.items():
            if not isinstance(entries, dict):
                raise DataFormatError(
                    self.path,
                    None,
                    f"{where}.{bench} must be a mapping of measures",
                    "write default: {...} and/or <measure>: {...}",
                )
            out[bench] = {}
            for measure, entry in entries.items():
                key = "default" if measure == "default" else canonical_measure(measure)
                if key != "default" and key == measure and not _parses(measure):
                    raise DataFormatError(
                        self.path,
                        None,
                        f"{where}.{bench}: '{measure}' is not an ir-measures measure",
                        "use e.g. RR@10, nDCG@10, R(rel=2)@1000 or 'default'",
                    )
                out[bench][key] = self._entry(entry, f"{where}.{bench}.{measure}")
        return out

    @staticmethod
    def _lookup(table: dict[str, dict[str, Tolerance]], benchmark: str, measure: str) -> Tolerance | None:
        names = [benchmark]
        parent = declared.forum_parent(benchmark)
        if parent:
            names.append(parent)
        names.append("default")  # a method's own default for every benchmark
        for name in names:
            entries = table.get(name, {})
            if measure in entries:
                return entries[measure]
            if "default" in entries:
                return entries["default"]
        return None

    def get(self, benchmark: str, measure: str, method: str | None = None) -> Tolerance:
        measure = canonical_measure(measure)
        if method and method in self.methods:
            found = self._lookup(self.methods[method], benchmark, measure)
            if found:
                return found
        return self._lookup(self.benchmarks, benchmark, measure) or self.global_default


def _parses(text: str) -> bool:
    try:
        ir_measures.parse_measure(text)
        return True
    except Exception:  # noqa: BLE001 - ir-measures raises several types for a bad string
        return False


def load_tolerances(path: str | Path | None = None) -> ToleranceTable:
    """Read and validate a tolerance table (default: the packaged ``tolerances.yaml``)."""
    if path is None:
        return _default_table()
    return _read(Path(path))


def _read(path: Path) -> ToleranceTable:
    try:
        data = yamlsafe.load(path.read_text(encoding="utf-8"))  # a user's file: aliases bounded
    except FileNotFoundError:
        raise DataFormatError(path, None, "file not found", "check the path") from None
    except yaml.YAMLError as exc:
        line = getattr(getattr(exc, "problem_mark", None), "line", None)
        raise DataFormatError(
            path, None if line is None else line + 1, f"bad YAML ({exc})", "fix the YAML syntax"
        ) from None
    return ToleranceTable(data, path)


@lru_cache(maxsize=1)
def _default_table() -> ToleranceTable:
    return _read(TOLERANCES_FILE)
