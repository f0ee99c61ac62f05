"""Pairs of independent runs of one system in the reported-scores registry: how far two honest runs
of the same recipe at paper scale land apart, read from the papers themselves.

Two printed numbers are a replication pair when they are the same method on the same benchmark,
measure and setting, and are two *runs*, not two printings of one run. The registry holds three
ways one run is printed twice, none of which is a pair:

- a copy: a cell with condition ``cited`` is the cited publication's run. Two copies of one
  publication (QC and LexMAE both print coCondenser's 38.2) are one run; so is a cell that prints
  the same number as a cited cell of its own paper without saying so (LexMAE Table 7 repeats
  coCondenser's 38.2 / 98.4 from its Table 1). Such a copy still stands for the cited run, so a
  copy against another team's re-run *is* a pair: coCondenser's own paper against the QC authors'
  reproduction († row, ``reproduction_by_authors``). A copy of a paper the registry itself holds
  is that paper's run (matched by its authors and by that paper printing its own number there).
- versions of one paper: every file of a paper family (QC v1, v2, the EMNLP build) prints the same
  runs, and one paper prints one run in several tables; a family is one origin.
- deterministic systems: a method whose spec family is training-free (BM25) gives the same
  number every run; what differs between papers is configuration, not chance.

Cells with a ``doubt`` are left out: a garbled number says nothing about run-to-run spread.

Settings match by their conditions (``schema.CONDITION_KEYS``), in three kinds: provenance (who
printed or ran it, not what was run), conditions whose absence means "not applied" (must be equal,
absence included: a sparsified or re-ranked run is another system), and conditions a table often
leaves unstated (a conflict only when both sides state different values; stated on one side only,
the pair keeps it in ``unmatched`` so the pooling can weigh it: the QC reproduction of coCondenser
pre-trains for 120K steps, which the cited row does not state).
"""

from __future__ import annotations

import functools
import itertools
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.core import yamlsafe
from harness.core.paths import BASELINES_DIR
from harness.papers.registry import load_papers
from harness.papers.schema import PaperInfo, ReportedCell

# Who printed or ran the number, not what was run.
PROVENANCE_KEYS = frozenset({"cited", "reproduction_by_authors", "runs_averaged"})
# Absent means not applied (or the method's default): both sides must agree, absence included.
STRICT_KEYS = frozenset(
    {
        "pretrain_corpus",
        "checkpoint",
        "finetune_data",
        "finetune_queries",
        "query_number",
        "mixed",
        "sparsify_top_k",
        "hybrid",
        "reranker",
        "reranker_teacher",
        "init",
        "ablation",
    }
)
# Tables often leave these unstated: they conflict only when both sides state different values.
STATED_KEYS = frozenset({"pretrain_steps", "finetune_stage", "msmarco_passages", "bm25_negatives"})
# Conditions that make another system, not another run of it: a pair differing in one is not even a
# look-alike, so rejected_pairs leaves it out (a retriever-1 row against a retriever-2 row).
SYSTEM_KEYS = frozenset(
    {
        "finetune_stage",
        "finetune_data",
        "finetune_queries",
        "query_number",
        "mixed",
        "sparsify_top_k",
        "hybrid",
        "reranker",
        "reranker_teacher",
        "ablation",
    }
)
# Spec families whose runs are deterministic (no seed): their repeated reports are not replication.
DETERMINISTIC_FAMILIES = frozenset({"lexical"})


@dataclass(frozen=True)
class ReplicationPair:
    """Two independent runs of one system at one setting, in points (38.2, not 0.382).

    ``a`` is the earlier run (the cited original where there is one), ``b`` the re-run.
    ``runs_a``/``runs_b``: how many runs each printed number averages (``runs_averaged``, else 1).
    ``setting``: the conditions the two share; ``unmatched``: conditions stated on one side only.
    """

    method: str
    benchmark: str
    measure: str
    a: float
    b: float
    source_a: str
    source_b: str
    runs_a: int = 1
    runs_b: int = 1
    setting: tuple[tuple[str, str], ...] = ()
    unmatched: tuple[str, ...] = ()

    @property
    def diff(self) -> float:
        """b - a in points: the re-run's distance from the original."""
        return round(self.b - self.a, 6)


@dataclass(frozen=True)
class _Run:
    cell: ReportedCell
    origin: str  # whose run the number is: "cited:<authors>" or "paper:<family>"
    copied_from: str  # the citation a cell silently repeats ("" when it is not a copy)


Cells = Iterable[ReportedCell | Mapping[str, Any]]


def replication_pairs(cells: Cells | None = None, papers: Sequence[PaperInfo] | None = None) -> list[ReplicationPair]:
    """Every pair of independent runs of one system, benchmark, measure and setting in ``cells``.

    ``cells``: the registry's cells (default: all of ``baselines/reported/``), as ReportedCell or
    as the dicts ``ReportedCell.to_dict()`` writes. ``papers``: the registry files that say which
    paper keys are one family and whose runs a citation names (default: the registry's; a paper
    key not among them is its own family).
    """
    return [pair for pair, reason in _candidates(cells, papers) if not reason]


