"""Learned-sparse retrieval through a Lucene impact index (pyserini 0.22.1 / Anserini), LexMAE §4.3.

Pipeline
    1. :func:`encode_sparse`: SPLADE-max weights ``{token: float}`` per text from a fine-tuned
       masked LM (:mod:`harness.retrieval.splade_model`), in batches sorted by length under
       ``torch.inference_mode``, the MLM head run on the non-padding positions only
       (:func:`~harness.retrieval.splade_model.encode_splade_max`, the same values); ``topk`` keeps each text's k largest weights (the paper's
       "top-K sparsifying" of documents, Fig. 3; ties at the k-th weight broken by ``torch.topk``).
    2. :func:`quantise`: ``floor(100 x w)`` per term, zeros dropped (§4.3: "virtual frequencies").
    3. :func:`build_impact_index`: a pyserini ``JsonVectorCollection`` (one
       ``{"id", "contents", "vector": {term: int}}`` per line, in one file per thread) indexed with
       ``--impact --pretokenized``: Anserini writes each term ``w`` times into a pseudo-document,
       splits it with Lucene's whitespace analyzer and keeps frequencies only, so a term's
       frequency in a document *is* its impact.
    4. :func:`search_impact`: pyserini's ``LuceneImpactSearcher`` with pre-encoded query vectors.
       Anserini builds ``BooleanQuery(SHOULD BoostQuery(TermQuery(term), q_w))`` straight from the
       map (no analysis) and ``ImpactSimilarity`` scores ``q_w x tf``, so a document's score is the
       integer dot product ``sum_t q_t d_t`` of the quantised vectors (exact in Lucene's float32
       while it stays below 2^24; the stats flag larger scores).
Exactness (tested against a brute-force dot product, :func:`brute_force_search`)
    - The query vectors reach the searcher through a tiny encoder object whose ``encode(qid)``
      returns the vector: pyserini's documented hook, with no query text round trip.
    - pyserini drops query terms whose idf ``log(N / df)`` is not above ``min_idf`` (0 by
      default), i.e. a term present in *every* document would silently vanish: ``min_idf=-1`` is
      passed so every indexed term counts (terms absent from the index score 0 anyway).
    - Anserini's ``ScoreTiesAdjusterReranker`` rounds scores to 4 decimals and lowers tied scores by
      1e-6 per position; scores are rounded back to the integer dot product, so ties are broken by
      the evaluator's rule as for every other run. Lucene itself breaks ties at the k-th hit by doc id.
    - Terms: the whitespace analyzer splits on whitespace only, so "##ing", "." or "[CLS]" stay one
      term. Terms containing whitespace (absent from BERT vocabularies, possible elsewhere) are
      escaped identically for documents and queries (:func:`lucene_term`: ``\\`` -> ``\\\\``,
      whitespace -> ``\\uXXXX``), which keeps the mapping one-to-one; longer than 255 characters
      (the analyzer's token limit) is refused.
Efficiency numbers (the paper's Table 4 and Fig. 3): index bytes on disk, average non-zeros per
document and query, queries per second of the search call (query maps built and searched with
``threads`` Lucene threads; JVM start and result conversion are timed separately).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import sys
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from harness.core import procs
from harness.core.errors import HarnessError
from harness.data.formats import by_score_then_id
from harness.retrieval.java import child_env, ensure_java_home, release_heap
from harness.training.precision import encode_autocast, for_inference

Run = dict[str, dict[str, float]]
SparseVector = dict[str, float]
ImpactVector = dict[str, int]
KINDS = ("query", "passage")
DEFAULT_SCALE = 100
INDEX_INFO_FILE = "harness_impact.json"
MAX_TERM_CHARS = 255  # Lucene WhitespaceTokenizer's default maximum token length
EXACT_SCORE_LIMIT = 2**24  # float32 holds every integer up to here


# --- terms --------------------------------------------------------------------------------------


def lucene_term(token: str) -> str:
    """The index term for a vocabulary token: itself unless it holds whitespace or a backslash (escaped)."""
    if not token:
        raise HarnessError("an empty token cannot be an index term")
    if any(c.isspace() or c == "\\" for c in token):
        token = "".join("\\\\" if c == "\\" else f"\\u{ord(c):04x}" if c.isspace() else c for c in token)
    if len(token) > MAX_TERM_CHARS:
        raise HarnessError(f"token {token[:40]!r}... is longer than Lucene's {MAX_TERM_CHARS}-character term limit")
    return token


def vocabulary_terms(tokenizer: Any) -> list[str]:
    """Token string per vocabulary id; a repeated string gets ``"\\t<id>"`` appended so keys stay unique."""
    size = len(tokenizer)
    tokens = tokenizer.convert_ids_to_tokens(list(range(size)))
    seen: set[str] = set()
    terms = []
    for i, tok in enumerate(tokens):
        tok = tok if tok is not None else f"[id{i}]"
        if tok in seen:
            tok = f"{tok}\t{i}"
        seen.add(tok)
        terms.append(tok)
    return terms


# --- encoding -----------------------------------------------------------------------------------


@dataclass
class SparseEncoder:
    """A loaded SPLADE-max model (a ``BertForMaskedLM`` folder) that turns texts into ``{token: weight}``."""

    model: Any
    tokenizer: Any
    device: Any
    terms: list[str]
    settings: dict[str, Any] = field(default_factory=dict)

    def max_length(self, kind: str, max_length: int | None) -> int:
        if kind not in KINDS:
            raise HarnessError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
        if max_length is None:
            key = "query_max_length" if kind == "query" else "passage_max_length"
            max_length = int(self.settings.get(key, 32 if kind == "query" else 144))
        limit = getattr(self.model.config, "max_position_embeddings", None)
        return min(max_length, int(limit)) if limit else max_length

    def encode(
        self,
        texts: Sequence[str],
        kind: str = "passage",
        batch_size: int = 64,
        max_length: int | None = None,
        topk: int | None = None,
        show_progress: bool = True,
    ) -> list[SparseVector]:
        """Weights per text, in the caller's order (see :func:`encode_sparse`)."""
        import torch

        from harness.retrieval.splade_model import encode_splade_max

        if batch_size < 1:
            raise HarnessError(f"batch_size must be positive, got {batch_size}")
        if topk is not None and topk < 1:
            raise HarnessError(f"topk must be positive (or None for no sparsification), got {topk}")
        length = self.max_length(kind, max_length)
        texts = [t or "" for t in texts]
        out: list[SparseVector] = [{} for _ in texts]
        # Longest first (stable): little padding, and an out-of-memory batch shows up at once.
        order = np.argsort(-np.fromiter((len(t) for t in texts), dtype=np.int64, count=len(texts)), kind="stable")
        was_training = self.model.training
        self.model.eval()
        bar = tqdm(
            total=len(texts),
            desc=f"encode sparse {'queries' if kind == 'query' else kind + 's'}",
            unit=kind[0],
            disable=not show_progress,
            dynamic_ncols=True,
        )
        try:
            with torch.inference_mode():
                for start in range(0, len(texts), batch_size):
                    idx = order[start : start + batch_size].tolist()
                    enc = self.tokenizer(
                        [texts[j] for j in idx], padding=True, truncation=True, max_length=length, return_tensors="pt"
                    )
                    enc = {k: v.to(self.device) for k, v in enc.items()}
                    with encode_autocast(self.settings.get("precision", "fp32"), self.device):
                        reps = encode_splade_max(self.model, enc)
                    if topk is not None and topk < reps.shape[1]:
                        values, cols = reps.topk(topk, dim=1)
                        reps = torch.zeros_like(reps).scatter_(1, cols, values)
                    rows, cols = torch.nonzero(reps > 0, as_tuple=True)
                    weights = reps[rows, cols].cpu().tolist()
                    for r, c, w in zip(rows.cpu().tolist(), cols.cpu().tolist(), weights):
                        out[idx[r]][self.terms[c]] = w
                    bar.update(len(idx))
        finally:
            bar.close()
            self.model.train(was_training)
        return out


