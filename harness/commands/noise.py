"""`python -m harness noise`: the seed-to-seed spread behind every verdict (see evaluation/noise.py)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from harness.commands._output import add_wide
from harness.core.paths import PROJECT_ROOT
from harness.core.text_table import format_table, wrap_text
from harness.evaluation import noise, pretrain_part
from harness.evaluation.margins import SigmaRep, bound_text, practical_margin, recipe_drift, sigma_rep, source_words
from harness.evaluation.power import PRINTED, power_table

WIDTH = 110  # long reasons wrap at this width


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "noise",
        help="the measured seed-to-seed spread that sets every verdict's margin (noise.yaml)",
        description=(
            "Measures the seed-to-seed spread of the control (nopretrain, mini profile) from its reference "
            "record and its re-runs under other seeds (`run --method nopretrain --profile mini --seed N`, "
            "records in runs/seeds/), prints it as a table in points and says whether "
            "harness/evaluation/noise.yaml still matches it. --write replaces the file; a test fails when the "
            "committed file no longer matches the records."
        ),
    )
    p.add_argument("--write", action="store_true", help="rewrite harness/evaluation/noise.yaml from the records")
    p.add_argument(
        "--margins",
        action="store_true",
        help="print what every verdict reads instead: Delta and sigma_rep per benchmark and measure, and the "
        "rule's power (with --all: each piece of evidence behind sigma_rep and the recipe drift)",
    )
    p.add_argument(
        "--all",
        "-v",
        "--verbose",
        dest="all",
        action="store_true",
        help="also print the runs measured (with --margins: the reasons and evidence behind each number)",
    )
    p.add_argument(
        "--runs",
        metavar="DIR",
        type=Path,
        default=None,
        help="the runs folder holding records/ and seeds/ (default: runs/)",
    )
    add_wide(p)
    p.set_defaults(func=_noise)


def _noise(args: argparse.Namespace) -> int:
    if args.margins:
        print(margins_report(args.all))
        return 0
    block = noise.measured_block(args.runs)
    print(spread_report(block, args.all))
    study = pretrain_report(*pretrain_part.same_commit_study(args.runs), verbose=args.all)
    if study:
        print(study)
    text = noise.render(block)
    target = noise.NOISE_FILE
    if args.write:
        noise.report(args.runs, write=True)
        print(f"wrote {target.relative_to(PROJECT_ROOT)}")
    elif target.read_text(encoding="utf-8").strip() == text.strip():
        print(f"{target.relative_to(PROJECT_ROOT)} matches these records")
    else:
        print(f"{target.relative_to(PROJECT_ROOT)} is stale: `python -m harness noise --write` rewrites it")
    return 0


def _code_words(commit: str | None) -> str:
    """Which code ran the seeds: one commit (the spread is seed noise alone) or several (code drift in it)."""
    if not commit:
        return "commits not recorded"
    return f"all at commit {commit[:7]}" if "several" not in commit else "at several commits (code drift included)"


def spread_report(block: dict[str, Any], verbose: bool = False) -> str:
    """The measured spread as a table in points (2 decimals), one row per benchmark and measure."""
    seeds = [str(r["seed"]) for r in block["runs"]]
    lines = [
        f"Seed-to-seed spread of {block['method']} [{block['profile']}] over {len(seeds)} seeds "
        f"({', '.join(seeds)}), settings {block['settings_hash']}, {_code_words(block.get('commit'))}; points"
    ]
    rows = [
        [
            benchmark,
            measure,
            ", ".join(f"{m:.2f}" for m in v["means"]),
            f"{v['sd']:.2f}",
            f"{v['tau']:.2f}",
            f"{v['shared']:.2f}",
            v["queries"],
        ]
        for benchmark, by in block["benchmarks"].items()
        for measure, v in by.items()
    ]
    headers = ["benchmark", "measure", "mean per seed", "SD of the mean", "per-query SD", "shared SD", "queries"]
    lines.append(format_table(headers, rows))
    lines.append(
        "SD of the mean: across seeds (measured); per-query SD: a query's score across seeds; shared SD: the "
        "part of the SD no number of queries averages away"
    )
    if verbose:
        lines += [f"  seed {r['seed']}: {r['run_id']}" for r in block["runs"]]
    return "\n".join(wrap_text(line, WIDTH, "  ") if "  " not in line else line for line in lines)


def pretrain_report(records: list[Any], spreads: pretrain_part.PretrainSpreads, verbose: bool = False) -> str:
    """The pre-training part measured by a small-profile seed study of one commit (`run --seeds S
    --pretrain-seeds P`): sigma_pt, its df and the fine-tuning SD per benchmark and measure; empty without one."""
    if not records:
        return ""
    first, commit = records[0], str((records[0].git or {}).get("commit", ""))[:7]
    pretrain = sorted({r.pretrain_seed for r in records})
    lines = [
        f"Pre-training part of {first.method} [{first.profile}] from {len(records)} runs: pre-training seeds "
        f"{', '.join(map(str, pretrain))} x fine-tuning seeds {', '.join(map(str, sorted({r.seed for r in records})))}, "
        f"all at commit {commit}; points"
    ]
    rows = [[b, m, f"{s.sigma_pt:.2f}", f"{s.df:.1f}", f"{s.sigma_ft:.2f}"] for (b, m), s in sorted(spreads.items())]
    lines.append(format_table(["benchmark", "measure", "sigma_pt", "df", "fine-tuning SD"], rows))
    lines.append(
        "sigma_pt: the SD between pre-trainings beyond the fine-tuning SD (one-way random effects, clipped at 0); "
        "it enters no verdict: the verdicts count a pre-training part measured at the paper profile, else the "
        "stand-in sigma_pt = sigma_ft"
    )
    if verbose:
        lines += [f"  pre-training {r.pretrain_seed}, seed {r.seed}: {r.run_id}" for r in records]
    return "\n".join(wrap_text(line, WIDTH, "  ") if "  " not in line else line for line in lines)


def _basis(spread: SigmaRep, benchmark: str) -> str:
    """Whether a sigma_rep rests on paper-scale evidence, the harness's mini seeds measured on that very
    benchmark, or those seeds transferred to it from another benchmark, model and scale."""
    if spread.evidence:
        return "measured (paper scale)"  # one of the legend's three words: measured / modelled / transferred
    if spread.parts and spread.parts.measured.split()[0] == noise.base_benchmark(benchmark):
        return "measured (mini)"
    return "transferred"


def _source_lines() -> list[str]:
    """Each row's sigma_rep source in the one wording every verdict surface prints (margins.source_words)."""
    return ["sigma_rep's source, in words:"] + [
        wrap_text(f"  {benchmark} {measure}: {source_words(sigma_rep(benchmark, measure))}", WIDTH, "    ")
        for benchmark, measure in PRINTED
    ]


