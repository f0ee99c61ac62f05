"""The dry-run's memory and disk of each data stage at the paper's corpus sizes, from bench_scale's
measured slopes (issue 39 item 4): a stage whose slope exceeds the machine is named before anything
runs; a stage without measurements says so; the line goes through the two largest sizes."""

from __future__ import annotations

import json

import pytest

from harness.run import footprint
from harness.run.projection import MSMARCO_PASSAGES, PRETRAIN_PASSAGES
from harness.run.runner import plan_method
from harness.spec.method import load_method


def _bench(tmp_path, rows):
    path = tmp_path / "bench_scale_cpu_2099-01-01.json"
    path.write_text(
        json.dumps(
            {"rows": [dict(zip(("stage", "passages", "peak_rss_mib", "disk_mib"), r), seconds=1.0) for r in rows]}
        )
    )
    return path


def _entries(method: str, profile: str = "paper"):
    spec = load_method(method, profile)
    return spec, plan_method(spec, list(spec.get("datasets"))).stages.entries


def test_the_line_goes_through_the_two_largest_sizes():
    slopes = footprint.fit(
        [
            {"stage": "index", "passages": n, "peak_rss_mib": m, "disk_mib": d}
            for n, m, d in ((1_000, 900.0, 1.0), (10_000, 100.0, 10.0), (100_000, 190.0, 100.0))
        ]
    )
    line = slopes["index"].rss
    assert line.sizes == (10_000, 100_000)  # the 1,000 row (a start-up outlier here) is not used
    assert line.slope == pytest.approx(90 / 90_000) and line.at(1_000_000) == pytest.approx(1_090.0)
    assert slopes["index"].disk.at(MSMARCO_PASSAGES) == pytest.approx(MSMARCO_PASSAGES / 1_000)
    flat = footprint.fit([{"stage": "s", "passages": n, "peak_rss_mib": m} for n, m in ((10, 50.0), (100, 49.0))])
    assert flat["s"].rss.at(10**7) == 49.0  # a slope negative in noise never projects below the measured
    assert footprint.fit([{"stage": "one", "passages": 10, "peak_rss_mib": 5.0}]) == {}  # one size: no slope


def test_a_stage_whose_slope_exceeds_memory_is_named_and_unmeasured_stages_say_so(tmp_path):
    # passages: 1 KiB per passage (8.8M passages: ~8.4 GiB); vector_store and search: flat
    results = _bench(
        tmp_path,
        [
            ("passages", 10_000, 100 + 10_000 / 1024, 1.0),
            ("passages", 100_000, 100 + 100_000 / 1024, 10.0),
            ("vector_store", 10_000, 60.0, 5.0),
            ("vector_store", 100_000, 60.0, 50.0),
            ("search", 10_000, 60.0, 5.0),
            ("search", 100_000, 60.0, 50.0),
        ],
    )
    spec, entries = _entries("cotmae")
    text = "\n".join(footprint.describe(spec, entries, results, memory_gib=4.0, free_gib=1_000.0))
    expected = (100 + MSMARCO_PASSAGES / 1024) / 1024
    assert f"would not fit: passages needs ~{expected:,.1f} GiB of memory, this machine has 4.0 GiB" in text
    assert "dense_retrieve" not in text.split("would not fit", 1)[1]  # 60 MiB fits
    rows = {line.split()[0]: line for line in text.splitlines()[2:] if line.startswith("    ")}
    assert "not measured" in rows["pretrain"] and "not measured" in rows["bm25_negatives/msmarco-passage-train"]
    assert "not measured: encode" in rows["dense_retrieve/msmarco-dev"]  # measured in part: says which part
    # the same slopes on a machine with enough memory: nothing named
    roomy = "\n".join(footprint.describe(spec, entries, results, memory_gib=64.0, free_gib=1_000.0))
    assert "would not fit" not in roomy


