"""What `python -m harness check` prints first: the verdict and counts in its first line, then the rows
that fail, then what ``--all`` adds. The full table (:func:`harness.gate.run.format_gate`) is behind
``check --all``: on the committed records it is ~200 rows, most of them SUPERSEDED or REFERENCE, and a
reader needs the verdict and what to fix before any of them."""

from __future__ import annotations

from harness.core.text_table import wrap_text
from harness.gate.run import GateResult, format_rows, verdict_text

FAILING_SHOWN = 40  # failing rows printed before "... N more" (keeps the summary on one screen)
RUNS_NAMED = 5  # your runs named in the summary


def headline(result: GateResult, apart: bool = False) -> str:
    """One line: the verdict first, what it is about (the records, not the papers' answer), then the
    records and the rows per status."""
    counts = ", ".join(f"{k} {v}" for k, v in result.counts().items()) or "nothing gated"
    records = f"{result.n_records} record(s) (integrity and references)"
    return f"{verdict_text(result, apart)}: {records}, {len(result.skipped)} skipped; {counts}"


def format_summary(result: GateResult, apart: bool = False, shown: int = FAILING_SHOWN) -> str:
    """The headline, then the failing rows (at most ``shown``), then how many rows ``--all`` adds."""
    lines = [wrap_text(headline(result, apart), indent="  ")]
    if apart and (ids := list(dict.fromkeys(row.run_id for row in result.rows))):
        # your runs by name: the ids `check --add RUN_ID` takes
        more = f" and {len(ids) - RUNS_NAMED} more" if len(ids) > RUNS_NAMED else ""
        lines.append(wrap_text(f"runs: {', '.join(ids[:RUNS_NAMED])}{more}", indent="  "))
    failing = result.failures()
    if failing:
        label = "rows that would fail it" if apart else "failing rows"
        lines.append(f"{label} ({len(failing)}):")
        lines.append(format_rows(failing[:shown]))
        if len(failing) > shown:
            lines.append(f"... and {len(failing) - shown} more failing row(s)")
    elif result.rows:
        lines.append("no failing rows")
    else:
        lines.append(f"no run records in {result.records_dir}")
    return "\n".join(lines)


def sigma_sources(result: GateResult) -> list[str]:
    """Each sigma_rep source the seed-graded rows read, in the words ``margins.source_words`` wrote (the
    note of each row holds it too, behind ``--all``), with how many rows and the benchmarks it graded."""
    by_source: dict[str, list[str]] = {}
    for row in result.rows:
        if row.sigma_source:
            by_source.setdefault(row.sigma_source, []).append(f"{row.benchmark} {row.measure}")
    return [
        f"sigma_rep's source ({len(where)} row(s): {', '.join(dict.fromkeys(where))}): {source}"
        for source, where in by_source.items()
    ]


def hidden_rows(*results: GateResult | None) -> int:
    """Rows the summary left out (passing and ungraded ones): what ``--all`` would add."""
    return sum(len(r.rows) - len(r.failures()) for r in results if r is not None)
