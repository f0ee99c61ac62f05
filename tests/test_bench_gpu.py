"""bench/bench_gpu.py runs on CPU as a smoke test: every stage kind, its figures and the JSON it writes."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench" / "bench_gpu.py"


def test_bench_gpu_smoke_on_cpu(tmp_path, capsys, one_thread):
    spec = importlib.util.spec_from_file_location("bench_gpu", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    assert module.main(["--device", "cpu", "--smoke", "--json", str(tmp_path / "gpu.json")]) == 0
    result = json.loads((tmp_path / "gpu.json").read_text())
    kinds = {r["kind"] for r in result["rows"]}
    assert {"cotmae", "cocondenser", "cpdae", "lexmae", "finetune", "encode"} <= kinds
    for row in result["rows"]:
        assert row["tflop_per_step"] > 0 and row["sequences_per_s"] > 0 and 0 < row["mfu"] < 1.5, row
        assert math.isfinite(row["loss"])
    assert result["smoke"] and result["peak_is"] == "this CPU's measured fp32 matmul rate"
    assert "SMOKE" in capsys.readouterr().out
    # the paper's per-device fine-tuning shape: CoT-MAE's 64 queries over 16 V100s x 16 passages
    assert module.finetune_shape() == (4, 16)
