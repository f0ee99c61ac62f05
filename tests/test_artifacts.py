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
    from harness.records.tracker import Tracker
    from harness.spec.method import load_method

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
    from harness.core.errors import HarnessError
    from harness.pipelines.context import RunContext, StageLog
    from harness.records.tracker import Tracker
    from harness.spec.method import load_method

    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    ctx = RunContext(
        load_method("nopretrain", "tiny"), Tracker(experiment="t", run_name="t", tags={}, enabled=False), StageLog()
    )
    with pytest.raises(HarnessError, match="stage 'finetune_r3' is not declared in harness/stages/graph.py"):
        ctx.cached_stage("finetune_r3", None, {}, {}, lambda work: {})


def test_a_cached_stage_reports_the_outputs_its_build_returned(tmp_path, monkeypatch):
    """A resumed run's record carries the losses of the stages it took from the cache (the loss gate
    reads them), and how long their build took."""
    from harness.pipelines.context import RunContext, StageLog
    from harness.records.tracker import Tracker
    from harness.spec.method import load_method

    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    entries = []
    for _ in range(2):
        ctx = RunContext(
            load_method("nopretrain", "tiny"), Tracker(experiment="t", run_name="t", tags={}, enabled=False), StageLog()
        )
        ctx.cached_stage("pretrain", None, {"a": 1}, {}, lambda work: {"loss_first10": 4.5, "steps": 3})
        entries.append(ctx.stages.entries[0])
    built, cached = entries
    assert not built["cached"] and cached["cached"]
    assert cached["output"] == built["output"] == {"loss_first10": 4.5, "steps": 3}
    assert cached["seconds"] == 0.0 and cached["built_seconds"] >= 0.0


# --- output digests: a finished output damaged after it was built is found -------------------------


def _built(tmp_path):
    folder = tmp_path / "out"
    (folder / "model").mkdir(parents=True)
    (folder / "run.trec").write_text("".join(f"q{i} Q0 d{i} 1 {1.0 / (i + 1)} t\n" for i in range(100)))
    (folder / "model" / "model.safetensors").write_bytes(bytes(range(256)) * 64)
    digests = sc.output_digests(folder)
    sc.mark_finished(folder, {"key": "k", sc.DIGESTS: digests})
    return folder, digests


def test_output_digests_match_an_untouched_folder_and_leave_out_markers_and_temps(tmp_path):
    folder, digests = _built(tmp_path)
    assert set(digests) == {"run.trec", "model/model.safetensors"}
    assert digests["run.trec"]["size"] == (folder / "run.trec").stat().st_size
    assert digests["run.trec"]["sha256"] == sc.hash_file(folder / "run.trec")
    (folder / "x.done.json").write_text("{}")  # a per-file marker, not an output
    (folder / ".y.ab12.tmp").write_text("half")  # being written
    assert sc.changed_output(folder, digests) is None


def test_a_run_file_cut_at_a_line_boundary_is_found(tmp_path):
    folder, digests = _built(tmp_path)
    lines = (folder / "run.trec").read_text().splitlines(keepends=True)
    (folder / "run.trec").write_text("".join(lines[:50]))
    assert sc.changed_output(folder, digests).startswith("run.trec (size")


def test_zeroed_model_bytes_with_the_size_unchanged_are_found(tmp_path):
    folder, digests = _built(tmp_path)
    path = folder / "model" / "model.safetensors"
    data = bytearray(path.read_bytes())
    data[1000:3000] = bytes(2000)
    path.write_bytes(bytes(data))
    assert sc.changed_output(folder, digests) == "model/model.safetensors (content differs)"


def test_an_extra_or_a_missing_file_is_found(tmp_path):
    folder, digests = _built(tmp_path)
    (folder / "stray.txt").write_text("x")
    assert sc.changed_output(folder, digests) == "stray.txt (not there when it was built)"
    (folder / "stray.txt").unlink()
    (folder / "model" / "model.safetensors").unlink()
    assert sc.changed_output(folder, digests) == "model/model.safetensors (missing)"


