"""`python -m harness ls`: list methods and benchmarks."""

from __future__ import annotations

import argparse

from harness.commands._output import add_wide
from harness.core.text_table import format_table
from harness.data.catalog import get_benchmark, list_benchmarks
from harness.pretrain.objectives import objectives
from harness.spec.files import list_methods
from harness.spec.method import load_method, profiles_of
from harness.stages.graph import outline


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "ls",
        help="list methods, benchmarks, objectives or the stage graph",
        description="List the method specs in baselines/ and the benchmarks the harness evaluates; "
        "`ls objectives` the registered pre-training objectives with their parameters; "
        "`ls stages` the declared stage graph (harness/stages/graph.py).",
    )
    p.add_argument("what", nargs="?", choices=["methods", "benchmarks", "objectives", "stages", "all"], default="all")
    add_wide(p)
    p.set_defaults(func=_ls)


def _ls(args: argparse.Namespace) -> int:
    if args.what == "stages":
        print(outline())
        return 0
    if args.what == "objectives":
        rows = [
            [name, ", ".join(d.losses), ", ".join(f"{k}={p.default!r}" for k, p in d.params.items()), d.module]
            for name, d in sorted(objectives().items())
        ]
        print(format_table(["objective", "losses", "parameters (defaults)", "module"], rows))
        return 0

    if args.what in ("methods", "all"):
        rows = []
        for name in list_methods():
            profiles = profiles_of(name)
            spec = load_method(name, "paper" if "paper" in profiles else profiles[0])
            rows.append([name, spec.get("family"), ",".join(profiles), spec.get("description")])
        print(format_table(["method", "family", "profiles", "description"], rows))
    if args.what == "all":
        print()
    if args.what in ("benchmarks", "all"):
        rows = []
        for name in list_benchmarks():
            b = get_benchmark(name)
            rows.append([name, b.kind, "embedded" if b.has_corpus() else "download", ",".join(b.splits())])
        print(format_table(["benchmark", "kind", "corpus", "splits"], rows))
    return 0
