"""Indexing and retrieval back-ends (Lucene through pyserini; faiss for dense).

Lucene: ``bm25.py`` (index, search, TREC run) and ``impact.py`` (learned-sparse impact index; ``impact_shards.py`` encodes its vectors on every rank), with
``java.py`` making pyserini's JVM findable and quiet; ``splade_model.py`` is the SPLADE-max model whose
vectors go into it. Dense: ``encoder.py`` encodes text with a local checkpoint, ``sharded.py`` a corpus
by shards, resumable, ``corpus_vectors.py`` keeps one encoding per (model, corpus, settings) and
``dense.py`` searches them exactly with faiss, on the GPUs of a CUDA run where ``faiss_gpu.py`` finds a GPU
build of faiss. A launched run of several processes searches where the vectors are instead:
``rank_search.py`` gives each rank its rows and merges on rank 0, ``exact_search.py`` is the exact
per-shard top-k and merge.
"""
