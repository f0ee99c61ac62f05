"""Data stages at growing corpus sizes: seconds, peak RSS and disk per stage and size (issue 39).

Each (stage, size) runs in a fresh process, so its peak RSS is its own: ``ru_maxrss`` of the process
(imports included) or of its largest child (the Lucene indexer's JVM), whichever is larger, with the
child's given apart as ``child_rss_mib``; disk is the size of what the stage writes. The corpora are
synthetic and deterministic (seeded per document): words drawn from a Zipf vocabulary, sentence and
document lengths log-normal, about one MS MARCO passage (~60 words) per document at the median, a long
tail of longer documents; training queries are one per ``--passages-per-query`` passages (MS MARCO:
8.8M / 502,939 = 17.5), each with one judged positive. The stages, named as the paper plans name them:

- ``passages``: harness.corpus.passage_shards.write_passages (the passages stage of a paper profile:
  Punkt on the corpus prefix, then shards of 10,000 documents), on ``size`` documents, with a
  WordPiece tokenizer trained on the first 2,000 documents (not timed);
- ``index``: harness.retrieval.bm25.build_index on the documents as a stream (the JsonCollection
  written as read, then pyserini's Lucene indexer, multifield, ``--threads``); the index is kept for
  ``retrieve`` at the same size;
- ``retrieve``: BM25 top-``--depth`` of a fixed set of ``--bm25-queries`` queries (the same at every
  size) through harness.retrieval.bm25.iter_search, written with harness.data.formats.stream_trec_run
  as the retrieve stage does (the index is built first, untimed, when ``index`` did not run);
- ``negatives``: a depth-200 run of ``--negatives-queries`` training queries (the same at every size,
  written untimed) turned into training negatives as the fine-tuning stages do: iter_trec_run ->
  iter_negative_pool -> a pool file. The query set is held fixed because the bound is about the corpus:
  the run, the pools and the qrels lookup grow with the queries (each query's positives are looked up
  in the benchmark's qrels dict, which every fine-tuning stage loads whole), not with the passages;
  ``--negatives-queries 0`` scales them with the corpus instead (one per ``--passages-per-query``);
- ``pretrain_data``: passages.jsonl (written untimed) opened as the pretrain stage does
  (harness.corpus.passage_file.PassageFile), one epoch of span pairs drawn lazily
  (harness.corpus.epoch_examples.EpochExamples) and every pair built and tokenised in batches of 256
  (the trainer's collate tokenises per micro-batch);
- ``teacher_pairs``: the stage-3 teacher's (query, passage text) pairs, ``--teacher-candidates`` per
  training query, the candidates a stream, in chunks (harness.finetune.teacher_pairs.iter_pair_chunks;
  texts from a cycle of 4,096 synthetic passages, not a corpus dict), scored by text length (no model)
  and written one query at a time as teacher_stage writes scores.json (iter_query_scores,
  write_scores_json);
- ``impact_index``: ``--impact-terms`` quantised impacts per document written as a
  JsonVectorCollection and indexed by Lucene (harness.retrieval.impact.build_impact_index);
- ``encode``: a tiny BERT (2 layers, hidden 32) encodes the corpus, read as a stream, into chunk files
  (harness.retrieval.shard_encoding.encode_corpus_sharded, as corpus_vectors does with ``iter_corpus``);
- ``vector_store``: ``size`` float32 vectors (``--dim``) written in chunk files as an encoding does,
  then merged into the cache's one .npy through a memory map (harness.retrieval.shard_merge);
- ``search``: exact top-``--k`` of ``--queries`` queries over that memory-mapped file in chunks
  (harness.retrieval.dense.search_vectors) in chunks of SEARCH_CHUNK_BYTES (32 MiB; runs use 2 GiB:
  search's memory is one chunk, so the bench's chunk is set below its smallest size; ``--chunk-rows``
  overrides); the row says ``chunk_rows``.

    python bench/bench_scale.py [--stages ...] [--size STAGE=N,N ...] [--json FILE]
    (sizes per stage: see SIZES; ``--size index=10000,100000`` overrides one stage's)
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

STAGES = (
    "passages",
    "index",
    "retrieve",
    "negatives",
    "pretrain_data",
    "teacher_pairs",
    "impact_index",
    "encode",
    "vector_store",
    "search",
)
# Default sizes per stage: seven stages reach 1M passages; the others stop where their
# cost on a 2-core machine does (Punkt ~3 ms a document, JSON impacts, a model), always 10x apart.
SIZES = {
    "passages": (10_000, 100_000),
    "index": (100_000, 1_000_000),
    "retrieve": (100_000, 1_000_000),
    "negatives": (100_000, 1_000_000),
    "pretrain_data": (100_000, 1_000_000),
    "teacher_pairs": (100_000, 1_000_000),
    "impact_index": (10_000, 100_000),
    "encode": (1_000, 10_000),
    "vector_store": (100_000, 1_000_000),
    "search": (100_000, 1_000_000),
}
VOCAB = 20_000
CHUNK = 10_000  # vectors per chunk file, as harness.retrieval.corpus_vectors.CHUNK_PASSAGES
# search's memory is one chunk of vectors (its mapped pages) plus the top-k arrays, whatever the corpus.
# Runs read 2 GiB chunks (harness.retrieval.dense.CHUNK_BYTES): at dim 128 that is 4.2M rows, more than
# the sizes measured here, so the bench reads 32 MiB chunks (65,536 rows at dim 128), smaller than its
# smallest size, so both sizes search several chunks and the bound shows.
SEARCH_CHUNK_BYTES = 32 * 2**20


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
    return {
        "title": " ".join(rng.choices(WORDS, cum_weights=CUMULATIVE, k=rng.randint(0, 6))).title(),
        "text": " ".join(sentences),
    }


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
    counts = write_passages(
        lambda: documents(size), tok, folder / "passages.jsonl", folder / "work", 144, punkt_train_chars=2_000_000
    )
    seconds = time.perf_counter() - started
    shutil.rmtree(folder / "tokenizer")
    return {"seconds": seconds, "items": counts["passages"]}


def _vectors(start: int, end: int, dim: int) -> Any:
    import numpy as np

    return np.random.default_rng(start).standard_normal((end - start, dim), dtype=np.float32)


def run_vector_store(size: int, folder: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Chunk files as harness.retrieval.shard_encoding writes them (manifest + .npy + .json; the ids hashed as
    they are made, no list of them), then the merge into the cache's .npy and doc_ids.json."""
    from harness.core.fsutil import atomic_write_text
    from harness.retrieval.shard_encoding import write_chunk
    from harness.retrieval.shard_manifest import FORMAT, MANIFEST
    from harness.retrieval.shard_merge import merge_shards_to_file
    from harness.stages.artifacts import TextHasher, hash_texts

    chunks = folder / "chunks"
    chunks.mkdir(parents=True)
    every = TextHasher()
    names = {}
    for k, start in enumerate(range(0, size, CHUNK)):
        end = min(size, start + CHUNK)
        name = f"rank0-chunk{k:05d}"
        ids = [f"doc{i}" for i in range(start, end)]
        for doc_id in ids:
            every.update(doc_id)
        write_chunk(chunks, name, ids, start, end, _vectors(start, end, args.dim))
        names[name] = {"rank": 0, "start": start, "end": end, "ids_sha256": hash_texts(ids)}
    atomic_write_text(
        chunks / MANIFEST,
        json.dumps({"format": FORMAT, "passages": size, "ids_sha256": every.hexdigest(), "chunks": names}),
    )
    del ids
    started = time.perf_counter()
    merge_shards_to_file(chunks, folder / "embeddings.npy", folder / "doc_ids.json")
    seconds = time.perf_counter() - started
    shutil.rmtree(chunks)
    return {"seconds": seconds, "items": size, "dim": args.dim}


