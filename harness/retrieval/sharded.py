"""Sharded, resumable corpus encoding: each rank writes its slice of the corpus in chunk files.

    # 2 CPU processes (gloo); on N GPUs the same line with --nproc_per_node N (nccl)
    torchrun --nproc_per_node 2 -m harness.evaluation.sharded --model models/all-MiniLM-L6-v2 \\
        --dataset msmarco-dl19-subset --out cache/shards/minilm-dl19 --shard-size 10000 --json summary.json

    # the same command again after a crash or a kill resumes: complete chunks are skipped

    from harness.retrieval.sharded import encode_corpus_sharded, merge_shards
    encode_corpus_sharded(encoder, corpus, "shards/", rank=r, world_size=w, shard_size=10_000)
    ids, emb = merge_shards("shards/")  # corpus order, float32 (n, dim)

``out_dir`` holds:

- ``manifest.json``: corpus fingerprint (ids, titles, texts in order), encoder fingerprint
  (model folder files + the settings that decide passage vectors, as the embedding cache of
  :mod:`harness.evaluation.zero_shot` keys them), shard_size, world_size, batch_size and the
  bounds and doc-id hash of every chunk. A run with other settings is refused in one line
  instead of mixing embeddings.
- ``rank{r}-chunk{k:05d}.npy`` + ``.json``: rank r's contiguous slice
  (:func:`harness.retrieval.encoder.shard_bounds`) cut into chunks of ``shard_size`` passages.
  Both are written atomically (:mod:`harness.core.fsutil`), the ``.json`` (doc ids, bounds, sha256
  of the ``.npy``) last, so a ``.json`` marks a complete chunk.

A resumed run encodes the missing chunks with the same inputs and batches as an uninterrupted
run, so the result is byte-identical (same device, precision and thread count; batch size is
part of the manifest). A per-rank ``flock`` keeps two processes of one rank from writing at once.

:func:`encode_distributed` is the torchrun / ``torch.multiprocessing`` driver: RANK/WORLD_SIZE
come from the environment (:func:`harness.training.distributed.init_distributed`: gloo on CPU,
nccl on CUDA), a barrier on a gloo group with a long timeout waits for every rank (a resumed
rank may wait hours for one that has more left), then rank 0 merges. Under
``torch.multiprocessing.spawn`` set RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT in each child
before calling it (as torchrun does). Every rank reads the whole corpus (the manifest
fingerprints all of it) but encodes only its slice. Search is exact flat inner
product (:mod:`harness.retrieval.dense`); ``fp16`` stores the vectors in half precision (half the
memory, scores rounded), and the output says which was used. The command line
(:mod:`harness.evaluation.sharded`) builds the index chunk by chunk (:func:`index_shards`), so the
fp32 matrix is never held whole.
"""

from __future__ import annotations

import collections
import hashlib
import io
import itertools
import json
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from harness.core import ranks
from harness.core.errors import HarnessError
from harness.core.fsutil import (
    atomic_write_bytes,
    atomic_write_json,
    exclusive_lock,
    is_temp,
)
from harness.core.hardware import total_memory_gib
from harness.retrieval.dense import Shard, build_index, retrieve
from harness.retrieval.encoder import (
    default_batch_size,
    load_zero_shot_encoder,
    shard_bounds,
    vector_settings,
)
from harness.retrieval.faiss_gpu import faiss_gpus, placement, to_gpus
from harness.stages.artifacts import TextHasher, hash_json, hash_texts
from harness.stages.checkpoints import model_fingerprint, resolve_model_path

MANIFEST = "manifest.json"
FORMAT = 1
BARRIER_TIMEOUT_S = 48 * 3600
Passages = Mapping[str, Mapping[str, str] | str]
# A corpus to encode: a dict, or a function returning a fresh stream of (doc id, doc) pairs in corpus
# order (a benchmark's ``iter_corpus``), read three times or fewer and never held whole.
CorpusSource = Passages | Callable[[], Iterable[tuple[str, Mapping[str, str] | str]]]


