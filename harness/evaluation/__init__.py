"""Official evaluation and comparison with the papers.

* ``conventions`` -- per-benchmark measures and rules (MS MARCO, TREC DL, BEIR, cqadupstack).
* ``measures``    -- ``evaluate(run, qrels, benchmark)`` / ``evaluate_measures`` with ir-measures.
* ``bootstrap``   -- bootstrap CI of a mean and a paired bootstrap test between runs.
* ``tolerances``  -- per (method, benchmark, measure) tolerances from ``tolerances.yaml``.
* ``verdict``     -- the one grading rule: REPRODUCED / DIFFERENT-BELOW / DIFFERENT-ABOVE / INCONCLUSIVE.
* ``margins``     -- what every verdict reads: the practical margin Delta and sigma_rep with its evidence.
* ``power``       -- what the rule can tell at those: P(verdict) and the seeds that reach a target.
* ``noise``       -- the harness's own seed-to-seed spread (``noise.yaml``): sigma_rep's floor.
* ``transfer_rule`` -- the declared rule of a spread transferred elsewhere (``transfer.yaml``).
* ``pretrain_part`` -- the pre-training part sigma_pt measured from records of several pre-training seeds.
* ``compare``     -- reproduced vs reported cells, like with like (NOT-COMPARABLE otherwise).
* ``chance``      -- what a random ranking scores on a benchmark, and whether a run beats it.
* ``dense_run``   -- one dense retrieval of a benchmark split: queries encoded, exact top-k, the run.
* ``zero_shot``   -- any local encoder checkpoint encoded, searched and scored on a benchmark.
* ``sharded``     -- the command line of sharded, resumable corpus encoding (:mod:`harness.retrieval.shard_encoding`).
* ``claims``, ``count_claims``, ``effects`` -- the papers' printed effects and reproduced ones graded.
"""

from harness.evaluation.bootstrap import bootstrap_ci, paired_bootstrap
from harness.evaluation.compare import Comparison, compare, format_comparison_table
from harness.evaluation.conventions import Convention, get_convention
from harness.evaluation.measures import EvalResult, evaluate, evaluate_measures

__all__ = [
    "Comparison",
    "Convention",
    "EvalResult",
    "bootstrap_ci",
    "compare",
    "evaluate",
    "evaluate_measures",
    "format_comparison_table",
    "get_convention",
    "paired_bootstrap",
]
