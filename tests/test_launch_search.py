"""`run --nproc-per-node 2` (gloo, CPU) searches where the vectors are: mining and every evaluation search
ran on both processes (their record entries say so), and one process searching the same models and
vectors again writes the same run files line for line: the same ids in the same order (ties by doc id in
both paths, at the k-th place too), scores within 2e-6 relative (each CPU rank scans its rows, on faiss's
1024-row blocks, with the one-process faiss code: harness/retrieval/rank_search.py). The 2-process run is
tests/test_launch.py's (slow); the check is here."""

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


RTOL = 2e-6  # relative: a few float32 ulps of a 768-term sum (measured up to 6.9e-7 at scores ~133)


def _near_groups(one: list[list[str]]) -> list[tuple[int, int, bool]]:
    """(start, end, last of its query) of each run of neighbours in ``one`` whose scores lie within RTOL."""
    groups, start = [], 0
    for i in range(len(one)):
        last = i + 1 == len(one) or one[i + 1][0] != one[i][0]
        if last or abs(float(one[i + 1][4]) - float(one[i][4])) > RTOL * abs(float(one[i][4])):
            groups.append((start, i + 1, last))
            start = i + 1
    return groups


def assert_same_run_lines(two: list[list[str]], one: list[list[str]], name: str = "") -> None:
    """Line for line: the same queries, ranks and tags, scores within RTOL, and the same doc ids in the same
    order wherever the scores tell them apart; exact ties are ordered and cut by doc id in both paths
    (harness.data.formats.by_score_then_id, harness.retrieval.exact_search.doc_id_order), so a group of
    equal scores holds the same ids in the same order, at the last place too. Only documents within RTOL of
    each other but not equal (the query vectors' float rounding: each rank encodes its own slice of the
    queries, in other batches) may swap, and such a group at a query's last place may hold other ids."""
    assert [r[:2] + r[3:4] + r[5:] for r in two] == [r[:2] + r[3:4] + r[5:] for r in one], name
    np.testing.assert_allclose([float(r[4]) for r in two], [float(r[4]) for r in one], rtol=RTOL, atol=0)
    for start, end, last in _near_groups(one):
        ids_two, ids_one = [r[2] for r in two[start:end]], [r[2] for r in one[start:end]]
        if len({r[4] for r in two[start:end] + one[start:end]}) == 1:  # one score: exact ties, by doc id
            assert ids_two == ids_one, (name, one[start])
        elif not last:
            assert sorted(ids_two) == sorted(ids_one), (name, one[start])


def assert_one_process_search_writes_the_same_run_files(run_dir: Path, record: dict, args: list[str]) -> None:
    """``record``: a finished 2-process cotmae_qc tiny run in ``run_dir`` (its cache and runs) of ``args`` (the
    `run` arguments, without the launch flags). Every search
    ran on both processes; one process searching the same models and vectors again (the dense_retrieve
    stages removed from the cache) writes the same run files. Called by tests/test_launch.py's 2-process
    run, so the 2-process tiny run is trained once in the suite."""
    searches = [e for e in record["stages"] if e["stage"] == "dense_retrieve"]
    assert searches and all(e["output"]["search_processes"] == 2 for e in searches)
    assert all(e["output"]["search_devices"] == ["cpu", "cpu"] for e in searches)
    cache = run_dir / "cache"
    two = _run_files(cache)
    assert len(two) == len(searches)
    shutil.rmtree(cache / "dense_retrieve")
    _finish(_harness(args, _env(run_dir)))
    one = _run_files(cache)
    assert one.keys() == two.keys()
    for name in one:
        assert_same_run_lines(two[name], one[name], name)
    newest = _records(run_dir)[-1]
    assert all(e["output"]["search_processes"] == 1 for e in newest["stages"] if e["stage"] == "dense_retrieve")


def test_run_lines_must_match_in_ids_and_order_and_scores_within_the_tolerance():
    def lines(*rows: tuple[str, str, float]) -> list[list[str]]:
        return [[q, "Q0", d, str(i + 1), repr(s), "t"] for i, (q, d, s) in enumerate(rows)]

    a = lines(("1", "x", 3.0), ("1", "y", 2.0), ("1", "z", 2.0), ("1", "u", 1.5), ("1", "v", 1.0), ("1", "w", 1.0))
    assert_same_run_lines(a, a)
    near = lines(
        ("1", "x", 3.0), ("1", "y", 2.0), ("1", "z", 2.0), ("1", "u", 1.5), ("1", "v", 1.0), ("1", "q", 1.000001)
    )
    assert_same_run_lines(near, a)  # a near tie (not equal) at the last place may hold another id
    swapped_near = lines(
        ("1", "x", 3.0), ("1", "z", 2.000001), ("1", "y", 2.0), ("1", "u", 1.5), ("1", "v", 1.0), ("1", "w", 1.0)
    )
    assert_same_run_lines(swapped_near, a)
    for other in (
        lines(("1", "x", 3.0), ("1", "z", 2.0), ("1", "y", 2.0), ("1", "u", 1.5), ("1", "v", 1.0), ("1", "w", 1.0)),
        lines(("1", "x", 3.0), ("1", "y", 2.0), ("1", "z", 2.0), ("1", "u", 1.5), ("1", "v", 1.0), ("1", "q", 1.0)),
        lines(("1", "y", 3.0), ("1", "x", 2.0), ("1", "z", 2.0), ("1", "u", 1.5), ("1", "v", 1.0), ("1", "w", 1.0)),
        lines(("1", "x", 3.001), ("1", "y", 2.0), ("1", "z", 2.0), ("1", "u", 1.5), ("1", "v", 1.0), ("1", "w", 1.0)),
    ):  # exact ties in another order, another id among exact ties at the last place, distinct scores swapped, a score off
        with pytest.raises(AssertionError):
            assert_same_run_lines(other, a)
