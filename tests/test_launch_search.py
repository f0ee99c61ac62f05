"""`run --nproc-per-node 2` (gloo, CPU) searches where the vectors are: mining and every evaluation search
ran on both processes (their record entries say so), and one process searching the same models and
vectors again writes the same run files (same ids and order, ties by doc id; scores within 1e-5)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from tests.test_launch import _env, _finish, _harness, _records


def _run_files(cache: Path) -> dict[str, list[list[str]]]:
    """Every dense_retrieve stage's run file, by its path under the cache, as split lines."""
    return {
        str(p.relative_to(cache)): [line.split() for line in p.read_text().splitlines()]
        for p in sorted((cache / "dense_retrieve").rglob("run.trec"))
    }


@pytest.mark.slow
def test_two_process_searches_write_the_one_process_run_files(tmp_path):
    args = ["run", "--method", "cotmae_qc", "--profile", "tiny"]
    _finish(_harness([*args, "--nproc-per-node", "2"], _env(tmp_path)))
    [record] = _records(tmp_path)
    searches = [e for e in record["stages"] if e["stage"] == "dense_retrieve"]
    assert searches and all(e["output"]["search_processes"] == 2 for e in searches)
    assert all(e["output"]["search_devices"] == ["cpu", "cpu"] for e in searches)
    cache = tmp_path / "cache"
    two = _run_files(cache)
    assert len(two) == len(searches)
    # the searches again in one process (faiss), over the same cached models and corpus vectors
    shutil.rmtree(cache / "dense_retrieve")
    _finish(_harness(args, _env(tmp_path)))
    one = _run_files(cache)
    assert one.keys() == two.keys()
    for name in one:
        assert [r[:4] for r in two[name]] == [r[:4] for r in one[name]], name
        np.testing.assert_allclose([float(r[4]) for r in two[name]], [float(r[4]) for r in one[name]], atol=1e-5)
    newest = _records(tmp_path)[-1]
    assert all(e["output"]["search_processes"] == 1 for e in newest["stages"] if e["stage"] == "dense_retrieve")
