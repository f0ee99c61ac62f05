"""The precision a run record's training stages used, and its one label on every surface.

A record states each training stage's precision in that stage's output (``precision``, since
2026-11-25); a record made before trained in fp32 (the CPU engine trained nothing else then). The
label is what the run's closing table, ``check``, the leaderboard, the report and MLflow's parent run
print beside a run's numbers: ``fp32``, ``bf16``, several joined by ``+`` (stages in different
precisions), or ``-`` for a run that trained nothing (BM25).
"""

from __future__ import annotations

from typing import Any

# The stages whose precision a record states (their outputs' `precision`, and `precision_source`).
TRAINING_STAGES = ("pretrain", "retriever1", "retriever2", "retriever3")
NO_TRAINING = "-"  # the label of a run that trained nothing


def stage_precisions(stages: list[dict[str, Any]]) -> dict[str, str]:
    """The precision each training stage of a record's ``stages`` used (fp32 for a record that predates
    stating it)."""
    stated = {
        str(e.get("stage")): str(e["output"]["precision"])
        for e in stages
        if isinstance(e.get("output"), dict) and e["output"].get("precision")
    }
    if stated:
        return stated
    return {str(e.get("stage")): "fp32" for e in stages if e.get("stage") in TRAINING_STAGES}


def precision_label(stages: list[dict[str, Any]]) -> str:
    """'fp32', 'bf16', 'bf16+fp32' (mixed, sorted) or '-' (no training stage)."""
    used = sorted(set(stage_precisions(stages).values()))
    return "+".join(used) if used else NO_TRAINING
