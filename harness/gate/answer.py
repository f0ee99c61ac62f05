"""The answer first (issue 63): one line saying how many of the papers' numbers for the harness's own
methods a paper-scale run has tested, how many reproduced and how many differ, then the short list of
the numbers no run of the harness can grade, each with its reason in a few words.

Derived from the cell states every surface reads (:mod:`harness.gate.cell_state`, computed by the gate
over the committed records), so `check`, the README's generated block, the report's first screen and the
leaderboard's first screen print the same text. A claim here is a registry cell of a method the harness
runs, on a benchmark it scores, with a printed number; the other cells (another system's row, a size or
a latency, an empty cell) are no claim a run could test.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.core.errors import HarnessError
from harness.core.statuses import NOT_COMPARABLE, NOT_YET_RUN
from harness.evaluation.verdict import DIFFERENT, INCONCLUSIVE, REPRODUCED
from harness.gate.cell_state import CellState, cell_states
from harness.gate.run import run_gate
from harness.papers.citation import table_citation
from harness.papers.registry import load_reported_cells

DEFINITION = (
    "A claim: a number a paper printed for a method the harness runs, on a benchmark it scores; tested at "
    "paper scale: graded from a `paper`-profile run or a released checkpoint; untried: a run would grade it; "
    "ungradable: no run of the harness can, for the reason given (`python -m harness check --json` gives each cell's state and reason). The gate's PASSED or FAILED is "
    "about the records' integrity and their references, not about this answer."
)
CANNOT = "no paper-profile run can grade it: "  # cell_state's prefix of a cell no run can grade


@dataclass(frozen=True)
class Ungradable:
    """The claims no run of the harness can grade for one reason."""

    reason: str  # a few words
    cells: int
    methods: tuple[str, ...]
    where: tuple[str, ...]  # the papers' tables, as every surface names them

    def text(self) -> str:
        return f"{self.reason}: {self.cells} of {', '.join(self.methods)}; {'; '.join(self.where)}"


@dataclass(frozen=True)
class Answer:
    """The answer in numbers: claims of the harness's methods, by what the records say of them."""

    claims: int
    tested: int  # graded by a paper-scale record: REPRODUCED, DIFFERENT-* or INCONCLUSIVE
    reproduced: int
    different: int
    inconclusive: int
    waiting: int  # a paper-profile run (or a released checkpoint's `reproduce`) would grade them
    ungradable: tuple[Ungradable, ...]

    def line(self) -> str:
        cannot = sum(u.cells for u in self.ungradable)
        return (
            f"Answer: {self.tested} of {self.claims} claims tested at paper scale: {self.reproduced} reproduced, "
            f"{self.different} different, {self.inconclusive} inconclusive; {self.waiting} untried; "
            f"{cannot} ungradable" + (":" if cannot else "")
        )

    def items(self) -> list[str]:
        return [u.text() for u in self.ungradable]

    def terminal(self, width: int = 120) -> str:
        """:meth:`text` with each item wrapped at ``width`` columns (the line itself fits)."""
        wrapped = [textwrap.fill(i, width, initial_indent="  - ", subsequent_indent="    ") for i in self.items()]
        return "\n".join([self.line(), *wrapped])

    def markdown(self) -> str:
        """The README's block: the line in bold, the items as a list, what a claim is."""
        items = [f"- {i}" for i in self.items()]
        return "\n".join([f"**{self.line()}**", "", *items, "", DEFINITION])

    def text(self) -> str:
        """The line, then one indented line per reason no run can grade a claim."""
        return "\n".join([self.line(), *(f"  - {item}" for item in self.items())])


def _get(cell: Any, name: str) -> Any:
    return cell.get(name) if isinstance(cell, Mapping) else getattr(cell, name, None)


def is_claim(cell: Any) -> bool:
    """A number a run of the harness could test: a method's printed score on a benchmark it scores."""
    return bool(_get(cell, "method")) and bool(_get(cell, "benchmark")) and _get(cell, "score") is not None


