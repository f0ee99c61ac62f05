"""An iterable cut into lists of a fixed size, read lazily: the chunks a stage encodes, scores or splits
one at a time (Python 3.11 has no ``itertools.batched``)."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")


def chunked(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """``items`` in lists of ``size`` (the last may be shorter), each read only when it is asked for."""
    if size < 1:
        raise ValueError(f"a chunk holds at least one item, got {size}")
    it = iter(items)
    while chunk := list(itertools.islice(it, size)):
        yield chunk