def load_sparse_encoder(model_dir: str | Path, device: str | None = None, precision: str = "fp32") -> SparseEncoder:
    """Load a fine-tuned lexical retriever (MLM head required); fp16/bf16 as :func:`harness.retrieval.encoder.load_encoder`."""
    import torch
    from transformers import AutoTokenizer

    from harness.retrieval.splade_model import load_masked_lm, read_lexical_settings

    if precision not in ("fp32", "fp16", "bf16"):
        raise HarnessError(f"precision must be fp32, fp16 or bf16, got {precision!r}")
    model_dir = Path(model_dir)
    model, _ = load_masked_lm(model_dir, allow_new_head=False)
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)
    except (OSError, ValueError) as exc:
        raise HarnessError(f"cannot load a tokenizer from {model_dir}: {exc}") from exc
    dev = torch.device(device) if device else torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model, precision = for_inference(model, precision, dev, lambda line: print(f"impact: {line}", file=sys.stderr))
    model.to(dev).eval()
    settings = {**read_lexical_settings(model_dir), "model_dir": str(model_dir), "precision": precision}
    return SparseEncoder(model, tokenizer, dev, vocabulary_terms(tokenizer), settings)


def encode_sparse(
    model_dir: str | Path | SparseEncoder,
    texts: Sequence[str],
    kind: str = "passage",
    batch_size: int = 64,
    max_length: int | None = None,
    topk: int | None = None,
    *,
    device: str | None = None,
    precision: str = "fp32",
    show_progress: bool = True,
) -> list[SparseVector]:
    """SPLADE-max ``{token: weight}`` (weights > 0 only) per text, in the given order.

    ``model_dir`` is a fine-tuned folder or an already loaded :class:`SparseEncoder`. The default
    ``max_length`` is the model's setting (32 for queries, 144 for passages). ``topk`` keeps each
    text's k largest weights.
    """
    encoder = model_dir if isinstance(model_dir, SparseEncoder) else load_sparse_encoder(model_dir, device, precision)
    return encoder.encode(texts, kind, batch_size, max_length, topk, show_progress)


