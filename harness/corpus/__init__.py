"""Pre-training corpus construction (QC paper §2.1, §3.1, §4.1).

* ``sentences``      -- NLTK Punkt trained offline on the corpus (no download).
* ``passages``       -- documents -> passages of <= 144 tokens of a given tokenizer.
* ``passage_shards`` -- a whole corpus's passages written as a stream, resumable by shard.
* ``passage_file``   -- ``passages.jsonl`` as a lazy sequence (pre-training never loads the corpus).
* ``pairs``          -- (anchor, context) examples: span | qc | mixed | single, per epoch, sharded.
* ``epoch_examples`` -- one epoch of those pairs as a lazy sequence.
* ``qgen``           -- doc2query-style nucleus sampling of C queries per passage (resumable JSONL).
* ``term_qgen``      -- a learned extractive query source for query-as-context at CPU scale (mini profile).
* ``tiny_t5``        -- a small T5 query generator trained from scratch (tiny profile).
* ``tokenizer``      -- a WordPiece vocabulary trained on the corpus (tiny profile).

Each builder ends with the ``done.json`` finished marker of :mod:`harness.stages.artifacts` (keyed by config + input hashes).

Heavy libraries (torch, transformers) are imported inside the functions that need them.
"""
