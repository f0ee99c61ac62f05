"""BM25 with Lucene through pyserini: index a BEIR-style corpus, search, write a TREC run.

Multifield (title as its own field, queried with the contents field at equal weight) is
what the papers' BEIR BM25 rows used (BEIR's Elasticsearch setup; Anserini's
"multifield" regression condition); "flat" (title prepended to the text) is the other
common convention and is available with `fields: {contents: 1.0}` in the spec.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from tqdm.auto import tqdm

from harness.core import procs
from harness.core.errors import HarnessError
from harness.retrieval.java import child_env, ensure_java_home, release_heap

Corpus = dict[str, dict[str, str]]
Run = dict[str, dict[str, float]]


def write_json_collection(
    corpus: Corpus | Iterable[tuple[str, dict[str, str]]], out_dir: Path, multifield: bool
) -> int:
    """Pyserini JsonCollection: one JSON object per line with id, contents (and title).

    ``corpus`` is a dict or ``(doc_id, doc)`` pairs (a benchmark's ``iter_corpus()``): written as it
    is read, so indexing MS MARCO does not hold its 8.8M passages in memory first."""
    out_dir.mkdir(parents=True, exist_ok=True)
    n = 0
    with (out_dir / "docs.jsonl").open("w") as fh:
        for doc_id, doc in corpus.items() if isinstance(corpus, Mapping) else corpus:
            title, text = doc.get("title", "") or "", doc.get("text", "") or ""
            if multifield:
                row = {"id": doc_id, "contents": text, "title": title}
            else:
                row = {"id": doc_id, "contents": f"{title} {text}".strip()}
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
            n += 1
    return n


def build_index(
    corpus: Corpus | Iterable[tuple[str, dict[str, str]]], index_dir: Path, fields: dict[str, float], threads: int = 2
) -> dict[str, float]:
    """Build a Lucene index with pyserini's indexer (a JVM subprocess that dies with the harness)."""
    ensure_java_home(in_process=False)  # the indexer is a child JVM: this process's heap waits for a search
    multifield = any(f != "contents" for f in fields)
    work = index_dir.parent / (index_dir.name + ".collection")
    n = write_json_collection(corpus, work, multifield)
    cmd = [
        sys.executable,
        "-m",
        "pyserini.index.lucene",
        "--collection",
        "JsonCollection",
        "--input",
        str(work),
        "--index",
        str(index_dir),
        "--generator",
        "DefaultLuceneDocumentGenerator",
        "--threads",
        str(threads),
        "--storePositions",
        "--storeDocvectors",
        "--storeRaw",
    ]
    extra = [f for f in fields if f != "contents"]
    if extra:
        cmd += ["--fields", *extra]
    started = time.time()
    with tqdm(total=n, desc="BM25 index (Lucene)", unit="doc") as bar:
        # Killed with the harness (SIGKILL included): an orphan would keep writing the
        # stage's .partial folder while a re-run indexes into it again.
        proc = procs.run(cmd, env=child_env())  # its JVM's crash report goes under the cache too
        bar.update(n)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
        raise HarnessError(f"pyserini indexing failed (exit {proc.returncode}):\n{tail}")
    for f in work.iterdir():
        f.unlink()
    work.rmdir()
    return {"documents": n, "seconds": round(time.time() - started, 2)}


def iter_search(
    index_dir: Path,
    queries: Mapping[str, str],
    k: int,
    k1: float,
    b: float,
    fields: dict[str, float],
    threads: int = 2,
    batch: int = 128,
    progress: bool = True,
) -> Iterator[tuple[str, dict[str, float]]]:
    """Top-k BM25 per query, ``(qid, {docid: score})`` in ascending qid order, one batch of queries
    in memory at a time (what :func:`harness.data.formats.stream_trec_run` writes as it comes).
    Deterministic: Lucene breaks ties by doc id, and a query's hits do not depend on its batch."""
    ensure_java_home(Path(index_dir))  # its heap sized for this index
    from pyserini.search.lucene import LuceneSearcher

    searcher = LuceneSearcher(str(index_dir))
    searcher.set_bm25(k1=k1, b=b)
    qids = sorted(queries)
    use_fields = fields if set(fields) != {"contents"} else {}
    try:
        for start in tqdm(range(0, len(qids), batch), desc="BM25 search", unit="batch", disable=not progress):
            chunk = qids[start : start + batch]
            hits = searcher.batch_search([queries[q] for q in chunk], chunk, k=k, threads=threads, fields=use_fields)
            for qid in chunk:
                yield qid, {h.docid: float(h.score) for h in hits.get(qid, [])}
    finally:
        searcher.close()  # its index's memory maps go now, not when the JVM collects it
        release_heap()


def search(
    index_dir: Path,
    queries: dict[str, str],
    k: int,
    k1: float,
    b: float,
    fields: dict[str, float],
    threads: int = 2,
    batch: int = 128,
) -> Run:
    """Top-k BM25 for every query, whole (:func:`iter_search` streams it); deterministic."""
    run = dict(iter_search(index_dir, queries, k, k1, b, fields, threads, batch))
    return {q: run[q] for q in queries}  # the queries' order, as callers have had it
