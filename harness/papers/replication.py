"""Placeholder until the registry's repeated reports are enumerated (issue 37): no pairs yet."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ReplicationPair:
    method: str
    benchmark: str
    measure: str
    a: float
    b: float
    source_a: str
    source_b: str

    @property
    def diff(self) -> float:
        return self.a - self.b


def replication_pairs(cells=None) -> list[ReplicationPair]:
    return []