def test_the_disk_the_stages_write_is_set_against_the_free_disk(tmp_path):
    results = _bench(tmp_path, [("vector_store", 10_000, 60.0, 10.0), ("vector_store", 100_000, 60.0, 100.0)])
    spec, entries = _entries("cotmae")
    feet = footprint.project(spec, entries, footprint.fit(json.loads(results.read_text())["rows"]))
    written = sum(f.disk_gib or 0.0 for f in feet)
    # two retrievers, one encoding of MS MARCO each (shared by mining, dev, DL19, DL20): 2 x 8.8M x 1 KiB
    assert written == pytest.approx(2 * MSMARCO_PASSAGES * 100 / 100_000 / 1024)
    lines = footprint.describe(spec, entries, results, memory_gib=64.0, free_gib=written / 2)
    assert any("would not fit: the data stages write" in line for line in lines)


def test_a_plan_that_pre_trains_on_wikipedia_is_projected_at_psgs_w100(tmp_path):
    results = _bench(tmp_path, [("passages", 10_000, 100.0, 1.0), ("passages", 100_000, 100.0, 10.0)])
    spec, entries = _entries("cpdae")
    text = "\n".join(footprint.describe(spec, entries, results, memory_gib=64.0, free_gib=1_000.0))
    row = next(line for line in text.splitlines() if line.split()[:1] == ["passages"])
    assert f"{PRETRAIN_PASSAGES['wikipedia']:,}" in row  # 21,015,324: psgs_w100, not MS MARCO


def test_the_dry_run_prints_it_from_the_committed_bench_result():
    spec, entries = _entries("cotmae")
    assert footprint.newest_results() is not None
    text = "\n".join(footprint.describe(spec, entries))
    assert "memory and disk of the data stages" in text and "bench/results/bench_scale_cpu_" in text


def test_a_run_warns_before_its_first_stage(tmp_path, monkeypatch, capsys):
    """The run itself, not only its dry-run, names a stage that would not fit before anything runs."""
    from harness.run import runner

    results = _bench(
        tmp_path, [("passages", 10_000, 100 + 10_000 / 1024, 1.0), ("passages", 100_000, 100 + 100_000 / 1024, 10.0)]
    )
    monkeypatch.setattr(footprint, "newest_results", lambda folder=footprint.RESULTS: results)
    monkeypatch.setattr(runner, "total_memory_gib", lambda: 4.0)
    spec = load_method("cotmae", "paper")
    plan = runner.build_plan(spec, runner.ProfileChoice("paper", "test"), list(spec.get("datasets")))
    runner.warn_if_too_big(plan)  # what a run prints after its tracker starts, before its first stage
    log = plan.stage_log()
    assert log.total > 0
    assert "would not fit: passages needs" in capsys.readouterr().out
    # what a full disk during the stage says it needs: the same projection, in MiB
    passages = footprint.stage_passages(spec, {"stage": "passages", "dataset": None})
    assert log.needs_mib[("passages", None)] == pytest.approx(10.0 + 9.0 * (passages - 100_000) / 90_000)


def test_a_stage_written_by_an_earlier_one_or_unmeasured_has_no_estimate(tmp_path):
    results = _bench(tmp_path, [("vector_store", 10_000, 60.0, 10.0), ("vector_store", 100_000, 60.0, 100.0)])
    spec, entries = _entries("cotmae")
    needs = footprint.stage_disk_mib(spec, entries, footprint.fit(json.loads(results.read_text())["rows"]))
    searches = [e for e in entries if e["stage"] == "dense_retrieve" and e.get("plan", "to run") == "to run"]
    estimated = [e for e in searches if (e["stage"], e.get("dataset")) in needs]
    # one estimate per encoding written (the first search over it); no stage but the vector ones was measured
    assert len(estimated) == len({str(e.get("vectors")) for e in searches}) and estimated
    assert {stage for stage, _ in needs} == {"dense_retrieve"}


