"""No path leaves its folder (issue 54, item 3): a run id, a references.json entry, ``include:`` and
``extends:`` name a file inside their folder or are refused with one line naming the value and the
fix; spec files, fragments, records, --metrics and eval's run files that are folders or pipes are
refused instead of crashing or blocking."""

from __future__ import annotations

import json
import os
import shutil
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness.cli import main
from harness.core.errors import DataFormatError, HarnessError
from harness.core.paths import PROJECT_ROOT, local_runs_dir
from harness.data.formats import read_trec_run
from harness.records.integrity import seal
from harness.records.run_record import RunRecord
from harness.records.store import REFERENCES_FILE, load_record, read_references, records_dir
from harness.records.writer import write_run_record
from harness.spec.method import load_method
from tests import test_your_runs
from tests.test_your_runs import _users_run

fresh_clone = test_your_runs.fresh_clone  # its fixture: runs/records/ as a fresh clone has it

BM25 = (PROJECT_ROOT / "baselines" / "bm25.yaml").read_text(encoding="utf-8")


def finishes(call: Callable[[], Any], seconds: float = 20.0) -> Any:
    """``call()``'s result or exception, failing (not hanging) when it blocks, as a read of a pipe does."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["result"] = call()
        except BaseException as exc:  # noqa: BLE001 (handed back to the test to assert on)
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True)  # daemon: a blocked read never holds pytest
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"blocked for {seconds}s (a pipe was opened for reading)"
    if "error" in box:
        raise box["error"]
    return box.get("result")


def fifo(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)
    return path


# ------------------------------------------------------------------ run ids (check --add / --accept)


def _sealed_with_id(reference: dict[str, Any], run_id: str, where: Path) -> Path:
    """A sealed, acceptable record whose run id is ``run_id``, written at ``where`` (as a writer that
    took a run id for a path would have written it)."""
    rec = seal({"schema_version": 1, **_users_run(reference, "20261224T100000-00aa11", run_id=run_id)})
    where.parent.mkdir(parents=True, exist_ok=True)
    where.write_text(json.dumps(rec))
    return where


@pytest.mark.parametrize("flag", ["--add", "--accept"])
def test_a_run_id_with_dots_never_moves_a_file_from_outside_runs_local(fresh_clone, tmp_path, capsys, flag):
    outside = _sealed_with_id(fresh_clone, "../outside/mine", tmp_path / "runs" / "outside" / "mine.json")
    assert main(["check", flag, "../outside/mine"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'../outside/mine' is not a run id" in err and "e.g. 'mine'" in err
    assert outside.exists() and not (records_dir() / "mine.json").exists()


def test_a_run_id_with_a_folder_is_refused_not_flattened(fresh_clone, capsys):
    source = _sealed_with_id(fresh_clone, "foo/bar", local_runs_dir() / "foo" / "bar.json")
    assert main(["check", "--add", "foo/bar"]) == 2
    assert "'foo/bar' is not a run id" in capsys.readouterr().err
    assert source.exists() and not (records_dir() / "bar.json").exists()


def test_a_record_file_name_is_told_to_drop_its_json(fresh_clone, capsys):
    assert main(["check", "--add", "runs/local/mine.json"]) == 2
    assert "(fix: give the run id alone, e.g. 'mine'" in capsys.readouterr().err


@pytest.mark.parametrize("run_id", ["../x", "/tmp/x", "a/b", ".hidden", ".."])
def test_a_record_is_never_written_outside_its_folder(tmp_path, run_id):
    with pytest.raises(HarnessError, match="is not a run id"):
        write_run_record(RunRecord.from_json({"run_id": run_id, "method": "m", "profile": "tiny", "metrics": {}}))
    assert not (tmp_path / "runs" / "x.json").exists()


def test_a_pipe_named_like_your_record_is_refused_in_one_line(fresh_clone, capsys):
    fifo(local_runs_dir() / "mine.json")
    assert finishes(lambda: main(["check", "--add", "mine"])) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a regular file" in err


def test_a_references_entry_names_a_record_of_its_folder(tmp_path):
    folder = tmp_path / "records"
    folder.mkdir()
    (folder / REFERENCES_FILE).write_text(
        json.dumps({"references": {"bm25/tiny": {"run_id": "../../elsewhere", "sha256": "0" * 64}}})
    )
    with pytest.raises(HarnessError, match="'../../elsewhere', which is not a record's file name"):
        read_references(folder)


def test_a_pipe_for_references_json_or_a_record_does_not_block(tmp_path):
    folder = tmp_path / "records"
    fifo(folder / REFERENCES_FILE)
    with pytest.raises(HarnessError, match="not a regular file"):
        finishes(lambda: read_references(folder))
    skipped = finishes(lambda: load_record(fifo(tmp_path / "x.json")))
    assert "not a regular file" in skipped.reason


# ------------------------------------------------------------------ include: and extends:


@pytest.fixture
def specs(tmp_path, monkeypatch) -> Path:
    """A specs folder of one's own (HARNESS_SPECS_DIR) holding bm25, and a fragment outside it."""
    folder = tmp_path / "specs"
    (folder / "fragments").mkdir(parents=True)
    (folder / "bm25.yaml").write_text(BM25, encoding="utf-8")
    (tmp_path / "outside.yaml").write_text("description: read from outside the specs folder\n")
    monkeypatch.setenv("HARNESS_SPECS_DIR", str(folder))
    return folder


