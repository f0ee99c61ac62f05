"""Zero-shot evaluation of any local encoder checkpoint: encode a benchmark, search, score.

    python -m harness eval --model models/Luyu/co-condenser-marco-retriever --dataset scifact --json out.json

    from harness.evaluation.zero_shot import evaluate_model
    summary = evaluate_model("path/to/all-MiniLM-L6-v2", "scifact")
    summary["metrics"]["scifact"]["nDCG@10"]

Steps: the model folder is found with :func:`harness.checkpoints.resolve_model_path` and loaded
with :func:`harness.retrieval.encoder.load_zero_shot_encoder`: ``load_encoder`` reads
pooling and normalisation from the folder itself (sentence-transformers ``modules.json`` and
Pooling config, the harness's ``harness_encoder.json``, else the Tevatron convention: CLS, no
normalisation); explicit arguments win. Maximum lengths: an explicit value, else the folder's
own (``harness_encoder.json``; a sentence-transformers folder's ``max_seq_length`` for queries
and passages alike, as sentence-transformers and BEIR encode), else the papers' 32 / 144; never
more than the model's position limit. The benchmark's corpus is encoded (or read back from the
embedding cache), its judged queries of the evaluation split are encoded, faiss searches exactly
(inner product), and :func:`harness.evaluation.measures.evaluate` scores the run with the
benchmark's official conventions.

BEIR depth: BEIR drops a hit whose doc id equals the query id, so each query is searched to
``depth + 1`` and a ranking keeps ``depth + 1`` hits only when it holds its self-hit, which the
evaluation then drops: every query is scored on exactly ``depth`` documents, as BEIR's own
``top_k + 1`` search does. A saved run (``save_run``) is exactly what was scored, so
``eval --run`` on it gives the same numbers.

Corpus embeddings are cached in ``cache_dir()/embeddings/<key>/`` (``embeddings.npy``,
``doc_ids.json`` and the finished marker of :mod:`harness.artifacts`; the folder is written whole),
``key`` = sha256 of (the model folder's file contents, the settings that decide passage vectors,
the benchmark name and its corpus checksum). Batch size
and device are not part of the key: they change vectors only at float rounding level.

cqadupstack is encoded and searched forum by forum (each forum is its own corpus) and scored as
the mean of the 12 forum means.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from harness.checkpoints import model_fingerprint, resolve_model_path
from harness.errors import HarnessError
from harness.artifacts import finished_meta, mark_finished
from harness.fsutil import PARTIAL, atomic_dir, temp_name
from harness.evaluation.conventions import get_convention
from harness.retrieval.encoder import load_zero_shot_encoder, vector_settings

Run = dict[str, dict[str, float]]

EXPERIMENT = "zero-shot"
# Bump when a change to encoding makes cached corpus embeddings stale.
EMBEDDINGS_FORMAT = 1
# Folder names that say nothing about the model: the run name then includes the parent folder.
_GENERIC_NAMES = {"model", "models", "checkpoint", "checkpoints", "final", "best", "export", "hf", "encoder"}


@dataclass
class ZeroShotOutcome:
    """Everything one zero-shot evaluation produced (``summary`` is what ``evaluate_model`` returns)."""

    summary: dict[str, Any]
    result: Any  # harness.evaluation.measures.EvalResult
    run: Run


# ---------------------------------------------------------------------------- model folder

def run_name_for(path: Path) -> str:
    path = path.resolve()
    if path.name.lower() in _GENERIC_NAMES and path.parent.name:
        return f"{path.parent.name}/{path.name}"
    return path.name


# ---------------------------------------------------------------------------- corpus embeddings

CHUNK_PASSAGES = 10_000  # passages per resumable chunk; corpora up to this size are encoded in one piece


def embeddings_key(fingerprint: str, encoder: Any, benchmark: Any) -> str:
    from harness.artifacts import hash_json

    return hash_json({"format": EMBEDDINGS_FORMAT, "model": fingerprint, "settings": vector_settings(encoder),
                      "benchmark": benchmark.name, "corpus": benchmark.corpus_files()})


EMBEDDINGS_FILE, IDS_FILE = "embeddings.npy", "doc_ids.json"


def _read_cached(folder: Path) -> tuple[list[str], np.ndarray, dict[str, Any]] | None:
    info = finished_meta(folder)
    if info is None:
        return None
    npy = folder / EMBEDDINGS_FILE
    try:
        emb = np.load(npy, mmap_mode="r")
        ids = json.loads((folder / IDS_FILE).read_text(encoding="utf-8"))
        if emb.ndim != 2 or emb.shape[0] != len(ids):
            raise ValueError(f"{emb.shape[0]} vectors for {len(ids)} doc ids")
        return ids, np.asarray(emb, dtype=np.float32), info
    except (OSError, ValueError, KeyError, json.JSONDecodeError) as exc:
        print(f"warning: ignoring a damaged embedding cache {npy} ({exc}); encoding again", file=sys.stderr)
        return None


def _write_cache(folder: Path, ids: list[str], emb: np.ndarray, info: dict[str, Any]) -> None:
    with atomic_dir(folder) as tmp:  # a complete folder or none
        np.save(tmp / EMBEDDINGS_FILE, emb)
        (tmp / IDS_FILE).write_text(json.dumps(ids), encoding="utf-8")
        mark_finished(tmp, {"key": folder.name, **info})


def corpus_embeddings(encoder: Any, benchmark: Any, fingerprint: str, batch_size: int, use_cache: bool = True,
                      show_progress: bool = True) -> tuple[list[str], np.ndarray, dict[str, Any]]:
    """(doc ids, float32 vectors, info) for ``benchmark``'s corpus; info holds encode seconds and the cache path."""
    folder = _embeddings_folder(fingerprint, encoder, benchmark)
    npy = folder / EMBEDDINGS_FILE
    if use_cache and (hit := _read_cached(folder)) is not None:
        ids, emb, info = hit
        print(f"{benchmark.name}: {len(ids):,} passage embeddings read from the cache ({npy})")
        return ids, emb, {"cached": True, "cache_file": str(npy), "encode_seconds": 0.0,
                          "original_encode_seconds": info.get("encode_seconds")}
    corpus = benchmark.corpus()  # a non-embedded corpus is downloaded here (clear error offline)
    if not corpus:
        raise HarnessError(f"the corpus of '{benchmark.name}' is empty")
    print(f"{benchmark.name}: encoding {len(corpus):,} passages (batch {batch_size}, max length "
          f"{encoder.spec.passage_max_length}, {encoder.device})")
    started = time.perf_counter()
    if use_cache:
        # Encoded in chunk files first, so an interrupted encoding of a big corpus resumes from its
        # last complete chunk (harness.retrieval.sharded); merged into the cache file, then removed.
        # Chunks that torchrun ranks finished (encode_corpus_shards) are merged as they are.
        from harness.retrieval.sharded import encode_corpus_sharded, merge_shards, shards_complete

        chunks = _chunks_folder(folder)
        if not shards_complete(chunks):
            encode_corpus_sharded(encoder, corpus, chunks, rank=0, world_size=1, shard_size=CHUNK_PASSAGES,
                                  batch_size=batch_size, show_progress=show_progress)
        ids, emb = merge_shards(chunks)
    else:
        ids, emb = encoder.encode_corpus(corpus, batch_size=batch_size, show_progress=show_progress)
    seconds = time.perf_counter() - started
    info = {"cached": False, "cache_file": str(npy) if use_cache else None, "encode_seconds": seconds}
    if use_cache:
        _write_cache(folder, ids, emb, {"encode_seconds": seconds, "benchmark": benchmark.name,
                                           "settings": vector_settings(encoder), "model": fingerprint})
        shutil.rmtree(chunks, ignore_errors=True)
    return ids, emb, info


