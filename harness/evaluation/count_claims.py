"""Count claims ("query-as-context improves coCondenser on 9 of 14 datasets") graded from the
per-dataset effects.

A registry ``claims:`` entry of kind ``count_greater`` (``harness.papers.text_claims``) whose two
rows (or columns) are harness methods is a count of per-dataset directions: one printed difference
per dataset (``claims.Claim``), each graded by the effect rule with the others of its table. The
count is read as the text states it, "on N datasets A beats B", i.e. at least N:

* A > B is shown on a dataset when the one-sided test of its run effect rejects after Holm over the
  claim's datasets; A < B likewise. With ``L`` datasets shown better and ``R`` shown worse of ``M``,
  the true count lies in ``[L, M - R]`` (an unrun or undecided dataset may go either way);
* REPRODUCED when ``L >= N``; DIFFERENT-BELOW when ``M - R < N`` (even every undecided and unrun
  dataset counted as a win leaves fewer than N); otherwise NOT-YET-RUN while a dataset is unrun
  (naming them), else INCONCLUSIVE;
* NOT-COMPARABLE when a dataset's difference is (its reason kept).

Count claims of kind ``count_best`` rank a method against rows the harness cannot run (SEED,
SPLADE, ...): not graded here, and not listed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from harness.core.statuses import NOT_YET_RUN
from harness.evaluation import verdict as rule
from harness.evaluation.claims import Claim, claim_from, own_row, spec_reason
from harness.evaluation.verdict import DIFFERENT_BELOW, INCONCLUSIVE, NOT_COMPARABLE, REPRODUCED
from harness.papers.registry import load_papers
from harness.papers.table_grid import TableGrid


@dataclass(frozen=True)
class CountClaim:
    paper: str  # the paper whose text states it
    claim_id: str
    text: str
    stated: int  # N
    source: str  # the table counted, as ``Claim.source``
    a: str
    b: str
    measure: str
    parts: tuple[Claim, ...]  # one printed difference per dataset counted

    @property
    def key(self) -> str:
        return f"{self.paper} {self.claim_id}"


@dataclass
class CountCheck:
    key: str
    source: str
    text: str
    a: str
    b: str
    measure: str
    stated: int
    datasets: int
    status: str
    reason: str = ""
    at_least: int | None = None  # L: datasets where A > B is shown
    at_most: int | None = None  # M - R: datasets where A > B is still possible
    missing: list[str] = field(default_factory=list)  # datasets not yet run
    graded_by: tuple[
        str, ...
    ] = ()  # the specs whose paper runs grade A and B (a declared variant's: Claim.a_graded_by)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def count_claims_for(pairs: Sequence[tuple[str, str]], papers: Sequence[Any] | None = None) -> list[CountClaim]:
    """Every ``count_greater`` claim of the registry whose A and B are one of ``pairs`` on every
    dataset counted (a claim restated by another paper about the same table is listed once)."""
    papers = list(load_papers()) if papers is None else list(papers)
    by_name = {p.paper: p for p in papers}
    wanted = set(pairs)
    out, seen = [], set()
    # a paper's own claims about its table first, then the papers that restate them
    stated = [(p, c) for p in papers for c in p.claims if c.get("check", {}).get("kind") == "count_greater"]
    for p, claim in sorted(stated, key=lambda pc: (pc[1]["check"].get("paper") or pc[0].paper) != pc[0].paper):
        chk = claim["check"]
        target = by_name.get(chk.get("paper") or p.paper)
        info = next((t for t in target.tables if t.label == chk["table"]), None) if target else None
        if target is None or info is None:
            continue
        grid = TableGrid(info, [c for c in target.cells if c.table == chk["table"]])
        rows = chk["axis"] == "rows"
        parts = [
            (grid.get(chk["a"], o), grid.get(chk["b"], o)) if rows else (grid.get(o, chk["a"]), grid.get(o, chk["b"]))
            for o in chk["over"]
        ]
        if not parts or any(
            ca is None or cb is None or not own_row(ca) or not own_row(cb) or (ca.method, cb.method) not in wanted
            for ca, cb in parts
        ):
            continue
        claims = tuple(claim_from(ca, cb) for ca, cb in parts)
        ident = (claims[0].source, claims[0].a, claims[0].b, tuple(c.benchmark for c in claims))
        if ident in seen:
            continue
        seen.add(ident)
        out.append(
            CountClaim(
                p.paper,
                str(claim["id"]),
                str(claim["text"]),
                int(claim["number"]),
                claims[0].source,
                claims[0].a,
                claims[0].b,
                claims[0].measure,
                claims,
            )
        )
    return out


def _p_one_sided(check: Mapping[str, Any], up: bool) -> float:
    effect, se = float(check["effect"]), float(check["se"] or 0.0)
    if se <= 0:
        return 0.0 if (effect > 0 if up else effect < 0) else 1.0
    x = effect / se
    return 1.0 - rule.phi(x) if up else rule.phi(x)


def check_count(claim: CountClaim, checks: Mapping[str, Mapping[str, Any]]) -> CountCheck:
    """Grade a count claim from the per-dataset checks (``ClaimCheck.to_dict()`` by ``Claim.key``;
    a dataset without one is unrun unless no run of the specs could grade it)."""
    out = CountCheck(
        claim.key,
        claim.source,
        claim.text,
        claim.a,
        claim.b,
        claim.measure,
        claim.stated,
        len(claim.parts),
        NOT_YET_RUN,
        graded_by=tuple(dict.fromkeys(s for p in claim.parts[:1] for s in (p.a_graded_by, p.b_graded_by))),
    )
    graded, unfit = [], {}
    for part in claim.parts:
        check = checks.get(part.key) or {}
        status = check.get("status")
        if status == NOT_COMPARABLE:
            unfit[part.benchmark] = str(check.get("reason") or "")
        elif status in (None, NOT_YET_RUN):
            why = spec_reason(part)
            if why:
                unfit[part.benchmark] = why
            else:
                out.missing.append(part.benchmark)
        else:
            graded.append(check)
    if unfit:
        reasons = set(unfit.values())
        out.status = NOT_COMPARABLE
        out.reason = (
            f"every dataset: {reasons.pop()}"
            if len(reasons) == 1 and len(unfit) == len(claim.parts)
            else "; ".join(f"{b}: {why}" for b, why in unfit.items())
        )
        return out
    up = rule.holm([_p_one_sided(c, True) for c in graded])
    down = rule.holm([_p_one_sided(c, False) for c in graded])
    out.at_least = sum(p < rule.ALPHA for p in up)
    out.at_most = len(claim.parts) - sum(p < rule.ALPHA for p in down)
    shown = (
        f"{claim.a} > {claim.b} on at least {out.at_least} and at most {out.at_most} of {len(claim.parts)} "
        f"datasets (one-sided, Holm over the datasets); the paper counts {claim.stated}"
    )
    if out.at_least >= claim.stated:
        out.status = REPRODUCED
    elif out.at_most < claim.stated:
        out.status = DIFFERENT_BELOW
    elif out.missing:
        out.status = NOT_YET_RUN
        shown += f"; not yet run: {', '.join(out.missing)}"
    else:
        out.status = INCONCLUSIVE
    out.reason = shown
    return out
