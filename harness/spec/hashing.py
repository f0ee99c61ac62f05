"""A spec's settings hash: what ran, canonicalised (documentation keys and a redundant retired block left out),
so two runs of the same settings carry the same hash.
"""

from __future__ import annotations

from typing import Any

from harness.spec.schema import DOCUMENTATION_KEYS
from harness.spec.stage_settings import NEGATIVE_DEPTH, finetune_settings
from harness.stages.artifacts import config_hash
from harness.training.precision import AUTO


def _without_redundant_mine(config: dict[str, Any]) -> dict[str, Any]:
    """A record made before ``finetune.mine`` was retired (RETIRED) ran the same settings as today's spec when
    its block says what the rule now derives (depth = retriever 2's negative_depth, mined with retriever 1):
    then the block is dropped before hashing; otherwise kept, so the hash tells the two runs apart."""
    finetune = config.get("finetune")
    mine = finetune.get("mine") if isinstance(finetune, dict) else None
    if not isinstance(mine, dict) or set(mine) - {"depth", "with"}:
        return config
    # finetune_settings reads the config's `finetune` block as it reads a spec's: the stage's keys over the shared
    depth = finetune_settings(config, "retriever2").get("negative_depth") or NEGATIVE_DEPTH
    if mine.get("depth", NEGATIVE_DEPTH) != depth or mine.get("with") not in (None, "retriever1"):
        return config
    assert isinstance(finetune, dict)  # `mine` came from it
    return {**config, "finetune": {k: v for k, v in finetune.items() if k != "mine"}}


def _auto_as_fp32(config: dict[str, Any]) -> dict[str, Any]:
    """``precision: auto`` hashed as ``fp32``: the CPU profiles stated fp32 before ``auto`` replaced it
    (2026-11-26), so their references still compare. Which precision a run in fact used is the gate's
    condition, stage by stage (harness.gate.grading.precision_difference), not the spec's. Fine-tuning
    trains in fp32 unless a spec says otherwise, so there a stated fp32 (or auto) is hashed as unstated."""

    def canonical(block: Any, default_fp32: bool) -> Any:
        if not isinstance(block, dict):
            return block
        out = {}
        for k, v in block.items():
            if k != "precision":
                out[k] = canonical(v, default_fp32)
            elif not (default_fp32 and v in (AUTO, "fp32")):
                out[k] = "fp32" if v == AUTO else v
        return out

    return {k: canonical(v, k == "finetune") if k in ("pretrain", "finetune") else v for k, v in config.items()}


def settings_hash(config: dict[str, Any]) -> str:
    """16 hex digits of the settings that run (documentation keys left out, a redundant retired block too,
    ``precision: auto`` as fp32)."""
    config = _auto_as_fp32(_without_redundant_mine(config or {}))
    return config_hash({k: v for k, v in config.items() if k not in DOCUMENTATION_KEYS})
