"""Every user-declared input validated at the boundary (issue 64): deep nesting and size bounded in
each parser, user benchmark declarations checked when used (never while building ``--help``),
downloads re-verified by content on reuse, and ``grade`` on ``run``'s seed rule."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from harness.cli import main
from harness.core import benchmarks as declared
from harness.core import jsonsafe, yamlsafe
from harness.core.errors import DataFormatError, HarnessError
from harness.data import download

DEEP = 10_000
DEEP_YAML = "[" * DEEP + "]" * DEEP
DEEP_JSON = DEEP_YAML


# ---------------------------------------------------------------------------- depth and size


@pytest.mark.parametrize("loader", [yamlsafe.FAST_LOADER, yaml.SafeLoader])
def test_yaml_nested_10000_deep_is_one_bound_error(loader):
    with pytest.raises(yamlsafe.DepthError, match="nested deeper than 64 levels"):
        yamlsafe.load(DEEP_YAML, loader)
    assert yamlsafe.load("a: [1, [2, {b: 3}]]", loader) == {"a": [1, [2, {"b": 3}]]}


def test_yaml_depth_counts_what_aliases_expand_to():
    levels = "\n".join(f"l{i}: &l{i} [*l{i - 1}]" for i in range(1, 70))
    with pytest.raises(yamlsafe.DepthError):
        yamlsafe.load("l0: &l0 [0]\n" + levels)


def test_yaml_past_the_size_bound_is_refused_before_parsing(monkeypatch):
    monkeypatch.setattr(yamlsafe, "CHARS_MAX", 100)
    with pytest.raises(yamlsafe.SizeError, match="more than the 100"):
        yamlsafe.load("a: " + "x" * 200)


def test_json_nested_10000_deep_is_a_decode_error():
    with pytest.raises(json.JSONDecodeError, match="nested deeper than 64"):
        jsonsafe.loads(DEEP_JSON)
    with pytest.raises(json.JSONDecodeError, match="nested deeper than 64"):
        jsonsafe.loads("[" * 100 + "]" * 100)  # under Python's recursion limit, over the bound
    with pytest.raises(json.JSONDecodeError, match="more than the 10"):
        jsonsafe.loads('{"a": "' + "x" * 20 + '"}', chars_max=10)
    assert jsonsafe.loads('{"a": [1, {"b": 2}]}') == {"a": [1, {"b": 2}]}


def one_error_line(capsys, path: Path) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(path) in err and "Traceback" not in err, err
    return err


def test_a_spec_nested_5000_deep_is_one_line_under_validate_and_dry_run(tmp_path, capsys, monkeypatch):
    spec = tmp_path / "deep.yaml"
    spec.write_text("name: deep\nextra: " + "[" * 5000 + "]" * 5000 + "\n", encoding="utf-8")
    monkeypatch.setenv("HARNESS_SPECS_DIR", str(tmp_path))
    assert main(["run", "--method", "deep", "--dry-run"]) == 2
    assert "nested deeper than" in one_error_line(capsys, spec)
    assert main(["validate"]) != 0
    out = capsys.readouterr()
    (line,) = [x for x in (out.out + out.err).splitlines() if "nested deeper than" in x]
    assert str(spec) in line and "Traceback" not in out.err


def test_a_grade_file_nested_10000_deep_is_one_line(tmp_path, capsys):
    path = tmp_path / "mine.json"
    path.write_text(DEEP_JSON, encoding="utf-8")
    assert main(["grade", "--metrics", str(path)]) == 2
    assert "nested deeper than" in one_error_line(capsys, path)


def test_a_record_nested_10000_deep_is_skipped_with_the_reason(tmp_path):
    from harness.records.store import Skipped, load_record

    path = tmp_path / "deep.json"
    path.write_text('{"a": ' + DEEP_JSON + "}", encoding="utf-8")
    got = load_record(path)
    assert isinstance(got, Skipped) and "nested deeper than" in got.reason


def test_a_references_manifest_nested_10000_deep_is_one_error(tmp_path):
    from harness.records.store import read_references

    (tmp_path / "references.json").write_text(DEEP_JSON, encoding="utf-8")
    with pytest.raises(HarnessError, match="nested deeper than"):
        read_references(tmp_path)


# ---------------------------------------------------------------------------- user benchmarks


@pytest.fixture
def specs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A specs folder with a benchmarks/ folder beside them, and a good declaration's files."""
    (tmp_path / "benchmarks" / "mine").mkdir(parents=True)
    (tmp_path / "benchmarks" / "mine" / "topics.tsv").write_text("q1\thello\n", encoding="utf-8")
    (tmp_path / "benchmarks" / "mine" / "qrels.txt").write_text("q1 0 d1 1\n", encoding="utf-8")
    monkeypatch.setenv("HARNESS_SPECS_DIR", str(tmp_path))
    return tmp_path


