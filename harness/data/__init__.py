"""Data layer: embedded real data, file-format readers/writers, named benchmarks, downloads.

* ``formats``      -- readers/writers for BEIR jsonl/tsv, TREC qrels/runs, topics and MS MARCO TSV.
* ``embedded``     -- the vendored, checksummed files under ``harness/data/embedded``.
* ``vendor``       -- maintainer tool: rebuilds those files from a checkout of the source data.
* ``catalog``      -- ``list_benchmarks()`` / ``get_benchmark(name)``.
* ``sampled``      -- ``<benchmark>@sample``: a seeded sample of a benchmark, for rehearsals.
* ``download``     -- checksummed, cached downloads of full corpora (never at import time).
* ``structure``    -- structural checks of the downloads whose publishers give no checksum.
* ``setting``      -- a spec's ``data:`` block applied for one run: the upstream files' source, which passages.
* ``negatives``    -- the published BM25 negatives of the MS MARCO training queries.
* ``hard_negatives`` -- sentence-transformers' MS MARCO hard negatives, selected as Thakur et al.'s BEIR recipe.
* ``requirements`` -- what data a planned run reads, and which of it this machine does not have yet.
* ``checksums``    -- a run record's data checksums against the catalog's (``check``'s DATA-MISMATCH rows).
"""
