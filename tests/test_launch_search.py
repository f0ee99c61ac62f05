"""`run --nproc-per-node 2` (gloo, CPU) searches where the vectors are: mining and every evaluation search
ran on both processes (their record entries say so), and one process searching the same models and
vectors again writes the same run files: scores within 2e-6 relative at every rank, and the same ids in the same
order (ties by doc id) except among documents whose scores lie within 2e-6 relative of each other, where the two
scorers' float rounding may order them apart, and among those tied at the last place, where faiss's own
pick follows no fixed rule. The 2-process run is tests/test_launch.py's (slow); the check is here."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np

from tests.test_launch import _env, _finish, _harness, _records


def _run_files(cache: Path) -> dict[str, list[list[str]]]:
    """Every dense_retrieve stage's run file, by its path under the cache, as split lines."""
    return {
        str(p.relative_to(cache)): [line.split() for line in p.read_text().splitlines()]
        for p in sorted((cache / "dense_retrieve").rglob("run.trec"))
    }


RTOL = 2e-6  # relative: a few float32 ulps of a 768-term sum (measured up to 6.9e-7 at scores ~133)


def _tie_groups(lines: list[list[str]], ref: list[list[str]]) -> list[tuple[str, int, frozenset[str]]]:
    """Per query, its ranking cut into groups of neighbours within RTOL of each other (each group's doc ids
        as a set), the cuts taken from ``ref``'s scores (one set of cuts for both files: a gap past RTOL is
    wider than either file's rounding); a query's last group, tied at its last place, is kept as its size only."""
    groups: list[tuple[str, int, frozenset[str]]] = []
    current: list[str] = []
    for i, row in enumerate(lines):
        current.append(row[2])
        last_of_query = i + 1 == len(ref) or ref[i + 1][0] != row[0]
        if last_of_query or abs(float(ref[i + 1][4]) - float(ref[i][4])) > RTOL * abs(float(ref[i][4])):
            groups.append((row[0], len(current), frozenset() if last_of_query else frozenset(current)))
            current = []
    return groups


def assert_one_process_search_writes_the_same_run_files(run_dir: Path, record: dict) -> None:
    """``record``: a finished 2-process cotmae_qc tiny run in ``run_dir`` (its cache and runs). Every search
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
    _finish(_harness(["run", "--method", "cotmae_qc", "--profile", "tiny"], _env(run_dir)))
    one = _run_files(cache)
    assert one.keys() == two.keys()
    for name in one:
        assert [r[:2] for r in two[name]] == [r[:2] for r in one[name]], name  # same queries, same depths
        np.testing.assert_allclose(
            [float(r[4]) for r in two[name]], [float(r[4]) for r in one[name]], rtol=RTOL, atol=0
        )
        assert _tie_groups(two[name], one[name]) == _tie_groups(one[name], one[name]), name
    newest = _records(run_dir)[-1]
    assert all(e["output"]["search_processes"] == 1 for e in newest["stages"] if e["stage"] == "dense_retrieve")


def test_tie_groups_let_only_near_ties_and_the_last_place_differ():
    def lines(*rows: tuple[str, str, float]) -> list[list[str]]:
        return [[q, "Q0", d, "0", str(s), "t"] for q, d, s in rows]

    a = lines(("1", "x", 3.0), ("1", "y", 2.0), ("1", "z", 2.000001), ("1", "w", 1.0), ("2", "x", 1.0))
    b = lines(("1", "x", 3.0), ("1", "z", 2.000001), ("1", "y", 2.0), ("1", "v", 1.0), ("2", "y", 1.0))
    assert _tie_groups(b, a) == _tie_groups(a, a)
    c = lines(("1", "y", 3.0), ("1", "x", 2.0), ("1", "z", 2.000001), ("1", "w", 1.0), ("2", "x", 1.0))
    assert _tie_groups(c, a) != _tie_groups(a, a)
