"""The reported-scores registry's schema: every cell of every results table of the papers, as printed.

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
harness.papers.consistency), ``text_values`` (numbers only given in the text), ``known_issues``,
``text_differences`` against another version, and ``notes``.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from harness.core.paths import BASELINES_DIR
from harness.data.catalog import reported_benchmarks

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
    "checkpoint": (
        str,
        "pre-trained weights released by the named authors, not pre-trained in the table's own setting",
    ),
    "finetune_stage": (
        str,
        "retriever1 (BM25 negatives) | retriever2 (mined hard negatives) | retriever3 (reranker-distilled)",
    ),
    "finetune_data": (str, "fine-tuning data when not the benchmark's own, e.g. BEIR protocol"),
    "msmarco_passages": (
        str,
        "MS MARCO passages fine-tuned and evaluated on: plain (collection.tsv) | titled "
        "(RocketQA's titles joined to it, as Tevatron reads MS MARCO)",
    ),
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

# The keys each part of a file may hold (True: required).
TOP_KEYS = {
    "schema_version": True,
    "paper": True,
    "title": True,
    "authors": True,
    "venue": True,
    "year": True,
    "paper_file": True,
    "original_file": True,
    "version": True,
    "family": True,
    "short_name": False,
    "tables": True,
    "notes": False,
    "claims": False,
    "text_values": False,
    "known_issues": False,
    "text_differences": False,
}
TABLE_KEYS = {
    "label": True,
    "caption": True,
    "unit": True,
    "columns": True,
    "rows": True,
    "bold_groups": True,
    "systems": False,
    "bold_note": False,
    "bold_extracted": False,
    "underline": False,
    "descriptor_columns": False,
    "counterparts": False,
    "conditions": False,
    "doubt": False,
    "note": False,
}
AXIS_KEYS = {"label", "key", "method", "benchmark", "measure", "unit", "conditions", "doubt", "note"}
COLUMN_KEYS = AXIS_KEYS | {"group"}
ROW_KEYS = AXIS_KEYS | {"section", "canonical", "descriptors", "values", "label_bold", "derived"}
CELL_KEYS = {"value", "bold", "underline", "marks", "doubt", "note"}
BOLD_GROUP_KEYS = {"by", "within", "exclude", "rule"}
CLAIM_KEYS = {"id", "text", "section", "number", "check"}
CHECK_KINDS = {
    "count_greater": {"kind", "paper", "table", "axis", "a", "b", "over"},
    "count_best": {"kind", "paper", "table", "axis", "target", "over", "among"},
    "difference": {"kind", "paper", "table", "a", "b"},
    "greater": {"kind", "paper", "table", "a", "b"},
    "equals": {"kind", "paper", "table", "a"},
}
TEXT_VALUE_KEYS = {"id", "source", "text", "value", "unit", "method", "benchmark", "measure", "conditions", "doubt"}
NUMBER = re.compile(r"^-?\d+(\.\d+)?$")


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
        return float(text) if NUMBER.match(text) else None


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
    short_name: str = ""  # how surfaces name the paper beside its authors and year ("QC v2")

    def table(self, label: str) -> TableInfo | None:
        return next((t for t in self.tables if t.label == label), None)


def canonical_label(label: str) -> str:
    """A version-independent name for a printed label: no citation, dagger or case."""
    text = re.sub(r"[\(\[][^\)\]]*\d{4}[a-z]?[^\)\]]*[\)\]]", "", label)
    text = text.replace("$\\dagger$", "").replace("†", "")
    return re.sub(r"\s+", " ", text).strip().lower()