def test_vector_stages_are_projected_at_the_plans_dimension():
    """bench_scale measures vectors at dim 128 (the row says so); a bert-base plan's are 768 wide: 8.8M x 768
    float32 on disk (25 GiB, not the 4.2 GiB of dim 128), and the search holds a run's 2 GiB chunk, not
    the bench's 32 MiB one."""
    from harness.retrieval.dense import chunk_rows
    from harness.run.model_shape import shape_of

    vectors = MSMARCO_PASSAGES * 128 * 4 / 2**20  # MiB at dim 128
    rows = [
        {
            "stage": s,
            "passages": n,
            "peak_rss_mib": 100.0,
            "disk_mib": vectors * n / MSMARCO_PASSAGES,
            "dim": 128,
            **({"chunk_rows": 65_536} if s == "search" else {}),
        }
        for s in ("vector_store", "search")
        for n in (100_000, 1_000_000)
    ]
    spec, entries = _entries("cotmae")
    assert shape_of(spec).hidden == 768
    feet = {f.label: f for f in footprint.project(spec, entries, footprint.fit(rows))}
    mining = feet["dense_retrieve/msmarco-passage-train (mining)"]
    assert mining.disk_gib == pytest.approx(MSMARCO_PASSAGES * 768 * 4 / 2**30)
    # the search's memory: the measured 100 MiB less its 32 MiB chunk, plus a run's 2 GiB chunk
    assert mining.rss_gib == pytest.approx((100.0 - 32.0 + chunk_rows(768) * 768 * 4 / 2**20) / 1024)
    assert mining.rss_gib > 2.0
    # rows without a dim (or at the plan's) are taken as measured
    same = footprint.fit([{**r, "dim": 768} for r in rows])
    plain = footprint.project(spec, entries, same)
    assert next(f for f in plain if f.label == mining.label).disk_gib == pytest.approx(vectors / 1024)


def test_the_plan_states_the_lucene_heap_its_searches_will_get(monkeypatch):
    monkeypatch.delenv("HARNESS_LUCENE_HEAP", raising=False)
    search = [{"stage": "retrieve", "dataset": "x/test"}]
    index = footprint.Footprint("index/x", 1_000_000)
    index.disk_gib = 2.0
    (line,) = footprint.heap_lines(search, [index])
    assert "-Xmx1280m" in line and "2,048 MiB" in line  # 1 GiB + 1/8 of the 2 GiB index
    (line,) = footprint.heap_lines(search, [])
    assert "sized when the search starts" in line
    assert footprint.heap_lines([{"stage": "retriever1"}], [index]) == []


def test_the_gpus_a_run_holds_while_its_cpu_stages_run_are_counted_idle(tmp_path):
    """Issue 51 item 7: the projection counts only GPU stages; Punkt and Lucene stages hold the declared
    GPUs idle for their measured wall time (bench_scale's seconds line), said in GPU-hours."""
    path = tmp_path / "bench_scale_cpu_2099-01-01.json"
    rows = [("passages", 10_000, 36.0), ("passages", 100_000, 360.0), ("encode", 1_000, 1.0), ("encode", 10_000, 10.0)]
    path.write_text(
        json.dumps(
            {
                "rows": [
                    {"stage": s, "passages": n, "seconds": t, "peak_rss_mib": 1.0, "disk_mib": 1.0} for s, n, t in rows
                ]
            }
        )
    )
    spec, entries = _entries("cotmae")  # declared 8 x A100 (cuda)
    text = "\n".join(footprint.describe(spec, entries, path, memory_gib=64.0, free_gib=1_000.0))
    rows_by = {line.split()[0]: line for line in text.splitlines()[2:] if line.startswith("    ")}
    passages_h = 360.0 / 100_000 * MSMARCO_PASSAGES / 3600  # a line through the origin: 3.6 ms a passage
    assert rows_by["passages"].split()[-2:] == [f"{passages_h:.1f}", "h"]
    feet = {f.label: f for f in footprint.project(spec, entries, footprint.measured_slopes(path))}
    assert feet["dense_retrieve/msmarco-dev"].cpu_hours is None  # a GPU stage: its time is projected above
    devices = int(spec.get("hardware.devices"))
    [idle] = [line for line in text.splitlines() if "idle GPU-hours" in line]
    total = sum(f.cpu_hours or 0.0 for f in feet.values())
    assert total >= passages_h and f"{total * devices:,.1f} idle GPU-hours" in idle
    cpu_spec, cpu_entries = _entries("cotmae", "mini")  # a CPU profile holds no GPU: no such line
    assert "idle GPU-hours" not in "\n".join(footprint.describe(cpu_spec, cpu_entries, path, 64.0, 1_000.0))