def encode_corpus_shards(encoder: Any, benchmark: Any, fingerprint: str, batch_size: int, rank: int,
                         world_size: int, show_progress: bool = True) -> None:
    """This torchrun rank's slice of ``benchmark``'s corpus into the chunk folder that
    :func:`corpus_embeddings` merges (nothing to do when the embeddings are cached already)."""
    from harness.retrieval.sharded import encode_corpus_sharded

    for part in benchmark.sub_benchmarks() or [benchmark]:
        folder = _embeddings_folder(fingerprint, encoder, part)
        if _read_cached(folder) is not None:
            continue
        encode_corpus_sharded(encoder, part.corpus(), _chunks_folder(folder), rank=rank, world_size=world_size,
                              shard_size=CHUNK_PASSAGES, batch_size=batch_size, show_progress=show_progress)


def _embeddings_dir() -> Path:
    from harness.paths import cache_dir

    return cache_dir() / "embeddings"


def _embeddings_folder(fingerprint: str, encoder: Any, benchmark: Any) -> Path:
    """The cache folder of these vectors (``.<key>.partial.tmp/`` beside it while being encoded)."""
    return _embeddings_dir() / embeddings_key(fingerprint, encoder, benchmark)


def _chunks_folder(folder: Path) -> Path:
    """The resumable work folder of ``folder``'s vectors (a temp name: never read as the cache)."""
    return temp_name(folder, PARTIAL)


# ---------------------------------------------------------------------------- search

