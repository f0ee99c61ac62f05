"""Names read from the benchmark declarations (harness/core/benchmarks.yaml): the 14 public BEIR datasets
(BEIR paper order) and cqadupstack's 12 forums, for callers that want them as tuples."""

from harness.core import benchmarks as _declared

BEIR_DATASETS = _declared.beir()
CQADUPSTACK_FORUMS = next(_declared.get(n).forums for n in BEIR_DATASETS if _declared.get(n).forums)
