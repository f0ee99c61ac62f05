"""Each family's pipeline, by the family's name: the pipeline modules are imported here, so the
functions they register (``@registry.pipeline(FAMILY)``, harness/stages/registry.py) are there before
any look-up, whatever was imported first."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from harness.pipelines import bm25, dense, learned_sparse
from harness.pipelines.context import RunContext
from harness.stages import registry

Pipeline = Callable[[RunContext, list[str]], dict[str, dict[str, Path]]]
# The modules whose import registers a family's pipeline (a new family's module goes here too).
PIPELINE_MODULES = (bm25, dense, learned_sparse)


def family_pipeline(family: str) -> Pipeline:
    """The pipeline registered for ``family`` (declared in harness/stages/graph.py :data:`FAMILIES`)."""
    return registry.PIPELINES.function(family)
