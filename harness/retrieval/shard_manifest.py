"""A sharded encoding folder's ``manifest.json``: what the chunks were encoded from and how they are laid
out, written by the first rank and checked by every later one, so a run with other settings is refused
in one line instead of mixing embeddings.

It holds the corpus fingerprint (ids, titles, texts in order), the encoder fingerprint (model folder
files + the settings that decide passage vectors, as the embedding cache of
:mod:`harness.evaluation.zero_shot` keys them), shard_size, world_size, batch_size and the bounds and
doc-id hash of every chunk.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.core.errors import HarnessError
from harness.core.fsutil import atomic_write_json
from harness.retrieval.encoder import vector_settings
from harness.retrieval.shard_layout import Survey, chunk_layout

MANIFEST = "manifest.json"
FORMAT = 1


def build_manifest(
    survey: Survey, enc_fp: str, encoder: Any, world_size: int, shard_size: int, batch_size: int
) -> dict[str, Any]:
    """The manifest of an encoding: the corpus's and encoder's fingerprints, the settings, every chunk."""
    chunks = {
        name: {"rank": r, "start": a, "end": b, "ids_sha256": survey.chunk_ids_sha256[name]}
        for name, (r, a, b) in chunk_layout(survey.passages, world_size, shard_size).items()
    }
    return {
        "format": FORMAT,
        "passages": survey.passages,
        "corpus": survey.corpus,
        "ids_sha256": survey.ids_sha256,
        "encoder": enc_fp,
        "encoder_settings": vector_settings(encoder),
        "world_size": world_size,
        "shard_size": shard_size,
        "batch_size": batch_size,
        "chunks": chunks,
    }


def read_manifest(out: Path) -> dict[str, Any]:
    """``out``'s manifest; a folder without one, or with an unreadable one, is refused in one line."""
    path = out / MANIFEST
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise HarnessError(f"{out} holds no {MANIFEST}: not a sharded encoding folder (encode into it first)") from None
    except (OSError, ValueError) as exc:
        raise HarnessError(f"{path} is unreadable ({exc}); delete {out} and encode again") from None


def check_or_write_manifest(out: Path, want: dict[str, Any]) -> None:
    """Write the manifest, or refuse if the folder was started with other settings (never mix)."""
    if not (out / MANIFEST).is_file():
        atomic_write_json(out / MANIFEST, want)  # ranks write identical content; the rename is atomic
        return
    have = read_manifest(out)
    if have == json.loads(json.dumps(want)):
        return
    labels = {
        "corpus": "corpus",
        "passages": "passages",
        "encoder": "encoder",
        "world_size": "world size",
        "shard_size": "shard_size",
        "batch_size": "batch_size",
        "format": "format",
    }
    diffs = [
        f"{label} {_short(have.get(key))} -> {_short(want[key])}"
        for key, label in labels.items()
        if have.get(key) != want[key]
    ] or ["chunk layout"]
    raise HarnessError(
        f"{out} was encoded with other settings ({'; '.join(diffs)}); resume with the same "
        "model, corpus, world size, shard size and batch size, or use a new folder"
    )


def chunks_in_order(manifest: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Chunks in corpus order (the JSON file sorts names: rank10 would come before rank2)."""
    return sorted(manifest["chunks"].items(), key=lambda item: item[1]["start"])


def _short(value: Any) -> str:
    text = str(value)
    return text[:12] if len(text) == 64 else text  # sha256s: a prefix is enough to tell them apart


def chunk_world_size(out_dir: str | Path) -> int | None:
    """The world size the chunks in ``out_dir`` were laid out for (its manifest's), None without one."""
    path = Path(out_dir) / MANIFEST
    try:
        return int(json.loads(path.read_text(encoding="utf-8"))["world_size"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def shards_complete(out_dir: str | Path) -> bool:
    """True when ``out_dir`` has a manifest and every chunk it lists has its ``.json`` (written last).

    Cheap (no hashing): :func:`harness.retrieval.shard_merge.merge_shards` verifies what it reads. Any world size counts, so an
    encoding finished by N torchrun ranks is merged by one process.
    """
    out = Path(out_dir)
    if not (out / MANIFEST).is_file():
        return False
    try:
        chunks = read_manifest(out)["chunks"]
    except (HarnessError, KeyError, TypeError):
        return False
    return all((out / f"{name}.json").is_file() for name in chunks)
