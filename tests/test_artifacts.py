"""The artifact layer: stable keys, atomic writes, the finished marker, stage folders."""

from __future__ import annotations

import pytest

from harness.stages import artifacts as sc


def test_keys_are_stable_and_sensitive():
    k = sc.builder_key({"a": 1, "b": [1, 2]}, {"x": "h1"})
    assert k == sc.builder_key({"b": [1, 2], "a": 1}, {"x": "h1"})
    assert k != sc.builder_key({"a": 2, "b": [1, 2]}, {"x": "h1"})
    assert k != sc.builder_key({"a": 1, "b": [1, 2]}, {"x": "h2"})
    assert sc.hash_texts(["ab", "c"]) != sc.hash_texts(["a", "bc"])


def test_hash_dir_and_file(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "f.txt").write_text("x")
    (tmp_path / "g.txt").write_text("y")
    h = sc.hash_dir(tmp_path)
    (tmp_path / "done.json").write_text("{}")  # markers do not change the content hash
    assert sc.hash_dir(tmp_path) == h
    (tmp_path / "g.txt").write_text("z")
    assert sc.hash_dir(tmp_path) != h


def test_finished_marker_roundtrip(tmp_path):
    key = sc.builder_key({"stage": "t"})
    assert not sc.is_finished(tmp_path) and sc.finished_meta(tmp_path) is None
    sc.mark_finished(tmp_path, {"key": key, "n": 3})
    assert sc.is_finished(tmp_path) and sc.is_finished(tmp_path, key) and not sc.is_finished(tmp_path, key + "x")
    assert sc.finished_meta(tmp_path) == {"key": key, "n": 3}
    assert [p.name for p in tmp_path.iterdir()] == [sc.DONE_NAME]  # one marker, nothing left beside it
    sc.clear_finished(tmp_path)
    assert not sc.is_finished(tmp_path, key)
    (tmp_path / "done.json").write_text("{torn")
    assert sc.finished_meta(tmp_path) is None and not sc.is_finished(tmp_path)
    (tmp_path / "done.json").write_text("[1]")  # not an object: not a marker
    assert not sc.is_finished(tmp_path)


def test_a_folder_under_a_temp_name_is_never_finished(tmp_path):
    """A build killed before its rename leaves its marker inside a temp-named folder: not finished."""
    from harness.core.fsutil import temp_name

    work = temp_name(tmp_path / "out")
    work.mkdir()
    sc.mark_finished(work, {"key": "k"})
    assert not sc.is_finished(work) and sc.finished_meta(work) is None
    work.rename(tmp_path / "out")
    assert sc.is_finished(tmp_path / "out", "k")


def test_hash_dir_leaves_out_what_is_being_written(tmp_path):
    from harness.core.fsutil import temp_name

    (tmp_path / "w.bin").write_bytes(b"w")
    h = sc.hash_dir(tmp_path, exclude=())
    temp_name(tmp_path / "w.bin").write_bytes(b"half")
    work = temp_name(tmp_path / "sub")
    work.mkdir()
    (work / "x").write_text("x")
    assert sc.hash_dir(tmp_path, exclude=()) == h


def test_atomic_write_leaves_old_file_on_failure(tmp_path, monkeypatch):
    p = tmp_path / "a.json"
    sc.atomic_write_json(p, {"v": 1})

    def boom(*a, **k):
        raise OSError("disk full")

    from harness.core import fsutil

    monkeypatch.setattr(fsutil.os, "replace", boom)
    with pytest.raises(OSError):
        sc.atomic_write_json(p, {"v": 2})
    assert '"v": 1' in p.read_text()
    assert [f.name for f in tmp_path.iterdir()] == ["a.json"]


def test_a_resumable_stage_resumes_its_partial_work_unless_forced(tmp_path, monkeypatch):
    from harness.pipelines.context import RunContext, StageLog
    from harness.spec.method import load_method
    from harness.records.tracking import Tracker

    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    found: list[list[str]] = []

    def stage(force: bool, finish: bool):
        def build(work):
            found.append(sorted(p.name for p in work.iterdir()))
            (work / "checkpoint").touch()
            if not finish:
                raise RuntimeError("killed mid-stage")
            return {}

        tracker = Tracker(experiment="t", run_name="t", tags={}, enabled=False)
        ctx = RunContext(load_method("nopretrain", "tiny"), tracker, StageLog(), force=force)
        return ctx.cached_stage("retriever1", None, {"a": 1}, {}, build)  # declared resumable (stages.py)

    for force, finish in ((False, False), (False, False), (True, True)):
        try:
            stage(force, finish)
        except RuntimeError:
            pass
    # The second call resumed the killed one's work folder; --force started afresh.
    assert found == [[], ["checkpoint"], []]


def test_a_stage_name_not_declared_in_the_stage_graph_is_refused(tmp_path, monkeypatch):
    from harness.pipelines.context import RunContext, StageLog
    from harness.core.errors import HarnessError
    from harness.spec.method import load_method
    from harness.records.tracking import Tracker

    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    ctx = RunContext(load_method("nopretrain", "tiny"), Tracker(experiment="t", run_name="t", tags={}, enabled=False),
                     StageLog())
    with pytest.raises(HarnessError, match="stage 'finetune_r3' is not declared in harness/stages/graph.py"):
        ctx.cached_stage("finetune_r3", None, {}, {}, lambda work: {})


def test_a_cached_stage_reports_the_outputs_its_build_returned(tmp_path, monkeypatch):
    """A resumed run's record carries the losses of the stages it took from the cache (the loss gate
    reads them), and how long their build took."""
    from harness.pipelines.context import RunContext, StageLog
    from harness.spec.method import load_method
    from harness.records.tracking import Tracker

    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    entries = []
    for _ in range(2):
        ctx = RunContext(load_method("nopretrain", "tiny"), Tracker(experiment="t", run_name="t", tags={}, enabled=False),
                         StageLog())
        ctx.cached_stage("pretrain", None, {"a": 1}, {}, lambda work: {"loss_first10": 4.5, "steps": 3})
        entries.append(ctx.stages.entries[0])
    built, cached = entries
    assert not built["cached"] and cached["cached"]
    assert cached["output"] == built["output"] == {"loss_first10": 4.5, "steps": 3}
    assert cached["seconds"] == 0.0 and cached["built_seconds"] >= 0.0