def rejected_pairs(
    cells: Cells | None = None, papers: Sequence[PaperInfo] | None = None
) -> list[tuple[ReplicationPair, str]]:
    """The cross-origin pairs at one system that look like replications but are not, each with the reason."""
    return [(pair, reason) for pair, reason in _candidates(cells, papers) if reason]


def _candidates(cells: Cells | None, papers: Sequence[PaperInfo] | None) -> list[tuple[ReplicationPair, str]]:
    papers = load_papers() if papers is None else list(papers)
    if cells is None:
        cells = [c for p in papers for c in list(p.cells) + list(p.text_values)]
    runs = _runs([_as_cell(c) for c in cells], papers)
    groups: dict[tuple[str, str, str], list[_Run]] = {}
    for run in runs:
        c = run.cell
        groups.setdefault((str(c.method), str(c.benchmark), str(c.measure)), []).append(run)
    best: dict[tuple, tuple[tuple, ReplicationPair, str]] = {}
    for key, group in groups.items():
        for x, y in itertools.combinations(group, 2):
            if x.origin == y.origin:
                continue  # one run printed twice (a copy, another version, another table)
            first, second = _order(x, y)
            reason, key_differing = _reason(first.cell, second.cell)
            if key_differing in SYSTEM_KEYS:
                continue
            pair = _pair(first, second)
            # One pair per origin couple and setting: the same two runs are printed in v1 and v2, in
            # QC and in LexMAE. Prefer the printing that sets both side by side, then the first file.
            ident = (key, first.origin, second.origin, pair.setting, reason)
            rank = (first.cell.paper != second.cell.paper, first.cell.cell_id, second.cell.cell_id)
            if ident not in best or rank < best[ident][0]:
                best[ident] = (rank, pair, reason)
    return [(pair, reason) for _, pair, reason in sorted(best.values(), key=lambda v: _sort_key(v[1], v[2]))]


def _as_cell(cell: ReportedCell | Mapping[str, Any]) -> ReportedCell:
    if isinstance(cell, ReportedCell):
        return cell
    data = dict(cell)
    data["doubt_scopes"] = tuple(data.get("doubt_scopes") or ())
    return ReportedCell(**data)


def _runs(cells: list[ReportedCell], papers: Sequence[PaperInfo]) -> list[_Run]:
    """The cells that are retrieval scores of a named method, each with the origin of its run."""
    families = {p.paper: p.family for p in papers}
    scored = [c for c in cells if c.method and c.benchmark and c.measure and c.score is not None]
    # (paper, method, benchmark, measure, printed value) -> citation, for spotting silent copies
    cited = {
        (c.paper, c.method, c.benchmark, c.measure, c.value): str(c.conditions["cited"])
        for c in scored
        if c.conditions.get("cited")
    }
    # (family, method, benchmark, measure) a paper family reports as its own run (neither copied nor a †)
    own = {
        (families.get(c.paper, c.paper), c.method, c.benchmark, c.measure)
        for c in scored
        if not c.conditions.get("cited") and not c.conditions.get("reproduction_by_authors")
    }
    out = []
    for c in scored:
        citation = str(c.conditions.get("cited") or "")
        copied = ""
        if not citation and not c.conditions.get("reproduction_by_authors"):
            copied = cited.get((c.paper, c.method, c.benchmark, c.measure, c.value), "")
        source = citation or copied
        if source:
            # A copy of a paper the registry holds is that paper's run, not a run of its own.
            named = [f for f in _registry_families(source, papers) if (f, c.method, c.benchmark, c.measure) in own]
            origin = f"paper:{named[0]}" if named else f"cited:{_citation_key(source)}"
        else:
            origin = f"paper:{families.get(c.paper, c.paper)}"
        out.append(_Run(c, origin, copied))
    return out


def _registry_families(citation: str, papers: Sequence[PaperInfo]) -> list[str]:
    """The families of the registry papers a citation may name: its first name is the paper's first
    author's surname and every other name it gives is an author's surname (year ignored: arXiv
    and venue versions of one paper carry different years). One first author writes several
    papers ('Wu et al., 2022' is CoT-MAE, not the QC paper), so the caller also requires that
    paper to print its own run of the cell's method, benchmark and measure."""
    names = [w for w in _citation_key(citation).split() if w not in {"and", "et", "al"}]
    out = []
    for p in papers:
        surnames = [_ascii(a).split()[-1] for a in p.authors if _ascii(a)]
        if names and surnames and names[0] == surnames[0] and set(names) <= set(surnames) and p.family not in out:
            out.append(p.family)
    return out


def _ascii(text: str) -> str:
    """Lower-case letters only ('Hofstätter' -> 'hofstatter'), so citations and author lists compare."""
    folded = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii").lower()
    return " ".join(re.sub(r"[^a-z ]", " ", folded).split())


