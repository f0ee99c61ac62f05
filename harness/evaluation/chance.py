"""Chance level: what a random ranking scores on a benchmark, and whether a run beats it.

A tiny model can train without error and still rank no better than chance; a number of
"1.1 nDCG@10" means nothing until it is set beside what a random ranking of the same
corpus scores. The random run is seeded, so the chance level is reproducible, and the run
is compared with it by a paired bootstrap over the judged queries.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

from harness.core.seeds import DEFAULT_SEED
from harness.evaluation.bootstrap import paired_bootstrap
from harness.evaluation.measures import evaluate


def random_run(
    doc_ids: list[str], query_ids: list[str], depth: int = 1000, seed: int = DEFAULT_SEED
) -> dict[str, dict[str, float]]:
    """Each query ranks ``depth`` documents drawn uniformly without replacement (seeded)."""
    rng = random.Random(seed)
    depth = min(depth, len(doc_ids))
    return {q: {d: float(depth - i) for i, d in enumerate(rng.sample(doc_ids, depth))} for q in query_ids}


def chance_check(
    bench: Any, per_query: Mapping[str, float], measure: str, seed: int = DEFAULT_SEED
) -> dict[str, Any] | None:
    """The random ranking's score for ``measure`` and the run's paired difference from it.

    None when the corpus is not available locally (its document ids are needed)."""
    if not bench.has_corpus():
        return None
    qrels = bench.qrels(bench.eval_split)
    chance = evaluate(random_run(sorted(bench.corpus()), sorted(qrels), seed=seed), qrels, bench)
    diff = paired_bootstrap(per_query, chance.per_query[measure], seed=seed)
    return {
        "measure": measure,
        "chance": chance.aggregate[measure],
        "delta": diff.mean_diff,
        "low": diff.low,
        "high": diff.high,
        "above_chance": diff.low > 0,
    }


def describe(dataset: str, check: Mapping[str, Any], value: float) -> str:
    verdict = "above chance" if check["above_chance"] else "NOT above chance (a random ranking does as well)"
    return (
        f"{dataset} {check['measure']} {100 * value:.2f} vs random ranking {100 * check['chance']:.2f}: "
        f"{100 * check['delta']:+.2f} [{100 * check['low']:+.2f}, {100 * check['high']:+.2f}], {verdict}"
    )
