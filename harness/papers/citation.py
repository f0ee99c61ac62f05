"""One name per paper (issue 63): the short citation every surface prints for a registry paper,
"Wu et al. 2023 (QC v2)", and with its table, "Wu et al. 2023 (QC v2), Table 1".

Read from the registry file's ``authors``, ``year`` and ``short_name`` (baselines/reported/*.yaml), so a
paper's name is written once; a key the registry does not know is printed as it is.
"""

from __future__ import annotations

import functools

from harness.papers.registry import load_papers


@functools.cache
def _names() -> dict[str, str]:
    out = {}
    for paper in load_papers():
        surname = paper.authors[0].split()[-1] if paper.authors else paper.paper
        who = f"{surname} et al." if len(paper.authors) > 2 else " & ".join(a.split()[-1] for a in paper.authors)
        out[paper.paper] = out[paper.paper_file] = f"{who} {paper.year} ({paper.short_name or paper.paper})"
    return out


def citation(paper: str) -> str:
    """'Wu et al. 2023 (QC v2)' for the registry key 'qc-v2' or its paper file 'qc-pretraining-v2.txt' (what
    a comparison keeps); the name itself when the registry does not know it."""
    try:
        names = _names()
    except Exception:  # noqa: BLE001 - an unreadable registry: the key still names the paper
        return paper
    return names.get(paper, paper)


def table_citation(paper: str, table: str) -> str:
    """'Wu et al. 2023 (QC v2), Table 1': a paper's table as every surface names it."""
    return f"{citation(paper)}, {table}" if table else citation(paper)
