"""Data stages at growing corpus sizes: seconds, peak RSS and disk per stage and size (issue 39).

Each (stage, size) runs in a fresh process, so its peak RSS (``ru_maxrss``, imports included) is its
own; disk is the size of what the stage writes. The corpora are synthetic and deterministic (seeded
per document): words drawn from a Zipf vocabulary, sentence and document lengths log-normal, about
one MS MARCO passage (~60 words) per document at the median, a long tail of longer documents. The
stages are the ones that stream (memory meant to stay flat as the corpus grows):

- ``passages``: harness.corpus.passage_shards.write_passages (the passages stage of a paper profile:
  Punkt on the corpus prefix, then shards of 10,000 documents), on ``size`` documents, with a
  WordPiece tokenizer trained on the first 2,000 documents (not timed);
- ``vector_store``: ``size`` float32 vectors (``--dim``) written in chunk files as an encoding does,
  then merged into the cache's one .npy through a memory map (harness.retrieval.sharded);
- ``search``: exact top-``--k`` of ``--queries`` queries over that memory-mapped file in chunks
  (harness.retrieval.dense.search_vectors; ``--chunk-rows`` forces chunking at small sizes).

Not measured here (yet): BM25 indexing and search, negatives, tokenisation and loading of
pre-training data, encoding with a model, impact indexing: their stages do not stream yet.

    python bench/bench_scale.py [--sizes 10000 100000] [--passage-sizes 1000 10000] [--dim 128]
                                [--stages passages vector_store search] [--queries 200] [--k 100]
                                [--chunk-rows N] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import random
import resource
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

STAGES = ("passages", "vector_store", "search")
VOCAB = 20_000
CHUNK = 10_000  # vectors per chunk file, as harness.retrieval.corpus_vectors.CHUNK_PASSAGES


def _word(rank: int) -> str:
    """A pronounceable pseudo-word per vocabulary rank (frequent words short)."""
    consonants, vowels = "bcdfghjklmnprstvz", "aeiou"
    out, n = [], rank + 1
    while n:
        n, r = divmod(n, len(consonants) * len(vowels))
        out.append(consonants[r % len(consonants)] + vowels[r // len(consonants)])
    return "".join(out)


WORDS = [_word(r) for r in range(VOCAB)]
CUMULATIVE = list(__import__("itertools").accumulate(1.0 / (r + 1) for r in range(VOCAB)))  # Zipf, s = 1


def document(i: int, seed: int = 0) -> dict[str, str]:
    """Document ``i`` of the synthetic corpus (the same for every run and size)."""
    rng = random.Random(seed * 1_000_003 + i)
    words = max(5, int(rng.lognormvariate(math.log(60), 0.6)))
    sentences, left = [], words
    while left > 0:
        n = min(left, max(3, int(rng.lognormvariate(math.log(15), 0.5))))
        picked = rng.choices(WORDS, cum_weights=CUMULATIVE, k=n)
        sentences.append(" ".join(picked).capitalize() + ".")
        left -= n
    return {"title": " ".join(rng.choices(WORDS, cum_weights=CUMULATIVE, k=rng.randint(0, 6))).title(),
            "text": " ".join(sentences)}


def documents(n: int) -> Iterator[tuple[str, dict[str, str]]]:
    for i in range(n):
        yield f"doc{i}", document(i)


def disk_mib(path: Path) -> float:
    files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
    return sum(p.stat().st_size for p in files) / 2**20


def run_passages(size: int, folder: Path, args: argparse.Namespace) -> dict[str, Any]:
    from harness.corpus.passage_shards import write_passages
    from harness.corpus.tokenizer import train_wordpiece

    sample = [d["title"] + " " + d["text"] for _, d in documents(min(size, 2000))]
    tok = train_wordpiece(sample, folder / "tokenizer", vocab_size=8000)
    started = time.perf_counter()
    counts = write_passages(lambda: documents(size), tok, folder / "passages.jsonl", folder / "work", 144,
                            punkt_train_chars=2_000_000)
    seconds = time.perf_counter() - started
    shutil.rmtree(folder / "tokenizer")
    return {"seconds": seconds, "items": counts["passages"]}


def _vectors(start: int, end: int, dim: int) -> Any:
    import numpy as np

    return np.random.default_rng(start).standard_normal((end - start, dim), dtype=np.float32)


def run_vector_store(size: int, folder: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Chunk files as harness.retrieval.sharded writes them (manifest + .npy + .json), then the merge."""
    from harness.core.fsutil import atomic_write_text
    from harness.retrieval import sharded
    from harness.stages.artifacts import hash_texts

    chunks = folder / "chunks"
    chunks.mkdir(parents=True)
    ids = [f"doc{i}" for i in range(size)]
    names = {}
    for k, start in enumerate(range(0, size, CHUNK)):
        end = min(size, start + CHUNK)
        name = f"rank0-chunk{k:05d}"
        sharded._write_chunk(chunks, name, ids[start:end], start, end, _vectors(start, end, args.dim))
        names[name] = {"rank": 0, "start": start, "end": end, "ids_sha256": hash_texts(ids[start:end])}
    atomic_write_text(chunks / sharded.MANIFEST, json.dumps({
        "format": sharded.FORMAT, "passages": size, "ids_sha256": hash_texts(ids), "chunks": names}))
    del ids
    started = time.perf_counter()
    sharded.merge_shards_to_file(chunks, folder / "embeddings.npy")
    seconds = time.perf_counter() - started
    shutil.rmtree(chunks)
    return {"seconds": seconds, "items": size}