def run_search(size: int, folder: Path, args: argparse.Namespace) -> dict[str, Any]:
    import numpy as np

    from harness.retrieval.dense import chunk_rows, search_vectors

    with open(folder / "embeddings.npy", "wb") as f:  # written as the store is: chunk by chunk, never whole
        np.lib.format.write_array_header_1_0(f, {"descr": "<f4", "fortran_order": False, "shape": (size, args.dim)})
        for start in range(0, size, CHUNK):
            f.write(_vectors(start, min(size, start + CHUNK), args.dim).tobytes())
    docs = np.load(folder / "embeddings.npy", mmap_mode="r")
    queries = np.random.default_rng(7).standard_normal((args.queries, args.dim), dtype=np.float32)
    rows = args.chunk_rows or chunk_rows(args.dim, SEARCH_CHUNK_BYTES)
    started = time.perf_counter()
    search_vectors(docs, queries, args.k, rows=rows)
    return {
        "seconds": time.perf_counter() - started,
        "items": size,
        "chunks": math.ceil(size / rows),
        "chunk_rows": rows,
        "dim": args.dim,
    }


FIELDS = {"contents": 1.0, "title": 1.0}  # the papers' BM25 setting (multifield)


def _bm25_index(size: int, folder: Path, args: argparse.Namespace) -> dict[str, Any]:
    from harness.retrieval import bm25

    return bm25.build_index(documents(size), folder, FIELDS, threads=args.threads)


