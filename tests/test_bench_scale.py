"""bench/bench_scale.py's rows at small sizes: the stage names and fields another reader projects memory
from, each (stage, size) measured in its own process, and counts that follow the synthetic data's design."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench" / "bench_scale.py"


def _module(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH.parent))  # the spawned children import it by name
    spec = importlib.util.spec_from_file_location("bench_scale", BENCH)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    return module


def test_bench_scale_rows_for_the_pure_python_stages(tmp_path, monkeypatch):
    bench = _module(monkeypatch)
    out = tmp_path / "scale.json"
    assert (
        bench.main(
            [
                "--stages",
                "negatives",
                "teacher_pairs",
                "vector_store",
                "search",
                "--size",
                "negatives=400,4000",
                "--size",
                "teacher_pairs=400",
                "--size",
                "vector_store=3000",
                "--size",
                "search=3000",
                "--chunk-rows",
                "1000",
                "--negatives-queries",
                "150",
                "--tmp",
                str(tmp_path),
                "--json",
                str(out),
            ]
        )
        == 0
    )
    rows = json.loads(out.read_text())["rows"]
    assert [(r["stage"], r["passages"]) for r in rows] == [
        ("negatives", 400),
        ("negatives", 4000),
        ("teacher_pairs", 400),
        ("vector_store", 3000),
        ("search", 3000),
    ]
    for r in rows:
        assert r["seconds"] >= 0 and r["peak_rss_mib"] > 0 and r["disk_mib"] >= 0, r
    neg = {r["passages"]: r for r in rows if r["stage"] == "negatives"}
    # the query set is held fixed while the corpus grows; every query has a judged positive, so a pool
    assert [(neg[n]["queries"], neg[n]["items"]) for n in (400, 4000)] == [(150, 150), (150, 150)]
    teacher = next(r for r in rows if r["stage"] == "teacher_pairs")
    assert teacher["items"] == 20 * 72 and teacher["chunks"] == 1
    search = next(r for r in rows if r["stage"] == "search")
    assert (search["chunks"], search["chunk_rows"], search["dim"]) == (3, 1000, 128)  # the row says its chunk
    assert next(r for r in rows if r["stage"] == "vector_store")["dim"] == 128  # the footprint scales by it
    assert list(tmp_path.iterdir()) == [out]  # every stage's folder removed


def test_synthetic_run_has_distinct_documents_and_the_planned_positives():
    bench = _load_plain()
    run = dict(bench.synthetic_run(5000, 30, 200))
    assert all(len(r) == 200 for r in run.values())
    qrels = bench.synthetic_qrels(30, 5000)
    inside = [q for q, rel in qrels.items() if next(iter(rel)) in run[q]]
    assert len(inside) == 27  # q % 10 == 9 has its positive outside its run


def _load_plain():
    spec = importlib.util.spec_from_file_location("bench_scale_plain", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
