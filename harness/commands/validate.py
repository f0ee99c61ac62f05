"""`python -m harness validate`: check the reported-scores registry, the method specs and the papers.

Exit status 0 when the registry and the specs are valid, even if the papers contradict
themselves (those are findings about the papers, printed for the reader); 1 on any schema or
spec problem. The specs are checked as ``run`` checks them before its first stage (structure,
then every profile's values: harness.run.validation), and every problem of every spec is listed.
"""

from __future__ import annotations

import argparse
from collections import Counter, defaultdict
from typing import Any

from harness.commands._output import write_json
from harness.core.errors import HarnessError
from harness.core.paths import REPORTED_DIR
from harness.core.text_table import wrap_text
from harness.papers.consistency import check_papers
from harness.papers.registry import load_registry, schema_problems
from harness.papers.text_claims import evaluate_claims
from harness.spec import rehearsal
from harness.spec.method import load_method
from harness.spec.paper_profiles import paper_deviations, paper_profiles


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "validate",
        help="validate the reported-scores registry and method specs; list the papers' inconsistencies",
        description="Schema-check baselines/reported/*.yaml and the method specs, then list every internal "
        "inconsistency found in the papers (averages, bold marks, claims in the text, versions).",
    )
    p.add_argument("--json", metavar="PATH", help="also write the findings as JSON")
    p.add_argument("--registry", metavar="DIR", default=None, help="registry folder (default: baselines/reported)")
    p.set_defaults(func=_validate)


def _spec_problems() -> list[str]:
    try:
        from harness.run.validation import validate_all
    except ImportError:  # the spec module is not there yet: no specs to check
        return []
    return list(validate_all())


def rehearsal_changes(papers: list[Any] | None = None) -> dict[str, list[str]]:
    """What each method's rehearsal profile changes relative to its paper profile, key by key,
    computed from the two resolved specs (harness.spec.rehearsal.differences)."""

    out = {}
    for paper in paper_profiles() if papers is None else papers:
        try:
            own = load_method(paper.name, "rehearsal", paper.path.parent)
            out[paper.name] = rehearsal.differences(paper.config, own.config)
        except HarnessError:  # no rehearsal (BM25), or one that cannot be derived (listed as a problem)
            continue
    return out


def _validate(args: argparse.Namespace) -> int:
    registry = args.registry or REPORTED_DIR
    schema = schema_problems(registry)
    specs = _spec_problems()
    findings, claims, cells = [], [], []
    if not schema:
        cells = load_registry(registry)
        findings = check_papers(cells)
        claims = evaluate_claims(cells)

    for title, problems in (("registry schema", schema), ("method specs", specs)):
        if problems:
            print(f"== {title}: {len(problems)} problem(s)")
            for msg in problems:
                print(f"  {msg}")
    by_paper: dict[str, list] = defaultdict(list)
    for f in findings:
        by_paper[f.paper].append(f)
    for paper, items in by_paper.items():
        print(f"== {paper}: {len(items)} finding(s)")
        for f in items:  # messages name their table themselves
            print(wrap_text(f"  [{f.kind}] {f.message}", 118, "      "))

    paper_specs = paper_profiles()
    deviations = paper_deviations(papers=paper_specs)
    for method, items in deviations.items():
        print(
            f"== {method} [paper]: {len(items)} deviation(s) from the paper (cells stating what they touch "
            "are NOT-COMPARABLE)"
        )
        for d in items:
            print(f"  {d}")
    assumptions = paper_deviations("assumptions", paper_specs)
    for method, items in assumptions.items():
        print(f"== {method} [paper]: {len(items)} assumption(s) where the papers say nothing")
        for d in items:
            print(f"  {d}")

    changes = rehearsal_changes(paper_specs)
    for method, items in changes.items():
        print(f"== {method} [rehearsal]: {len(items)} change(s) from the paper profile")
        for line in items:
            print(f"  {line}")

    kinds = Counter(f.kind for f in findings)
    claim_status = Counter(r.status for r in claims)
    papers = len({c.paper for c in cells})
    summary = (
        f"registry: {'OK' if not schema else f'{len(schema)} schema problem(s)'} "
        f"({papers} papers, {len(cells)} cells); specs: {'OK' if not specs else f'{len(specs)} problem(s)'}; "
        f"papers: {len(findings)} finding(s)"
        + (f" ({', '.join(f'{k} {n}' for k, n in kinds.most_common())})" if kinds else "")
        + (f"; claims: {claim_status.get('ok', 0)} of {len(claims)} agree with the tables" if claims else "")
        + f"; paper profiles: {sum(map(len, deviations.values()))} declared deviation(s), "
        f"{sum(map(len, assumptions.values()))} assumption(s)"
        + (
            f"; rehearsals: {len(changes)}, each changing {min(map(len, changes.values()))}-"
            f"{max(map(len, changes.values()))} keys"
            if changes
            else ""
        )
    )
    print(summary)
    if args.json:
        write_json(
            args.json,
            {
                "ok": not schema and not specs,
                "schema_problems": schema,
                "spec_problems": specs,
                "deviations": deviations,
                "assumptions": assumptions,
                "rehearsal_changes": changes,
                "inconsistencies": [f.to_dict() for f in findings],
                "claims": [r.__dict__ | {"cells": list(r.cells)} for r in claims],
                "summary": summary,
            },
        )
    return 1 if schema or specs else 0
