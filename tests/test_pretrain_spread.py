"""sigma_pt from runs with different pre-training seeds (issue 61 item 3): noise.pretrain_spread on
synthetic records, 2 pre-training x 3 fine-tuning seeds and more."""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.core.errors import HarnessError
from harness.evaluation import noise
from harness.records.run_record import RunRecord


def _record(pretrain_seed: int | None, value: float) -> RunRecord:
    return RunRecord("r", "cotmae_qc", "paper", {"scifact": {"nDCG@10": value / 100}}, pretrain_seed=pretrain_seed)


def test_a_balanced_design_recovers_both_parts():
    """Many pre-training seeds x 3 fine-tuning seeds drawn with sigma_pt 0.8 and sigma_ft 0.5: both come back."""
    rng = np.random.default_rng(0)
    values = {p: list(50 + rng.normal(0, 0.8) + rng.normal(0, 0.5, 3)) for p in range(400)}
    got = noise.pretrain_spread(values)
    assert got.groups == 400 and got.runs == 1200 and got.df > 100
    assert got.sigma_pt == pytest.approx(0.8, abs=0.08) and got.sigma_ft == pytest.approx(0.5, abs=0.03)


def test_two_pretraining_seeds_by_hand_and_a_clip_never_raises_the_df():
    # 2 x 3: group means 50 and 52, within SD 1: MSB = 3 * 2 = 6, MSW = 1, sigma_pt^2 = (6 - 1) / 3
    got = noise.pretrain_spread({42: [49.0, 50.0, 51.0], 43: [51.0, 52.0, 53.0]})
    assert got.sigma_pt == pytest.approx(math.sqrt(5 / 3)) and got.sigma_ft == pytest.approx(1.0)
    assert got.df == pytest.approx((5 / 3) ** 2 / ((36 / 1 + 1 / 4) / 9))
    # pre-trainings that agree more closely than their fine-tunings: clipped to 0, df at most groups - 1
    clipped = noise.pretrain_spread({42: [48.0, 50.0, 52.0], 43: [48.1, 50.1, 52.1]})
    assert clipped.sigma_pt == 0.0 and clipped.df <= 1


def test_records_without_a_pretrain_seed_share_seed_42s_pretraining():
    records = [_record(None, v) for v in (49.0, 50.0, 51.0)] + [_record(43, v) for v in (51.0, 52.0, 53.0)]
    got = noise.pretrain_spread_of(records, "scifact", "nDCG@10")
    assert got is not None and got.groups == 2 and got.sigma_pt == pytest.approx(math.sqrt(5 / 3))
    # fine-tune-only evidence (one pre-training): nothing to estimate
    assert noise.pretrain_spread_of(records[:3], "scifact", "nDCG@10") is None
    with pytest.raises(HarnessError, match="pre-training seeds"):
        noise.pretrain_spread({42: [50.0], 43: [51.0]})
