"""The one temp-name rule and the atomic-folder helper (harness/core/fsutil.py): a folder appears whole
or not at all, a failed or killed writer leaves nothing that looks finished, and every scanner of
records and caches skips what is still being written."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from harness.core.fsutil import (
    atomic_dir,
    atomic_path,
    atomic_write_text,
    is_temp,
    is_temp_of,
    remove_temps,
    replace_dir,
    temp_name,
)
from harness.core.paths import PROJECT_ROOT
from harness.stages import artifacts

RUNS = PROJECT_ROOT / "runs" / "records"


# --- the temp-name rule -----------------------------------------------------------------------


def test_a_temp_name_is_hidden_keeps_the_suffix_and_is_recognised(tmp_path):
    target = tmp_path / "rank0-chunk00001.npy"
    tmp = temp_name(target)
    assert tmp.parent == tmp_path and tmp.name.startswith(".rank0-chunk00001.npy.") and tmp.suffix == ".npy"
    assert tmp != temp_name(target)  # a writer of its own: a random token each time
    assert temp_name(target, "partial").name == ".rank0-chunk00001.npy.partial.tmp.npy"
    folder = temp_name(tmp_path / "abc123")  # a folder (no suffix): .<name>.<token>.tmp
    assert folder.name.startswith(".abc123.") and folder.name.endswith(".tmp") and folder.name.count(".") == 3
    for name in (tmp.name, temp_name(tmp_path / "key").name, "x.json.tmp", ".a.json.k3j2x9.tmp.json"):
        assert is_temp(name), name
    for name in ("a.json", "tmp", "references.json", "step-000000002", "key.lock", ".lock", "template.json"):
        assert not is_temp(name), name
    with pytest.raises(ValueError):
        temp_name(target, "a.b")


def test_np_save_writes_the_temp_name_it_is_given(tmp_path):
    """Why the suffix stays last: np.save appends '.npy' to a name without it."""
    with atomic_path(tmp_path / "e.npy") as tmp:
        np.save(tmp, np.arange(3))
    assert [p.name for p in tmp_path.iterdir()] == ["e.npy"]


def test_temps_of_one_target_are_told_from_another_targets(tmp_path):
    a, ab = tmp_path / "a", tmp_path / "a.b"
    assert is_temp_of(temp_name(a), a) and not is_temp_of(temp_name(ab), a) and is_temp_of(temp_name(ab), ab)
    stale, partial, other = temp_name(a), temp_name(a, "partial"), temp_name(ab)
    for path in (stale, partial, other):
        path.mkdir()
    (tmp_path / "a.lock").touch()
    assert remove_temps(a, keep=partial) == [stale]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([partial.name, other.name, "a.lock"])


def test_atomic_files_use_the_rule_and_leave_nothing_on_failure(tmp_path):
    target = tmp_path / "r.json"
    with atomic_path(target) as tmp:
        assert is_temp(tmp) and is_temp_of(tmp, target)
        tmp.write_text("{}")
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_text("{half")
        raise RuntimeError("killed")
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"] and target.read_text() == "{}"


# --- atomic folders ---------------------------------------------------------------------------


def test_success_renames_the_folder_into_place(tmp_path):
    target = tmp_path / "out"
    with atomic_dir(target) as work:
        assert is_temp(work) and is_temp_of(work, target) and not target.exists()
        (work / "data.bin").write_bytes(b"x")
        artifacts.mark_finished(work, {"key": "k"})
        assert not artifacts.is_finished(work)  # not before it is in place
    assert artifacts.is_finished(target, "k") and (target / "data.bin").read_bytes() == b"x"
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_success_replaces_an_existing_folder_unless_told_to_keep_it(tmp_path):
    target = tmp_path / "out"
    target.mkdir()
    (target / "stale.bin").write_bytes(b"old")
    with atomic_dir(target) as work:
        (work / "new.bin").write_bytes(b"new")
        assert (target / "stale.bin").exists()  # the old one stays readable until the rename
    assert [p.name for p in target.iterdir()] == ["new.bin"] and [p.name for p in tmp_path.iterdir()] == ["out"]
    with atomic_dir(target, replace=False) as work:  # someone else finished the same thing first
        (work / "other.bin").write_bytes(b"other")
    assert [p.name for p in target.iterdir()] == ["new.bin"] and [p.name for p in tmp_path.iterdir()] == ["out"]


def test_an_exception_removes_the_work_folder_and_keeps_the_old_output(tmp_path):
    target = tmp_path / "out"
    with pytest.raises(KeyboardInterrupt), atomic_dir(target) as work:
        (work / "half.bin").write_bytes(b"h")
        raise KeyboardInterrupt
    assert list(tmp_path.iterdir()) == []
    target.mkdir()
    (target / "old.bin").write_bytes(b"o")
    with pytest.raises(RuntimeError), atomic_dir(target) as work:
        raise RuntimeError("build failed")
    assert [p.name for p in tmp_path.iterdir()] == ["out"] and (target / "old.bin").exists()


def test_keep_partial_resumes_the_work_folder_and_keeps_it_on_failure(tmp_path):
    target = tmp_path / "out"
    for attempt in range(2):
        with pytest.raises(RuntimeError), atomic_dir(target, keep_partial=True) as work:
            assert work == temp_name(target, "partial")
            assert sorted(p.name for p in work.iterdir()) == [f"step{i}" for i in range(attempt)]
            (work / f"step{attempt}").touch()
            raise RuntimeError("killed mid-build")
    with atomic_dir(target, keep_partial=True) as work:
        (work / "step2").touch()
    assert sorted(p.name for p in target.iterdir()) == ["step0", "step1", "step2"]
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_replace_dir_over_a_file(tmp_path):
    work, target = tmp_path / "w", tmp_path / "t"
    work.mkdir()
    target.write_text("a file where the folder goes")
    replace_dir(work, target)
    assert target.is_dir() and [p.name for p in tmp_path.iterdir()] == ["t"]


KILLED_WRITER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from harness.stages import artifacts
    from harness.core.fsutil import atomic_dir

    with atomic_dir(Path(sys.argv[1])) as work:
        (work / "weights.bin").write_bytes(b"w" * 1000)
        artifacts.mark_finished(work, {"key": "k"})  # everything written, the marker too
        print("ready", flush=True)
        time.sleep(60)  # killed here: before the rename
""")