def sparsify_topk(weights: Mapping[str, float], k: int) -> dict[str, float]:
    """The ``k`` largest weights (ties broken by token, so the result is deterministic)."""
    if k < 1:
        raise HarnessError(f"k must be positive, got {k}")
    return dict(sorted(weights.items(), key=lambda kv: (-kv[1], kv[0]))[:k])


def quantise(weights: Mapping[str, float], scale: float = DEFAULT_SCALE) -> ImpactVector:
    """``{token: floor(scale x w)}`` with zero impacts dropped (LexMAE §4.3, scale 100)."""
    out: ImpactVector = {}
    for token, w in weights.items():
        w = float(w)
        if not math.isfinite(w) or w < 0:
            raise HarnessError(f"weight {w} of token {token!r} is not a finite non-negative number")
        impact = math.floor(scale * w)
        if impact > 0:
            out[token] = impact
    return out


# --- indexing -----------------------------------------------------------------------------------


def _checked_impacts(vector: Mapping[str, int], what: str) -> dict[str, int]:
    """Lucene terms -> positive int impacts (zeros dropped); anything else is an error."""
    out: dict[str, int] = {}
    for token, w in vector.items():
        if isinstance(w, bool) or not isinstance(w, int):
            raise HarnessError(f"{what}: impact of {token!r} is {w!r}, not an integer (quantise the weights first)")
        if w < 0:
            raise HarnessError(f"{what}: impact of {token!r} is negative ({w})")
        if w:
            out[lucene_term(token)] = w
    return out


def _pairs(
    vectors: Mapping[str, Mapping[str, int]] | Iterable[tuple[str, Mapping[str, int]]],
) -> Iterator[tuple[str, Mapping[str, int]]]:
    return iter(vectors.items()) if isinstance(vectors, Mapping) else iter(vectors)


