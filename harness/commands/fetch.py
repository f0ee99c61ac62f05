"""`python -m harness fetch`: download (and verify) the data files and checkpoints a run needs, ahead of it."""

from __future__ import annotations

import argparse

from harness.core.errors import HarnessError, UnknownNameError
from harness.core.paths import PROJECT_ROOT
from harness.core.text_table import format_table
from harness.data import download


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
        rows = []
        for key, src in download.SOURCES.items():
            try:
                md5, sha256 = src.expected()
            except HarnessError:  # a fixture mirror that does not hold this file
                rows.append([key, src.filename, "missing (not on the fixture mirror)", "-"])
                continue
            check = "sha256" if sha256 else "md5" if md5 else "recorded sha256 (unpinned)"
            rows.append([key, src.filename, "here" if download.available(key) else "missing", check])
        print(format_table(["name", "file", "status", "verified by"], rows))
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