@dataclass
class ShardReport:
    """What one rank did: its slice, how many chunks were already complete, how fast it encoded."""

    rank: int
    world_size: int
    start: int
    end: int
    chunks: int
    chunks_skipped: int
    passages_encoded: int
    seconds: float

    @property
    def passages_per_second(self) -> float | None:
        return self.passages_encoded / self.seconds if self.seconds > 0 else None


# ---------------------------------------------------------------------------- fingerprints


def _pairs(source: CorpusSource) -> Iterator[tuple[str, Mapping[str, str] | str]]:
    """A fresh stream of (doc id, doc) pairs in corpus order."""
    return iter(source.items()) if isinstance(source, Mapping) else iter(source())


def _fields(doc_id: str, doc: Mapping[str, str] | str) -> tuple[str, str, str]:
    return (doc_id, "", doc) if isinstance(doc, str) else (doc_id, doc.get("title") or "", doc.get("text") or "")


def corpus_fingerprint(passages: CorpusSource) -> str:
    """sha256 over every (id, title, text) in order: a changed, added or reordered passage changes it."""
    return hash_texts(itertools.chain.from_iterable(_fields(d, doc) for d, doc in _pairs(passages)))


@dataclass
class _Survey:
    """What the manifest needs of a corpus, read from one stream (two when ``world_size`` > 1)."""

    passages: int
    corpus: str
    ids_sha256: str
    chunk_ids_sha256: dict[str, str]  # chunk name -> hash_texts of its doc ids


def _survey(source: CorpusSource, world_size: int, shard_size: int) -> _Survey:
    """Count and fingerprint the corpus without holding it. One process's chunks start at multiples of
    ``shard_size``, so their id hashes come from the same pass; with several ranks the layout depends on
    the count, so a second pass reads the ids again."""
    corpus, ids, block = TextHasher(), TextHasher(), TextHasher()
    blocks: list[str] = []
    n = 0
    for doc_id, doc in _pairs(source):
        for text in _fields(doc_id, doc):
            corpus.update(text)
        ids.update(doc_id)
        block.update(doc_id)
        n += 1
        if n % shard_size == 0:
            blocks.append(block.hexdigest())
            block = TextHasher()
    if n % shard_size:
        blocks.append(block.hexdigest())
    layout = _layout(n, world_size, shard_size)
    if world_size == 1:
        chunk_sha = dict(zip(layout, blocks))
    else:
        chunk_sha = {}
        bounds = iter(layout.items())
        name, (_, a, b) = next(bounds, ("", (0, 0, 0)))
        hasher = TextHasher()
        for i, (doc_id, _) in enumerate(_pairs(source)):
            while name and i >= b:  # empty slices (more ranks than passages) have no chunks
                name, (_, a, b) = next(bounds, ("", (0, 0, 0)))
            hasher.update(doc_id)
            if i == b - 1:
                chunk_sha[name] = hasher.hexdigest()
                hasher = TextHasher()
        if len(chunk_sha) != len(layout):
            raise HarnessError("the corpus changed while it was read (a second pass gave other passages)")
    return _Survey(n, corpus.hexdigest(), ids.hexdigest(), chunk_sha)


def encoder_fingerprint(encoder: Any) -> str:
    """sha256 of the model folder's files and the settings that decide passage vectors."""

    return hash_json({"model": model_fingerprint(Path(encoder.spec.model_dir)), "settings": vector_settings(encoder)})


def _chunk_name(rank: int, k: int) -> str:
    return f"rank{rank}-chunk{k:05d}"


def _layout(n: int, world_size: int, shard_size: int) -> dict[str, tuple[int, int, int]]:
    """Every chunk: name -> (rank, start, end), in corpus order."""
    out: dict[str, tuple[int, int, int]] = {}
    for r in range(world_size):
        start, end = shard_bounds(n, r, world_size)
        for k, a in enumerate(range(start, end, shard_size)):
            out[_chunk_name(r, k)] = (r, a, min(a + shard_size, end))
    return out


def _rank_world(rank: int | None, world_size: int | None) -> tuple[int, int]:
    rank = ranks.rank() if rank is None else rank  # RANK / WORLD_SIZE when set
    world_size = ranks.world_size() if world_size is None else world_size
    shard_bounds(1, rank, world_size)  # validates
    return rank, world_size


# ---------------------------------------------------------------------------- manifest