def _search_part(encoder: Any, part: Any, fingerprint: str, split: str | None, depth: int, batch_size: int,
                 use_cache: bool, show_progress: bool) -> tuple[Run, dict[str, Any]]:
    """One corpus (a cqadupstack forum, else the benchmark): its cached vectors, searched at BEIR's depth."""
    from harness.evaluation.dense_run import judged_queries, retrieve

    judged_queries(part, split)  # checked before the corpus is encoded
    doc_ids, doc_emb, corpus_info = corpus_embeddings(encoder, part, fingerprint, batch_size, use_cache, show_progress)
    self_hits = get_convention(part.name, part.kind).drop_self_hits
    run, stats = retrieve(encoder, part, split, depth, corpus=(doc_ids, doc_emb), batch_size=batch_size,
                          keep_self_hits=self_hits, show_progress=show_progress)
    stats.update(corpus_info)
    return run, stats


def _combine_stats(parts: dict[str, dict[str, Any]], encoder: Any) -> dict[str, Any]:
    """Efficiency over all parts (one part except for cqadupstack)."""
    total = lambda key: sum(float(s[key]) for s in parts.values())  # noqa: E731
    docs, queries = int(total("docs")), int(total("queries"))
    encode_s, search_s, query_s = total("encode_seconds"), total("search_seconds"), total("query_encode_seconds")
    cached = [s["cached"] for s in parts.values()]
    out: dict[str, Any] = {
        "index": next(iter(parts.values()))["index"],
        "docs": docs, "dim": encoder.dim, "index_bytes": int(total("index_bytes")),
        "queries": queries, "k": next(iter(parts.values()))["k"],
        "corpus_embeddings_cached": all(cached) if len(set(cached)) == 1 else "partly",
        "corpus_encode_seconds": round(encode_s, 3),
        "passages_per_second": round(docs / encode_s, 1) if encode_s > 0 else None,
        "query_encode_seconds": round(query_s, 3),
        "index_build_seconds": round(total("index_build_seconds"), 4),
        "search_seconds": round(search_s, 4),
        "qps": round(queries / search_s, 1) if search_s > 0 else None,
        "qps_with_query_encoding": round(queries / (search_s + query_s), 1) if search_s + query_s > 0 else None,
        "device": str(encoder.device), "precision": encoder.precision,
        "cache_files": [s["cache_file"] for s in parts.values() if s.get("cache_file")],
    }
    originals = [s.get("original_encode_seconds") for s in parts.values()]
    if any(o is not None for o in originals):
        out["original_corpus_encode_seconds"] = round(sum(float(o or 0) for o in originals), 3)
    if encoder.device.type == "cpu":
        import torch

        out["torch_threads"] = torch.get_num_threads()
    return out


# ---------------------------------------------------------------------------- the whole evaluation

def run_zero_shot(
    model_path: str | Path,
    dataset: str | Any,
    *,
    pooling: str | None = None,
    normalize: bool | None = None,
    query_max_length: int | None = None,
    passage_max_length: int | None = None,
    batch_size: int = 32,
    depth: int = 1000,
    split: str | None = None,
    measures: Iterable[str] | None = None,
    save_run: str | Path | None = None,
    device: str | None = None,
    precision: str = "fp32",
    use_cache: bool = True,
    track: bool = True,
    show_progress: bool = True,
) -> ZeroShotOutcome:
    """:func:`evaluate_model` keeping the EvalResult (per-query scores) and the run for the CLI."""
    from harness.data.catalog import get_benchmark
    from harness.evaluation.measures import benchmark_qrels, evaluate, merge_subsets

    if depth < 1:
        raise HarnessError(f"depth must be positive, got {depth}")
    if batch_size < 1:
        raise HarnessError(f"batch size must be positive, got {batch_size}")
    bench = get_benchmark(dataset) if isinstance(dataset, str) else dataset
    path = resolve_model_path(model_path)
    qrels = benchmark_qrels(bench, split)  # also rejects an unknown split before any model is loaded
    encoder = load_zero_shot_encoder(path, pooling, normalize, query_max_length, passage_max_length, device, precision)
    fingerprint = model_fingerprint(path)
    parts = bench.sub_benchmarks() or [bench]
    runs: dict[str, Run] = {}
    stats: dict[str, dict[str, Any]] = {}
    for part in parts:
        runs[part.name], stats[part.name] = _search_part(encoder, part, fingerprint, split, depth, batch_size,
                                                         use_cache, show_progress)
    run = merge_subsets(runs) if bench.sub_benchmarks() else runs[bench.name]
    result = evaluate(run, qrels, bench, measures)
    efficiency = _combine_stats(stats, encoder)
    settings = encoder.settings()
    if save_run:
        from harness.data.formats import write_trec_run

        tag = "zeroshot-" + "".join(c if c.isalnum() or c in "-_." else "_" for c in path.resolve().name)
        write_trec_run(run, save_run, tag=tag)
    metrics = {result.benchmark: dict(result.aggregate)}
    metrics.update({name: dict(r.aggregate) for name, r in result.subsets.items()})
    split_name = bench._split(split)
    summary: dict[str, Any] = {
        "command": "eval", "source": "model", "benchmark": bench.name, "split": split_name,
        "model": str(path), "model_name": run_name_for(path), "model_fingerprint": fingerprint,
        "qrels": f"{bench.name} ({split_name})", "primary": result.primary, "metrics": metrics,
        "num_queries": result.num_queries, "missing_queries": len(result.missing_queries),
        "dropped_self_hits": result.dropped_self_hits, "subsets": list(result.subsets),
        "depth": depth, "run": str(save_run) if save_run else None,
        "encoder": settings, "efficiency": efficiency, "mlflow": None,
    }
    if track:
        summary["mlflow"] = _track(summary, result, save_run)
    return ZeroShotOutcome(summary=summary, result=result, run=run)


