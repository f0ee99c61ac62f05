"""Per-family pipelines: a resolved spec + a dataset -> a TREC run file, through cached stages.

``context.py`` is what a pipeline gets from the runner (the spec, the tracker, the stage cache and
``input_key``); ``chain.py`` the chain every trained family runs; ``bm25.py``, ``dense.py``,
``learned_sparse.py`` and ``pretrain.py`` the families' and pre-training's stages; ``families.py`` each family's
pipeline by name (it imports the modules that register them); ``hard_negatives.py`` retriever 1's negatives from a
published hard-negative file; ``forums.py`` retrieves a benchmark made of parts
(cqadupstack's forums) part by part and merges the runs.
"""