def short_reason(reason: str) -> str:
    """A cell state's reason that no run can grade it, in a few words (the full one stays per cell)."""
    text = reason.removeprefix(CANNOT)
    setting = re.match(r"cell reports ([\w.-]+)=(.+?)(?:, run |; |$)", text)
    said = f"paper: {setting[1]}={setting[2].strip()}" if setting else ""
    if "declared deviation: " in text:
        return f"{said} (declared deviation)" if said else "declared deviation: " + _head(text.split("deviation: ")[1])
    if "weights unidentified" in text and said:
        return f"{said}, weights unidentified"
    if text.startswith("the paper copies this number from"):
        return "cited from another paper"
    if text.startswith("doubtful cell"):
        return "doubtful extraction"
    if said and ", run has " in text:
        return f"{said}, spec: {text.split('=')[-1].strip()}"
    if said and "run does not state" in text:
        return f"{said}, unstated in the spec"
    return text.split(";", 1)[0]


def _head(text: str) -> str:
    return text.split(":", 1)[0].strip()


def _tables(cells: Iterable[Any]) -> tuple[str, ...]:
    """'Wu et al. 2023 (QC v2), Tables 1, 2' per paper, in the registry's order."""
    by_paper: dict[str, list[str]] = {}
    for c in cells:
        paper = str(_get(c, "paper") or str(_get(c, "cell_id") or "").split("/", 1)[0])
        tables = by_paper.setdefault(paper, [])
        if str(_get(c, "table")) not in tables:
            tables.append(str(_get(c, "table")))
    out = []
    for paper, tables in by_paper.items():
        numbered = [t.removeprefix("Table ") for t in tables if re.fullmatch(r"Table \d+", t)]
        named = [f"Tables {', '.join(numbered)}"] if len(numbered) > 1 else [f"Table {n}" for n in numbered]
        out.append(
            table_citation(paper, ", ".join(named + [t for t in tables if t.removeprefix("Table ") not in numbered]))
        )
    return tuple(out)


def answer(cells: Sequence[Any], states: Mapping[str, CellState]) -> Answer:
    """The answer over ``cells`` (registry cells, dicts or objects) and their ``states``."""
    claims = [c for c in cells if is_claim(c) and str(_get(c, "cell_id")) in states]
    found = [states[str(_get(c, "cell_id"))] for c in claims]
    groups: dict[str, list[Any]] = {}
    for cell, state in zip(claims, found, strict=True):
        if state.state == NOT_COMPARABLE and not state.command:
            groups.setdefault(short_reason(state.reason), []).append(cell)
    ungradable = [
        Ungradable(reason, len(group), tuple(dict.fromkeys(str(_get(c, "method")) for c in group)), _tables(group))
        for reason, group in groups.items()
    ]
    ungradable.sort(key=lambda u: (-u.cells, u.reason))
    states_found = [s.state for s in found]
    waiting = sum(s.state == NOT_YET_RUN or (s.state == NOT_COMPARABLE and bool(s.command)) for s in found)
    return Answer(
        claims=len(claims),
        tested=sum(s in (REPRODUCED, *DIFFERENT, INCONCLUSIVE) for s in states_found),
        reproduced=states_found.count(REPRODUCED),
        different=sum(s in DIFFERENT for s in states_found),
        inconclusive=states_found.count(INCONCLUSIVE),
        waiting=waiting,
        ungradable=tuple(ungradable),
    )


def gate_answer(states: Mapping[str, CellState], cells: Sequence[Any] | None) -> Answer:
    """The answer from a gate's cell states (``GateResult.cells``) over the papers' ``cells``; a gate that
    graded no paper record computed none, so every cell's state is then taken over no records."""
    cells = list(cells or [])
    return answer(cells, states or cell_states(cells, []))


def committed_answer(records: str | Path | None = None, reported: str | Path | None = None) -> Answer:
    """The answer over a records folder (default the committed runs/records/) and the papers' cells (a
    ``--reported`` snapshot, or the registry), graded as ``check`` grades them."""
    cells, error = load_reported_cells(reported)
    if error or cells is None:
        raise HarnessError(f"the papers' cells cannot be loaded: {error}")
    return gate_answer(run_gate(records, reported=reported).cells, cells)
