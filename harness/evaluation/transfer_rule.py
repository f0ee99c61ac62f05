"""The declared transfer rule of a seed spread measured elsewhere (``transfer.yaml`` beside this module).

A sigma carried from another model, scale or benchmark (the mini seeds of ``noise.yaml`` standing in
for a paper-scale run) is only as good as the transfer, which no df of the source measures. The rule,
declared once with its reason, caps the df at the source's ``seeds - 1`` and/or inflates sigma;
``noise.transfer`` applies it and ``margins.source_words`` names it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
from numpy.typing import ArrayLike

from harness.core import yamlsafe
from harness.core.errors import DataFormatError

RULE_FILE = Path(__file__).with_name("transfer.yaml")


@dataclass(frozen=True)
class TransferRule:
    model: str  # what the transferred seeds fine-tuned (in words: "MiniLM")
    train_queries: int  # the training queries they fine-tuned on
    df_at_most_seeds: bool  # df capped at the source's seeds - 1
    inflation: float  # sigma multiplied by this
    why: str

    def apply(self, sigma: ArrayLike, df: ArrayLike, seeds: int) -> tuple[np.ndarray, np.ndarray]:
        """``(sigma, df)`` of a transferred spread under the rule (vectorised: the simulation runs it)."""
        s, d = np.asarray(sigma, dtype=float) * self.inflation, np.asarray(df, dtype=float)
        return s, (np.minimum(d, seeds - 1) if self.df_at_most_seeds else d)

    def words(self, seeds: int) -> str:
        """The rule in a few words: "df capped at 2" / "x1.5, df capped at 2"."""
        parts = [f"x{self.inflation:g}"] if self.inflation != 1.0 else []
        if self.df_at_most_seeds:
            parts.append(f"df capped at {seeds - 1}")
        return ", ".join(parts) or "as measured"


@lru_cache(maxsize=1)
def load() -> TransferRule:
    data = yamlsafe.load(RULE_FILE.read_text(encoding="utf-8"))
    try:
        source = data["source"]
        rule = TransferRule(
            str(source["model"]),
            int(source["train_queries"]),
            bool(data["df_at_most_seeds"]),
            float(data["inflation"]),
            str(data["why"]).strip(),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise DataFormatError(
            RULE_FILE, None, f"{exc!r}", "needs source {model, train_queries}, df_at_most_seeds, inflation, why"
        ) from None
    if rule.inflation < 1.0 or not rule.why:
        raise DataFormatError(RULE_FILE, None, "inflation must be >= 1 and why given", "a rule never narrows sigma")
    return rule
