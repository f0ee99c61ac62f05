"""The run's seed: 42 unless ``run --seed N`` (or one seed of ``run --seeds``) says otherwise.

The seed is an argument: the command line hands it to ``run_method``, which puts it on the
:class:`~harness.pipelines.context.RunContext` every stage reads. :data:`DEFAULT_SEED` is only the
default of those arguments; no module reads a seed from the environment.
"""

from __future__ import annotations

DEFAULT_SEED = 42
