"""Per-family pipelines: a resolved spec + a dataset -> a TREC run file, through cached stages."""