def run_search(size: int, folder: Path, args: argparse.Namespace) -> dict[str, Any]:
    import numpy as np

    from harness.retrieval.dense import chunk_rows, search_vectors

    with open(folder / "embeddings.npy", "wb") as f:  # written as the store is: chunk by chunk, never whole
        np.lib.format.write_array_header_1_0(f, {"descr": "<f4", "fortran_order": False, "shape": (size, args.dim)})
        for start in range(0, size, CHUNK):
            f.write(_vectors(start, min(size, start + CHUNK), args.dim).tobytes())
    docs = np.load(folder / "embeddings.npy", mmap_mode="r")
    queries = np.random.default_rng(7).standard_normal((args.queries, args.dim), dtype=np.float32)
    rows = args.chunk_rows or chunk_rows(args.dim)
    started = time.perf_counter()
    search_vectors(docs, queries, args.k, rows=rows)
    return {"seconds": time.perf_counter() - started, "items": size, "chunks": math.ceil(size / rows)}


RUNNERS = {"passages": run_passages, "vector_store": run_vector_store, "search": run_search}


def _child(stage: str, size: int, folder: str, args: argparse.Namespace, out: Any) -> None:
    result = RUNNERS[stage](size, Path(folder), args)
    result["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    result["disk_mib"] = disk_mib(Path(folder))
    out.send(result)


def measure(stage: str, size: int, args: argparse.Namespace) -> dict[str, Any]:
    """One (stage, size) in a fresh process and a fresh folder (removed after)."""
    ctx = multiprocessing.get_context("spawn")
    with tempfile.TemporaryDirectory(prefix=f"bench_scale_{stage}_", dir=args.tmp) as folder:
        recv, send = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_child, args=(stage, size, folder, args, send))
        proc.start()
        result = recv.recv() if recv.poll(args.timeout) else None
        proc.join()
        if result is None or proc.exitcode:
            raise SystemExit(f"bench_scale: {stage} at {size:,} failed (exit code {proc.exitcode})")
    return {"stage": stage, "passages": size, "seconds": round(result["seconds"], 3),
            "peak_rss_mib": round(result["peak_rss_mib"], 1), "disk_mib": round(result["disk_mib"], 1),
            **{k: result[k] for k in ("items", "chunks") if k in result}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000],
                        help="corpus sizes of the vector stages (vectors)")
    parser.add_argument("--passage-sizes", type=int, nargs="+", default=[1_000, 10_000],
                        help="corpus sizes of the passages stage (documents; ~5 ms each on a loaded 2-core machine)")
    parser.add_argument("--stages", nargs="+", choices=STAGES, default=list(STAGES))
    parser.add_argument("--dim", type=int, default=128, help="vector dimension (768 for BERT-base: 6x the disk)")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--k", type=int, default=100)
    parser.add_argument("--chunk-rows", type=int, default=None, help="rows per search chunk (default: 2 GiB)")
    parser.add_argument("--tmp", default=None, help="folder for the stages' files (default: the system's)")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds one (stage, size) may take")
    parser.add_argument("--json", type=Path, default=None, help='write {"rows": [...]} here')
    args = parser.parse_args(argv)

    from harness.core.text_table import format_table

    rows = []
    for stage in args.stages:
        for size in sorted(args.passage_sizes if stage == "passages" else args.sizes):
            rows.append(measure(stage, size, args))
            r = rows[-1]
            print(f"{stage:<13} {size:>10,}  {r['seconds']:>9.2f} s  {r['peak_rss_mib']:>8.1f} MiB RSS  "
                  f"{r['disk_mib']:>9.1f} MiB disk", flush=True)
    print()
    print(f"dim {args.dim}; search: {args.queries} queries, top {args.k}; one fresh process per row")
    print(format_table(["stage", "size", "seconds", "peak RSS MiB", "disk MiB", "items"],
                       [[r["stage"], f"{r['passages']:,}", f"{r['seconds']:.2f}", f"{r['peak_rss_mib']:.1f}",
                         f"{r['disk_mib']:.1f}", f"{r.get('items', '')}"] for r in rows]))
    if args.json:
        args.json.write_text(json.dumps({"rows": rows}, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
