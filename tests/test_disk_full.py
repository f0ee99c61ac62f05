"""A full disk is one line (issue 54 item 5): an ENOSPC/EDQUOT however it surfaces -- an OSError without a
filename (a write to an open file, numpy's), the same wrapped by torch in a RuntimeError, or torch's bare
"unexpected pos N vs M" while the folder's disk has no room -- is "error: no space left on the device
holding <path>" and exit 2, and an atomic write it interrupts leaves nothing a later run would take as
finished. The disk is never really filled: the write and the free-space query are patched."""

from __future__ import annotations

import argparse
import errno
import shutil
from collections import namedtuple
from pathlib import Path

import pytest

from harness import cli
from harness.core.errors import DiskFull, disk_full
from harness.core.fsutil import atomic_dir, atomic_path, atomic_write_bytes, is_temp

Usage = namedtuple("Usage", "total used free")
ENOSPC = OSError(errno.ENOSPC, "No space left on device")  # as a write to an open file raises it: no filename
TORCH_POS = "[enforce fail at inline_container.cc:603] . unexpected pos 8832 vs 8724"
TORCH_WRITE = (
    "[enforce fail at inline_container.cc:778] . PytorchStreamWriter failed writing file data/2: file write failed"
)


@pytest.fixture
def homes(tmp_path, monkeypatch):
    cache, runs = tmp_path / "cache", tmp_path / "runs"
    cache.mkdir()
    runs.mkdir()
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(cache))
    monkeypatch.setenv("HARNESS_RUNS_DIR", str(runs))
    return cache, runs


def _free(monkeypatch, free_of):
    """shutil.disk_usage reports ``free_of(path)`` bytes free."""
    real = shutil.disk_usage

    def usage(path):
        total, used, _ = real(path)
        return Usage(total, used, free_of(Path(path)))

    monkeypatch.setattr(shutil, "disk_usage", usage)


def _run_raising(exc: BaseException, monkeypatch, capsys) -> tuple[int, list[str]]:
    """The CLI's main on a command whose work raises ``exc``: its status and its stderr lines."""

    def boom(args):
        raise exc

    parser = argparse.ArgumentParser()
    parser.set_defaults(func=boom)
    monkeypatch.setattr(cli, "build_parser", lambda: parser)
    status = cli.main([])
    return status, [line for line in capsys.readouterr().err.splitlines() if line.strip()]


def _wrapped(message: str) -> RuntimeError:
    try:
        try:
            raise OSError(errno.ENOSPC, "No space left on device")
        except OSError as exc:
            raise RuntimeError(message) from exc
    except RuntimeError as exc:
        return exc


# --- the CLI's line ---------------------------------------------------------------------------------


def test_enospc_without_a_filename_names_the_fuller_folder(homes, monkeypatch, capsys):
    cache, runs = homes
    _free(monkeypatch, lambda p: 0 if p == runs else 10 * 2**30)
    status, err = _run_raising(OSError(errno.ENOSPC, "No space left on device"), monkeypatch, capsys)
    assert status == 2
    assert err == [f"error: no space left on the device holding {runs}"], err


def test_enospc_with_a_filename_names_that_file(homes, monkeypatch, capsys):
    target = homes[0] / "bm25" / "run.trec"
    exc = OSError(errno.ENOSPC, "No space left on device", str(target))
    status, err = _run_raising(exc, monkeypatch, capsys)
    assert (status, err) == (2, [f"error: no space left on the device holding {target}"])


def test_a_quota_is_a_full_disk_too(homes, monkeypatch, capsys):
    status, err = _run_raising(OSError(errno.EDQUOT, "Disk quota exceeded"), monkeypatch, capsys)
    assert status == 2 and len(err) == 1 and err[0].startswith("error: no space left on the device holding ")