def run_index(size: int, folder: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Lucene BM25 index of ``size`` documents, streamed into the collection file; kept for ``retrieve``."""
    started = time.perf_counter()
    built = _bm25_index(size, folder / "index", args)
    seconds = time.perf_counter() - started
    disk = disk_mib(folder)
    keep = Path(args.shared) / f"index-{size}"
    shutil.rmtree(keep, ignore_errors=True)
    shutil.move(str(folder / "index"), keep)
    return {"seconds": seconds, "items": built["documents"], "disk_mib": disk}


def bm25_queries(n: int, seed: int = 11) -> dict[str, str]:
    """A fixed query set (the same at every size): 2-8 words of the vocabulary past its 50 commonest."""
    rng = random.Random(seed)
    tail = CUMULATIVE[50:]
    base = CUMULATIVE[49]
    weights = [c - base for c in tail]
    return {f"q{i:05d}": " ".join(rng.choices(WORDS[50:], cum_weights=weights, k=rng.randint(2, 8))) for i in range(n)}


def run_retrieve(size: int, folder: Path, args: argparse.Namespace) -> dict[str, Any]:
    from harness.data.formats import stream_trec_run
    from harness.retrieval import bm25
    from harness.retrieval.java import ensure_java_home

    index = Path(args.shared) / f"index-{size}"
    if not index.is_dir():
        _bm25_index(size, index, args)
    ensure_java_home(index)  # the heap a run's search of this index gets
    queries = bm25_queries(args.bm25_queries)
    from pyserini.search.lucene import LuceneSearcher  # noqa: F401  the JVM starts here, before the clock

    started = time.perf_counter()
    hits = bm25.iter_search(index, queries, args.depth, 0.9, 0.4, FIELDS, args.threads, progress=False)
    written = stream_trec_run(hits, folder / "run.trec", tag="bm25-bench")
    return {"seconds": time.perf_counter() - started, "items": written}


def _training_queries(size: int, args: argparse.Namespace) -> int:
    return max(1, size // args.passages_per_query)


def synthetic_run(size: int, queries: int, depth: int) -> Iterator[tuple[str, dict[str, float]]]:
    """Query ``q``'s ``depth`` distinct documents (a stride prime to the corpus size), scores falling."""
    stride = 104_729 if size % 104_729 else 1_299_709
    for q in range(queries):
        first = (q * 7_919) % size
        yield (
            f"q{q:08d}",
            {f"doc{(first + j * stride) % size}": float(depth - j) + 0.5 for j in range(min(depth, size))},
        )


def synthetic_qrels(queries: int, size: int) -> dict[str, dict[str, int]]:
    """One judged positive per query: its rank-``q % 8`` document, or one its run lacks for q % 10 == 9."""
    stride = 104_729 if size % 104_729 else 1_299_709
    return {
        f"q{q:08d}": {f"doc{((q * 7_919) % size + (q % 8) * stride) % size}" if q % 10 != 9 else f"pos{q}": 1}
        for q in range(queries)
    }


def run_negatives(size: int, folder: Path, args: argparse.Namespace) -> dict[str, Any]:
    from harness.data.formats import iter_trec_run, stream_trec_run
    from harness.finetune.negatives import iter_negative_pool, write_negative_pool

    queries = args.negatives_queries or _training_queries(size, args)
    stream_trec_run(synthetic_run(size, queries, 200), folder / "run.trec", tag="bm25-bench")
    qrels = synthetic_qrels(queries, size)
    started = time.perf_counter()
    written = write_negative_pool(
        iter_negative_pool(iter_trec_run(folder / "run.trec"), qrels, 200), folder / "negatives.tsv"
    )
    return {"seconds": time.perf_counter() - started, "items": written, "queries": queries}


def run_pretrain_data(size: int, folder: Path, args: argparse.Namespace) -> dict[str, Any]:
    from harness.corpus.epoch_examples import EpochExamples
    from harness.corpus.passage_file import PassageFile
    from harness.corpus.passages import Passage, load_tokenizer, passage_line
    from harness.corpus.tokenizer import train_wordpiece

    sample = [d["title"] + " " + d["text"] for _, d in documents(min(size, 2000))]
    tok = load_tokenizer(train_wordpiece(sample, folder / "tokenizer", vocab_size=8000))
    with open(folder / "passages.jsonl", "w", encoding="utf-8") as f:
        for i, (doc_id, d) in enumerate(documents(size)):
            f.write(passage_line(Passage(pid=str(i), doc_id=doc_id, text=d["text"])))
    started = time.perf_counter()
    passages = PassageFile(folder / "passages.jsonl")  # as pretrain_stage reads them: lazily
    examples = EpochExamples("span", passages, None, epoch=0, seed=42)
    tokens = 0
    for start in range(0, len(examples), 256):
        batch = examples[start : start + 256]
        enc = tok([a for a, _ in batch], [c for _, c in batch], truncation=True, max_length=144)
        tokens += sum(len(ids) for ids in enc["input_ids"])
    seconds = time.perf_counter() - started
    shutil.rmtree(folder / "tokenizer")
    return {"seconds": seconds, "items": len(examples), "tokens": tokens}


class _CyclePassages(dict):
    """Doc id ``docN`` -> synthetic document ``N % 4096`` (computed once): texts without a corpus dict."""

    def __missing__(self, key: str) -> dict[str, str]:
        n = int(key[3:]) % 4096
        value = document(n)
        self[f"doc{n}"] = value
        return value

    def __getitem__(self, key: str) -> dict[str, str]:
        return super().__getitem__(f"doc{int(key[3:]) % 4096}")


def run_teacher_pairs(size: int, folder: Path, args: argparse.Namespace) -> dict[str, Any]:
    from harness.finetune.teacher_pairs import iter_pair_chunks, iter_query_scores, write_scores_json

    queries_n = _training_queries(size, args)
    queries = bm25_queries(queries_n, seed=13)  # the stage holds the training queries' texts too
    stride = 104_729 if size % 104_729 else 1_299_709
    candidates = (
        (q, [f"doc{(i * 7_919 + j * stride) % size}" for j in range(args.teacher_candidates)])
        for i, q in enumerate(queries)
    )  # a stream, as teacher_stage makes them from its groups
    passages = _CyclePassages()
    counts = {"chunks": 0}

    def scored() -> Iterator[tuple[list[tuple[str, str]], list[float]]]:
        """A stand-in teacher (score = text length), so what is measured is the data's path, not a model."""
        for keys, chunk in iter_pair_chunks(queries, candidates, passages, " [SEP] "):
            counts["chunks"] += 1
            yield keys, [float(len(q) + len(p)) for q, p in chunk]

    started = time.perf_counter()
    pairs = write_scores_json(iter_query_scores(scored()), folder / "scores.json")
    return {"seconds": time.perf_counter() - started, "items": pairs, "chunks": counts["chunks"], "queries": queries_n}


def impact_vectors(size: int, terms: int) -> Iterator[tuple[str, dict[str, int]]]:
    for i in range(size):
        rng = random.Random(1_000_003 * 7 + i)
        picked = dict.fromkeys(rng.choices(WORDS, cum_weights=CUMULATIVE, k=terms))
        yield f"doc{i}", {w: rng.randint(1, 100) for w in picked}


def run_impact_index(size: int, folder: Path, args: argparse.Namespace) -> dict[str, Any]:
    from harness.retrieval.impact import build_impact_index

    started = time.perf_counter()
    stats = build_impact_index(impact_vectors(size, args.impact_terms), folder / "index", threads=args.threads)
    return {"seconds": time.perf_counter() - started, "items": stats["documents"], "postings": stats["postings"]}


def run_encode(size: int, folder: Path, args: argparse.Namespace) -> dict[str, Any]:
    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    from harness.corpus.tokenizer import train_wordpiece
    from harness.retrieval.encoder import load_encoder
    from harness.retrieval.shard_encoding import encode_corpus_sharded

    torch.set_num_threads(args.threads)
    sample = [d["title"] + " " + d["text"] for _, d in documents(min(size, 2000))]
    tok_dir = folder / "model"
    train_wordpiece(sample, tok_dir, vocab_size=8000)
    vocab = BertTokenizerFast.from_pretrained(tok_dir).vocab_size
    torch.manual_seed(0)
    BertModel(
        BertConfig(
            vocab_size=vocab,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=64,
            max_position_embeddings=256,
        )
    ).save_pretrained(tok_dir)
    encoder = load_encoder(tok_dir, query_max_length=32, passage_max_length=144, device="cpu")
    started = time.perf_counter()  # the corpus read as a stream, as corpus_vectors reads iter_corpus
    encode_corpus_sharded(
        encoder,
        lambda: documents(size),
        folder / "chunks",
        rank=0,
        world_size=1,
        shard_size=CHUNK,
        batch_size=64,
        show_progress=False,
    )
    seconds = time.perf_counter() - started
    shutil.rmtree(tok_dir)
    return {"seconds": seconds, "items": size, "dim": encoder.dim}


RUNNERS = {
    "passages": run_passages,
    "index": run_index,
    "retrieve": run_retrieve,
    "negatives": run_negatives,
    "pretrain_data": run_pretrain_data,
    "teacher_pairs": run_teacher_pairs,
    "impact_index": run_impact_index,
    "encode": run_encode,
    "vector_store": run_vector_store,
    "search": run_search,
}


def _child(stage: str, size: int, folder: str, args: argparse.Namespace, out: Any) -> None:
    result = RUNNERS[stage](size, Path(folder), args)
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    child = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # the largest finished child
    result["peak_rss_mib"] = max(own, child)
    if child:
        result["child_rss_mib"] = child
    result.setdefault("disk_mib", disk_mib(Path(folder)))
    out.send(result)


def measure(stage: str, size: int, args: argparse.Namespace) -> dict[str, Any]:
    """One (stage, size) in a fresh process and a fresh folder (removed after)."""
    ctx = multiprocessing.get_context("spawn")
    with tempfile.TemporaryDirectory(prefix=f"bench_scale_{stage}_", dir=args.tmp) as folder:
        recv, send = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_child, args=(stage, size, folder, args, send))
        proc.start()
        send.close()  # the child's end only: a child that dies makes poll() see EOF, not wait out the timeout
        try:
            result = recv.recv() if recv.poll(args.timeout) else None
        except EOFError:
            result = None
        if result is None and proc.is_alive():
            proc.kill()
        proc.join()
        if result is None or proc.exitcode:
            raise SystemExit(f"bench_scale: {stage} at {size:,} failed (exit code {proc.exitcode})")
    return {
        "stage": stage,
        "passages": size,
        "seconds": round(result["seconds"], 3),
        "peak_rss_mib": round(result["peak_rss_mib"], 1),
        "disk_mib": round(result["disk_mib"], 1),
        **{
            k: round(result[k], 1) if k == "child_rss_mib" else result[k]
            for k in ("items", "chunks", "chunk_rows", "dim", "queries", "postings", "tokens", "child_rss_mib")
            if k in result
        },
    }