def margins_report(verbose: bool = False) -> str:
    """Delta and sigma_rep with the rule's power, as one table; with ``verbose`` the reasons and the
    evidence behind each number and the recipe drift (docs/comparing-with-papers.md)."""
    power = {(r.benchmark, r.measure): r for r in power_table()}

    def seeds(n: int | None) -> str:
        return ">20" if n is None else str(n)

    rows = []
    for benchmark, measure in PRINTED:
        spread, margin, r = (
            sigma_rep(benchmark, measure),
            practical_margin(benchmark, measure),
            power[(benchmark, measure)],
        )
        rows.append(
            [
                benchmark,
                measure,
                f"{margin.points:.1f}",
                bound_text(spread.points),
                f"{r.sigma_rep:.2f}",
                _basis(spread, benchmark),
                f"{r.reproduced:.2f}",
                f"{r.false_different:.3f}",
                f"{r.power:.2f}",
                f"{seeds(r.seeds_reproduced)} / {seeds(r.seeds_power)}",
                f"{r.sigma_needed:.2f}",
            ]
        )
    headers = [
        "benchmark",
        "measure",
        "Delta",
        "sigma_rep",
        "tested",
        "basis",
        "P(REPR | same)",
        "P(DIFF | same)",
        "P(DIFF | 2 Delta)",
        "seeds R / D",
        "sigma needed",
    ]
    intro = (
        "What every verdict reads, in points: Delta (the practical margin) and sigma_rep (80% upper bound of the "
        "spread between reproductions; 'tested': the estimate the rule's t-test reads; basis: measured "
        "(paper scale: same-recipe evidence; mini: the harness's mini seeds on that benchmark), or transferred from them), and the rule's "
        "power for one run against one printed run ('seeds R / D': runs needed for P(REPRODUCED | same) and P(DIFFERENT | 2 Delta) >= 0.8)"
    )
    lines = [wrap_text(intro, WIDTH, "  "), "", format_table(headers, rows), "", *_source_lines()]
    if not verbose:
        lines += ["", "`python -m harness noise --margins --all` adds the reasons, the evidence and the recipe drift"]
        return "\n".join(lines)
    lines.append("")
    for benchmark, measure in PRINTED:
        spread, margin = sigma_rep(benchmark, measure), practical_margin(benchmark, measure)
        lines.append(wrap_text(f"{benchmark} {measure}: Delta {margin.points:.1f} ({margin.why})", WIDTH, "    "))
        lines.append(wrap_text(f"  sigma_rep {bound_text(spread.points)}: {spread.why}", WIDTH, "    "))
        lines.extend(
            wrap_text(f"    - {e.source} [{e.benchmark} {e.measure}, {e.df} df]", WIDTH, "      ")
            for e in spread.evidence
        )
    lines += [
        "",
        wrap_text(
            "Recipe drift (re-runs by another team that changed the recipe: never pooled into sigma_rep; "
            "comparability must catch what they show):",
            WIDTH,
        ),
    ]
    lines.extend(
        wrap_text(
            f"  {e.benchmark} {e.measure}: {e.variance**0.5 * 2**0.5:.2f} points apart - {e.source}", WIDTH, "    "
        )
        for e in recipe_drift()
    )
    return "\n".join(lines)