def _spec(folder: Path, name: str, extra: str) -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(BM25.replace("name: bm25\n", f"name: {name}\n{extra}\n"), encoding="utf-8")
    return path


@pytest.mark.parametrize("include", ["../../outside", "ABSOLUTE", "fragments/../../../outside"])
def test_include_never_reads_yaml_outside_the_fragment_folders(specs, include):
    name = str(specs.parent / "outside") if include == "ABSOLUTE" else include
    path = _spec(specs, "mine", f"include: [{name}]")
    with pytest.raises(DataFormatError, match="is not a fragment's name") as exc:
        load_method("mine", "paper")
    assert f"{path}:" in str(exc.value) and repr(name) in str(exc.value)


def test_include_through_the_cli_is_exit_2_with_one_line(specs, tmp_path, capsys):
    _spec(specs, "mine", "include: ../../outside")
    numbers = tmp_path / "numbers.json"  # grade resolves the method's spec first
    numbers.write_text(json.dumps({"runs": [{"method": "mine", "metrics": {}}]}))
    assert main(["grade", "--metrics", str(numbers)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'../../outside' is not a fragment's name" in err


@pytest.mark.parametrize("parent", ["../specs/bm25", "/etc/passwd", "sub/bm25", "5"])
def test_extends_names_a_spec_of_the_folder(specs, parent):
    path = specs / "child.yaml"
    path.write_text(f"name: child\nextends: {parent}\nprofiles: {{paper: {{}}}}\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match="is not a spec's name") as exc:
        load_method("child", "paper")
    assert f"{path}:2:" in str(exc.value) and "extends:" in str(exc.value)


@pytest.mark.parametrize("kind", ["folder", "pipe"])
def test_a_spec_or_fragment_that_is_no_file_is_one_line(specs, kind):
    def make(path: Path) -> None:
        path.mkdir() if kind == "folder" else fifo(path)

    make(specs / "odd.yaml")
    with pytest.raises(HarnessError, match="odd.yaml: (a folder, not a file|not a regular file)"):
        finishes(lambda: load_method("odd", "paper"))
    make(specs / "fragments" / "frag.yaml")
    _spec(specs, "mine", "include: [frag]")
    with pytest.raises(HarnessError, match="frag.yaml: (a folder, not a file|not a regular file)"):
        finishes(lambda: load_method("mine", "paper"))


def test_a_good_fragment_still_loads(specs):
    fragment = PROJECT_ROOT / "baselines" / "fragments" / "query_as_context.yaml"
    shutil.copy(fragment, specs / "fragments" / "own.yaml")
    _spec(specs, "mine", "include: [own]")
    assert load_method("mine", "paper").name == "mine"


# ------------------------------------------------------------------ files given on the command line


@pytest.mark.parametrize("kind", ["folder", "pipe"])
def test_grade_metrics_must_be_a_regular_file(tmp_path, capsys, kind):
    path = tmp_path / "mine.json"
    path.mkdir() if kind == "folder" else fifo(path)
    assert finishes(lambda: main(["grade", "--metrics", str(path)])) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(path) in err and ("a folder" in err or "not a regular file" in err)


def test_eval_run_file_that_is_a_pipe_does_not_block(tmp_path):
    with pytest.raises(DataFormatError, match="not a regular file"):
        finishes(lambda: read_trec_run(fifo(tmp_path / "run.trec")))


def test_records_folder_that_is_a_pipe_is_one_line(tmp_path, capsys):
    assert finishes(lambda: main(["check", "--records", str(fifo(tmp_path / "records"))])) == 2
    assert "is a file, not a folder" in capsys.readouterr().err
