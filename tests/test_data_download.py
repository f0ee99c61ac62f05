"""Download path: file:// and a loopback HTTP server, checksums, cache, extraction, mirror."""

from __future__ import annotations

import dataclasses
import hashlib
import http.server
import io
import json
import tarfile
import threading
import zipfile
from pathlib import Path

import pytest

from harness.core.errors import DataFormatError, HarnessError
from harness.data import catalog, download


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    """Downloads land in a temporary cache; no mirror unless a test sets one; no proxy for 127.0.0.1."""
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv(download.MIRROR_ENV, raising=False)
    for var in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")


def _md5(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class _Server:
    """A loopback HTTP server over one folder that counts GET requests."""

    def __init__(self, folder: Path):
        self.hits: list[str] = []
        hits = self.hits

        class Handler(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, directory=str(folder), **kwargs)

            def do_GET(self):
                hits.append(self.path)
                super().do_GET()

            def log_message(self, *args):  # keep test output clean
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.timeout = 5
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def __enter__(self) -> _Server:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)
        assert not self.thread.is_alive()


def test_fetch_file_url_verifies_and_caches(tmp_path):
    payload = b"some bytes\n" * 1000
    src = tmp_path / "src" / "data.bin"
    src.parent.mkdir()
    src.write_bytes(payload)
    dest_dir = tmp_path / "dl"
    got = download.fetch(src.as_uri(), dest_dir, sha256=_sha(payload), md5=_md5(payload))
    assert got == dest_dir / "data.bin" and got.read_bytes() == payload
    assert download.recorded_sha256(got) == _sha(payload)
    src.unlink()  # a second call must not need the source
    assert download.fetch(src.as_uri(), dest_dir, sha256=_sha(payload)) == got
    assert sorted(p.name for p in dest_dir.iterdir() if not p.name.startswith(".")) == [
        "data.bin",
        "data.bin.verified.json",
    ]


def test_fetch_file_url_bad_checksum_removes_file(tmp_path):
    src = tmp_path / "data.bin"
    src.write_bytes(b"payload")
    dest_dir = tmp_path / "dl"
    with pytest.raises(HarnessError) as info:
        download.fetch(src.as_uri(), dest_dir, md5="0" * 32)
    msg = str(info.value)
    assert "checksum mismatch" in msg and "data.bin" in msg and "md5" in msg and "removed" in msg
    assert [p for p in dest_dir.iterdir() if not p.name.startswith(".")] == []
    # a cached file that no longer matches is removed, and the error says so
    download.fetch(src.as_uri(), dest_dir)
    with pytest.raises(HarnessError, match="sha256 .* expected"):
        download.fetch(src.as_uri(), dest_dir, sha256="f" * 64)
    assert not (dest_dir / "data.bin").exists()


def test_fetch_http_loopback(tmp_path):
    served = tmp_path / "www"
    served.mkdir()
    payload = bytes(range(256)) * 4096  # 1 MiB
    (served / "blob.bin").write_bytes(payload)
    dest_dir = tmp_path / "dl"
    with _Server(served) as server:
        url = f"{server.url}/blob.bin"
        got = download.fetch(url, dest_dir, sha256=_sha(payload), md5=_md5(payload))
        assert got.read_bytes() == payload and server.hits == ["/blob.bin"]
        assert download.fetch(url, dest_dir, sha256=_sha(payload)) == got
        assert server.hits == ["/blob.bin"]  # cache hit: no second request
        with pytest.raises(HarnessError, match="checksum mismatch"):
            download.fetch(url, tmp_path / "other", sha256="0" * 64)
        assert [p for p in (tmp_path / "other").iterdir() if p.name != ".locks"] == []  # no file, no .part
        with pytest.raises(HarnessError, match="could not download .*missing.bin"):
            download.fetch(f"{server.url}/missing.bin", dest_dir)
        assert not (dest_dir / "missing.bin.part").exists()


def test_fetch_refuses_other_schemes(tmp_path):
    with pytest.raises(HarnessError, match="only http"):
        download.fetch("ftp://example.org/x.zip", tmp_path)