def _sizes(values: list[str]) -> dict[str, tuple[int, ...]]:
    """``--size index=10000,100000`` -> that stage's sizes instead of SIZES's."""
    out = dict(SIZES)
    for value in values:
        stage, _, sizes = value.partition("=")
        if stage not in SIZES or not sizes:
            raise SystemExit(
                f"bench_scale: --size wants STAGE=N[,N...] with a stage of {', '.join(STAGES)}, got {value!r}"
            )
        out[stage] = tuple(int(n.replace("_", "")) for n in sizes.split(","))
    return out


PROJECT_TO = (8_800_000, 21_000_000)  # MS MARCO passages; DPR Wikipedia psgs_w100


def projections(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per stage, from its two largest sizes: slopes per 1M passages (seconds, MiB of RSS, MiB of disk),
    the growth ratios Done-when 1 bounds (RSS <= 1.5x and <= 4 GiB over 10x; seconds at most linear),
    and the straight-line values at PROJECT_TO (RSS never projected below the larger size's)."""
    out = []
    for stage in STAGES:
        mine = sorted((r for r in rows if r["stage"] == stage), key=lambda r: r["passages"])
        if len(mine) < 2:
            continue
        a, b = mine[-2], mine[-1]
        span = (b["passages"] - a["passages"]) / 1e6
        slope = {k: (b[k] - a[k]) / span for k in ("seconds", "peak_rss_mib", "disk_mib")}
        row = {
            "stage": stage,
            "from": a["passages"],
            "to": b["passages"],
            "size_ratio": b["passages"] / a["passages"],
            "rss_ratio": b["peak_rss_mib"] / a["peak_rss_mib"],
            "seconds_ratio": b["seconds"] / a["seconds"] if a["seconds"] else math.inf,
            **{f"{k}_per_1m": v for k, v in slope.items()},
        }
        row["rss_bound_holds"] = row["rss_ratio"] <= 1.5 and b["peak_rss_mib"] <= 4096
        row["seconds_bound_holds"] = row["seconds_ratio"] <= row["size_ratio"] * 1.1  # 10% for timing noise
        for n in PROJECT_TO:
            more = (n - b["passages"]) / 1e6
            row[f"at_{n}"] = {
                "seconds": b["seconds"] + slope["seconds"] * more,
                "peak_rss_mib": max(b["peak_rss_mib"], b["peak_rss_mib"] + slope["peak_rss_mib"] * more),
                "disk_mib": b["disk_mib"] + slope["disk_mib"] * more,
            }
        out.append(row)
    return out


def print_projections(rows: list[dict[str, Any]]) -> None:
    from harness.core.text_table import format_table

    table = []
    for p in projections(rows):
        m, w = p[f"at_{PROJECT_TO[0]}"], p[f"at_{PROJECT_TO[1]}"]
        table.append(
            [
                p["stage"],
                f"{p['from']:,}->{p['to']:,}",
                f"{p['seconds_ratio']:.2f}",
                f"{p['rss_ratio']:.2f}",
                "yes" if p["rss_bound_holds"] else "NO",
                "yes" if p["seconds_bound_holds"] else "NO",
                f"{p['seconds_per_1m']:.0f}",
                f"{p['peak_rss_mib_per_1m']:.0f}",
                f"{p['disk_mib_per_1m']:.0f}",
                f"{m['seconds'] / 3600:.2f} h / {m['peak_rss_mib'] / 1024:.1f} GiB / {m['disk_mib'] / 1024:.1f} GiB",
                f"{w['seconds'] / 3600:.2f} h / {w['peak_rss_mib'] / 1024:.1f} GiB / {w['disk_mib'] / 1024:.1f} GiB",
            ]
        )
    print(
        format_table(
            [
                "stage",
                "sizes",
                "time x",
                "RSS x",
                "RSS bound",
                "time bound",
                "s/1M",
                "RSS MiB/1M",
                "disk MiB/1M",
                "8.8M: time / RSS / disk",
                "21M: time / RSS / disk",
            ],
            table,
        )
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stages", nargs="+", choices=STAGES, default=list(STAGES))
    parser.add_argument(
        "--size",
        action="append",
        default=[],
        metavar="STAGE=N,N",
        help="one stage's corpus sizes (default: SIZES in this file)",
    )
    parser.add_argument("--dim", type=int, default=128, help="vector dimension (768 for BERT-base: 6x the disk)")
    parser.add_argument("--queries", type=int, default=200, help="dense search: queries")
    parser.add_argument("--k", type=int, default=100, help="dense search: top k")
    parser.add_argument(
        "--chunk-rows",
        type=int,
        default=None,
        help="rows per search chunk (default: 32 MiB of vectors; runs use 2 GiB)",
    )
    parser.add_argument("--threads", type=int, default=2, help="Lucene (and torch) threads")
    parser.add_argument("--bm25-queries", type=int, default=1000, help="retrieve: the fixed query set's size")
    parser.add_argument("--depth", type=int, default=1000, help="retrieve: BM25 results per query")
    parser.add_argument(
        "--passages-per-query",
        type=int,
        default=20,
        help="training queries = size / this (teacher_pairs; MS MARCO: 17.5)",
    )
    parser.add_argument(
        "--negatives-queries",
        type=int,
        default=50_000,
        help="negatives: training queries at every size (0: size / --passages-per-query)",
    )
    parser.add_argument(
        "--teacher-candidates",
        type=int,
        default=72,
        help="teacher_pairs: candidates per query (MS MARCO stage 3: ~36M pairs / 502,939 queries)",
    )
    parser.add_argument("--impact-terms", type=int, default=100, help="impact_index: terms drawn per document")
    parser.add_argument("--tmp", default=None, help="folder for the stages' files (default: the system's)")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds one (stage, size) may take")
    parser.add_argument("--json", type=Path, default=None, help='write {"rows": [...]} here (after every row)')
    parser.add_argument(
        "--project",
        type=Path,
        default=None,
        help="measure nothing: print the slopes and 8.8M / 21M projections of this JSON's rows",
    )
    args = parser.parse_args(argv)
    if args.project:
        print_projections(json.loads(args.project.read_text(encoding="utf-8"))["rows"])
        return 0
    sizes = _sizes(args.size)

    from harness.core.text_table import format_table

    rows = []
    with tempfile.TemporaryDirectory(prefix="bench_scale_shared_", dir=args.tmp) as shared:
        args.shared = shared  # the BM25 index of ``index`` at a size, read by ``retrieve`` at that size
        for stage in (s for s in STAGES if s in args.stages):
            for size in sorted(sizes[stage]):
                rows.append(measure(stage, size, args))
                r = rows[-1]
                print(
                    f"{stage:<13} {size:>10,}  {r['seconds']:>9.2f} s  {r['peak_rss_mib']:>8.1f} MiB RSS  "
                    f"{r['disk_mib']:>9.1f} MiB disk",
                    flush=True,
                )
                if args.json:
                    args.json.write_text(json.dumps({"rows": rows}, indent=2) + "\n", encoding="utf-8")
    print()
    print(
        f"dim {args.dim}; search: {args.queries} queries, top {args.k}; retrieve: {args.bm25_queries} queries, "
        f"depth {args.depth}; {args.threads} threads; one fresh process per row"
    )
    print(
        format_table(
            ["stage", "size", "seconds", "peak RSS MiB", "disk MiB", "items"],
            [
                [
                    r["stage"],
                    f"{r['passages']:,}",
                    f"{r['seconds']:.2f}",
                    f"{r['peak_rss_mib']:.1f}",
                    f"{r['disk_mib']:.1f}",
                    f"{r.get('items', '')}",
                ]
                for r in rows
            ],
        )
    )
    print()
    print_projections(rows)
    if args.json:
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