@pytest.mark.parametrize("message", [TORCH_POS, TORCH_WRITE])
def test_torch_wrapping_enospc_is_one_line(message, homes, monkeypatch, capsys):
    status, err = _run_raising(_wrapped(message), monkeypatch, capsys)
    assert status == 2 and len(err) == 1, err
    assert err[0] in (f"error: no space left on the device holding {h}" for h in homes), err


@pytest.mark.parametrize("message", [TORCH_POS, TORCH_WRITE])
def test_torchs_bare_message_is_a_full_disk_only_when_the_disk_is_full(message, homes, monkeypatch, capsys):
    cache, _ = homes
    _free(monkeypatch, lambda p: 4096 if p == cache else 10 * 2**30)
    status, err = _run_raising(RuntimeError(message), monkeypatch, capsys)
    assert (status, err) == (2, [f"error: no space left on the device holding {cache}"])
    _free(monkeypatch, lambda p: 10 * 2**30)  # room everywhere: some other failure, left to its traceback
    with pytest.raises(RuntimeError, match="unexpected pos|file write failed"):
        _run_raising(RuntimeError(message), monkeypatch, capsys)


def test_other_errors_are_not_a_full_disk(homes, monkeypatch, capsys):
    with pytest.raises(RuntimeError, match="CUDA out of memory"):
        _run_raising(RuntimeError("CUDA out of memory"), monkeypatch, capsys)
    assert disk_full(OSError(errno.EIO, "Input/output error")) is None


def test_an_estimate_is_said_when_known_and_never_invented(tmp_path):
    said = f"no space left on the device holding {tmp_path} (needs ~1234 MiB)"
    assert str(DiskFull(tmp_path, 1234.4)) == said
    full = disk_full(OSError(errno.ENOSPC, "No space left on device"), (tmp_path,))
    assert str(full) == f"no space left on the device holding {tmp_path}"


# --- nothing half-written is reused ---------------------------------------------------------------


