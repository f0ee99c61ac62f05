"""Every printed table as a runnable matrix (issue 62): per table, how many of its cells a run the harness
offers can grade and why the rest cannot, and the runs the table needs, deduplicated, each with the cells
it grades (Pyserini 2CR's idea of a table as conditions with their commands; written for this registry).

Read from the cell states every surface reads (:mod:`harness.gate.cell_state`) and the registry generically:
a variant spec another change declares (``variant_of``) counts here as soon as ``paper_run`` finds it.
``harness table`` prints it, the glance tab, the report and docs/comparing-with-papers.md show the counts.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.core.errors import HarnessError, UnknownNameError
from harness.core.statuses import NOT_YET_RUN
from harness.evaluation.verdict import VERDICTS
from harness.gate.answer import is_claim, short_reason
from harness.gate.cell_state import GRADED, CellState, cell_states, paper_run, paper_spec
from harness.papers.citation import citation
from harness.papers.schema import PaperInfo

RUN, REPRODUCE = "run", "reproduce"


def _get(cell: Any, name: str) -> Any:
    return cell.get(name) if isinstance(cell, Mapping) else getattr(cell, name, None)


def _paper(cell: Any) -> str:
    return str(_get(cell, "paper") or str(_get(cell, "cell_id") or "").split("/", 1)[0])


def own_cell(cell: Any) -> bool:
    """A cell of the harness's own methods (the issue's 220): a printed number of a method the harness runs,
    on a benchmark it scores, neither copied from another paper nor doubtful."""
    conditions = dict(_get(cell, "conditions") or {})
    return is_claim(cell) and "cited" not in conditions and not _get(cell, "doubt")


def reachable(state: CellState) -> bool:
    """Whether a run the harness offers grades the cell: graded already, or a command that would."""
    return state.state in GRADED or bool(state.command)


def few_words(reason: str) -> str:
    """A reason no run grades a cell, as the answer line words it, without its trailing aside."""
    return re.sub(r" \((?!declared deviation)[^()]*\)$", "", short_reason(reason))


def table_command(paper: str, table: str, flag: str = "--dry-run") -> str:
    quoted = f'"{table}"' if re.search(r"\s", table) else table
    return " ".join(["python -m harness table", paper, quoted, *([flag] if flag else [])])


@dataclass(frozen=True)
class TableCount:
    """One printed table: its cells, how many a run can grade, their states, and the reasons of the rest."""

    paper: str  # the registry key (qc-v2)
    table: str  # as printed (Table 2)
    name: str  # the citation every surface prints: "Wu et al. 2023 (QC v2), Table 2"
    cells: int
    reachable: int
    states: tuple[tuple[str, int], ...]  # state -> cells, in the legend's order
    unreachable: tuple[tuple[str, int], ...]  # short reason -> cells no run can grade, most first
    command: str  # the table's command (its dry-run)

    def states_text(self) -> str:
        return ", ".join(f"{s} {n}" for s, n in self.states)

    def reasons_text(self) -> str:
        return "; ".join(f"{r}: {n}" for r, n in self.unreachable)


def _count(paper: str, table: str, cells: Sequence[Any], states: Mapping[str, CellState]) -> TableCount:
    found = [states[str(_get(c, "cell_id"))] for c in cells]
    by_state = Counter(s.state for s in found)
    why = Counter(few_words(s.reason) for s in found if not reachable(s))
    return TableCount(
        paper=paper,
        table=table,
        name=f"{citation(paper)}, {table}",
        cells=len(found),
        reachable=sum(reachable(s) for s in found),
        states=tuple((s, by_state[s]) for s in (*VERDICTS, NOT_YET_RUN) if by_state[s]),
        unreachable=tuple(sorted(why.items(), key=lambda kv: (-kv[1], kv[0]))),
        command=table_command(paper, table),
    )


def tables_of(cells: Sequence[Any]) -> dict[tuple[str, str], list[Any]]:
    """(paper, table) -> its cells, in the registry's order."""
    out: dict[tuple[str, str], list[Any]] = {}
    for c in cells:
        out.setdefault((_paper(c), str(_get(c, "table") or "")), []).append(c)
    return out


def table_counts(cells: Sequence[Any], states: Mapping[str, CellState]) -> list[TableCount]:
    """Every table of every paper with its counts (cells without a state are left out)."""
    known = [c for c in cells if str(_get(c, "cell_id")) in states]
    return [_count(p, t, group, states) for (p, t), group in tables_of(known).items()]


def states_of(cells: Sequence[Any], gated: Mapping[str, CellState]) -> Mapping[str, CellState]:
    """A gate's cell states, or, when it graded no paper record (and so computed none), each over no records."""
    return gated or cell_states(cells, [])