def _citation_key(citation: str) -> str:
    """Authors of a citation without year or punctuation: 'Gao and Callan, 2021b' and 'Gao & Callan,
    2022' are the arXiv and ACL versions of one paper (one run, printed with the year of the version
    each citer read). Within one method's cells an author list names one publication."""
    text = re.sub(r"\b(19|20)\d\d[a-z]?\b", " ", citation.replace("&", " and "))
    return _ascii(text)


def _order(x: _Run, y: _Run) -> tuple[_Run, _Run]:
    """The original first: a cited run before a re-run, a re-run (†) second, else by origin."""

    def rank(run: _Run) -> tuple:
        copy = bool(run.cell.conditions.get("cited") or run.copied_from)
        return (not copy, bool(run.cell.conditions.get("reproduction_by_authors")), run.origin, run.cell.cell_id)

    return (x, y) if rank(x) <= rank(y) else (y, x)


def _reason(a: ReportedCell, b: ReportedCell) -> tuple[str, str]:
    """Why two cells of different origins are not two runs of one recipe ('' when they are), and
    the condition that differs when that is the reason."""
    # Another system first (a retriever-1 row is not a look-alike of a retriever-2 row), then another setting.
    for key in sorted(SYSTEM_KEYS) + sorted((STRICT_KEYS | STATED_KEYS) - SYSTEM_KEYS):
        va, vb = a.conditions.get(key), b.conditions.get(key)
        stated_on_one_side = key in STATED_KEYS and (va is None or vb is None)
        if va != vb and not stated_on_one_side:
            return f"setting differs: {key} {va!r} vs {vb!r}", key
    for c in (a, b):
        if c.doubt:
            return f"doubt on {_where(c)}: {c.doubt}", ""
    if _spec_family(str(a.method)) in DETERMINISTIC_FAMILIES:
        return f"deterministic system ({a.method}: spec family {_spec_family(str(a.method))})", ""
    return "", ""


def _pair(first: _Run, second: _Run) -> ReplicationPair:
    a, b = first.cell, second.cell
    shared = sorted(
        (k, str(a.conditions[k]))
        for k in a.conditions
        if k not in PROVENANCE_KEYS and b.conditions.get(k) == a.conditions[k]
    )
    unmatched = []
    for key in sorted(STATED_KEYS):
        va, vb = a.conditions.get(key), b.conditions.get(key)
        if (va is None) != (vb is None):
            unmatched.append(f"{key}={va if va is not None else vb} ({'a' if va is not None else 'b'} only)")
    return ReplicationPair(
        method=str(a.method),
        benchmark=str(a.benchmark),
        measure=str(a.measure),
        a=round(float(a.score) * 100, 6),
        b=round(float(b.score) * 100, 6),  # type: ignore[arg-type]  # paired cells hold scores
        source_a=_source(first),
        source_b=_source(second),
        runs_a=int(a.conditions.get("runs_averaged") or 1),
        runs_b=int(b.conditions.get("runs_averaged") or 1),
        setting=tuple(shared),
        unmatched=tuple(unmatched),
    )


def _where(c: ReportedCell) -> str:
    return f"{c.paper_file} {c.table} row '{c.row}' column '{c.column}'"


def _source(run: _Run) -> str:
    c = run.cell
    where = f"{c.paper_file} {c.table} row '{c.row}'"
    if c.conditions.get("cited"):
        return f"{where} (copied from {c.conditions['cited']})"
    if run.copied_from:
        return f"{where} (same number as its paper's copy from {run.copied_from})"
    if c.conditions.get("reproduction_by_authors"):
        return f"{where} (the authors' reproduction)"
    return where


def _sort_key(pair: ReplicationPair, reason: str) -> tuple:
    return (pair.method, pair.benchmark, pair.measure, pair.source_a, pair.source_b, reason)


@functools.lru_cache(maxsize=64)
def _spec_family(method: str) -> str | None:
    """The spec family of a method (baselines/<method>.yaml), None when it has no spec."""
    path = BASELINES_DIR / f"{method}.yaml"
    if not path.is_file():
        return None
    data = yamlsafe.load(path.read_text(encoding="utf-8")) or {}
    return data.get("family") if isinstance(data, dict) else None


def _format(pair: ReplicationPair) -> str:
    flags = f"  [unmatched: {', '.join(pair.unmatched)}]" if pair.unmatched else ""
    return (
        f"{pair.method:12s} {pair.benchmark:12s} {pair.measure:8s} a={pair.a:6.2f} b={pair.b:6.2f} "
        f"diff={pair.diff:+.2f}{flags}\n    a: {pair.source_a}\n    b: {pair.source_b}"
    )


if __name__ == "__main__":
    print("Replication pairs:")
    for found in replication_pairs():
        print(_format(found))
    print("\nRejected look-alikes:")
    for found, why in rejected_pairs():
        print(_format(found) + f"\n    not a pair: {why}")
