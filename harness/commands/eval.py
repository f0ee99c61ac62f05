"""`python -m harness eval`: score a TREC run file with a benchmark's official conventions.

    python -m harness eval --run run.dl19.trec --benchmark dl19 --json out/dl19.json --per-query

The run source is a mutually exclusive group so that other sources (a fine-tuned model
to encode and search with, ``--model PATH --dataset D``) can join it later: add the
option to ``_source_group`` and a branch to ``_load_run``.

cqadupstack (mean of 12 forums): ``--run`` is either a folder holding one run file per
forum (file name starting with ``cqadupstack-<forum>`` or ``<forum>``), or one file whose
query ids are written ``<forum>/<qid>`` (forum ids collide across forums).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from harness.commands._output import format_table, write_json
from harness.errors import HarnessError


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "eval", help="evaluate a TREC run file with a benchmark's official measures",
        epilog="example: python -m harness eval --run runs/dl19.trec --benchmark dl19 --json out/dl19.json --per-query",
        description=("Evaluate a run with the papers' conventions for the benchmark: MS MARCO dev RR@10/R@50/"
                     "R@100/R@1000; TREC DL nDCG@10 (+ R and RR at grade >= 2) over judged queries; BEIR "
                     "nDCG@10/R@100 with doc id == query id hits dropped; cqadupstack as the mean of 12 forums. "
                     "Judged queries missing from the run score 0."))
    _source_group(p)
    p.add_argument("--benchmark", required=True, metavar="NAME",
                   help="benchmark whose qrels and conventions to use (see `python -m harness ls benchmarks`)")
    p.add_argument("--split", default=None,
                   help="qrels split (default: the benchmark's evaluation split, e.g. 'dev' for msmarco-dev)")
    p.add_argument("--qrels", metavar="FILE", default=None,
                   help="evaluate against this qrels file (TREC or BEIR tsv) instead of the benchmark's; "
                        "the benchmark still chooses the conventions (cqadupstack: query ids <forum>/<qid>)")
    p.add_argument("--measure", action="append", default=None, metavar="M",
                   help="ir-measures measure to compute instead of the official ones (repeatable), e.g. AP")
    p.add_argument("--json", metavar="PATH", help="write a machine-readable summary")
    p.add_argument("--per-query", nargs="?", const="auto", default=None, metavar="PATH",
                   help="write per-query scores (TSV: measure, query_id, value) to PATH, or next to --json "
                        "(<json>.per_query.tsv) / the run file when no PATH is given")
    p.set_defaults(func=_eval)


def _source_group(p: argparse.ArgumentParser) -> argparse._MutuallyExclusiveGroup:
    """Where the ranking comes from (exactly one). Future: --model PATH (with --dataset D)."""
    group = p.add_mutually_exclusive_group(required=True)
    group.add_argument("--run", metavar="FILE",
                       help="TREC run file (qid Q0 docid rank score tag); for cqadupstack also a folder holding "
                            "one run file per forum (cqadupstack-android.trec or android.trec, ...)")
    return group


# ---------------------------------------------------------------------------- loading

def _load_run(args: argparse.Namespace, benchmark: Any) -> dict[str, dict[str, float]]:
    """The run to evaluate, from whichever source option was given."""
    if args.run is not None:
        return _read_run_source(Path(args.run), benchmark)
    raise HarnessError("no run source given (use --run FILE)")  # unreachable: the group is required


def _read_run_source(path: Path, benchmark: Any) -> dict[str, dict[str, float]]:
    from harness.data.formats import read_trec_run
    from harness.evaluation.measures import merge_subsets, normalise_subset_ids

    subs = benchmark.sub_benchmarks()
    if path.is_dir():
        if not subs:
            raise HarnessError(f"--run {path} is a folder; give a run file (folders are for cqadupstack's forums)")
        parts = {}
        for sub in subs:
            files = _forum_files(path, sub.name)
            if len(files) > 1:
                raise HarnessError(f"{path}: several run files for {sub.name}: {', '.join(f.name for f in files)}")
            if files:
                parts[sub.name] = read_trec_run(files[0])
        if not parts:
            raise HarnessError(f"{path}: no run file named after any {benchmark.name} forum "
                               f"(expected e.g. {subs[0].name}.trec)")
        return merge_subsets(parts)
    run = read_trec_run(path)
    if not run:
        raise HarnessError(f"{path}: the run file has no entries")
    return normalise_subset_ids(run, benchmark.name) if subs else run


def _forum_files(folder: Path, sub_name: str) -> list[Path]:
    short = sub_name.split("-", 1)[-1]
    return sorted(f for f in folder.iterdir()
                  if f.is_file() and f.name.split(".", 1)[0] in (sub_name, short))


def _load_qrels(args: argparse.Namespace, benchmark: Any) -> tuple[dict[str, dict[str, int]], str]:
    from harness.evaluation.measures import benchmark_qrels

    if args.qrels:
        from harness.data.formats import read_qrels
        from harness.evaluation.measures import normalise_subset_ids

        qrels = read_qrels(args.qrels)
        if benchmark.sub_benchmarks():
            qrels = normalise_subset_ids(qrels, benchmark.name)
        return qrels, str(args.qrels)
    split = args.split
    return benchmark_qrels(benchmark, split), f"{benchmark.name} ({split or benchmark.eval_split})"


# ---------------------------------------------------------------------------- command

def _eval(args: argparse.Namespace) -> int:
    from harness.data.catalog import get_benchmark
    from harness.evaluation.measures import evaluate

    benchmark = get_benchmark(args.benchmark)
    if args.qrels and args.split:
        raise HarnessError("--split selects the benchmark's own qrels; it cannot be combined with --qrels")
    qrels, qrels_source = _load_qrels(args, benchmark)
    run = _load_run(args, benchmark)
    overlap = sum(1 for qid in run if qid in qrels)
    if overlap == 0:
        hint = (" (cqadupstack query ids are written <forum>/<qid>, e.g. android/11546; or give a folder "
                "of per-forum run files)") if benchmark.sub_benchmarks() else ""
        raise HarnessError(f"none of the run's {len(run)} queries has qrels in {qrels_source}: "
                           f"wrong --benchmark or --split, or query ids written differently?{hint}")
    result = evaluate(run, qrels, benchmark, args.measure)

    _print_result(result, qrels_source, unjudged=len(run) - overlap)
    per_query_file = _write_per_query(args, result) if args.per_query else None
    if args.json:
        split = None if args.qrels else (args.split or benchmark.eval_split)
        write_json(args.json, _summary(args, result, split, qrels_source, per_query_file))
    return 0


def _print_result(result: Any, qrels_source: str, unjudged: int) -> None:
    covered = result.num_queries - len(result.missing_queries)
    print(f"{result.benchmark}: qrels {qrels_source}; {result.num_queries} judged queries, run ranks {covered}")
    rows = [[m + (" *" if m == result.primary else ""), f"{v:.4f}", f"{100 * v:.2f}"]
            for m, v in result.aggregate.items()]
    print(format_table(["measure", "value", "points"], rows))
    if result.subsets:
        print()
        measures = list(result.measures)
        rows = [[name, r.num_queries, *(f"{r.aggregate[m]:.4f}" for m in measures)]
                for name, r in result.subsets.items()]
        print(format_table(["subset", "queries", *measures], rows))
        print(f"{result.benchmark} = unweighted mean of the {len(result.subsets)} subset means")
    if result.primary:
        print("* primary measure")
    if result.missing_queries:
        print(f"warning: {len(result.missing_queries)} judged queries have no ranking in the run; they score 0",
              file=sys.stderr)
    if unjudged:
        print(f"note: {unjudged} run queries have no qrels and are ignored", file=sys.stderr)
    if result.dropped_self_hits:
        print(f"note: dropped {result.dropped_self_hits} hits whose doc id equals the query id (BEIR convention)",
              file=sys.stderr)


def _per_query_path(args: argparse.Namespace) -> Path:
    if args.per_query != "auto":
        return Path(args.per_query)
    if args.json:
        json_path = Path(args.json)
        return json_path.with_name(json_path.stem + ".per_query.tsv")
    run = Path(args.run)
    return (run / f"{args.benchmark}.per_query.tsv") if run.is_dir() else run.with_name(
        f"{run.name}.{args.benchmark}.per_query.tsv")


def _write_per_query(args: argparse.Namespace, result: Any) -> str:
    path = _per_query_path(args)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8", newline="\n") as fh:
        fh.write("measure\tquery_id\tvalue\n")
        for measure, values in result.per_query.items():
            for qid, value in values.items():
                fh.write(f"{measure}\t{qid}\t{value!r}\n")
    tmp.replace(path)
    print(f"wrote {path}")
    return str(path)


def _summary(args: argparse.Namespace, result: Any, split: str | None, qrels_source: str,
             per_query_file: str | None) -> dict:
    metrics = {result.benchmark: dict(result.aggregate)}
    metrics.update({name: dict(r.aggregate) for name, r in result.subsets.items()})
    return {
        "command": "eval",
        "benchmark": result.benchmark,
        "split": split,
        "run": str(args.run),
        "qrels": qrels_source,
        "primary": result.primary,
        "metrics": metrics,
        "num_queries": result.num_queries,
        "missing_queries": len(result.missing_queries),
        "dropped_self_hits": result.dropped_self_hits,
        "subsets": list(result.subsets),
        "per_query_file": per_query_file,
    }