def write_vector_collection(
    doc_vectors: Mapping[str, Mapping[str, int]] | Iterable[tuple[str, Mapping[str, int]]],
    path: str | Path,
    files: int = 1,
) -> dict[str, Any]:
    """Write a JsonVectorCollection (streaming); documents with no non-zero impact are left out.

    ``files`` > 1: ``path``'s folder gets ``files`` files (``docs-00.jsonl``...), documents dealt
    round-robin, so Anserini's ``--threads`` indexes that many files at once (one file is one
    thread whatever ``--threads`` says). The index holds the same documents in another internal
    order, and searches return the same runs: Anserini sorts hits by score, then by the external
    doc id (``BREAK_SCORE_TIES_BY_DOCID``), also at the k-th hit. The seen-id set is the one thing
    that grows with the corpus (a repeated id is an error).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if files < 1:
        raise HarnessError(f"an impact collection needs at least one file, got {files}")
    paths = [path] if files == 1 else [path.parent / f"docs-{i:02d}.jsonl" for i in range(files)]
    docs = empty = postings = impact_sum = 0
    seen: set[str] = set()
    handles = [p.open("w", encoding="utf-8") for p in paths]
    try:
        for doc_id, vector in _pairs(doc_vectors):
            doc_id = str(doc_id)
            if doc_id in seen:
                raise HarnessError(f"document id {doc_id!r} appears twice in the impact vectors")
            seen.add(doc_id)
            terms = _checked_impacts(vector, f"document {doc_id!r}")
            if not terms:
                empty += 1  # Anserini skips empty documents; they would score 0 for every query anyway
                continue
            handles[docs % files].write(
                json.dumps({"id": doc_id, "contents": "", "vector": terms}, ensure_ascii=False) + "\n"
            )
            docs += 1
            postings += len(terms)
            impact_sum += sum(terms.values())
    finally:
        for fh in handles:
            fh.close()
    return {
        "documents": docs,
        "empty_documents": empty,
        "postings": postings,
        "impact_sum": impact_sum,
        "avg_doc_nonzeros": postings / docs if docs else 0.0,
    }


def directory_bytes(folder: str | Path, exclude: Sequence[str] = (INDEX_INFO_FILE,)) -> int:
    """Bytes of the files under ``folder`` (the index size on disk), leaving out ``exclude`` names."""
    total = 0
    for root, _, files in os.walk(folder):
        total += sum(os.path.getsize(os.path.join(root, f)) for f in files if f not in exclude)
    return total


def index_collection(
    collection_dir: str | Path,
    index_dir: str | Path,
    threads: int = 2,
    optimize: bool = False,
    documents: int | None = None,
) -> dict[str, Any]:
    """Run pyserini's Lucene indexer (a JVM subprocess that dies with the harness) on a folder of
    JsonVectorCollection files."""

    ensure_java_home(in_process=False)  # the indexer is a child JVM: this process's heap waits for a search
    index_dir = Path(index_dir)
    cmd = [
        sys.executable,
        "-m",
        "pyserini.index.lucene",
        "--collection",
        "JsonVectorCollection",
        "--input",
        str(collection_dir),
        "--index",
        str(index_dir),
        "--generator",
        "DefaultLuceneDocumentGenerator",
        "--threads",
        str(threads),
        "--impact",
        "--pretokenized",
    ]
    if optimize:
        cmd.append("--optimize")
    started = time.time()
    with tqdm(total=documents, desc="impact index (Lucene)", unit="doc") as bar:
        # Killed with the harness (SIGKILL included): an orphan would keep writing the
        # stage's .partial folder while a re-run indexes into it again.
        proc = procs.run(cmd, env=child_env())  # its JVM's crash report goes under the cache too
        if documents:
            bar.update(documents)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
        raise HarnessError(f"pyserini impact indexing failed (exit {proc.returncode}):\n{tail}")
    return {
        "index_seconds": round(time.time() - started, 2),
        "index_bytes": directory_bytes(index_dir),
        "threads": threads,
        "optimize": optimize,
    }


def build_impact_index(
    doc_vectors: Mapping[str, Mapping[str, int]] | Iterable[tuple[str, Mapping[str, int]]],
    index_dir: str | Path,
    threads: int = 2,
    optimize: bool = False,
) -> dict[str, Any]:
    """Index quantised document vectors (``{docid: {token: int}}`` or (docid, vector) pairs).

    Returns the stats (documents, average non-zeros per document, postings, index bytes, seconds),
    also written to ``<index_dir>/harness_impact.json`` for :func:`search_impact`.
    """

    index_dir = Path(index_dir)
    if index_dir.exists() and any(index_dir.iterdir()):
        raise HarnessError(f"{index_dir} is not empty; give a new folder for the impact index")
    work = index_dir.parent / (index_dir.name + ".collection")
    shutil.rmtree(work, ignore_errors=True)
    started = time.time()
    try:
        # One file per thread: Anserini indexes files in parallel (the runs do not change; see above).
        written = write_vector_collection(doc_vectors, work / "docs.jsonl", files=threads)
        if not written["documents"]:
            raise HarnessError("no document has a non-zero impact: nothing to index")
        built = index_collection(work, index_dir, threads, optimize, written["documents"])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    stats = {
        "index": "Lucene impact index (pyserini 0.22.1, JsonVectorCollection --impact --pretokenized)",
        **written,
        **built,
        "seconds": round(time.time() - started, 2),
    }
    (index_dir / INDEX_INFO_FILE).write_text(json.dumps(stats, indent=1) + "\n", encoding="utf-8")
    return stats


# --- search -------------------------------------------------------------------------------------


class _VectorLookup:
    """pyserini's query-encoder hook: ``encode(key)`` returns the pre-encoded ``{term: int}`` of ``key``."""

    def __init__(self, vectors: Mapping[str, Mapping[str, int]]):
        self.vectors = vectors

    def encode(self, key: str) -> Mapping[str, int]:
        return self.vectors[key]