GOOD = {"name": "mine", "kind": "trec-dl", "reader": "local", "topics": "mine/topics.tsv", "qrels": "mine/qrels.txt"}


def declare(specs: Path, file: str, text: str | dict) -> Path:
    path = specs / "benchmarks" / file
    path.write_text(text if isinstance(text, str) else yaml.safe_dump({"benchmarks": [text]}), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "text",
    [
        "benchmarks: [\n",  # malformed
        "- a\n- b\n",  # a top-level list
        "benchmarks: " + DEEP_YAML + "\n",
        "a: &a [x, x, x, x, x, x, x, x, x]\n"
        + "".join(
            f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
            for p, c in zip("abcdefgh", "bcdefghi")
        ),
        "benchmarks:\n  - {name: nfcorpus, kind: beir, reader: local, topics: t.tsv, qrels: q.txt}\n",
    ],
    ids=["malformed", "top-level-list", "10000-deep", "alias-bomb", "duplicate-nfcorpus"],
)
def test_a_bad_user_file_stops_only_the_commands_that_read_it(specs, capsys, text):
    import shutil

    from harness.core.paths import BASELINES_DIR

    shutil.copy(BASELINES_DIR / "bm25.yaml", specs / "bm25.yaml")
    bad = declare(specs, "bad.yaml", text)
    declare(specs, "good.yaml", GOOD)
    env = dict(os.environ, HARNESS_SPECS_DIR=str(specs))
    helped = subprocess.run(
        [sys.executable, "-m", "harness", "--help"], capture_output=True, text=True, env=env, timeout=120
    )
    assert helped.returncode == 0 and "Traceback" not in helped.stderr, helped.stderr
    assert main(["ls"]) == 0
    assert "mine" in capsys.readouterr().out  # the good file's benchmark is still listed
    assert main(["run", "--method", "bm25", "--dataset", "theirs", "--dry-run"]) == 2
    one_error_line(capsys, bad)


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"name": "../../evil name"}, "plain name"),
        ({"topics": "../../../../../../etc/passwd"}, "topics"),
        ({"qrels": "/etc/hostname"}, "qrels"),
        ({"qrels": "mine"}, "not a regular file"),
        ({"queries": -5}, "queries"),
        ({"queries": 1e300}, "queries"),
        ({"passages": "lots"}, "passages"),
        ({"queries": [1, 2]}, "queries"),
        ({"queries": True}, "queries"),
        ({"kind": "nonsense"}, "kind"),
        ({"printed": ["MAP@7"]}, "printed"),
        ({"splits": 5}, "splits"),
        ({"split_aliases": ["a"]}, "split_aliases"),
        ({"description": ["x"]}, "description"),
        ({"download": "x"}, "download"),
    ],
)
def test_a_user_declaration_is_validated_like_a_spec(specs, change, key):
    path = declare(specs, "mine.yaml", {**GOOD, **change})
    assert "mine" not in declared.declarations() and "evil" not in str(list(declared.declarations()))
    (problem,) = declared.user_problems()
    assert isinstance(problem, DataFormatError) and str(path) in str(problem) and key in str(problem)
    assert "\n" not in str(problem) and "fix:" in str(problem)


def test_a_good_user_declaration_is_read(specs):
    declare(specs, "mine.yaml", {**GOOD, "queries": 1, "printed": ["nDCG@10"]})
    assert declared.get("mine").queries == 1 and declared.user_problems() == ()


# ---------------------------------------------------------------------------- downloads


def test_a_damaged_download_with_its_size_and_mtime_kept_is_fetched_again(tmp_path, capsys):
    import hashlib

    payload = b"publisher's bytes\n" * 100
    src = tmp_path / "src" / "data.bin"
    src.parent.mkdir()
    src.write_bytes(payload)
    sha = hashlib.sha256(payload).hexdigest()
    got = download.fetch(src.as_uri(), tmp_path / "dl", sha256=sha)
    st = got.stat()
    got.write_bytes(b"X" + payload[1:])  # same size
    os.utime(got, ns=(st.st_atime_ns, st.st_mtime_ns))  # same mtime
    assert download.fetch(src.as_uri(), tmp_path / "dl", sha256=sha).read_bytes() == payload
    assert "not usable" in capsys.readouterr().out


