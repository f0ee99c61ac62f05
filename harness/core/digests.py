"""A sampled digest of a very large file: what the stage cache and the download cache check on reuse
instead of a full sha256 (which would read many GiB each time).

It hashes the file's size, its first and last block and ``blocks`` blocks at fixed offsets spread over
it: a truncation (the size), a rewritten header or tail, and any overwritten run of bytes longer than
the gap between two samples (1/(blocks+1) of the file) all change it, at (blocks+2) x ``block`` bytes
read whatever the file's size.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

SAMPLED_ABOVE = 1 << 30  # files at least this large get the sampled digest
SAMPLE_BLOCK = 1 << 20  # bytes hashed per sampled block
SAMPLE_BLOCKS = 64  # blocks at fixed offsets, besides the first and the last


def sampled_digest(path: Path, size: int, block: int = SAMPLE_BLOCK, blocks: int = SAMPLE_BLOCKS) -> str:
    h = hashlib.sha256(size.to_bytes(8, "little"))
    last = max(size - block, 0)
    offsets = sorted({0, last, *(last * i // (blocks + 1) for i in range(1, blocks + 1))})
    with open(path, "rb") as f:
        for offset in offsets:
            f.seek(offset)
            h.update(offset.to_bytes(8, "little"))
            h.update(f.read(block))
    return h.hexdigest()
