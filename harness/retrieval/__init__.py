"""Indexing and retrieval back-ends (Lucene through pyserini; faiss for dense).

Lucene: ``bm25.py`` (index, search, TREC run) and ``impact.py`` (learned-sparse impact index; ``impact_shards.py`` encodes its vectors on every rank), with
``java.py`` making pyserini's JVM findable and quiet; ``splade_model.py`` is the SPLADE-max model whose
vectors go into it. Dense: ``encoder.py`` encodes text with a local checkpoint; a corpus is encoded
by shards, resumable: ``shard_layout.py`` (the corpus's fingerprints, each rank's chunks),
``shard_manifest.py``, ``shard_encoding.py``, ``shard_merge.py``, ``shard_index.py`` (a faiss index of
the chunks), ``shard_search.py`` and ``shard_distributed.py`` (the torchrun driver); ``corpus_vectors.py`` keeps one encoding per (model, corpus, settings) and
``dense.py`` searches them exactly with faiss, on the GPUs of a CUDA run where ``faiss_gpu.py`` finds a GPU
build of faiss. A launched run of several processes searches where the vectors are instead:
``rank_search.py`` gives each rank its rows and merges on rank 0, ``exact_search.py`` is the exact
per-shard top-k and merge.
"""
