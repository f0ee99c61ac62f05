"""`python -m harness fetch`: download (and verify) the data files and checkpoints a run needs, ahead of it."""

from __future__ import annotations

import argparse

from harness.core import benchmarks
from harness.core.errors import HarnessError, UnknownNameError
from harness.core.text_table import format_table
from harness.data import download, embedded
from harness.data.setting import data_setting
from harness.papers import model_pins as models
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
            "revision harness/papers/model_pins.yaml pins, each file checked against its pinned sha256 (else the first "
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
        help="a checkpoint to download into models/NAME at its pinned revision (harness/papers/model_pins.yaml; repeatable)",
    )
    p.add_argument("--method", help="every input a run of this method reads: its data files and checkpoints")
    p.add_argument("--profile", default="paper", help="with --method: the profile whose plan is read (default paper)")
    p.set_defaults(func=_fetch)


def _fetch(args: argparse.Namespace) -> int:
    if args.method:
        return _fetch_plan(args.method, args.profile, show_only=args.list or args.dry_run)
    if args.list or not (args.names or args.model):
        print(download_list())
        rows = [
            [f"--model {name}", pin.repo or "-", "missing" if models.problem(name) else "here", pin.verified_by()]
            for name, pin in models.registry().items()
        ]
        print(format_table(["model", "repository", "status", "verified by"], rows))
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


def _size(n: int | None) -> str:
    """Bytes as a person reads them: "6.7 kB", "1.2 GB"; "-" when unknown."""
    if n is None:
        return "-"
    value, unit = float(n), "B"
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if value < 1000 or unit == "TB":
            break
        value /= 1000
    return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"


def _embedded(key: str) -> tuple[list[str], int]:
    """The parts of a download's dataset stored in the package (harness/data/embedded) and their bytes."""
    kind, _, name = key.partition("/")
    decl = benchmarks.find(name)
    if decl is None or decl.kind != kind or not decl.embedded:
        return [], 0
    stored = sum(int(e.get("bytes", 0)) for path, e in embedded.manifest().items() if path.startswith(f"{key}/"))
    return sorted({part.split("/")[0] for part in decl.embedded}), stored


def download_list() -> str:
    """Every registered download: whether it is here (or embedded, so never needed), its size, its check;
    then the total still to download (published sizes) and how many have no published size."""
    rows, needed, unknown = [], 0, 0
    for key, src in download.SOURCES.items():
        parts, stored = _embedded(key)
        whole = {"corpus", "queries", "qrels"} <= set(parts)
        try:
            md5, sha256 = src.expected()
        except HarnessError:  # a fixture mirror that does not hold this file
            status = "embedded (no download needed)" if whole else "missing (not on the fixture mirror)"
            rows.append([key, src.filename, status, _size(stored or None), "-"])
            continue
        check = "sha256" if sha256 else "md5" if md5 else "recorded sha256 (unpinned)"
        local = download.downloads_dir() / src.filename
        if download.available(key):
            status, size = "here", _size(local.stat().st_size) if local.is_file() else "-"
        elif whole:
            status, size = "embedded (no download needed)", _size(stored)
        else:
            status = f"missing ({', '.join(parts)} embedded)" if parts else "missing"
            size = _size(src.size)  # as its publisher states it; "-": none registered
            needed += src.size or 0
            unknown += src.size is None
        rows.append([key, src.filename, status, size, check])
    total = f"to download: {_size(needed)} in the published sizes" + (
        f", plus {unknown} download(s) of no registered size" if unknown else ""
    )
    return (
        format_table(["name", "file", "status", "size", "verified by"], rows)
        + "\nsize: the file here, the embedded files as stored (gzip), or a missing file's published size "
        "('-': none registered here)\n" + total
    )


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
