"""BM25 search: harness (Lucene through pyserini, multifield and flat) vs bm25s, one run.

On the embedded SciFact and NFCorpus corpora and test queries, each system indexes the whole
corpus and searches every test query at k = 1000 and k = 100, with the harness's BM25 parameters
(k1 = 0.9, b = 0.4, ``baselines/bm25.yaml``) and the same number of threads (``--threads``, 2).

- harness: ``harness.retrieval.bm25.build_index`` / ``search`` (pyserini's Lucene indexer in a JVM
  subprocess; Lucene's English analyzer: stop words + Porter stemmer). "multifield" indexes the
  title as its own field and queries title and contents at equal weight (the papers' setting);
  "flat" indexes "title text" as one field.
- bm25s 0.3.16: ``bm25s.tokenize`` (its own regex tokenizer, English stop words, a stemmer:
  PyStemmer's English if installed, else NLTK's Snowball English, the same algorithm, else none;
  the table says which) over "title text", ``BM25(method="lucene")``, numpy backend.

Timings: indexing is one build (the harness figure includes writing the JSON collection and
starting the indexer JVM: it is what a user waits for). Search is the best of up to
``--repeats`` passes over all test queries, stopping once 3 s are spent (so the harness's
k = 1000 search, tens of seconds, is timed once), query tokenisation included, after one
warm-up query (the JVM start and first-call costs are excluded from both). nDCG@10 comes from
``harness.evaluation.measures.evaluate`` (BEIR conventions) on the k = 1000 run. Ratios are
relative to "harness flat", the like-for-like setting (one text field): index speed-up is
harness seconds / system seconds, search speed-up is system q/s / harness q/s (> 1: faster
than harness flat).

Where the harness's time goes: pyserini's ``batch_search`` itself (not the conversion of hits
to a dict, under 1 s) takes ~0.1 s per query at k = 1000, because pyserini loads every hit's
stored Lucene document to read its id; at k = 100 it is ~7x faster.

    python bench/bench_bm25.py [--datasets scifact nfcorpus] [--threads 2] [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("TQDM_DISABLE", "1")  # the harness's progress bars would drown the table
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

K1, B = 0.9, 0.4
FIELDS = {"multifield": {"contents": 1.0, "title": 1.0}, "flat": {"contents": 1.0}}
DEPTHS = (1000, 100)


def pick_stemmer():
    """(stemmer for bm25s.tokenize or None, its name)."""
    try:
        import Stemmer

        return Stemmer.Stemmer("english"), "PyStemmer english (Snowball)"
    except ImportError:
        pass
    try:
        from nltk.stem.snowball import SnowballStemmer

        snow = SnowballStemmer("english", ignore_stopwords=False)
        return (lambda words: [snow.stem(w) for w in words]), "NLTK Snowball english (PyStemmer not installed)"
    except ImportError:
        return None, "none (neither PyStemmer nor NLTK installed)"


def best_of(repeats: int, fn, budget_s: float = 3.0):
    """(result of the last call, best seconds) over up to ``repeats`` calls, stopping once ``budget_s``
    is spent: a sub-second search gets several tries, a 30-second one is timed once."""
    best, out, spent = float("inf"), None, 0.0
    for _ in range(max(1, repeats)):
        started = time.perf_counter()
        out = fn()
        took = time.perf_counter() - started
        best, spent = min(best, took), spent + took
        if spent >= budget_s:
            break
    return out, best


def bench_harness(corpus, queries, mode: str, threads: int, repeats: int, work: Path) -> dict:
    from harness.retrieval import bm25

    fields = FIELDS[mode]
    index = work / f"lucene-{mode}"
    started = time.perf_counter()
    bm25.build_index(corpus, index, fields, threads=threads)
    index_s = time.perf_counter() - started
    first = next(iter(queries))
    bm25.search(index, {first: queries[first]}, 10, K1, B, fields, threads)  # warm-up: JVM, class loading
    out = {"index_s": index_s}
    for k in DEPTHS:
        run, secs = best_of(repeats, lambda k=k: bm25.search(index, queries, k, K1, B, fields, threads))
        out[k] = (run, secs)
    return out


def bench_bm25s(corpus, queries, stemmer, threads: int, repeats: int) -> dict:
    import bm25s

    doc_ids = list(corpus)
    texts = [f"{d.get('title') or ''} {d.get('text') or ''}".strip() for d in corpus.values()]
    started = time.perf_counter()
    tokens = bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False)
    retriever = bm25s.BM25(method="lucene", k1=K1, b=B)
    retriever.index(tokens, show_progress=False)
    index_s = time.perf_counter() - started
    qids = list(queries)

    def search(k: int, chosen=qids):
        q_tokens = bm25s.tokenize([queries[q] for q in chosen], stopwords="en", stemmer=stemmer, show_progress=False)
        docs, scores = retriever.retrieve(q_tokens, k=k, show_progress=False, n_threads=threads)
        return {
            q: {doc_ids[i]: float(s) for i, s in zip(row_d, row_s)} for q, row_d, row_s in zip(chosen, docs, scores)
        }

    search(10, qids[:1])  # warm-up
    out = {"index_s": index_s}
    for k in DEPTHS:
        out[k] = best_of(repeats, lambda k=k: search(k))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=["scifact", "nfcorpus"])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)

    import bm25s

    from harness.core.text_table import format_table
    from harness.data.catalog import get_benchmark
    from harness.evaluation.measures import evaluate

    stemmer, stemmer_name = pick_stemmer()
    rows = []
    started = time.perf_counter()
    for name in args.datasets:
        bench = get_benchmark(name)
        corpus, queries, qrels = bench.corpus(), bench.queries("test"), bench.qrels("test")
        with tempfile.TemporaryDirectory(prefix="bench_bm25_") as tmp:
            results = {
                f"harness {mode}": bench_harness(corpus, queries, mode, args.threads, args.repeats, Path(tmp))
                for mode in FIELDS
            }
        results[f"bm25s {bm25s.__version__}"] = bench_bm25s(corpus, queries, stemmer, args.threads, args.repeats)
        for system, r in results.items():
            print(
                f"{name} {system}: index {r['index_s']:.1f}s, search k=1000 {r[1000][1]:.2f}s, "
                f"k=100 {r[100][1]:.2f}s ({time.perf_counter() - started:.0f}s so far)",
                file=sys.stderr,
            )
        ref = results["harness flat"]
        for system, r in results.items():
            qps = {k: len(queries) / r[k][1] for k in DEPTHS}
            ref_qps = {k: len(queries) / ref[k][1] for k in DEPTHS}
            ndcg = evaluate(r[1000][0], qrels, bench).aggregate["nDCG@10"]
            rows.append(
                [
                    name,
                    system,
                    f"{r['index_s']:.2f}",
                    f"{qps[1000]:.0f}",
                    f"{qps[100]:.0f}",
                    f"{ndcg:.4f}",
                    f"{ref['index_s'] / r['index_s']:.2f}",
                    f"{qps[1000] / ref_qps[1000]:.2f}",
                    f"{qps[100] / ref_qps[100]:.2f}",
                ]
            )
        print(f"{name}: {len(corpus):,} docs, {len(queries)} test queries", file=sys.stderr)

    from importlib.metadata import version

    print(
        f"BM25 k1={K1} b={B}; threads {args.threads}; search = best of <= {args.repeats} passes; bm25s tokenizer: "
        f"English stop words, stemmer {stemmer_name}; pyserini {version('pyserini')}, numpy {version('numpy')}; "
        f"{os.cpu_count()} CPUs, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    print(
        format_table(
            [
                "dataset",
                "system",
                "index s",
                "q/s k=1000",
                "q/s k=100",
                "nDCG@10",
                "index x vs flat",
                "search x k=1000",
                "search x k=100",
            ],
            rows,
        )
    )
    print(f"ratios relative to harness flat (> 1: faster); total {time.perf_counter() - started:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
