"""Run records name the CPU precisely enough to tell why two machines' last digits differ."""

from __future__ import annotations

import sys

import pytest

from harness.core import hardware
from harness.records import environment


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/cpuinfo")
def test_records_name_the_cpu_model_its_features_and_the_kernels_torch_picked():
    import torch  # noqa: F401  (loaded, as in every training run)

    info = environment.hardware()
    assert info["cpu_model"].endswith(")") and info["cpu_model"].count("/") == 2  # family/model/stepping
    assert set(info["cpu_features"]) <= set(hardware.CPU_FEATURES)
    assert info["torch_threads"] >= 1 and info["torch_cpu_capability"]


def test_cpu_identity_reads_the_first_processor_block(tmp_path):
    fake = tmp_path / "cpuinfo"
    fake.write_text(
        "processor\t: 0\nmodel name\t: Some CPU\ncpu family\t: 6\nmodel\t\t: 143\nstepping\t: 8\n"
        "flags\t\t: fpu avx2 avx512f amx_tile\n\nprocessor\t: 1\nflags\t\t: fpu\n"
    )
    assert hardware.cpu_identity(fake) == {
        "cpu_model": "Some CPU (6/143/8)",
        "cpu_features": ["avx2", "avx512f", "amx_tile"],
    }
