"""``passages.jsonl`` as a lazy sequence: what pre-training reads without loading the corpus (issue 39).

:func:`harness.corpus.passages.load_passages` builds every :class:`Passage` up front: ~10 GiB a
process for MS MARCO's 8.8M passages, once per DDP rank. :class:`PassageFile` keeps one file offset
per passage (8 bytes); ``pf[i]`` reads and parses line ``i`` when asked (``os.pread``, no memory
map whose touched pages would count in the process's RSS), so a rank reads the passages of its own
share and the kernel's page cache holds the file once for every rank.
:meth:`PassageFile.doc_codes` numbers the documents in order of first appearance, as
:func:`harness.corpus.pairs._doc_positions` groups them, with one integer per passage.
"""

from __future__ import annotations

import hashlib
import json
import os
from array import array
from collections.abc import Sequence
from pathlib import Path
from typing import overload

import numpy as np

from harness.core.errors import DataFormatError
from harness.corpus.passages import PASSAGES_FILE, Passage


class PassageFile(Sequence[Passage]):
    """The passages of a ``passages.jsonl`` (blank lines skipped, as load_passages does), read on demand."""

    def __init__(self, path: str | Path):
        path = Path(path)
        self.path = path / PASSAGES_FILE if path.is_dir() else path
        offsets, lines = array("q"), array("q")
        pos = 0
        with open(self.path, "rb") as f:
            for n, line in enumerate(f, 1):
                if line.strip():
                    offsets.append(pos)
                    lines.append(n)
                pos += len(line)
        self._offsets = np.frombuffer(offsets, dtype=np.int64) if offsets else np.zeros(0, np.int64)
        self._lines = np.frombuffer(lines, dtype=np.int64) if lines else np.zeros(0, np.int64)
        self._size = pos
        self._codes: np.ndarray | None = None
        self._file = open(self.path, "rb")

    def __len__(self) -> int:
        return len(self._offsets)

    def _record(self, i: int) -> dict:
        start = int(self._offsets[i])
        end = int(self._offsets[i + 1]) if i + 1 < len(self._offsets) else self._size
        raw = os.pread(self._file.fileno(), end - start, start)  # the line, and any blank lines after it
        try:
            record = json.loads(raw)
            str(record["pid"]), str(record["doc_id"]), str(record["text"])
        except (ValueError, KeyError, TypeError) as exc:
            raise DataFormatError(
                self.path,
                int(self._lines[i]),
                f"not a passage record ({exc})",
                'one JSON object {"pid", "doc_id", "text"} per line',
            ) from None
        return record

    @overload
    def __getitem__(self, i: int) -> Passage: ...
    @overload
    def __getitem__(self, i: slice) -> list[Passage]: ...

    def __getitem__(self, i: int | slice) -> Passage | list[Passage]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if not -len(self) <= i < len(self):
            raise IndexError(f"passage {i} of {len(self)}")
        d = self._record(i % len(self))
        return Passage(pid=str(d["pid"]), doc_id=str(d["doc_id"]), text=str(d["text"]))

    def doc_codes(self) -> np.ndarray:
        """Document number of each passage, numbered by first appearance (int64, one per passage).

        A builder writes a document's passages together, so a running count is enough; whether a
        document came back later is checked on 8-byte hashes of the document ids that start a run,
        and only then are the ids held in a dict (a hash collision can only cause that exact path).
        Computed once (every epoch asks)."""
        if self._codes is None:
            self._codes = self._doc_codes()
        return self._codes

    def _doc_codes(self) -> np.ndarray:
        codes = np.empty(len(self), dtype=np.int64)
        starts = array("Q")
        last, code = None, -1
        for i in range(len(self)):
            doc_id = str(self._record(i)["doc_id"])
            if doc_id != last:
                code, last = code + 1, doc_id
                starts.append(int.from_bytes(hashlib.blake2b(doc_id.encode(), digest_size=8).digest(), "little"))
            codes[i] = code
        if len(np.unique(np.frombuffer(starts, dtype=np.uint64))) == len(starts):
            return codes
        first: dict[str, int] = {}
        for i in range(len(self)):
            codes[i] = first.setdefault(str(self._record(i)["doc_id"]), len(first))
        return codes

    def close(self) -> None:
        self._file.close()