def test_an_unpinned_download_changed_since_verified_is_fetched_again(tmp_path):
    src = tmp_path / "src" / "data.bin"
    src.parent.mkdir()
    src.write_bytes(b"abc" * 100)
    got = download.fetch(src.as_uri(), tmp_path / "dl")
    st = got.stat()
    got.write_bytes(b"abd" * 100)
    os.utime(got, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert download.fetch(src.as_uri(), tmp_path / "dl").read_bytes() == b"abc" * 100


def test_a_very_large_download_is_checked_by_its_sampled_digest(tmp_path, monkeypatch):
    monkeypatch.setattr(download, "SAMPLED_ABOVE", 1000)
    payload = bytes(range(256)) * 40
    src = tmp_path / "src" / "big.bin"
    src.parent.mkdir()
    src.write_bytes(payload)
    got = download.fetch(src.as_uri(), tmp_path / "dl")
    rec = json.loads((tmp_path / "dl" / "big.bin.verified.json").read_text())
    assert rec["sampled"]
    monkeypatch.setattr(download, "_hashes", lambda p: pytest.fail("a full re-hash of a large unchanged file"))
    assert download._cached(got, src.as_uri(), None, None)
    with open(got, "r+b") as fh:  # the first block is always sampled
        fh.write(b"\xff\xff")
    monkeypatch.undo()
    assert not download._cached(got, src.as_uri(), None, None)


# ---------------------------------------------------------------------------- grade


def grade_file(tmp_path: Path, run: dict) -> Path:
    path = tmp_path / "mine.json"
    path.write_text(json.dumps({"runs": [run]}), encoding="utf-8")
    return path


@pytest.mark.parametrize("seeds", [[-1, 43], [10**30], [2**32]])
def test_grade_refuses_the_seeds_run_refuses(tmp_path, capsys, seeds):
    run = {"method": "cotmae_qc", "metrics": {"msmarco-dev": {"MRR@10": [38.0] * len(seeds)}}, "seeds": seeds}
    path = grade_file(tmp_path, run)
    assert main(["grade", "--metrics", str(path)]) == 2
    assert "outside [0, 4294967295]" in one_error_line(capsys, path)


def test_grade_names_the_file_for_an_unknown_method(tmp_path, capsys):
    path = grade_file(tmp_path, {"method": "cotmae_qq", "metrics": {"msmarco-dev": {"MRR@10": 38.0}}})
    assert main(["grade", "--metrics", str(path)]) == 2
    assert "runs[0]" in one_error_line(capsys, path)


# ---------------------------------------------------------------------------- process count


def test_nproc_per_node_is_bounded_by_the_cores_on_cpu_unless_forced(monkeypatch, capsys):
    from harness.core.hardware import Hardware
    from harness.run import process_check

    cpu = Hardware("cpu", 0, (), 4)
    process_check.check_bound(4, cpu, forced=False)
    with pytest.raises(HarnessError, match="this machine has 4 CPU core.*--oversubscribe"):
        process_check.check_bound(5, cpu, forced=False)
    process_check.check_bound(1000, cpu, forced=True)
    gpu = Hardware("cuda", 2, ("H100", "H100"), 64)
    with pytest.raises(HarnessError, match="has 2 GPU"):
        process_check.check_bound(3, gpu, forced=False)
    import harness.commands.run as run_command

    monkeypatch.setattr(run_command, "detect", lambda: cpu)
    monkeypatch.setattr(run_command.launch, "launch", lambda *a: pytest.fail("a worker started"))
    assert main(["run", "--method", "bm25", "--nproc-per-node", "1000"]) == 2
    assert "--nproc-per-node 1000: this machine has 4" in capsys.readouterr().err


def test_a_batch_mapping_problem_exits_2_before_any_worker_starts(monkeypatch, capsys):
    import harness.commands.run as run_command
    from harness.core.hardware import Hardware

    monkeypatch.setattr(run_command, "detect", lambda: Hardware("cpu", 0, (), 8))
    monkeypatch.setattr(run_command.launch, "launch", lambda *a: pytest.fail("a worker started"))
    monkeypatch.setattr(run_command, "run_method", lambda *a, **k: pytest.fail("a stage ran"))
    for argv in (["--nproc-per-node", "1000", "--dry-run"], ["--nproc-per-node", "3"]):
        assert main(["run", "--method", "cotmae", "--profile", "tiny", *argv]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "cotmae.yaml: pretrain batch over" in err and "cannot be split" in err, err
