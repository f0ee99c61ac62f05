"""bench/bench_qgen.py: a generation step at the tiny T5 shape, its FLOPs counted against the model."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import bench_qgen


def test_the_flop_model_matches_the_counted_generation_step() -> None:
    """flop_counter's count equals the model's terms it can see (it skips CPU attention), and the model's
    whole is larger by the attention terms only."""
    row = bench_qgen.measure(batch=2, input_tokens=12, returns=3, new_tokens=4, repeats=1)
    assert row["model_without_attention_over_counted"] == 1.0
    assert row["model_gflop"] > row["counted_gflop"] and row["step_seconds"] > 0
