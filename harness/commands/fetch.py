"""`python -m harness fetch`: download (and verify) the data files and checkpoints a run needs, ahead of it."""

from __future__ import annotations

import argparse

from harness.core import benchmarks
from harness.core.errors import HarnessError, UnknownNameError
from harness.core.paths import PROJECT_ROOT
from harness.core.text_table import format_table
from harness.data import download, embedded


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "fetch",
        help="download and verify data files (or a checkpoint) ahead of a run",
        description=(
            "Download registered data files (`fetch --list` names them; a run's --dry-run lists the ones it "
            "lacks) into the cache, verified against the publisher's checksum where one is published (else "
            "the sha256 of the first download is recorded and checked afterwards). An interrupted download "
            "continues where it stopped. HARNESS_DATA_MIRROR replaces every publisher's base URL by a folder "
            "or URL holding the same file names. `--model NAME` downloads a Hugging Face checkpoint into "
            "models/NAME (this needs the Hub; the paper profiles' inits and teachers)."
        ),
    )
    p.add_argument("names", nargs="*", metavar="NAME", help="download names (see --list)")
    p.add_argument("--list", action="store_true", help="list the registered downloads and whether each is here")
    p.add_argument(
        "--model",
        action="append",
        default=[],
        metavar="NAME",
        help="a Hugging Face checkpoint to download into models/NAME (repeatable)",
    )
    p.set_defaults(func=_fetch)


def _fetch(args: argparse.Namespace) -> int:
    if args.list or not (args.names or args.model):
        print(download_list())
        return 0
    for key in args.names:
        if key not in download.SOURCES:
            raise UnknownNameError("download", key, list(download.SOURCES))
    for key in args.names:
        path = download.fetch_source(key)
        print(f"fetch: {key} -> {path} (verified)")
    for name in args.model:
        print(f"fetch: model {name} -> {fetch_model(name)}")
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
    """Every registered download: whether it is here (or embedded, so never needed), its size, its check."""
    rows = []
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
        elif parts:
            status, size = f"missing ({', '.join(parts)} embedded)", "-"
        else:
            status, size = "missing", "-"
        rows.append([key, src.filename, status, size, check])
    return (
        format_table(["name", "file", "status", "size", "verified by"], rows)
        + "\nsize: the file here, or the embedded files as stored (gzip); a download not made yet has no size here "
        "(its publisher's page gives it)"
    )


def fetch_model(name: str) -> str:
    """Download the Hugging Face checkpoint ``name`` into models/NAME (where runs look for it)."""

    target = PROJECT_ROOT / "models" / name
    try:
        from huggingface_hub import snapshot_download

        return snapshot_download(repo_id=name, local_dir=str(target))
    except Exception as exc:  # noqa: BLE001 - the Hub client raises many kinds (offline, not found, HTTP): one line each
        raise HarnessError(
            f"could not download the checkpoint {name} from the Hugging Face Hub ({type(exc).__name__}: "
            f"{str(exc).splitlines()[0] if str(exc) else ''}). Fix: allow the Hub (HF_HUB_OFFLINE=0), "
            f"or copy the checkpoint's folder to {target} yourself"
        ) from None