def test_a_killed_writer_leaves_no_folder_that_looks_finished(tmp_path):
    target = tmp_path / "cache" / "stage" / "abc"
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED_WRITER, str(target)], stdout=subprocess.PIPE, text=True, cwd=PROJECT_ROOT
    )
    try:
        assert proc.stdout.readline().strip() == "ready"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    left = list(target.parent.iterdir())
    assert not target.exists() and not artifacts.is_finished(target)
    assert len(left) == 1 and is_temp(left[0]) and not artifacts.is_finished(left[0])
    assert (left[0] / "done.json").is_file()  # its marker is there, and still it is not finished
    assert remove_temps(target) == left and list(target.parent.iterdir()) == []  # what the next builder clears


# --- scanners skip temp names -----------------------------------------------------------------


def test_a_record_being_written_is_never_read(tmp_path):
    """The latent bug: atomic_path's temp file ends in '.json' like a record; records loading must
    list it as a write in progress and never parse it (half a record, or a whole one about to shadow
    the record it becomes)."""
    from harness.records.store import load_records

    source = sorted(p for p in RUNS.glob("*.json") if p.name != "references.json")[0]
    text = source.read_text(encoding="utf-8")
    with atomic_path(tmp_path / source.name) as tmp:
        assert tmp.suffix == ".json"
        tmp.write_text(text[: len(text) // 2], encoding="utf-8")
        records, skipped = load_records(tmp_path)
        assert records == [] and [s.path for s in skipped] == [tmp] and "unfinished write" in skipped[0].reason
        tmp.write_text(text, encoding="utf-8")
        records, skipped = load_records(tmp_path)
        assert records == [] and [s.path for s in skipped] == [tmp]
    records, skipped = load_records(tmp_path)
    assert [r.path.name for r in records] == [source.name] and skipped == []


def test_cache_scanners_skip_temp_names(tmp_path, monkeypatch):
    from harness.corpus.qgen import load_queries

    # Generated queries read from a folder of per-rank files: a temp file there is not a shard.
    atomic_write_text(tmp_path / "q" / "queries.jsonl", json.dumps({"pid": "1", "queries": ["a"]}) + "\n")
    temp_name(tmp_path / "q" / "queries.rank1-of-2.jsonl").write_text('{"pid": "2", "queries": ["half')
    assert load_queries(tmp_path / "q") == {"1": ["a"]}
    # A stage folder that was never renamed into place is not a cached stage.
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    cache = artifacts.StageCache("index", {"k": 1}, {})
    with pytest.raises(RuntimeError), cache.building(keep_partial=True) as work:
        cache.mark_finished(work, {})
        raise RuntimeError("killed before the rename")
    assert cache.partial.is_dir() and not cache.is_done()


def test_a_stage_build_is_renamed_into_place_with_its_marker(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    cache = artifacts.StageCache("index", {"k": 1}, {"in": "h"})
    for _ in range(2):  # a rebuild replaces the finished folder
        with cache.building() as work:
            (work / "index").mkdir()
            cache.mark_finished(work, {"documents": 1})
    assert cache.is_done() and cache.meta()["documents"] == 1 and cache.meta()["key"] == cache.key
    assert sorted(p.name for p in cache.dir.parent.iterdir()) == [cache.key]
    with pytest.raises(RuntimeError, match="without mark_finished"), cache.building() as work:
        pass  # a build that forgot its marker is not cached (it would look unfinished forever)
    assert cache.is_done() and sorted(p.name for p in cache.dir.parent.iterdir()) == [cache.key]
    # A killed non-resumable build's temp folder is removed by the next build of the key.
    temp_name(cache.dir).mkdir()
    with cache.building() as work:
        cache.mark_finished(work, {})
    assert sorted(p.name for p in cache.dir.parent.iterdir()) == [cache.key]