def test_a_large_vector_store_gets_a_sampled_digest_that_still_finds_damage(tmp_path, monkeypatch):
    """Above SAMPLED_ABOVE a .npy is not hashed whole: its size, first and last block and blocks at
    fixed offsets are, which still catches a cut file and an overwritten stretch of it."""
    monkeypatch.setattr(sc, "SAMPLED_ABOVE", 1 << 16)
    monkeypatch.setattr(sc, "SAMPLE_BLOCK", 256)
    monkeypatch.setattr(sc, "SAMPLE_BLOCKS", 8)
    folder = tmp_path / "emb"
    folder.mkdir()
    npy = folder / "embeddings.npy"
    npy.write_bytes(bytes(range(256)) * 1024)  # 256 KiB
    digests = sc.output_digests(folder)
    assert "sampled" in digests["embeddings.npy"] and "sha256" not in digests["embeddings.npy"]
    assert sc.changed_output(folder, digests) is None
    data = bytearray(npy.read_bytes())
    data[len(data) // 2 - 20000 : len(data) // 2 + 20000] = bytes(40000)  # longer than the gap between samples
    npy.write_bytes(bytes(data))
    assert sc.changed_output(folder, digests) == "embeddings.npy (content differs)"
    npy.write_bytes(bytes(range(256)) * 1000)
    assert sc.changed_output(folder, digests).startswith("embeddings.npy (size")


def _stage_ctx():
    from harness.pipelines.context import RunContext, StageLog
    from harness.records.tracker import Tracker
    from harness.spec.method import load_method

    return RunContext(
        load_method("nopretrain", "tiny"), Tracker(experiment="t", run_name="t", tags={}, enabled=False), StageLog()
    )


def test_a_damaged_cached_stage_is_rebuilt_saying_which_file_changed(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    builds = []

    def build(work):
        builds.append(1)
        (work / "run.trec").write_text("q1 Q0 d1 1 2.0 t\nq1 Q0 d2 2 1.0 t\n")
        return {}

    ctx = _stage_ctx()
    cache = ctx.cached_stage("retrieve", "ds", {"a": 1}, {}, build)
    assert sc.DIGESTS in cache.meta() and sc.DIGESTS not in ctx.stages.entries[0]["output"]  # bookkeeping
    _stage_ctx().cached_stage("retrieve", "ds", {"a": 1}, {}, build)
    assert len(builds) == 1  # untouched: reused
    (cache.dir / "run.trec").write_text("q1 Q0 d1 1 2.0 t\n")
    ctx = _stage_ctx()
    ctx.cached_stage("retrieve", "ds", {"a": 1}, {}, build)
    assert len(builds) == 2 and not ctx.stages.entries[0]["cached"]
    assert (
        "[retrieve/ds] cached output changed since it was built (run.trec (size 17 bytes, built 34)): rebuilding"
    ) in capsys.readouterr().out
    assert (cache.dir / "run.trec").read_text().count("\n") == 2
    ctx = _stage_ctx()
    ctx.cached_stage("retrieve", "ds", {"a": 1}, {}, build)
    assert len(builds) == 2 and ctx.stages.entries[0]["cached"] and sc.DIGESTS not in ctx.stages.entries[0]["output"]


def test_a_stage_folder_finished_before_digests_were_kept_is_accepted_once_and_given_them(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    builds = []

    def build(work):
        builds.append(1)
        (work / "run.trec").write_text("q1 Q0 d1 1 2.0 t\n")
        return {}

    cache = _stage_ctx().cached_stage("retrieve", "ds", {"a": 1}, {}, build)
    meta = cache.meta()
    del meta[sc.DIGESTS]
    sc.mark_finished(cache.dir, meta)  # as an older harness left it
    _stage_ctx().cached_stage("retrieve", "ds", {"a": 1}, {}, build)
    assert len(builds) == 1 and cache.meta()[sc.DIGESTS] == sc.output_digests(cache.dir)
    (cache.dir / "run.trec").write_text("")
    _stage_ctx().cached_stage("retrieve", "ds", {"a": 1}, {}, build)
    assert len(builds) == 2  # checked from then on