def search_impact(
    index_dir: str | Path,
    query_vectors: Mapping[str, Mapping[str, int]],
    k: int = 1000,
    threads: int = 2,
    batch_size: int = 1000,
) -> tuple[Run, dict[str, Any]]:
    """Top-``k`` documents per query (``{qid: {token: int}}``): the run and efficiency stats."""

    if k < 1:
        raise HarnessError(f"k must be positive, got {k}")
    index_dir = Path(index_dir)
    if not (index_dir.is_dir() and any(p.name.startswith("segments") for p in index_dir.iterdir())):
        raise HarnessError(f"{index_dir} holds no Lucene index; build it with build_impact_index")
    qids = [str(q) for q in query_vectors]
    queries = {str(q): _checked_impacts(v, f"query {q!r}") for q, v in query_vectors.items()}
    ensure_java_home(index_dir)  # its heap sized for this index
    setup_started = time.perf_counter()
    from pyserini.search.lucene import LuceneImpactSearcher

    # min_idf=-1: keep terms that occur in every document (idf 0), which the default 0 would drop.
    searcher = LuceneImpactSearcher(str(index_dir), _VectorLookup(queries), min_idf=-1)
    setup_seconds = time.perf_counter() - setup_started
    run: Run = {}
    search_seconds = convert_seconds = 0.0
    max_score = 0.0
    try:
        for start in tqdm(range(0, len(qids), batch_size), desc="impact search", unit="batch"):
            chunk = qids[start : start + batch_size]
            t0 = time.perf_counter()
            hits = searcher.batch_search(chunk, chunk, k=k, threads=threads)
            t1 = time.perf_counter()
            for qid in chunk:
                # Integer dot products: undo Anserini's 1e-6 tie offsets (see the module docstring).
                ranked = {h.docid: float(round(h.score)) for h in hits.get(qid, [])}
                run[qid] = ranked
                if ranked:
                    max_score = max(max_score, max(ranked.values()))
            convert_seconds += time.perf_counter() - t1
            search_seconds += t1 - t0
    finally:
        searcher.close()
        release_heap()
    info_file = index_dir / INDEX_INFO_FILE
    index_info = json.loads(info_file.read_text(encoding="utf-8")) if info_file.is_file() else {}
    nonzeros = [len(v) for v in queries.values()]
    stats = {
        "index": "Lucene impact index (pyserini LuceneImpactSearcher, ImpactSimilarity)",
        "docs": index_info.get("documents"),
        "index_bytes": directory_bytes(index_dir),
        "avg_doc_nonzeros": index_info.get("avg_doc_nonzeros"),
        "avg_query_nonzeros": sum(nonzeros) / len(nonzeros) if nonzeros else 0.0,
        "queries": len(qids),
        "k": k,
        "threads": threads,
        "search_seconds": search_seconds,
        "qps": len(qids) / search_seconds if search_seconds > 0 else float("inf"),
        "setup_seconds": setup_seconds,
        "convert_seconds": convert_seconds,
        "max_score": max_score,
        "scores_exact": max_score < EXACT_SCORE_LIMIT,
    }
    if max_score >= EXACT_SCORE_LIMIT:
        print(
            f"impact: a score reached {max_score:.0f} >= 2^24: Lucene's float32 scores may be off by a few units",
            file=sys.stderr,
        )
    return run, stats


def brute_force_search(
    doc_vectors: Mapping[str, Mapping[str, int]], query_vectors: Mapping[str, Mapping[str, int]], k: int = 1000
) -> Run:
    """Exact top-``k`` by sparse integer dot product (score > 0 only; ties by doc id), for checks."""
    postings: dict[str, list[tuple[str, int]]] = {}
    for doc_id, vector in doc_vectors.items():
        for term, w in vector.items():
            if w:
                postings.setdefault(term, []).append((str(doc_id), int(w)))
    run: Run = {}
    for qid, query in query_vectors.items():
        scores: dict[str, int] = {}
        for term, qw in query.items():
            for doc_id, dw in postings.get(term, ()):
                scores[doc_id] = scores.get(doc_id, 0) + int(qw) * dw
        top = by_score_then_id((d, s) for d, s in scores.items() if s > 0)[:k]
        run[str(qid)] = {d: float(s) for d, s in top}
    return run
