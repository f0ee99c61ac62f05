"""A run record's data checksums against the catalog's (``check``'s DATA-MISMATCH rows).

A record's ``datasets`` block is ``{dataset: {file key: checksum}}``, written from
``Benchmark.files()`` (harness/data/catalog.py). Two kinds of key name a file the catalog pins:

* ``embedded/<stored path>``: the sha256 of the stored file in ``embedded/MANIFEST.json``;
* ``downloads/<file name>``: the checksum ``harness.data.download.SOURCES`` pins for the file
  (``<sha256>`` where published, ``md5:<hex>`` otherwise), or ``fixture-sha256:<hex>`` for the
  test fixture mirror (tests/fixtures/msmarco_mirror/FIXTURE.json: the rehearsal profile's data).

Every other key is a label, not a file (``msmarco_passages: titled``, a forum name, a sample's
parameters), and a download the catalog does not pin (no published checksum: the value is the sha256
fetched, or ``unpinned``) cannot be verified: both are left alone. The check reads only the two
manifests, never the data, so a record made on another machine is checked without its files.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import Any, NamedTuple

from harness.core.paths import PROJECT_ROOT
from harness.data import download, embedded

EMBEDDED_PREFIX, DOWNLOADS_PREFIX = "embedded/", "downloads/"
FIXTURE_PREFIX, MD5_PREFIX = "fixture-sha256:", "md5:"
# The rehearsal profile's mirror (harness/spec/rehearsal.py FIXTURE_MIRROR); its manifest pins its files.
FIXTURE_MANIFEST = PROJECT_ROOT / "tests" / "fixtures" / "msmarco_mirror" / download.FIXTURE_MANIFEST


class Mismatch(NamedTuple):
    """One file whose checksum in a record is not the catalog's."""

    dataset: str
    file: str
    recorded: str
    expected: str  # what the catalog pins, or why it has nothing for this file

    def describe(self) -> str:
        return (
            f"dataset '{self.dataset}', file {self.file}: the record says {_short(self.recorded)}, "
            f"the catalog {self.expected}"
        )


def _short(value: str) -> str:
    return value if len(value) <= 24 else f"{value[:20]}..."


@functools.lru_cache(maxsize=1)
def _fixture_files() -> dict[str, str]:
    try:
        files = json.loads(FIXTURE_MANIFEST.read_text(encoding="utf-8"))["files"]
        return {name: str(entry["sha256"]) for name, entry in files.items()}
    except (OSError, ValueError, KeyError, TypeError):
        return {}  # no fixture mirror in this checkout: fixture checksums cannot be verified


def _expected_download(filename: str, value: str) -> str | None:
    """What the catalog pins for a download named ``filename`` in the form ``value`` takes; None when
    it pins nothing to compare with; "" when it has no such file."""
    if value.startswith(FIXTURE_PREFIX):
        fixture = _fixture_files()
        if not fixture:
            return None
        return FIXTURE_PREFIX + fixture[filename] if filename in fixture else ""
    sources = [s for s in download.SOURCES.values() if s.filename == filename]
    if not sources:
        return ""
    if value.startswith(MD5_PREFIX):
        pinned = {MD5_PREFIX + s.md5 for s in sources if s.md5}
    else:
        pinned = {s.sha256 for s in sources if s.sha256}
    if not pinned:
        return None  # unpinned upstream (the value is what was fetched): nothing to compare with
    return value if value in pinned else sorted(pinned)[0]


def expected_checksum(key: str, value: str) -> str | None:
    """The catalog's checksum for a record's file ``key`` (in the form of ``value``); "" when the
    catalog has no such file; None when ``key`` is a label or the catalog pins nothing for it."""
    if key.startswith(EMBEDDED_PREFIX):
        entry = embedded.manifest().get(key[len(EMBEDDED_PREFIX) :])
        return str(entry["sha256"]) if entry else ""
    if key.startswith(DOWNLOADS_PREFIX):
        return _expected_download(key[len(DOWNLOADS_PREFIX) :], value)
    return None


def mismatches(datasets: Mapping[str, Any] | None) -> list[Mismatch]:
    """Every file of a record's ``datasets`` block whose checksum differs from the catalog's."""
    out = []
    for dataset, files in (datasets or {}).items():
        if not isinstance(files, Mapping):
            out.append(Mismatch(str(dataset), "-", repr(files)[:40], "wants {file: checksum}"))
            continue
        for key, value in files.items():
            expected = expected_checksum(str(key), str(value))
            if expected is None or expected == str(value):
                continue
            out.append(
                Mismatch(
                    str(dataset), str(key), str(value), f"pins {_short(expected)}" if expected else "has no such file"
                )
            )
    return out
