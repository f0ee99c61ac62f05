"""`python -m harness reproduce`: score a released checkpoint and compare it with the papers (harness/run/reproduce.py)."""

from __future__ import annotations

import argparse

from harness.commands._output import name_list, write_json
from harness.core.errors import HarnessError
from harness.core.points import fmt
from harness.core.statuses import NOT_COMPARABLE
from harness.core.text_table import format_table
from harness.evaluation.chance import describe
from harness.evaluation.compare import Comparison, format_comparison_table
from harness.papers.released import load_checkpoints
from harness.records.run_record import RunRecord
from harness.records.tracker import tracking_line
from harness.run.reproduce import reproduce_checkpoint

_EPILOG = """examples:
  python -m harness reproduce --list
  python -m harness reproduce --checkpoint co-condenser-marco-retriever
  python -m harness reproduce --checkpoint cotmae-msmarco-retriever --benchmark dl19,dl20
  torchrun --nproc_per_node 8 -m harness reproduce --checkpoint co-condenser-marco-retriever
      (every rank encodes its shards of each corpus, resumably; rank 0 searches, scores, records)

weights: models/<source> or $HARNESS_MODELS_DIR/<source> (a Hugging Face folder), or the Hub
with HF_HUB_OFFLINE=0; corpora: the download path, or HARNESS_DATA_MIRROR."""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "reproduce",
        help="score a released checkpoint on the benchmarks of its reported cells and grade it",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(
            "Encode, search (exact, faiss) and score a released checkpoint from baselines/released/checkpoints.yaml "
            "(HARNESS_CHECKPOINTS names another registry) with the authors' pooling, similarity and lengths; "
            "grade it against the cells whose row is that checkpoint (same weights, same queries: an exact Anserini-style tolerance, REPRODUCED or DIFFERENT), list the "
            "method's other cells as NOT-COMPARABLE with the reason, log to MLflow and write a run record "
            "(profile 'checkpoint') that `check` gates and the leaderboard shows."
        ),
    )
    p.add_argument("--checkpoint", metavar="NAME", help="registry name (see --list)")
    p.add_argument(
        "--list", action="store_true", help="list the registry: checkpoints, their cells, and what is unreleased"
    )
    p.add_argument(
        "--benchmark",
        "--dataset",
        dest="benchmark",
        metavar="NAMES",
        default=None,
        help="comma-separated benchmarks (default: the checkpoint's, e.g. msmarco-dev,dl19,dl20)",
    )
    p.add_argument("--batch-size", type=int, default=32, metavar="N", help="encoding batch size (default: %(default)s)")
    p.add_argument(
        "--depth", type=int, default=1000, metavar="K", help="documents retrieved per query (default: %(default)s)"
    )
    p.add_argument("--device", default=None, help="torch device (default: cuda if available, else cpu)")
    p.add_argument(
        "--precision",
        choices=["fp32", "fp16", "bf16"],
        default="fp32",
        help="encoding precision: fp16 on CUDA; bf16 on CUDA or a CPU whose torch computes bf16 (default: %(default)s)",
    )
    p.add_argument("--no-cache", action="store_true", help="encode corpora even if their embeddings are cached")
    p.add_argument("--no-track", action="store_true", help="do not log to MLflow")
    p.add_argument(
        "--reported",
        metavar="JSON",
        default=None,
        help="compare with a JSON snapshot of reported cells instead of baselines/reported/",
    )
    p.add_argument("--json", metavar="PATH", help="write the run record's summary as JSON")
    p.set_defaults(func=_reproduce)


def _list() -> int:
    registry = load_checkpoints()
    rows = [
        [
            c.name,
            c.kind,
            c.method or "-",
            c.source,
            ", ".join(c.benchmarks) or "-",
            "; ".join(f"{p} {t} · {r}" for p, t, r in c.reproduces) or "-",
        ]
        for c in registry.checkpoints.values()
    ]
    print(format_table(["checkpoint", "kind", "method", "source", "benchmarks", "reproduces"], rows))
    for method, why in registry.unreleased.items():
        print(f"{method}: {why}")
    print(f"registry: {registry.path}")
    return 0


def _reproduce(args: argparse.Namespace) -> int:
    if args.list:
        if args.checkpoint:  # it would be silently ignored
            raise HarnessError("--list lists every released checkpoint; give it without --checkpoint")
        return _list()
    if not args.checkpoint:
        raise HarnessError("give --checkpoint NAME (python -m harness reproduce --list shows the names)")

    benchmarks = name_list(args.benchmark, "--benchmark")
    record = reproduce_checkpoint(
        args.checkpoint,
        benchmarks,
        batch_size=args.batch_size,
        depth=args.depth,
        device=args.device,
        precision=args.precision,
        use_cache=not args.no_cache,
        track=not args.no_track,
        reported=args.reported,
    )
    if record is None:  # a torchrun rank other than 0: it encoded its shards
        return 0
    comps = [Comparison(**c) for c in record.comparison]
    print()
    print(
        format_comparison_table(comps)
        if comps
        else "(no reported cell for this checkpoint's method on these benchmarks)"
    )
    for name, check in record.chance.items():
        print(describe(name, check, record.metrics[name][check["measure"]]))
    print(summary_line(record))
    if args.json:
        body = {k: v for k, v in record.to_json().items() if k != "per_query"}
        write_json(args.json, {**body, "run_record": str(record.path)})
    return 0


def summary_line(record: RunRecord) -> str:
    graded = [c for c in record.comparison if c["status"] != NOT_COMPARABLE]
    counts: dict[str, int] = {}
    for c in graded:
        counts[c["status"]] = counts.get(c["status"], 0) + 1
    verdict = ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "no comparable cell"
    scores = "; ".join(
        f"{b} {next(iter(m))} {fmt(100 * next(iter(m.values())))} points" for b, m in record.metrics.items()
    )
    where = tracking_line(record.mlflow, with_uri=False)
    return (
        f"{(record.checkpoint or {}).get('name')} [released checkpoint]: {scores}; vs the papers: {verdict} "
        f"in {record.seconds}s -- record {record.path}; {where}"
    )
