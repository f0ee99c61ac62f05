"""Names written once: the 14 public BEIR datasets (BEIR paper order) and cqadupstack's 12 forums.

Imports nothing, so every layer (catalog, conventions, registry, leaderboard) can use it.
"""

BEIR_DATASETS = ("trec-covid", "nfcorpus", "nq", "hotpotqa", "fiqa", "arguana", "webis-touche2020",
                 "cqadupstack", "quora", "dbpedia-entity", "scidocs", "fever", "climate-fever", "scifact")
CQADUPSTACK_FORUMS = ("android", "english", "gaming", "gis", "mathematica", "physics", "programmers",
                      "stats", "tex", "unix", "webmasters", "wordpress")
