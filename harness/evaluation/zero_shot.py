"""Zero-shot evaluation of any local encoder checkpoint: encode a benchmark, search, score.

    python -m harness eval --model models/Luyu/co-condenser-marco-retriever --dataset scifact --json out.json

    from harness.evaluation.zero_shot import evaluate_model
    summary = evaluate_model("path/to/all-MiniLM-L6-v2", "scifact")
    summary["metrics"]["scifact"]["nDCG@10"]

Steps: the model folder is found with :func:`harness.stages.checkpoints.resolve_model_path` and loaded
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

Corpus vectors come from the shared cache of :mod:`harness.retrieval.corpus_vectors` (keyed by
the model folder's contents, the vector settings and the corpus), which the pipelines' dense
stages fill too: evaluating a run's retriever folder reads the vectors its run encoded.

cqadupstack is encoded and searched forum by forum (each forum is its own corpus) and scored as
the mean of the 12 forum means.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.core.errors import HarnessError
from harness.data.catalog import get_benchmark
from harness.data.formats import write_trec_run
from harness.evaluation.conventions import get_convention
from harness.evaluation.dense_run import judged_queries, retrieve
from harness.evaluation.measures import benchmark_qrels, evaluate, merge_subsets, warn_unretrievable
from harness.records.parent_run import parent_metrics
from harness.records.tracker import Tracker, tracking_line
from harness.retrieval.corpus_vectors import corpus_embeddings
from harness.retrieval.encoder import load_zero_shot_encoder
from harness.stages.checkpoints import model_fingerprint, resolve_model_path

Run = dict[str, dict[str, float]]

EXPERIMENT = "zero-shot"
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


# ---------------------------------------------------------------------------- search


def _search_part(
    encoder: Any,
    part: Any,
    fingerprint: str,
    split: str | None,
    depth: int,
    batch_size: int,
    use_cache: bool,
    show_progress: bool,
) -> tuple[Run, dict[str, Any], list[str]]:
    """One corpus (a cqadupstack forum, else the benchmark): its cached vectors, searched at BEIR's
    depth; with the corpus's doc ids."""

    judged_queries(part, split)  # checked before the corpus is encoded
    doc_ids, doc_emb, corpus_info = corpus_embeddings(encoder, part, fingerprint, batch_size, use_cache, show_progress)
    self_hits = get_convention(part.name, part.kind).drop_self_hits
    run, stats = retrieve(
        encoder,
        part,
        split,
        depth,
        corpus=(doc_ids, doc_emb),
        batch_size=batch_size,
        keep_self_hits=self_hits,
        show_progress=show_progress,
    )
    stats.update(corpus_info)
    return run, stats, list(doc_ids)


