"""Downloads without a published checksum are checked structurally before they are marked verified
(issue 25): a damaged or wrong file never poisons the cache, and a fixed mirror is picked up."""

from __future__ import annotations

import gzip
import io
import json
import tarfile
from pathlib import Path

import pytest

from harness.core.errors import HarnessError
from harness.data import download, structure

DOCS = "D1\thttp://a\tA title\tA body.\nD2\thttp://b\tB title\tB body.\n"


@pytest.fixture
def plain_mirror(tmp_path, monkeypatch) -> Path:
    """A mirror folder without a fixture manifest: the publisher's (absent) checksums apply."""
    folder = tmp_path / "plain-mirror"
    folder.mkdir()
    monkeypatch.setenv(download.MIRROR_ENV, str(folder))
    monkeypatch.setitem(structure.CHECKS, "msmarco-docs", structure.tsv_gz(columns=4, lines=2))
    return folder


def _verified(name: str) -> bool:
    return download.recorded_sha256(download.downloads_dir() / name) is not None


@pytest.mark.parametrize(
    "payload, problem",
    [
        (b"<html>mirror error page</html>", "not an intact gzip file"),
        (gzip.compress(DOCS.encode(), mtime=0)[:-12], "not an intact gzip file"),  # cut short: no CRC trailer
        (gzip.compress(b"D1\thttp://a\tonly three\n", mtime=0), "line 1 has 3 tab-separated fields, expected 4"),
        (gzip.compress(DOCS.encode() * 2, mtime=0), "4 data lines, the publisher's file has 2"),
    ],
    ids=["html-page", "cut-short", "three-fields", "more-lines"],  # ids, not the bytes: the same in every process
)
def test_a_bad_unpinned_download_is_refused_and_not_kept(plain_mirror: Path, payload: bytes, problem: str) -> None:
    (plain_mirror / "msmarco-docs.tsv.gz").write_bytes(payload)
    with pytest.raises(HarnessError) as err:
        download.fetch_source("msmarco-docs")
    assert "msmarco-docs.tsv.gz" in str(err.value) and problem in str(err.value)
    folder = download.downloads_dir()
    assert not (folder / "msmarco-docs.tsv.gz").exists() and not _verified("msmarco-docs.tsv.gz")


def test_after_a_refused_download_the_fixed_mirror_file_is_taken(plain_mirror: Path) -> None:
    (plain_mirror / "msmarco-docs.tsv.gz").write_bytes(b"garbage")
    with pytest.raises(HarnessError):
        download.fetch_source("msmarco-docs")
    (plain_mirror / "msmarco-docs.tsv.gz").write_bytes(gzip.compress(DOCS.encode()))
    path = download.fetch_source("msmarco-docs")  # nothing to delete by hand first
    assert gzip.decompress(path.read_bytes()).decode() == DOCS and _verified("msmarco-docs.tsv.gz")


def test_a_file_put_in_the_cache_by_hand_is_checked_before_it_is_used(plain_mirror: Path) -> None:
    folder = download.downloads_dir()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "msmarco-docs.tsv.gz").write_bytes(b"not gzip")  # no .verified.json beside it
    (plain_mirror / "msmarco-docs.tsv.gz").write_bytes(gzip.compress(DOCS.encode()))
    path = download.fetch_source("msmarco-docs")  # the bad cached file is replaced from the mirror
    assert gzip.decompress(path.read_bytes()).decode() == DOCS


def test_tar_and_jsonl_checks(tmp_path: Path) -> None:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        data = b"1\ta title\n"
        info = tarfile.TarInfo("marco/para.title.txt")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    good = tmp_path / "marco.tar.gz"
    good.write_bytes(buf.getvalue())
    structure.CHECKS["rocketqa-marco"](good)
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(buf.getvalue()[: len(buf.getvalue()) // 2])
    with pytest.raises(structure.StructureError, match="not an intact tar archive"):
        structure.CHECKS["rocketqa-marco"](cut)
    with pytest.raises(structure.StructureError, match="lacks marco/other"):
        structure.tar_with("marco/other")(good)

    row = {"query_id": "1", "query": "q", "positive_passages": [], "negative_passages": []}
    lines = tmp_path / "train.jsonl.gz"
    lines.write_bytes(gzip.compress((json.dumps(row) + "\n").encode()))
    structure.CHECKS["tevatron-train"](lines)
    lines.write_bytes(gzip.compress(json.dumps({"query_id": "1"}).encode()))
    with pytest.raises(structure.StructureError, match="line 1 lacks query, positive_passages"):
        structure.CHECKS["tevatron-train"](lines)


def test_every_unpinned_source_declares_a_structure_check() -> None:
    for src in download.SOURCES.values():
        if not (src.md5 or src.sha256):
            assert src.structure in structure.CHECKS, f"{src.name}: unpinned without a structural check"
