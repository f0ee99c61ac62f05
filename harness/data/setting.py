"""A spec's ``data:`` block, applied for one run: where the upstream files come from and which MS
MARCO passages are read.

* ``data.mirror``: a folder (relative to the project root) or URL serving the upstream files under
  their own names; ``HARNESS_DATA_MIRROR`` is set to it while the run lasts (the rehearsal reads
  the fixture mirror tests/fixtures/msmarco_mirror). Without the key the user's setting stands.
* ``data.msmarco_passages``: ``plain`` (collection.tsv) or ``titled`` (RocketQA's titles joined to
  it, as Tevatron reads MS MARCO); set as ``HARNESS_MSMARCO_PASSAGES`` for the catalog, whose MS
  MARCO benchmarks name the titles file in their ``files()``, so cached stages never mix the two.

Both are restored when the run ends, so runs in one process do not leak into each other.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from harness.core.errors import HarnessError
from harness.core.paths import PROJECT_ROOT
from harness.data.download import MIRROR_ENV

PASSAGES_ENV = "HARNESS_MSMARCO_PASSAGES"
PASSAGE_VARIANTS = ("plain", "titled")


def msmarco_passages() -> str:
    """The MS MARCO passage variant of the current run (``plain`` unless a spec says otherwise)."""
    value = os.environ.get(PASSAGES_ENV, "plain").strip() or "plain"
    if value not in PASSAGE_VARIANTS:
        raise HarnessError(f"{PASSAGES_ENV}={value!r}: expected one of {', '.join(PASSAGE_VARIANTS)}")
    return value


def resolve_mirror(value: str) -> str:
    """A URL as is; a folder relative to the project root made absolute (it must exist)."""
    if "://" in value:
        return value
    path = (PROJECT_ROOT / value).resolve()
    if not path.is_dir():
        raise HarnessError(
            f"data.mirror {value}: no such folder ({path}); restore it from the repository "
            "(git checkout -- tests/fixtures) or point data.mirror at a copy of the upstream files"
        )
    return str(path)


@contextmanager
def _env(name: str, value: str | None) -> Iterator[None]:
    before = os.environ.get(name)
    if value is not None:
        os.environ[name] = value
    try:
        yield
    finally:
        if value is not None:
            if before is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = before


@contextmanager
def data_setting(spec: Any) -> Iterator[None]:
    """Apply the spec's ``data:`` block inside the ``with`` block."""
    data = spec.data_block()  # harness.spec.run_settings.DataSettings (a layer above this one)
    mirror = data.mirror
    resolved = resolve_mirror(str(mirror)) if mirror else None
    before = os.environ.get(MIRROR_ENV)
    if resolved and before and before != resolved:
        print(f"  data: {spec.profile} reads its files from {mirror} (its data.mirror), not {MIRROR_ENV}={before}")
    passages = data.msmarco_passages
    if passages is not None and passages not in PASSAGE_VARIANTS:
        raise HarnessError(
            f"{spec.path}: data.msmarco_passages {passages!r} is not one of {', '.join(PASSAGE_VARIANTS)}"
        )
    with _env(MIRROR_ENV, resolved), _env(PASSAGES_ENV, passages or "plain"):
        yield
