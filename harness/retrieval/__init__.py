"""Indexing and retrieval back-ends (Lucene through pyserini; faiss for dense)."""
