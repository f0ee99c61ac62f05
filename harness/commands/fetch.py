"""`python -m harness fetch`: download (and verify) the data files and checkpoints a run needs, ahead of it."""

from __future__ import annotations

import argparse

from harness.core.errors import HarnessError, UnknownNameError
from harness.core.text_table import format_table
from harness.data import download, models
from harness.data.setting import data_setting
from harness.run import preflight
from harness.run.runner import plan_method
from harness.spec.method import load_method


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "fetch",
        help="download and verify data files (or a checkpoint) ahead of a run",
        description=(
            "Download registered data files (`fetch --list` names them; a run's --dry-run lists the ones it "
            "lacks) into the cache, verified against the publisher's checksum where one is published (else "
            "the sha256 of the first download is recorded and checked afterwards). An interrupted download "
            "continues where it stopped. HARNESS_DATA_MIRROR replaces every publisher's base URL by a folder "
            "or URL holding the same file names. `--model NAME` downloads a checkpoint into models/NAME at the "
            "revision harness/data/models.yaml pins, each file checked against its pinned sha256 (else the first "
            "download's is recorded: trust on first use); HARNESS_MODEL_MIRROR: a folder or URL holding "
            "NAME/<files> instead of the Hugging Face Hub. `--method M [--profile P]` fetches every input that "
            "run's plan reads (`--list`/`--dry-run`: only list them; `run` refuses to start while one is missing)."
        ),
    )
    p.add_argument("names", nargs="*", metavar="NAME", help="download names (see --list)")
    p.add_argument("--list", action="store_true", help="list the registered downloads and whether each is here")
    p.add_argument("--dry-run", action="store_true", help="with --method: list what it would fetch, download nothing")
    p.add_argument(
        "--model",
        action="append",
        default=[],
        metavar="NAME",
        help="a checkpoint to download into models/NAME at its pinned revision (harness/data/models.yaml; repeatable)",
    )
    p.add_argument("--method", help="every input a run of this method reads: its data files and checkpoints")
    p.add_argument("--profile", default="paper", help="with --method: the profile whose plan is read (default paper)")
    p.set_defaults(func=_fetch)


def _fetch(args: argparse.Namespace) -> int:
    if args.method:
        return _fetch_plan(args.method, args.profile, show_only=args.list or args.dry_run)
    if args.list or not (args.names or args.model):
        rows = []
        for key, src in download.SOURCES.items():
            try:
                md5, sha256 = src.expected()
            except HarnessError:  # a fixture mirror that does not hold this file
                rows.append([key, src.filename, "missing (not on the fixture mirror)", "-"])
                continue
            check = "sha256" if sha256 else "md5" if md5 else "recorded sha256 (unpinned)"
            rows.append([key, src.filename, "here" if download.available(key) else "missing", check])
        for name, pin in models.registry().items():
            rows.append(
                [f"--model {name}", pin.repo or "-", "missing" if models.problem(name) else "here", pin.verified_by()]
            )
        print(format_table(["name", "file", "status", "verified by"], rows))
        return 0
    for key in args.names:
        if key not in download.SOURCES:
            raise UnknownNameError("download", key, list(download.SOURCES))
    for key in args.names:
        path = download.fetch_source(key)
        print(f"fetch: {key} -> {path} (verified)")
    for name in args.model:
        print(f"fetch: model {name} -> {models.fetch_model(name)} (verified)")
    return 0


def _fetch_plan(method: str, profile: str, show_only: bool) -> int:
    """`fetch --method M --profile P`: every input of that run's plan (the preflight's), listed or fetched."""
    spec = load_method(method, profile)
    datasets = list(spec.get("datasets", []))
    with data_setting(spec):
        ctx = plan_method(spec, datasets)
        inputs = preflight.plan_inputs(spec, datasets, ctx)
        if show_only:
            rows = [[i.kind, i.name, "missing" if i.problem else "here", i.verified_by] for i in inputs]
            print(f"inputs of {method} [{profile}] ({len(inputs)}):")
            print(format_table(["kind", "name", "status", "verified by"], rows))
            lines = preflight.problems(spec, datasets, ctx)
            print(f"missing or mismatched ({len(lines)}; what `run` refuses to start for):")
            print("\n".join(f"  ! {line}" for line in lines) if lines else "  (none)")
            return 0
        failed = []
        for item in inputs:
            if not item.problem:
                continue
            try:
                where = download.fetch_source(item.name) if item.kind == "data" else models.fetch_model(item.name)
                print(f"fetch: {item.kind} {item.name} -> {where} (verified)")
            except HarnessError as exc:  # one input that cannot be fetched must not keep the others from coming
                failed.append(f"{item.name}: {exc}")
    if failed:
        raise HarnessError(f"{len(failed)} input(s) could not be fetched:\n" + "\n".join(f"  ! {f}" for f in failed))
    return 0