def evaluate_model(model_path: str | Path, dataset: str | Any, **options: Any) -> dict[str, Any]:
    """Zero-shot evaluation of a local checkpoint on ``dataset``; returns the JSON-ready summary.

    ``options``: pooling ("cls"/"mean"), normalize (bool), query_max_length, passage_max_length
    (None: the folder's own settings, see the module docstring), batch_size (32), depth (1000),
    split (the benchmark's evaluation split), measures (the official ones), save_run (TREC run
    path), device, precision ("fp32"), use_cache (True), track (MLflow, True), show_progress.

    Summary keys: metrics ``{dataset: {measure: value}}`` (plus one entry per cqadupstack forum),
    ``encoder`` (pooling, normalize, max lengths, ... and ``sources``: where each came from),
    ``efficiency`` (qps, index_bytes, corpus_encode_seconds, ...), ``model``, ``mlflow``.
    """
    return run_zero_shot(model_path, dataset, **options).summary


def _track(summary: dict[str, Any], result: Any, save_run: str | Path | None) -> dict[str, Any]:
    from harness.tracking import Tracker

    tracker = Tracker(experiment=EXPERIMENT, run_name=summary["model_name"],
                      tags={"model": summary["model"], "dataset": summary["benchmark"], "split": summary["split"]})
    eff = summary["efficiency"]
    with tracker.run():
        tracker.log_params({"model": summary["model"], "model_fingerprint": summary["model_fingerprint"],
                            "dataset": summary["benchmark"], "split": summary["split"], "depth": summary["depth"],
                            "encoder": {k: v for k, v in summary["encoder"].items() if k != "sources"},
                            "encoder_sources": summary["encoder"]["sources"]})
        tracker.log_metrics(dict(result.aggregate))
        tracker.log_metrics({k: float(eff[k]) for k in ("qps", "index_bytes", "corpus_encode_seconds",
                                                        "query_encode_seconds", "search_seconds")
                             if isinstance(eff.get(k), (int, float))})
        tracker.log_text(json.dumps(summary, indent=1, default=str), "zero_shot_summary.json")
        if save_run:
            tracker.log_artifact(save_run, "runs")
    return tracker.info()


def summary_line(summary: dict[str, Any]) -> str:
    """One line: model, dataset, primary score, encoder settings, speed, where it was logged."""
    enc, eff = summary["encoder"], summary["efficiency"]
    primary = summary["primary"] or next(iter(summary["metrics"][summary["benchmark"]]))
    value = summary["metrics"][summary["benchmark"]][primary]
    encoded = ("corpus embeddings cached" if eff["corpus_embeddings_cached"] is True
               else f"{eff['docs']:,} passages encoded in {eff['corpus_encode_seconds']:.1f}s")
    mlflow = summary.get("mlflow") or {}
    where = f"MLflow run {mlflow['run_id']}" if mlflow.get("run_id") else "MLflow off"
    qps = f"{eff['qps']:,.0f}" if eff.get("qps") else "-"
    return (f"zero-shot {summary['model_name']} on {summary['benchmark']}: {primary} {value:.4f} ({100 * value:.2f}) "
            f"-- {enc['pooling']} pooling, {'normalised' if enc['normalize'] else 'not normalised'}, max length "
            f"{enc['query_max_length']}/{enc['passage_max_length']}; {encoded}; {eff['queries']:,} queries at "
            f"{qps} q/s (search); {where}")
