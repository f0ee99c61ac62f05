"""Pre-training corpus construction (QC paper §2.1, §3.1, §4.1).

* ``sentences``   -- NLTK Punkt trained offline on the corpus (no download).
* ``passages``    -- documents -> passages of <= 144 tokens of a given tokenizer.
* ``pairs``       -- (anchor, context) examples: span | qc | mixed | single, per epoch, sharded.
* ``qgen``        -- doc2query-style nucleus sampling of C queries per passage (resumable JSONL).
* ``tiny_t5``     -- a small T5 query generator trained from scratch (tiny profile).
* ``tokenizer``   -- a WordPiece vocabulary trained on the corpus (tiny profile).

Each builder ends with the ``done.json`` finished marker of :mod:`harness.stages.artifacts` (keyed by config + input hashes).

Heavy libraries (torch, transformers) are imported inside the functions that need them.
"""
