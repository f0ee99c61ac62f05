"""Embedded data: manifest completeness, reproducible gzip, sha256 checked on every load."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from harness.core import benchmarks as declared
from harness.core.errors import HarnessError
from harness.core.paths import EMBEDDED_DATA_DIR
from harness.data import catalog, embedded, vendor

EXTRA_FILES = {"MANIFEST.json", "SOURCES.md", "msmarco-passage/dl19-relevant-subset/SMOKE-TEST-ONLY.txt"}


def _manifest() -> dict:
    return json.loads((EMBEDDED_DATA_DIR / "MANIFEST.json").read_text())


def test_manifest_lists_exactly_the_stored_files_with_provenance():
    entries = _manifest()["files"]
    listed = {e["path"] for e in entries}
    on_disk = {p.relative_to(EMBEDDED_DATA_DIR).as_posix() for p in EMBEDDED_DATA_DIR.rglob("*") if p.is_file()}
    assert on_disk - EXTRA_FILES == listed
    for e in entries:
        assert e["path"].endswith(".gz")
        assert len(e["sha256"]) == 64 and len(e["content_sha256"]) == 64 and e["lines"] > 0
        assert e["origin"] and e["licence"]
    smoke = [e for e in entries if e["path"].startswith("msmarco-passage/")]
    assert len(smoke) == 3 and all("SMOKE TEST ONLY" in e["note"] for e in smoke)
    assert (EMBEDDED_DATA_DIR / "SOURCES.md").read_text().startswith("# Data sources")
    # the 12 cqadupstack forums and all 13 other BEIR test sets have topics and qrels
    names = {p.split("beir-v1.0.0-", 1)[1].split(".test")[0] for p in listed if "beir-v1.0.0-" in p}
    assert len(names) == 25


def test_total_size_is_small():
    total = sum(e["bytes"] for e in _manifest()["files"])
    assert total < 40e6, total


def test_stored_bytes_and_content_match_manifest():
    for e in _manifest()["files"]:
        raw = (EMBEDDED_DATA_DIR / e["path"]).read_bytes()
        assert hashlib.sha256(raw).hexdigest() == e["sha256"], e["path"]
        content = gzip.decompress(raw)
        assert hashlib.sha256(content).hexdigest() == e["content_sha256"], e["path"]
        assert content.count(b"\n") == e["lines"], e["path"]
    assert len(embedded.verify_all()) == len(_manifest()["files"])


def test_vendored_gzip_is_reproducible(tmp_path):
    """The tool stores `gzip -9 -n` output: no name, no timestamp, identical on rebuild."""
    src = tmp_path / "src"
    (src / "beir/scifact/qrels").mkdir(parents=True)
    (src / "beir/scifact/qrels/test.tsv").write_text("query-id\tcorpus-id\tscore\n1\t31715818\t1\n")
    (src / "SOURCES.md").write_text("# Data sources\n")
    first = vendor.build(src, tmp_path / "a")
    os.utime(src / "beir/scifact/qrels/test.tsv", (1, 1))
    second = vendor.build(src, tmp_path / "b")
    assert first == second
    stored = (tmp_path / "a/beir/scifact/qrels/test.tsv.gz").read_bytes()
    assert stored == (tmp_path / "b/beir/scifact/qrels/test.tsv.gz").read_bytes()
    assert stored[3] & 0x08 == 0 and stored[4:8] == b"\0\0\0\0"  # no FNAME flag, mtime 0
    assert first["files"][0]["lines"] == 2 and "TwistXXF" in first["files"][0]["origin"]


def _copy_embedded(tmp_path: Path, rel: str) -> Path:
    root = tmp_path / "embedded"
    (root / rel).parent.mkdir(parents=True)
    shutil.copyfile(EMBEDDED_DATA_DIR / "MANIFEST.json", root / "MANIFEST.json")
    shutil.copyfile(EMBEDDED_DATA_DIR / rel, root / rel)
    return root


def test_checksum_mismatch_names_file_and_fix(tmp_path):
    rel = "topics-and-qrels/topics.dl19-passage.txt.gz"
    root = _copy_embedded(tmp_path, rel)
    assert embedded.path(rel, root) == root / rel  # verified and cached
    assert embedded.path("topics-and-qrels/topics.dl19-passage.txt", root) == root / rel  # .gz optional
    data = bytearray((root / rel).read_bytes())
    data[-10] ^= 0xFF
    (root / rel).write_bytes(bytes(data))
    os.utime(root / rel, ns=(1, 1))  # a changed file is re-checked even within the same process
    with pytest.raises(HarnessError) as info:
        embedded.path(rel, root)
    msg = str(info.value)
    assert "topics.dl19-passage.txt.gz" in msg and "sha256" in msg and "git checkout" in msg


def test_missing_and_unknown_files(tmp_path):
    rel = "topics-and-qrels/topics.dl20.txt.gz"
    root = _copy_embedded(tmp_path, rel)
    (root / rel).unlink()
    with pytest.raises(HarnessError, match="missing.*git checkout"):
        embedded.path(rel, root)
    with pytest.raises(HarnessError, match="not part of the embedded data"):
        embedded.path("beir/nq/corpus.jsonl", root)
    with pytest.raises(HarnessError, match="manifest .* is missing"):
        embedded.path(rel, tmp_path / "nowhere")


def test_catalog_load_refuses_corrupted_embedded_file(tmp_path, monkeypatch):
    root = tmp_path / "embedded"
    shutil.copytree(EMBEDDED_DATA_DIR, root)
    target = root / "topics-and-qrels/qrels.dl19-passage.txt.gz"
    target.write_bytes(gzip.compress(b"19335 0 1017759 0\n", mtime=0))
    monkeypatch.setattr(embedded, "EMBEDDED_DATA_DIR", root)
    bench = catalog.TrecBenchmark(declared.get("dl19"))  # a fresh one: get_benchmark's is cached
    with pytest.raises(HarnessError, match="qrels.dl19-passage.txt.gz is corrupted"):
        bench.qrels()