def _manifest(
    survey: _Survey, enc_fp: str, encoder: Any, world_size: int, shard_size: int, batch_size: int
) -> dict[str, Any]:

    chunks = {
        name: {"rank": r, "start": a, "end": b, "ids_sha256": survey.chunk_ids_sha256[name]}
        for name, (r, a, b) in _layout(survey.passages, world_size, shard_size).items()
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


def _read_manifest(out: Path) -> dict[str, Any]:
    path = out / MANIFEST
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise HarnessError(f"{out} holds no {MANIFEST}: not a sharded encoding folder (encode into it first)") from None
    except (OSError, ValueError) as exc:
        raise HarnessError(f"{path} is unreadable ({exc}); delete {out} and encode again") from None


def _check_or_write_manifest(out: Path, want: dict[str, Any]) -> None:
    """Write the manifest, or refuse if the folder was started with other settings (never mix)."""
    if not (out / MANIFEST).is_file():
        atomic_write_json(out / MANIFEST, want)  # ranks write identical content; the rename is atomic
        return
    have = _read_manifest(out)
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


def _in_order(manifest: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Chunks in corpus order (the JSON file sorts names: rank10 would come before rank2)."""
    return sorted(manifest["chunks"].items(), key=lambda item: item[1]["start"])


def _short(value: Any) -> str:
    text = str(value)
    return text[:12] if len(text) == 64 else text  # sha256s: a prefix is enough to tell them apart


# ---------------------------------------------------------------------------- encoding


def _chunk_complete(out: Path, name: str, entry: Mapping[str, Any], dim: int) -> bool:
    """True when both files exist and agree with the manifest (a damaged chunk is encoded again)."""

    meta_path, npy_path = out / f"{name}.json", out / f"{name}.npy"
    if not meta_path.is_file():
        return False
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        rows = np.load(npy_path, mmap_mode="r")  # reads the header only
        ok = (
            (meta["start"], meta["end"]) == (entry["start"], entry["end"])
            and hash_texts(meta["ids"]) == entry["ids_sha256"]
            and rows.dtype == np.float32
            and rows.shape == (entry["end"] - entry["start"], dim)
        )
    except (OSError, ValueError, KeyError, TypeError):
        ok = False
    if not ok:
        print(f"[sharded] {name} is damaged or from another run; encoding it again", file=sys.stderr)
    return ok


def _write_chunk(out: Path, name: str, ids: list[str], start: int, end: int, emb: np.ndarray) -> None:
    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(emb, dtype=np.float32))
    data = buf.getvalue()
    atomic_write_bytes(out / f"{name}.npy", data)
    # Written last: its presence means the .npy beside it is complete.
    atomic_write_json(
        out / f"{name}.json", {"start": start, "end": end, "ids": ids, "npy_sha256": hashlib.sha256(data).hexdigest()}
    )


def encode_corpus_sharded(
    encoder: Any,
    passages: CorpusSource,
    out_dir: str | Path,
    *,
    rank: int | None = None,
    world_size: int | None = None,
    shard_size: int = 10_000,
    batch_size: int | None = None,
    show_progress: bool = True,
    fingerprint: str | None = None,
) -> ShardReport:
    """Encode rank ``rank``'s slice of ``passages`` (``{doc_id: {"title", "text"}}``, corpus order, or a
    function returning such (doc id, doc) pairs, e.g. ``benchmark.iter_corpus``) into chunk files under
    ``out_dir``, skipping chunks already complete.

    The corpus is read as a stream: one pass fingerprints it (two with several ranks), one reads this
    rank's chunks, each held alone while it is encoded (sorted longest first within the chunk, as before),
    so memory is one chunk, not the corpus.

    ``rank``/``world_size`` default to RANK/WORLD_SIZE (torchrun), else 0 of 1. ``fingerprint``
    (of the encoder) may be given to skip hashing the model folder on every rank. ``batch_size`` None is
    the encoder's device default (64 on a CPU, 2048 token-sorted on CUDA: ``encoder.batching()``).
    """

    rank, world_size = _rank_world(rank, world_size)
    batch_size = default_batch_size(encoder.device) if batch_size is None else batch_size
    if shard_size < 1 or batch_size < 1:
        raise HarnessError(f"shard_size and batch_size must be positive, got {shard_size} and {batch_size}")
    survey = _survey(passages, world_size, shard_size)
    if not survey.passages:
        raise HarnessError("the corpus to encode is empty")
    out = Path(out_dir)
    manifest = _manifest(
        survey, fingerprint or encoder_fingerprint(encoder), encoder, world_size, shard_size, batch_size
    )
    _check_or_write_manifest(out, manifest)
    mine = {n: c for n, c in _in_order(manifest) if c["rank"] == rank}
    start, end = shard_bounds(survey.passages, rank, world_size)
    with exclusive_lock(out / f".rank{rank}.lock", f"sharded encoding rank {rank}"):
        for stale in out.glob(f".rank{rank}-chunk*"):  # temp files of a killed writer of this rank
            if is_temp(stale):
                stale.unlink(missing_ok=True)
        todo = [(n, c) for n, c in mine.items() if not _chunk_complete(out, n, c, encoder.dim)]
        left = sum(c["end"] - c["start"] for _, c in todo)
        print(
            f"[sharded] rank {rank}/{world_size}: passages [{start:,}, {end:,}) in {len(mine)} chunk(s) of "
            f"{shard_size:,}; {len(mine) - len(todo)} already complete, {left:,} passages to encode",
            file=sys.stderr,
            flush=True,
        )
        bar = tqdm(
            total=end - start,
            initial=end - start - left,
            desc=f"encode rank {rank}/{world_size}",
            unit="passage",
            disable=not show_progress,
            dynamic_ncols=True,
        )  # rate + ETA
        started = time.perf_counter()
        stream, position = _pairs(passages), 0
        try:
            for name, c in todo:  # corpus order
                collections.deque(itertools.islice(stream, c["start"] - position), maxlen=0)  # skip
                chunk = list(itertools.islice(stream, c["end"] - c["start"]))
                position = c["end"]
                chunk_ids = [d for d, _ in chunk]
                if hash_texts(chunk_ids) != c["ids_sha256"]:
                    raise HarnessError(
                        f"the corpus changed while {out} was encoded (chunk {name} holds other doc "
                        "ids than the first pass read)"
                    )
                texts = encoder.passage_texts([doc for _, doc in chunk])
                del chunk
                emb = encoder.encode(texts, batch_size=batch_size, kind="passage", show_progress=False)
                _write_chunk(out, name, chunk_ids, c["start"], c["end"], emb)
                bar.update(len(chunk_ids))
        finally:
            bar.close()
        seconds = time.perf_counter() - started
    report = ShardReport(rank, world_size, start, end, len(mine), len(mine) - len(todo), left, seconds)
    rate = f"{report.passages_per_second:,.1f} passages/s" if report.passages_per_second else "nothing to encode"
    print(
        f"[sharded] rank {rank}/{world_size}: encoded {left:,} passages in {seconds:.1f} s ({rate})",
        file=sys.stderr,
        flush=True,
    )
    return report


def chunk_world_size(out_dir: str | Path) -> int | None:
    """The world size the chunks in ``out_dir`` were laid out for (its manifest's), None without one."""
    path = Path(out_dir) / MANIFEST
    try:
        return int(json.loads(path.read_text(encoding="utf-8"))["world_size"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def shards_complete(out_dir: str | Path) -> bool:
    """True when ``out_dir`` has a manifest and every chunk it lists has its ``.json`` (written last).

    Cheap (no hashing): :func:`merge_shards` verifies what it reads. Any world size counts, so an
    encoding finished by N torchrun ranks is merged by one process.
    """
    out = Path(out_dir)
    if not (out / MANIFEST).is_file():
        return False
    try:
        chunks = _read_manifest(out)["chunks"]
    except (HarnessError, KeyError, TypeError):
        return False
    return all((out / f"{name}.json").is_file() for name in chunks)


def iter_shards(out_dir: str | Path, *, verify: bool = True) -> Iterator[tuple[int, list[str], np.ndarray]]:
    """(start, doc ids, float32 rows) of every chunk in corpus order, each checked against the
    manifest; a missing or inconsistent chunk is refused in one line. Holds one chunk at a time.

    ``verify`` checks each ``.npy`` against the sha256 its ``.json`` recorded (one extra hash pass).
    """

    out = Path(out_dir)
    manifest = _read_manifest(out)
    all_ids, count = TextHasher(), 0  # the whole corpus's ids checked as a hash: nothing grows with it
    dim: int | None = None
    for name, c in _in_order(manifest):
        meta_path, npy_path = out / f"{name}.json", out / f"{name}.npy"
        if not (meta_path.is_file() and npy_path.is_file()):
            raise HarnessError(
                f"{out}: chunk {name} (passages {c['start']:,}-{c['end']:,}, rank {c['rank']}) is "
                "missing; run the same encoding command again to resume"
            )
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
            data = npy_path.read_bytes()
            rows = np.load(io.BytesIO(data))
            chunk_ids = list(meta["ids"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise HarnessError(f"{out}: chunk {name} is unreadable ({exc}); delete its two files and resume") from None
        if hash_texts(chunk_ids) != c["ids_sha256"] or (meta.get("start"), meta.get("end")) != (c["start"], c["end"]):
            raise HarnessError(
                f"{out}: the doc ids of chunk {name} disagree with {MANIFEST}; delete its two files and resume"
            )
        if rows.ndim != 2 or rows.shape[0] != len(chunk_ids) or rows.dtype != np.float32:
            raise HarnessError(
                f"{out}: chunk {name} holds {rows.shape} {rows.dtype} vectors for {len(chunk_ids)} "
                "ids; delete its two files and resume"
            )
        if verify and hashlib.sha256(data).hexdigest() != meta.get("npy_sha256"):
            raise HarnessError(
                f"{out}: {name}.npy does not match the sha256 its .json recorded; delete its two files and resume"
            )
        if dim is not None and rows.shape[1] != dim:
            raise HarnessError(f"{out}: chunk {name} has dimension {rows.shape[1]}, others {dim}")
        dim = rows.shape[1]
        for doc_id in chunk_ids:
            all_ids.update(doc_id)
        count += len(chunk_ids)
        yield c["start"], chunk_ids, rows
    if dim is None or count != manifest["passages"] or all_ids.hexdigest() != manifest["ids_sha256"]:
        raise HarnessError(
            f"{out}: the chunks hold {count:,} doc ids, not the {manifest['passages']:,} of "
            f"{MANIFEST} in order; delete the folder and encode again"
        )


def merge_shards(out_dir: str | Path, *, verify: bool = True) -> tuple[list[str], np.ndarray]:
    """(doc ids, float32 matrix) in corpus order (see :func:`iter_shards`)."""
    passages = int(_read_manifest(Path(out_dir))["passages"])
    ids: list[str] = []
    emb: np.ndarray | None = None
    for start, chunk_ids, rows in iter_shards(out_dir, verify=verify):
        if emb is None:  # one preallocated matrix: no second copy of the corpus at merge time
            emb = np.empty((passages, rows.shape[1]), dtype=np.float32)
        emb[start : start + len(chunk_ids)] = rows
        ids.extend(chunk_ids)
    assert emb is not None  # iter_shards refuses an empty folder
    return ids, emb


def merge_shards_to_file(out_dir: str | Path, npy: str | Path, ids_json: str | Path, *, verify: bool = True) -> int:
    """The chunks written into one ``.npy`` file in corpus order (the bytes ``np.save`` writes for the
    merged matrix), one chunk in memory at a time, appended with plain writes (a memory map would keep
    the written pages in this process's RSS), and their doc ids into ``ids_json`` as they come (the bytes
    of ``json.dumps(ids)``: no id list grows with the corpus); returns the count. Readers map the
    ``.npy`` (``np.load(mmap_mode="r")``)."""
    passages = int(_read_manifest(Path(out_dir))["passages"])
    count = 0
    with open(npy, "wb") as f, open(ids_json, "w", encoding="utf-8") as g:
        g.write("[")
        for start, chunk_ids, rows in iter_shards(out_dir, verify=verify):
            if start == 0:  # iter_shards yields in corpus order and refuses an empty folder
                header = {
                    "descr": np.lib.format.dtype_to_descr(np.dtype(np.float32)),
                    "fortran_order": False,
                    "shape": (passages, rows.shape[1]),
                }
                np.lib.format.write_array_header_1_0(f, header)
            f.write(np.ascontiguousarray(rows, dtype="<f4").tobytes())
            g.write(("" if start == 0 else ", ") + json.dumps(chunk_ids)[1:-1])
            count += len(chunk_ids)
        g.write("]")
    return count


# ---------------------------------------------------------------------------- index


def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024:
            return f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n:,.1f} TiB"


def build_search_index(embeddings: np.ndarray, *, fp16: bool = False, device: Any = None) -> tuple[Any, str]:
    """(faiss index, label): exact ``IndexFlatIP`` by default, fp16 storage on request. On a CUDA
    ``device`` with a GPU faiss the exact index moves to the GPUs (:mod:`harness.retrieval.faiss_gpu`;
    fp16 storage stays on the CPU) and the label says so.

    Prints the memory figure (n x dim x bytes) before building, and a hint when fp32 would not
    fit in this machine's RAM.
    """

    n, dim = embeddings.shape
    width = 2 if fp16 else 4
    gpus = 0 if fp16 else faiss_gpus(device)
    label = _index_label(fp16, gpus)
    print(f"index: {label}: {n:,} x {dim} x {width} B = {_human(n * dim * width)}", flush=True)
    ram = (total_memory_gib() or 0) * 2**30
    if not fp16 and ram and n * dim * 4 > 0.8 * ram:
        print(
            f"index: {_human(n * dim * 4)} is more than 80% of this machine's {_human(ram)} RAM; "
            "fp16 storage halves it",
            file=sys.stderr,
        )
    if not fp16:
        return build_index(embeddings, device if gpus else None), label
    import faiss

    if not np.isfinite(embeddings).all():
        raise HarnessError("passage embeddings contain NaN or infinite values")
    index = faiss.IndexScalarQuantizer(dim, faiss.ScalarQuantizer.QT_fp16, faiss.METRIC_INNER_PRODUCT)
    index.add(np.ascontiguousarray(embeddings, dtype=np.float32))
    return index, label


def index_shards(
    out_dir: str | Path, *, fp16: bool = False, verify: bool = True, device: Any = None
) -> tuple[list[str], Any, str]:
    """(doc ids, faiss index, label) built chunk by chunk from the shards, never holding the fp32
    matrix: the peak is the index (n x dim x 4, or x 2 with ``fp16``) plus one chunk. The exact index
    then moves to the GPUs as :func:`build_search_index`'s does."""
    import faiss

    gpus = 0 if fp16 else faiss_gpus(device)
    manifest = _read_manifest(Path(out_dir))
    ids: list[str] = []
    index: Any = None
    label = ""
    for _, chunk_ids, rows in iter_shards(out_dir, verify=verify):
        if index is None:
            n, dim = int(manifest["passages"]), rows.shape[1]
            label = _index_label(fp16, gpus)
            print(
                f"index: {label}: {n:,} x {dim} x {2 if fp16 else 4} B = {_human(n * dim * (2 if fp16 else 4))} "
                "(built chunk by chunk)",
                flush=True,
            )
            index = (
                faiss.IndexScalarQuantizer(dim, faiss.ScalarQuantizer.QT_fp16, faiss.METRIC_INNER_PRODUCT)
                if fp16
                else faiss.IndexFlatIP(dim)
            )
        if not np.isfinite(rows).all():
            raise HarnessError(f"{out_dir}: passage embeddings contain NaN or infinite values")
        index.add(np.ascontiguousarray(rows, dtype=np.float32))
        ids.extend(chunk_ids)
    return ids, (to_gpus(index) if gpus and index is not None else index), label


def _index_label(fp16: bool, gpus: int = 0) -> str:
    """What the index is; where it lies only when that is not the CPU (a CPU label reads as before)."""
    return (
        "faiss.IndexScalarQuantizer fp16 (exhaustive inner product over fp16-stored vectors; scores rounded)"
        if fp16
        else "faiss.IndexFlatIP (exact inner product, fp32)" + (f" on {placement(gpus)}" if gpus else "")
    )


def search_merged(
    doc_ids: Sequence[str],
    doc_emb: np.ndarray,
    query_ids: Sequence[str],
    query_emb: np.ndarray,
    k: int = 1000,
    *,
    fp16: bool = False,
    device: Any = None,
) -> tuple[dict[str, dict[str, float]], dict[str, Any]]:
    """:func:`harness.retrieval.dense.retrieve` over one index of the merged matrix (on the GPUs for a CUDA
    ``device`` with a GPU faiss); stats say which index and where."""

    gpus = 0 if fp16 else faiss_gpus(device)
    index, label = build_search_index(doc_emb, fp16=fp16, device=device if gpus else None)
    run, stats = retrieve(query_ids, query_emb, Shard(index, list(doc_ids), placement(gpus, device, fp16=fp16)), k=k)
    stats["index"] = label
    return run, stats


# ---------------------------------------------------------------------------- distributed driver


def waiting_group(timeout_s: float = BARRIER_TIMEOUT_S) -> Any:
    """A gloo process group for waiting on every rank after encoding: CPU objects on any backend,
    and a timeout long enough for a resumed rank with nothing left to wait for one with hours left."""

    import torch.distributed as dist

    return dist.new_group(backend="gloo", timeout=timedelta(seconds=timeout_s))


@dataclass
class DistributedEncoding:
    """One process's view: every rank's report; the merged ids/matrix on rank 0 only."""

    rank: int
    world_size: int
    encoder: Any
    reports: list[ShardReport]
    doc_ids: list[str] | None = None
    embeddings: np.ndarray | None = None
    summary: dict[str, Any] = field(default_factory=dict)


def encode_distributed(
    model: str | Path,
    passages: Passages,
    out_dir: str | Path,
    *,
    shard_size: int = 10_000,
    batch_size: int | None = None,
    device: str | None = None,
    show_progress: bool = True,
    barrier_timeout_s: float = BARRIER_TIMEOUT_S,
    merge: bool = True,
) -> DistributedEncoding:
    """Every rank encodes its slice (resuming), waits for the others, then rank 0 merges
    (``merge=False``: leaves the chunks for :func:`index_shards`, without the fp32 matrix in RAM).

    Under torchrun RANK/WORLD_SIZE/MASTER_* come from the environment; without them this is one
    process doing all the work. The process group is left (destroyed) if this call created it.
    """
    import torch.distributed as dist

    from harness.training import distributed as D

    created = not (dist.is_available() and dist.is_initialized())
    info = D.init_distributed(device)
    try:
        encoder = load_zero_shot_encoder(resolve_model_path(model), device=str(info.device))
        batch_size = default_batch_size(encoder.device) if batch_size is None else batch_size
        report = encode_corpus_sharded(
            encoder,
            passages,
            out_dir,
            rank=info.rank,
            world_size=info.world_size,
            shard_size=shard_size,
            batch_size=batch_size,
            show_progress=show_progress,
        )
        reports = [report]
        if info.distributed:
            group = waiting_group(barrier_timeout_s)
            gathered: list[Any] = [None] * info.world_size
            dist.all_gather_object(gathered, asdict(report), group=group)
            dist.barrier(group=group)
            reports = [ShardReport(**r) for r in gathered]
        result = DistributedEncoding(info.rank, info.world_size, encoder, reports)
        if info.is_main:
            if merge:
                result.doc_ids, result.embeddings = merge_shards(out_dir)
            manifest = _read_manifest(Path(out_dir))
            seconds = max(r.seconds for r in reports)
            encoded = sum(r.passages_encoded for r in reports)
            result.summary = {
                "out_dir": str(out_dir),
                "docs": int(manifest["passages"]),
                "dim": int(encoder.dim),
                "world_size": info.world_size,
                "shard_size": shard_size,
                "batch_size": batch_size,
                "batching": encoder.batching(batch_size),
                "precision": encoder.precision,
                "device": str(info.device),
                "passages_encoded": encoded,
                "chunks_skipped": sum(r.chunks_skipped for r in reports),
                "encode_seconds": round(seconds, 3),
                "passages_per_second": round(encoded / seconds, 1) if seconds > 0 else None,
                "ranks": [asdict(r) for r in reports],
            }
        return result
    finally:
        if created:
            D.cleanup()