def _combine_stats(parts: dict[str, dict[str, Any]], encoder: Any) -> dict[str, Any]:
    """Efficiency over all parts (one part except for cqadupstack)."""

    def total(key: str) -> float:
        return sum(float(s[key]) for s in parts.values())

    docs, queries = int(total("docs")), int(total("queries"))
    encode_s, search_s, query_s = total("encode_seconds"), total("search_seconds"), total("query_encode_seconds")
    cached = [s["cached"] for s in parts.values()]
    out: dict[str, Any] = {
        "index": next(iter(parts.values()))["index"],
        "index_device": next(iter(parts.values()))["index_device"],
        "docs": docs,
        "dim": encoder.dim,
        "index_bytes": int(total("index_bytes")),
        "queries": queries,
        "k": next(iter(parts.values()))["k"],
        "corpus_embeddings_cached": all(cached) if len(set(cached)) == 1 else "partly",
        "corpus_encode_seconds": round(encode_s, 3),
        "passages_per_second": round(docs / encode_s, 1) if encode_s > 0 else None,
        "query_encode_seconds": round(query_s, 3),
        "index_build_seconds": round(total("index_build_seconds"), 4),
        "search_seconds": round(search_s, 4),
        "qps": round(queries / search_s, 1) if search_s > 0 else None,
        "qps_with_query_encoding": round(queries / (search_s + query_s), 1) if search_s + query_s > 0 else None,
        "device": str(encoder.device),
        "precision": encoder.precision,
        "batching": next(iter(parts.values())).get("batching"),
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
    corpus_ids: dict[str, list[str]] = {}
    for part in parts:
        runs[part.name], stats[part.name], corpus_ids[part.name] = _search_part(
            encoder, part, fingerprint, split, depth, batch_size, use_cache, show_progress
        )
    run = merge_subsets(runs) if bench.sub_benchmarks() else runs[bench.name]
    # doc ids are not namespaced by forum: a subset benchmark's corpora are checked pooled
    warn_unretrievable(qrels, (doc for ids in corpus_ids.values() for doc in ids))
    result = evaluate(run, qrels, bench, measures)
    efficiency = _combine_stats(stats, encoder)
    settings = encoder.settings()
    if save_run:
        tag = "zeroshot-" + "".join(c if c.isalnum() or c in "-_." else "_" for c in path.resolve().name)
        write_trec_run(run, save_run, tag=tag)
    metrics = {result.benchmark: dict(result.aggregate)}
    metrics.update({name: dict(r.aggregate) for name, r in result.subsets.items()})
    split_name = bench._split(split)
    summary: dict[str, Any] = {
        "command": "eval",
        "source": "model",
        "benchmark": bench.name,
        "split": split_name,
        "model": str(path),
        "model_name": run_name_for(path),
        "model_fingerprint": fingerprint,
        "qrels": f"{bench.name} ({split_name})",
        "primary": result.primary,
        "metrics": metrics,
        "num_queries": result.num_queries,
        "missing_queries": len(result.missing_queries),
        "dropped_self_hits": result.dropped_self_hits,
        "subsets": list(result.subsets),
        "depth": depth,
        "run": str(save_run) if save_run else None,
        "encoder": settings,
        "efficiency": efficiency,
        "mlflow": None,
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
    tracker = Tracker(
        experiment=EXPERIMENT,
        run_name=summary["model_name"],
        tags={"model": summary["model"], "dataset": summary["benchmark"], "split": summary["split"]},
    )
    eff = summary["efficiency"]
    with tracker.run():
        tracker.log_params(
            {
                "model": summary["model"],
                "model_fingerprint": summary["model_fingerprint"],
                "dataset": summary["benchmark"],
                "split": summary["split"],
                "depth": summary["depth"],
                "encoder": {k: v for k, v in summary["encoder"].items() if k != "sources"},
                "encoder_sources": summary["encoder"]["sources"],
            }
        )
        # <benchmark>/<measure>, as a method run's parent: runs on different benchmarks stay on separate rows.
        tracker.log_metrics(parent_metrics({summary["benchmark"]: dict(result.aggregate)}))
        tracker.log_metrics(
            {
                k: float(eff[k])
                for k in ("qps", "index_bytes", "corpus_encode_seconds", "query_encode_seconds", "search_seconds")
                if isinstance(eff.get(k), (int, float))
            }
        )
        tracker.log_text(json.dumps(summary, indent=1, default=str), "zero_shot_summary.json")
        if save_run:
            tracker.log_artifact(save_run, "runs")
    return tracker.info()


def summary_line(summary: dict[str, Any]) -> str:
    """One line: model, dataset, primary score, encoder settings, speed, where it was logged."""
    enc, eff = summary["encoder"], summary["efficiency"]
    primary = summary["primary"] or next(iter(summary["metrics"][summary["benchmark"]]))
    value = summary["metrics"][summary["benchmark"]][primary]
    encoded = (
        "corpus embeddings cached"
        if eff["corpus_embeddings_cached"] is True
        else f"{eff['docs']:,} passages encoded in {eff['corpus_encode_seconds']:.1f}s"
    )
    where = tracking_line(summary.get("mlflow"), with_uri=False)
    qps = f"{eff['qps']:,.0f}" if eff.get("qps") else "-"
    return (
        f"zero-shot {summary['model_name']} on {summary['benchmark']}: {primary} {value:.4f} ({100 * value:.2f}) "
        f"-- {enc['pooling']} pooling, {'normalised' if enc['normalize'] else 'not normalised'}, max length "
        f"{enc['query_max_length']}/{enc['passage_max_length']}; {encoded}; {eff['queries']:,} queries at "
        f"{qps} q/s (search); {where}"
    )
