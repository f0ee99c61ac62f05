"""`python -m harness eval`: score a TREC run file, or a model zero-shot, with a benchmark's official conventions.

    python -m harness eval --run run.dl19.trec --benchmark dl19 --json out/dl19.json --per-query
    python -m harness eval --model models/Luyu/co-condenser-marco-retriever --dataset scifact --json out.json

The ranking comes from one source (a mutually exclusive group): ``--run FILE``, or
``--model PATH``, a local Hugging Face or sentence-transformers folder that is encoded,
searched exactly with faiss and scored (:mod:`harness.evaluation.zero_shot`; pooling,
normalisation and lengths come from the folder unless given). ``--dataset`` is another
spelling of ``--benchmark``. Options that only make sense for a model are refused with
``--run``.

cqadupstack (mean of 12 forums): ``--run`` is either a folder holding one run file per
forum (file name starting with ``cqadupstack-<forum>`` or ``<forum>``), or one file whose
query ids are written ``<forum>/<qid>`` (forum ids collide across forums).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from harness.commands._output import json_target, write_json
from harness.core.errors import HarnessError
from harness.core.fsutil import atomic_path, is_temp
from harness.core.text_table import format_table
from harness.data.catalog import get_benchmark
from harness.data.formats import read_qrels, read_trec_run
from harness.evaluation.measures import (
    benchmark_qrels,
    evaluate,
    merge_subsets,
    normalise_subset_ids,
)
from harness.evaluation.zero_shot import run_zero_shot, summary_line

_EPILOG = """examples:
  python -m harness eval --run runs/dl19.trec --benchmark dl19 --json out/dl19.json --per-query
  python -m harness eval --model models/Luyu/co-condenser-marco-retriever --dataset scifact --json out/cc.json
  python -m harness eval --model path/to/all-MiniLM-L6-v2 --dataset nfcorpus --pooling mean --normalize"""

# --model options: (dest, flag) pairs refused with --run, and their defaults.
_MODEL_OPTIONS = {
    "pooling": "--pooling",
    "normalize": "--normalize/--no-normalize",
    "query_max_length": "--query-max-length",
    "passage_max_length": "--passage-max-length",
    "batch_size": "--batch-size",
    "depth": "--depth",
    "save_run": "--save-run",
    "device": "--device",
    "precision": "--precision",
    "no_cache": "--no-cache",
    "no_track": "--no-track",
}
_MODEL_DEFAULTS = {"batch_size": 32, "depth": 1000, "precision": "fp32", "no_cache": False, "no_track": False}


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "eval",
        help="evaluate a TREC run file, or a model zero-shot, with a benchmark's official measures",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(
            "Evaluate a run with the papers' conventions for the benchmark: MS MARCO dev RR@10/R@50/"
            "R@100/R@1000; TREC DL nDCG@10 (+ R and RR at grade >= 2) over judged queries; BEIR "
            "nDCG@10/R@100 with doc id == query id hits dropped; cqadupstack as the mean of 12 forums. "
            "Judged queries missing from the run score 0. With --model, the benchmark's corpus and "
            "judged queries are encoded and searched first (zero-shot)."
        ),
    )
    _source_group(p)
    p.add_argument(
        "--benchmark",
        "--dataset",
        dest="benchmark",
        required=True,
        metavar="NAME",
        help="benchmark whose qrels and conventions to use (see `python -m harness ls benchmarks`); "
        "--dataset is the same option",
    )
    p.add_argument(
        "--split",
        default=None,
        help="qrels split (default: the benchmark's evaluation split, e.g. 'dev' for msmarco-dev)",
    )
    p.add_argument(
        "--qrels",
        metavar="FILE",
        default=None,
        help="evaluate against this qrels file (TREC or BEIR tsv) instead of the benchmark's; "
        "the benchmark still chooses the conventions (cqadupstack: query ids <forum>/<qid>)",
    )
    p.add_argument(
        "--measure",
        action="append",
        default=None,
        metavar="M",
        help="ir-measures measure to compute instead of the official ones (repeatable), e.g. AP",
    )
    p.add_argument("--json", metavar="PATH", help="write a machine-readable summary")
    p.add_argument(
        "--per-query",
        nargs="?",
        const="auto",
        default=None,
        metavar="PATH",
        help="write per-query scores (TSV: measure, query_id, value) to PATH, or next to --json "
        "(<json>.per_query.tsv) / the run file when no PATH is given (with --model: next to --save-run, "
        "else <model folder name>.<benchmark>.per_query.tsv)",
    )
    _model_options(p)
    p.set_defaults(func=_eval)


def _model_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("with --model (zero-shot evaluation of a checkpoint)")
    g.add_argument(
        "--pooling",
        choices=["cls", "mean"],
        default=None,
        help="override the folder's pooling (default: sentence-transformers Pooling config, "
        "harness_encoder.json, else CLS as Tevatron)",
    )
    g.add_argument(
        "--normalize",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="L2-normalise vectors (cosine) or not (dot product); default: the folder's own "
        "(a Normalize module), else not",
    )
    g.add_argument(
        "--query-max-length",
        type=int,
        default=None,
        metavar="N",
        help="query tokens kept (default: the folder's own, e.g. sentence-transformers max_seq_length, else 32)",
    )
    g.add_argument(
        "--passage-max-length",
        type=int,
        default=None,
        metavar="N",
        help="passage tokens kept (default: the folder's own, else 144)",
    )
    g.add_argument(
        "--batch-size",
        type=int,
        default=_MODEL_DEFAULTS["batch_size"],
        metavar="N",
        help="encoding batch size (default: %(default)s)",
    )
    g.add_argument(
        "--depth",
        type=int,
        default=_MODEL_DEFAULTS["depth"],
        metavar="K",
        help="documents retrieved per query (default: %(default)s; BEIR: after dropping self-hits)",
    )
    g.add_argument("--save-run", metavar="PATH", default=None, help="write the TREC run that was scored")
    g.add_argument("--device", default=None, help="torch device (default: cuda if available, else cpu)")
    g.add_argument(
        "--precision",
        choices=["fp32", "fp16", "bf16"],
        default=_MODEL_DEFAULTS["precision"],
        help="encoding precision: fp16 on CUDA; bf16 on CUDA or a CPU whose torch computes bf16 (default: %(default)s)",
    )
    g.add_argument(
        "--no-cache",
        action="store_true",
        help="encode the corpus even if its embeddings are cached (and do not cache them)",
    )
    g.add_argument("--no-track", action="store_true", help="do not log to MLflow")


def _source_group(p: argparse.ArgumentParser) -> argparse._MutuallyExclusiveGroup:
    """Where the ranking comes from (exactly one)."""
    group = p.add_mutually_exclusive_group(required=True)
    group.add_argument(
        "--run",
        metavar="FILE",
        help="TREC run file (qid Q0 docid rank score tag); for cqadupstack also a folder holding "
        "one run file per forum (cqadupstack-android.trec or android.trec, ...)",
    )
    group.add_argument(
        "--model",
        metavar="PATH",
        help="local Hugging Face or sentence-transformers folder to evaluate zero-shot, or a "
        "published name (e.g. Luyu/co-condenser-marco-retriever) kept under models/<name> "
        "or $HARNESS_MODELS_DIR/<name>",
    )
    return group


# ---------------------------------------------------------------------------- loading


def _load_run(args: argparse.Namespace, benchmark: Any) -> dict[str, dict[str, float]]:
    """The run to evaluate, from whichever source option was given."""
    if args.run is not None:
        return _read_run_source(Path(args.run), benchmark)
    raise HarnessError("no run source given (use --run FILE or --model PATH)")  # --model goes to _eval_model


def _read_run_source(path: Path, benchmark: Any) -> dict[str, dict[str, float]]:
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
            raise HarnessError(
                f"{path}: no run file named after any {benchmark.name} forum (expected e.g. {subs[0].name}.trec)"
            )
        return merge_subsets(parts)
    run = read_trec_run(path)
    if not run:
        raise HarnessError(f"{path}: the run file has no entries")
    return normalise_subset_ids(run, benchmark.name) if subs else run


def _forum_files(folder: Path, sub_name: str) -> list[Path]:
    short = sub_name.split("-", 1)[-1]
    return sorted(
        f for f in folder.iterdir() if f.is_file() and not is_temp(f) and f.name.split(".", 1)[0] in (sub_name, short)
    )


def _load_qrels(args: argparse.Namespace, benchmark: Any) -> tuple[dict[str, dict[str, int]], str]:
    if args.qrels:
        qrels = read_qrels(args.qrels)
        if benchmark.sub_benchmarks():
            qrels = normalise_subset_ids(qrels, benchmark.name)
        return qrels, str(args.qrels)
    split = args.split
    return benchmark_qrels(benchmark, split), f"{benchmark.name} ({split or benchmark.eval_split})"


# ---------------------------------------------------------------------------- command


def _eval(args: argparse.Namespace) -> int:
    json_target(args.json)  # before encoding or scoring, not after
    if getattr(args, "model", None) is not None:
        return _eval_model(args)
    _refuse_model_options(args)
    benchmark = get_benchmark(args.benchmark)
    if args.qrels and args.split:
        raise HarnessError("--split selects the benchmark's own qrels; it cannot be combined with --qrels")
    qrels, qrels_source = _load_qrels(args, benchmark)
    run = _load_run(args, benchmark)
    overlap = sum(1 for qid in run if qid in qrels)
    if overlap == 0:
        hint = (
            (
                " (cqadupstack query ids are written <forum>/<qid>, e.g. android/11546; or give a folder "
                "of per-forum run files)"
            )
            if benchmark.sub_benchmarks()
            else ""
        )
        raise HarnessError(
            f"none of the run's {len(run)} queries has qrels in {qrels_source}: "
            f"wrong --benchmark or --split, or query ids written differently?{hint}"
        )
    result = evaluate(run, qrels, benchmark, args.measure)

    _print_result(result, qrels_source, unjudged=len(run) - overlap)
    per_query_file = _write_per_query(args, result) if args.per_query else None
    if args.json:
        split = None if args.qrels else (args.split or benchmark.eval_split)
        write_json(args.json, _summary(args, result, split, qrels_source, per_query_file))
    return 0


def _refuse_model_options(args: argparse.Namespace) -> None:
    given = [
        flag
        for dest, flag in _MODEL_OPTIONS.items()
        if hasattr(args, dest) and getattr(args, dest) != _MODEL_DEFAULTS.get(dest)
    ]
    if given:
        raise HarnessError(f"{', '.join(given)} only apply with --model PATH (a run file is already ranked)")


def _eval_model(args: argparse.Namespace) -> int:
    """--model PATH: encode, search and score zero-shot (harness.evaluation.zero_shot)."""

    if args.qrels:
        raise HarnessError(
            "--qrels cannot be combined with --model: the queries to encode come from the "
            "benchmark; use --split to pick its qrels, or --save-run and then --run with --qrels"
        )
    outcome = run_zero_shot(
        args.model,
        args.benchmark,
        pooling=args.pooling,
        normalize=args.normalize,
        query_max_length=args.query_max_length,
        passage_max_length=args.passage_max_length,
        batch_size=args.batch_size,
        depth=args.depth,
        split=args.split,
        measures=args.measure,
        save_run=args.save_run,
        device=args.device,
        precision=args.precision,
        use_cache=not args.no_cache,
        track=not args.no_track,
    )
    summary, result = outcome.summary, outcome.result
    _print_result(result, summary["qrels"], unjudged=0)
    _print_encoder(summary)
    if args.save_run:
        print(f"wrote {args.save_run}")
    per_query_file = _write_per_query(args, result) if args.per_query else None
    print(summary_line(summary))
    if args.json:
        write_json(args.json, {**summary, "per_query_file": per_query_file})
    return 0


def _print_encoder(summary: dict[str, Any]) -> None:
    enc, eff = summary["encoder"], summary["efficiency"]
    src = enc["sources"]
    print(
        f"encoder: {summary['model']} ({enc['format']}); pooling {enc['pooling']} [{src.get('pooling')}]; "
        f"normalise {enc['normalize']} [{src.get('normalize')}]; query max length {enc['query_max_length']} "
        f"[{src.get('query_max_length')}]; passage max length {enc['passage_max_length']} "
        f"[{src.get('passage_max_length')}]"
    )
    encode = (
        "cached"
        if eff["corpus_embeddings_cached"] is True
        else f"{eff['corpus_encode_seconds']:.1f}s ({eff['passages_per_second']} passages/s)"
    )
    print(
        f"efficiency: {eff['docs']:,} docs x {eff['dim']} dims, index {eff['index_bytes']:,} bytes; corpus "
        f"encoding {encode}; {eff['queries']:,} queries encoded in {eff['query_encode_seconds']:.2f}s, searched "
        f"at {eff['qps']} q/s (top {summary['depth']}) on {eff['device']}"
    )


def _print_result(result: Any, qrels_source: str, unjudged: int) -> None:
    covered = result.num_queries - len(result.missing_queries)
    print(f"{result.benchmark}: qrels {qrels_source}; {result.num_queries} judged queries, run ranks {covered}")
    rows = [
        [m + (" *" if m == result.primary else ""), f"{v:.4f}", f"{100 * v:.2f}"] for m, v in result.aggregate.items()
    ]
    print(format_table(["measure", "value", "points"], rows))
    if result.subsets:
        print()
        measures = list(result.measures)
        rows = [
            [name, r.num_queries, *(f"{r.aggregate[m]:.4f}" for m in measures)] for name, r in result.subsets.items()
        ]
        print(format_table(["subset", "queries", *measures], rows))
        print(f"{result.benchmark} = unweighted mean of the {len(result.subsets)} subset means")
    if result.primary:
        print("* primary measure")
    if result.missing_queries:
        print(
            f"warning: {len(result.missing_queries)} judged queries have no ranking in the run; they score 0",
            file=sys.stderr,
        )
    if unjudged:
        print(f"note: {unjudged} run queries have no qrels and are ignored", file=sys.stderr)
    if result.dropped_self_hits:
        print(
            f"note: dropped {result.dropped_self_hits} hits whose doc id equals the query id (BEIR convention)",
            file=sys.stderr,
        )


def _per_query_path(args: argparse.Namespace) -> Path:
    if args.per_query != "auto":
        return Path(args.per_query)
    if args.json:
        json_path = Path(args.json)
        return json_path.with_name(json_path.stem + ".per_query.tsv")
    if getattr(args, "model", None) is not None:
        if args.save_run:
            return Path(args.save_run).with_name(f"{Path(args.save_run).name}.{args.benchmark}.per_query.tsv")
        return Path(f"{Path(args.model).name or 'model'}.{args.benchmark}.per_query.tsv")
    run = Path(args.run)
    return (
        (run / f"{args.benchmark}.per_query.tsv")
        if run.is_dir()
        else run.with_name(f"{run.name}.{args.benchmark}.per_query.tsv")
    )


def _write_per_query(args: argparse.Namespace, result: Any) -> str:
    path = _per_query_path(args)
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8", newline="\n") as fh:
        fh.write("measure\tquery_id\tvalue\n")
        for measure, values in result.per_query.items():
            for qid, value in values.items():
                fh.write(f"{measure}\t{qid}\t{value!r}\n")
    print(f"wrote {path}")
    return str(path)


def _summary(
    args: argparse.Namespace, result: Any, split: str | None, qrels_source: str, per_query_file: str | None
) -> dict:
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
