"""Data layer: embedded real data, file-format readers/writers, named benchmarks, downloads.

* ``formats``  -- readers/writers for BEIR jsonl/tsv, TREC qrels/runs, topics and MS MARCO TSV.
* ``embedded`` -- the vendored, checksummed files under ``harness/data/embedded``.
* ``catalog``  -- ``list_benchmarks()`` / ``get_benchmark(name)``.
* ``download`` -- checksummed, cached downloads of full corpora (never at import time).
"""