def _half_then_enospc(monkeypatch):
    """Path.write_bytes writes half of its data, then fails as a full disk does."""

    def write_bytes(self, data):
        with open(self, "wb") as fh:
            fh.write(data[: len(data) // 2])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Path, "write_bytes", write_bytes)


def test_an_atomic_write_cut_by_enospc_leaves_nothing(tmp_path, monkeypatch):
    target = tmp_path / "run.trec"
    _half_then_enospc(monkeypatch)
    with pytest.raises(DiskFull) as caught:
        atomic_write_bytes(target, b"q1 Q0 d1 1 1.0 bm25\n" * 100)
    assert caught.value.path == target
    assert str(caught.value) == f"no space left on the device holding {target}"
    assert list(tmp_path.iterdir()) == []  # no final file, no temp a later run could find


def test_an_existing_file_survives_a_failed_rewrite(tmp_path, monkeypatch):
    target = tmp_path / "scores.json"
    target.write_bytes(b"{}\n")
    _half_then_enospc(monkeypatch)
    with pytest.raises(DiskFull):
        atomic_write_bytes(target, b"[" + b"1," * 1000 + b"1]\n")
    assert [p.name for p in tmp_path.iterdir()] == ["scores.json"] and target.read_bytes() == b"{}\n"


def test_torchs_bare_message_is_judged_before_the_temp_frees_its_space(tmp_path, monkeypatch):
    """The short temp still holds the space when the free space is asked; removing it frees the disk."""
    target = tmp_path / "model.pt"
    temps: list[Path] = []
    _free(monkeypatch, lambda p: 0 if any(t.exists() for t in temps) else 10 * 2**30)
    with pytest.raises(DiskFull) as caught:
        with atomic_path(target) as tmp:
            temps.append(tmp)
            tmp.write_bytes(b"PK" * 100)
            raise RuntimeError(TORCH_POS)
    assert caught.value.path == target and isinstance(caught.value.__cause__, RuntimeError)
    assert list(tmp_path.iterdir()) == []


def test_an_atomic_folder_cut_by_enospc_leaves_nothing(tmp_path):
    target = tmp_path / "index"
    with pytest.raises(DiskFull) as caught:
        with atomic_dir(target) as work:
            (work / "part-0").write_bytes(b"x" * 100)
            raise OSError(errno.ENOSPC, "No space left on device")
    assert caught.value.path == target
    assert list(tmp_path.iterdir()) == []


def test_a_numpy_save_cut_by_enospc_leaves_nothing(tmp_path):
    np = pytest.importorskip("numpy")
    target = tmp_path / "vectors.npy"

    class Full:  # numpy writes the array through the file object: the OSError has no filename
        def __init__(self, path):
            self.fh = open(path, "wb")

        def write(self, data):
            self.fh.write(bytes(data)[:10])
            raise OSError(errno.ENOSPC, "No space left on device")

        def close(self):
            self.fh.close()

    with pytest.raises(DiskFull):
        with atomic_path(target) as tmp:
            out = Full(tmp)
            try:
                np.save(out, np.zeros((64, 8), dtype=np.float32))
            finally:
                out.close()
    assert list(tmp_path.iterdir()) == []


def test_a_checkpoint_file_cut_by_a_full_disk_names_it(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    from harness.training import checkpoint

    path = tmp_path / ".step-000000002.partial.tmp" / "model.pt"
    path.parent.mkdir()

    def short_save(obj, fh):
        fh.write(b"PK" * 10)
        raise RuntimeError(TORCH_POS)

    monkeypatch.setattr(torch, "save", short_save)
    _free(monkeypatch, lambda p: 0)
    with pytest.raises(DiskFull) as caught:
        checkpoint._fsync_save({"w": 1}, path)
    assert caught.value.path == path and is_temp(path.parent)  # a temp folder: never resumed from


def test_a_stage_cut_by_a_full_disk_names_its_output_and_what_the_plan_projected(tmp_path, monkeypatch):
    from harness.pipelines.context import RunContext, StageLog
    from harness.records.tracker import Tracker
    from harness.spec.method import load_method

    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))

    def build(work):
        with open(work / "run.trec", "wb") as fh:
            fh.write(b"q1 Q0 d1 1 1.0 bm25\n")
            raise OSError(errno.ENOSPC, "No space left on device")  # a write to an open file: no filename

    log = StageLog(needs_mib={("retrieve", "some-benchmark"): 2048.4})
    tracker = Tracker(experiment="t", run_name="t", tags={}, enabled=False)
    ctx = RunContext(load_method("nopretrain", "tiny"), tracker, log)
    with pytest.raises(DiskFull) as caught:
        ctx.cached_stage("retrieve", "some-benchmark", {"k": 1}, {}, build)
    assert str(caught.value).startswith("no space left on the device holding " + str(tmp_path / "cache"))
    assert str(caught.value).endswith(" (needs ~2048 MiB)")
    left = [p for p in (tmp_path / "cache").rglob("*") if p.is_file() and p.suffix != ".lock"]
    assert left == []  # the stage's work folder is gone: nothing a later run could take as its output
    with pytest.raises(DiskFull) as caught:  # a stage without an estimate says none
        ctx.cached_stage("retrieve", "other", {"k": 1}, {}, build)
    assert "needs" not in str(caught.value)


def test_a_file_cut_in_an_atomic_folder_is_named_as_it_would_be_when_finished(tmp_path):
    target = tmp_path / "index"
    with pytest.raises(DiskFull) as caught:
        with atomic_dir(target) as work:
            with open(work / "segment-0", "wb"):
                raise OSError(errno.ENOSPC, "No space left on device", str(work / "segment-0"))
    assert caught.value.path == target / "segment-0" and list(tmp_path.iterdir()) == []
    with pytest.raises(DiskFull) as caught:  # the same through an atomic file in it: not its temp name
        with atomic_dir(target) as work:
            with atomic_path(work / "docids.json") as tmp:
                tmp.write_bytes(b"[1, 2")
                raise OSError(errno.ENOSPC, "No space left on device")
    assert caught.value.path == target / "docids.json" and list(tmp_path.iterdir()) == []
