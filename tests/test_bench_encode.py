"""bench/bench_encode.py's ranking check: the share of queries whose top 10 is the reference's."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

BENCH = Path(__file__).resolve().parents[1] / "bench" / "bench_encode.py"


def _bench():
    spec = importlib.util.spec_from_file_location("bench_encode", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_top10_agreement_counts_order_and_set_apart():
    bench = _bench()
    reference = np.tile(np.arange(20, 0, -1, dtype=float), (3, 1))  # passage 0 best, then 1, 2, ...
    swapped = reference.copy()
    swapped[1, [0, 1]] = swapped[1, [1, 0]]  # order within the top 10 changes: same set
    swapped[2, [9, 10]] = swapped[2, [10, 9]]  # passage 10 enters the top 10: another set
    assert bench.top10_agreement(reference, reference) == (1.0, 1.0)
    order, same_set = bench.top10_agreement(swapped, reference)
    assert order == 1 / 3 and same_set == 2 / 3
