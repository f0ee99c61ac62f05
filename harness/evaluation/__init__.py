"""Official evaluation and comparison with the papers.

* ``conventions`` -- per-benchmark measures and rules (MS MARCO, TREC DL, BEIR, cqadupstack).
* ``measures``    -- ``evaluate(run, qrels, benchmark)`` / ``evaluate_measures`` with ir-measures.
* ``bootstrap``   -- bootstrap CI of a mean and a paired bootstrap test between runs.
* ``tolerances``  -- per (method, benchmark, measure) tolerances from ``tolerances.yaml``.
* ``verdict``     -- the one grading rule: REPRODUCED / DIFFERENT-BELOW / DIFFERENT-ABOVE / INCONCLUSIVE.
* ``noise``       -- the measured seed-to-seed spread (``noise.yaml``) that sets each verdict's margin.
* ``compare``     -- reproduced vs reported cells, like with like (NOT-COMPARABLE otherwise).
"""

from harness.evaluation.bootstrap import bootstrap_ci, paired_bootstrap
from harness.evaluation.compare import Comparison, compare, format_comparison_table
from harness.evaluation.conventions import Convention, get_convention
from harness.evaluation.measures import EvalResult, evaluate, evaluate_measures

__all__ = ["Comparison", "Convention", "EvalResult", "bootstrap_ci", "compare", "evaluate", "evaluate_measures",
           "format_comparison_table", "get_convention", "paired_bootstrap"]