def _zip_bytes(members: dict[str, str]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, text in members.items():
            zf.writestr(name, text)
    return buf.getvalue()


def test_extract_refuses_escaping_members(tmp_path):
    bad_zip = tmp_path / "bad.zip"
    bad_zip.write_bytes(_zip_bytes({"../evil.txt": "x"}))
    with pytest.raises(HarnessError, match="outside"):
        download.extract_zip(bad_zip, tmp_path / "out")
    assert not (tmp_path / "evil.txt").exists() and not (tmp_path / "out").exists()
    bad_tar = tmp_path / "bad.tar.gz"
    with tarfile.open(bad_tar, "w:gz") as tf:
        info = tarfile.TarInfo("link")
        info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tf.addfile(info)
    with pytest.raises(HarnessError, match="link"):
        download.extract_tar(bad_tar, tmp_path / "out2")
    not_zip = tmp_path / "nz.zip"
    not_zip.write_bytes(b"nope")
    with pytest.raises(HarnessError, match="not a valid zip"):
        download.extract_zip(not_zip, tmp_path / "out3")


def _fake_hotpotqa(qrels_train: str = "q1\td1\t1\n") -> bytes:
    return _zip_bytes(
        {
            "hotpotqa/corpus.jsonl": "".join(
                json.dumps({"_id": f"d{i}", "title": f"T{i}", "text": f"text {i}"}) + "\n" for i in range(3)
            ),
            "hotpotqa/queries.jsonl": '{"_id": "q1", "text": "first"}\n{"_id": "q2", "text": "second"}\n',
            "hotpotqa/qrels/train.tsv": "query-id\tcorpus-id\tscore\n" + qrels_train,
            "hotpotqa/qrels/dev.tsv": "query-id\tcorpus-id\tscore\nq2\td2\t1\n",
        }
    )


def _use_mirror(monkeypatch, tmp_path: Path, files: dict[str, bytes], pin: dict[str, str] | None = None) -> Path:
    mirror = tmp_path / "mirror"
    mirror.mkdir(exist_ok=True)
    for name, data in files.items():
        (mirror / name).write_bytes(data)
    monkeypatch.setenv(download.MIRROR_ENV, mirror.as_uri())
    for key, name in (pin or {}).items():  # test archives are not the upstream bytes: pin their md5
        monkeypatch.setitem(
            download.SOURCES, key, dataclasses.replace(download.SOURCES[key], md5=_md5(files[name]), sha256=None)
        )
    return mirror


def test_catalog_loads_beir_zip_through_mirror(tmp_path, monkeypatch):
    data = _fake_hotpotqa()
    _use_mirror(monkeypatch, tmp_path, {"hotpotqa.zip": data}, {"beir/hotpotqa": "hotpotqa.zip"})
    bench = catalog.BeirBenchmark("hotpotqa", "hotpotqa")
    corpus = bench.corpus()
    assert corpus == {f"d{i}": {"title": f"T{i}", "text": f"text {i}"} for i in range(3)}
    assert bench.queries("train") == {"q1": "first"} and bench.qrels("dev") == {"q2": {"d2": 1}}
    assert len(bench.queries("test")) == 7405  # test topics stay the embedded Anserini ones
    extracted = tmp_path / "cache/downloads/beir/hotpotqa/hotpotqa/corpus.jsonl"
    assert extracted.is_file()
    assert bench.files()["downloads/hotpotqa.zip"] == f"md5:{_md5(data)}"  # the checksum it was verified against


def test_catalog_reports_qrels_for_unknown_query_in_download(tmp_path, monkeypatch):
    data = _fake_hotpotqa("q1\td1\t1\nq9\td2\t1\n")
    _use_mirror(monkeypatch, tmp_path, {"hotpotqa.zip": data}, {"beir/hotpotqa": "hotpotqa.zip"})
    with pytest.raises(DataFormatError) as info:
        catalog.BeirBenchmark("hotpotqa", "hotpotqa").qrels("train")
    assert "train.tsv:3:" in str(info.value) and "'q9' unknown to the topics (queries.jsonl)" in str(info.value)


def test_mirror_with_wrong_bytes_fails_checksum(tmp_path, monkeypatch):
    _use_mirror(monkeypatch, tmp_path, {"fiqa.zip": _zip_bytes({"fiqa/corpus.jsonl": ""})})
    with pytest.raises(HarnessError, match="checksum mismatch for fiqa.zip from .*17918ed23cd04fb15047f73e6c3bd9d9"):
        catalog.get_benchmark("fiqa").corpus()
    assert not (tmp_path / "cache/downloads/fiqa.zip").exists()


def test_offline_corpus_error_says_how_to_get_it(tmp_path, monkeypatch):
    empty = tmp_path / "empty-mirror"
    empty.mkdir()
    monkeypatch.setenv(download.MIRROR_ENV, str(empty))  # a plain folder path works as a mirror too
    with pytest.raises(HarnessError) as info:
        catalog.get_benchmark("fiqa").corpus()
    msg = str(info.value)
    assert "'fiqa' is not embedded" in msg and "fiqa.zip" in msg and download.MIRROR_ENV in msg
    assert str(tmp_path / "cache" / "downloads") in msg


def test_msmarco_corpus_through_mirror(tmp_path, monkeypatch):
    tsv = b"0\tThe presence of communication amid scientific minds.\n1\tThe Manhattan Project.\n"
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        info = tarfile.TarInfo("collection.tsv")
        info.size = len(tsv)
        tf.addfile(info, io.BytesIO(tsv))
    _use_mirror(
        monkeypatch,
        tmp_path,
        {"collection.tar.gz": buf.getvalue()},
        {"msmarco-passage/collection": "collection.tar.gz"},
    )
    corpus = catalog.get_benchmark("dl19").corpus()
    assert corpus["1"] == {"title": "", "text": "The Manhattan Project."} and len(corpus) == 2
    assert catalog.get_benchmark("msmarco-dev").corpus_files() == {
        "downloads/collection.tar.gz": f"md5:{download.SOURCES['msmarco-passage/collection'].md5}"
    }


def test_registry_urls_and_checksums():
    assert download.SOURCES["beir/scifact"].url() == f"{download.BEIR_BASE_URL}/scifact.zip"
    assert download.SOURCES["msmarco-passage/collection"].url().startswith("https://msmarco.")
    for name in catalog.BEIR_NAMES:
        src = download.SOURCES[f"beir/{name}"]
        assert src.md5 is None or len(src.md5) == 32
    assert download.SOURCES["beir/nfcorpus"].md5 == "a89dba18a62ef92f7d323ec890a0d38d"


def test_no_download_at_import(tmp_path):
    """Importing the data layer touches neither the network nor the cache folder."""
    import os
    import subprocess
    import sys

    code = (
        "import socket\n"
        "def refuse(*a, **k): raise SystemExit('network used at import')\n"
        "socket.socket.connect = refuse\n"
        "import harness.data.catalog, harness.data.download, harness.data.formats\n"
        "assert 'tqdm' not in __import__('sys').modules\n"
    )
    env = {**os.environ, "HARNESS_CACHE_DIR": str(tmp_path / "cache")}
    subprocess.run(
        [sys.executable, "-c", code], check=True, env=env, timeout=60, cwd=Path(catalog.__file__).resolve().parents[2]
    )
    assert not (tmp_path / "cache").exists()
