"""A spec's settings hash: what ran, canonicalised (documentation keys and a redundant retired block left out),
so two runs of the same settings carry the same hash.
"""

from __future__ import annotations

from typing import Any

from harness.spec.schema import DOCUMENTATION_KEYS
from harness.spec.stage_settings import NEGATIVE_DEPTH
from harness.stages.artifacts import config_hash


def _negative_depth(config: dict[str, Any], stage: str) -> Any:
    """A fine-tuning stage's negative_depth in a resolved spec's config: its block's, the finetune block's, the default."""
    finetune = config.get("finetune") or {}
    return ((finetune.get(stage) or {}).get("negative_depth") or finetune.get("negative_depth") or NEGATIVE_DEPTH)


def _without_redundant_mine(config: dict[str, Any]) -> dict[str, Any]:
    """A record made before ``finetune.mine`` was retired (RETIRED) ran the same settings as today's spec when
    its block says what the rule now derives (depth = retriever 2's negative_depth, mined with retriever 1):
    then the block is dropped before hashing; otherwise kept, so the hash tells the two runs apart."""
    finetune = config.get("finetune")
    mine = finetune.get("mine") if isinstance(finetune, dict) else None
    if not isinstance(mine, dict) or set(mine) - {"depth", "with"}:
        return config
    if mine.get("depth", NEGATIVE_DEPTH) != _negative_depth(config, "retriever2") \
            or mine.get("with") not in (None, "retriever1"):
        return config
    return {**config, "finetune": {k: v for k, v in finetune.items() if k != "mine"}}


def settings_hash(config: dict[str, Any]) -> str:
    """16 hex digits of the settings that run (documentation keys left out, a redundant retired block too)."""
    return config_hash({k: v for k, v in _without_redundant_mine(config or {}).items() if k not in DOCUMENTATION_KEYS})
