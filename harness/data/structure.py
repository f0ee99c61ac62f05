"""Structural checks for downloads whose publishers give no checksum.

A file with no published md5/sha256 (the pre-training corpora, RocketQA's titles, Tevatron's
training set) cannot be verified byte for byte, so before it is marked verified it is read once
end to end: the archive must be intact (gzip's CRC and length trailer, every tar member), every
line must have the publisher's columns, and where the publisher states a line count it must match.
A file that fails is never marked verified (``download.fetch`` removes it and says why), so a
damaged transfer or a wrong mirror file cannot poison the cache.

Each check takes the file and raises :class:`StructureError` naming what is wrong; ``CHECKS``
maps the name a :class:`harness.data.download.Source` declares to its check.
"""

from __future__ import annotations

import gzip
import json
import tarfile
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path


class StructureError(ValueError):
    """The file is not what its publisher ships (the message says how)."""


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, text without newline) of a gzipped UTF-8 file, read to its end (CRC checked)."""
    try:
        with gzip.open(path, "rt", encoding="utf-8", newline="\n") as fh:
            for number, line in enumerate(fh, 1):
                yield number, line.rstrip("\n")
    except (OSError, EOFError, zlib.error) as exc:  # not gzip, truncated, bad CRC
        raise StructureError(f"not an intact gzip file ({exc})") from None
    except UnicodeDecodeError as exc:
        raise StructureError(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def tsv_gz(columns: int, lines: int | None = None, header: str | None = None) -> Callable[[Path], None]:
    """A gzipped TSV: every line ``columns`` fields, ``header`` first if given, ``lines`` data lines
    if the publisher states how many."""

    def check(path: Path) -> None:
        count = 0
        for number, line in _lines(path):
            if number == 1 and header is not None:
                if line != header:
                    raise StructureError(f"line 1 is {line[:80]!r}, expected the header {header!r}")
                continue
            fields = line.count("\t") + 1
            if fields != columns:
                raise StructureError(f"line {number} has {fields} tab-separated fields, expected {columns}")
            count += 1
        if lines is not None and count != lines:
            raise StructureError(f"{count:,} data lines, the publisher's file has {lines:,}")
        if count == 0:
            raise StructureError("no data lines")

    return check


def jsonl_gz(keys: tuple[str, ...]) -> Callable[[Path], None]:
    """Gzipped JSON lines, each an object holding ``keys``."""

    def check(path: Path) -> None:
        count = 0
        for number, line in _lines(path):
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise StructureError(f"line {number} is not JSON ({exc.msg})") from None
            missing = [k for k in keys if not isinstance(row, dict) or k not in row]
            if missing:
                raise StructureError(f"line {number} lacks {', '.join(missing)}")
            count += 1
        if count == 0:
            raise StructureError("no lines")

    return check


def tar_with(*members: str) -> Callable[[Path], None]:
    """A tar archive (gzip or not) that reads to its end and holds ``members``."""

    def check(path: Path) -> None:
        try:
            with tarfile.open(path) as tar:
                names = set()
                for info in tar:  # walks every header: a truncated archive fails here
                    names.add(info.name)
                    if info.isfile():
                        fh = tar.extractfile(info)
                        while fh is not None and fh.read(1 << 20):  # reads the data too: gzip's CRC
                            pass
        except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
            raise StructureError(f"not an intact tar archive ({exc})") from None
        missing = [m for m in members if m not in names]
        if missing:
            raise StructureError(f"lacks {', '.join(missing)}")

    return check


# Counts as their publishers state them: the MS MARCO document collection's 3,213,835 documents
# (TREC DL document-ranking overview) and DPR's 21,015,324 Wikipedia passages (DPR's data README).
CHECKS: dict[str, Callable[[Path], None]] = {
    "msmarco-docs": tsv_gz(columns=4, lines=3_213_835),
    "wikipedia-dpr": tsv_gz(columns=3, lines=21_015_324, header="id\ttext\ttitle"),
    "rocketqa-marco": tar_with("marco/para.title.txt"),
    "tevatron-train": jsonl_gz(("query_id", "query", "positive_passages", "negative_passages")),
    # BEIR's train_msmarco_v3.py counts 502,939 lines (its progress bar): not a count the publisher states
    "sbert-hard-negatives": jsonl_gz(("qid", "pos", "neg")),
}