def own_counts(cells: Sequence[Any], states: Mapping[str, CellState]) -> dict[str, int]:
    """The cells of the harness's own methods by state, plus ``reachable`` (what the registry-walk test pins)."""
    found = [states[str(_get(c, "cell_id"))] for c in cells if own_cell(c) and str(_get(c, "cell_id")) in states]
    counts = dict(Counter(s.state for s in found))
    counts.update(cells=len(found), reachable=sum(reachable(s) for s in found))
    return counts


# ----------------------------------------------------------------------------- the runs of one table


@dataclass(frozen=True)
class TableRun:
    """One run a table needs: a paper-profile run of a method (or variant) spec, or a released
    checkpoint's `reproduce`, with the datasets it names and the cells (ids) it grades."""

    kind: str  # RUN or REPRODUCE
    target: str  # the method spec, or the checkpoint
    datasets: tuple[str, ...]  # run: its --dataset list (empty: the spec's own); reproduce: its benchmarks
    cells: tuple[str, ...]

    @property
    def command(self) -> str:
        if self.kind == REPRODUCE:
            return f"python -m harness reproduce --checkpoint {self.target} --benchmark {','.join(self.datasets)}"
        named = [f"--dataset {','.join(self.datasets)}"] if self.datasets else []
        return " ".join(["python -m harness run --method", self.target, "--profile paper", *named])


def _run_datasets(method: str, extras: Sequence[tuple[str, ...]]) -> tuple[str, ...]:
    """One run's datasets for several cells: none when the spec's own cover them all, else its own first."""
    if not any(extras):
        return ()
    spec = paper_spec(method)
    own = spec.datasets if spec is not None else ()
    return tuple(dict.fromkeys([*own, *(d for e in extras for d in e)]))


def table_runs(cells: Sequence[Any]) -> list[TableRun]:
    """The runs that grade ``cells`` (one table's), one per spec or checkpoint, in the order their first
    cell is printed; a cell no run can grade is in none."""
    groups: dict[tuple[str, str], list[tuple[str, tuple[str, ...]]]] = {}
    for c in cells:
        can = paper_run(c)
        if not can.command:
            continue
        kind = REPRODUCE if can.command.startswith("python -m harness reproduce") else RUN
        wanted = (str(_get(c, "benchmark")),) if kind == REPRODUCE else can.datasets
        groups.setdefault((kind, can.target), []).append((str(_get(c, "cell_id")), wanted))
    out = []
    for (kind, target), found in groups.items():
        extras = [d for _, d in found]
        datasets = tuple(dict.fromkeys(d for e in extras for d in e)) if kind == REPRODUCE else None
        out.append(TableRun(kind, target, datasets or _run_datasets(target, extras), tuple(i for i, _ in found)))
    return out


# ----------------------------------------------------------------------------- naming a paper and a table


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def resolve_paper(name: str, papers: Sequence[PaperInfo]) -> str:
    """The registry key of ``name``: the key (qc-v2), the short name (QC v2), the citation
    (Wu et al. 2023 (QC v2)) or the paper file; an unknown name lists the valid ones."""
    for p in papers:
        if _norm(name) in {_norm(x) for x in (p.paper, p.short_name or "", citation(p.paper), p.paper_file) if x}:
            return p.paper
    known = [f"{p.paper} ({p.short_name})" if p.short_name else p.paper for p in papers]
    raise HarnessError(f"unknown paper {name!r}: give one of {', '.join(known)} (the key or the short name)")


def resolve_table(paper: str, name: str, tables: Sequence[str]) -> str:
    """The table of ``paper`` that ``name`` is ('Table 2', or '2'); an unknown one lists the paper's tables."""
    for t in tables:
        if _norm(name) in (_norm(t), _norm(t.removeprefix("Table "))):
            return t
    raise UnknownNameError(f"table of {paper}", name, list(tables))


def graded_by_row(run: TableRun, cells: Sequence[Any]) -> list[str]:
    """The cells ``run`` grades, one line per printed row: 'row: column, column, ...'."""
    wanted = set(run.cells)
    rows: dict[str, list[str]] = {}
    for c in cells:
        if str(_get(c, "cell_id")) in wanted:
            row = _get(c, "row_key") or _get(c, "row")  # the row with its group ("coCondenser / 1")
            rows.setdefault(str(row), []).append(str(_get(c, "column")))
    return [f"{row}: {', '.join(columns)}" for row, columns in rows.items()]


def markdown(counts: Sequence[TableCount]) -> str:
    """The table-by-table list of docs/comparing-with-papers.md: paper, table, cells, reachable, command."""
    lines = ["| paper | table | cells | a run can grade | command |", "|---|---|---:|---:|---|"]
    for c in counts:
        lines.append(f"| {citation(c.paper)} | {c.table} | {c.cells} | {c.reachable} | `{c.command}` |")
    total, reach = sum(c.cells for c in counts), sum(c.reachable for c in counts)
    lines.append(f"| all {len(counts)} tables | | {total} | {reach} | `python -m harness table --list` |")
    return "\n".join(lines)
