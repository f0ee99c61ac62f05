"""MS MARCO training data through the fixture mirror: the catalog entry, titled passages, published
BM25 negatives, checksums against the mirror's manifest, resumed downloads, and what a dry-run lists."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from harness.core.errors import HarnessError
from harness.core.paths import PROJECT_ROOT
from harness.data import download
from harness.data.catalog import get_benchmark
from harness.data.negatives import read_published_negatives
from harness.data.requirements import missing_inputs, required_sources
from harness.data.setting import PASSAGES_ENV
from harness.spec.method import load_method, pretraining_methods

FIXTURE = PROJECT_ROOT / "tests" / "fixtures" / "msmarco_mirror"


def test_fixture_mirror_is_what_its_builder_writes() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("build_mirror", FIXTURE.parent / "build_msmarco_mirror.py")
    builder = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(builder)
    manifest = json.loads((FIXTURE / download.FIXTURE_MANIFEST).read_text())["files"]
    for name, data in builder.build().items():
        assert (
            hashlib.sha256(data).hexdigest()
            == manifest[name]["sha256"]
            == hashlib.sha256((FIXTURE / name).read_bytes()).hexdigest()
        ), name


def test_training_queries_qrels_and_corpus_from_the_mirror(mirror: Path) -> None:
    bench = get_benchmark("msmarco-passage-train")
    queries, qrels = bench.queries("train"), bench.qrels("train")
    assert queries and set(queries) == set(qrels)
    corpus = bench.corpus()
    assert len(corpus) == 300 and all(pid in corpus for docs in qrels.values() for pid in docs)
    assert all(doc["title"] == "" for doc in corpus.values())  # plain: collection.tsv has no titles
    files = bench.files()
    assert files["downloads/queries.tar.gz"].startswith("fixture-sha256:")  # never taken for the real file


def test_titled_passages_join_rocketqa_titles_and_change_the_files(mirror: Path, monkeypatch) -> None:
    plain = get_benchmark("dl19").corpus_files()
    monkeypatch.setenv(PASSAGES_ENV, "titled")
    bench = get_benchmark("dl19")
    titled = dict(bench.iter_corpus())
    assert len(titled) == 300 and all(doc["title"] for doc in titled.values())
    assert bench.corpus_files() != plain and bench.corpus_files()["msmarco_passages"] == "titled"


def test_published_negatives_keep_judged_queries_and_skip_positives(mirror: Path) -> None:
    qrels = get_benchmark("msmarco-passage-train").qrels("train")
    triples = read_published_negatives("msmarco-triples", download.fetch_source("msmarco-passage/triples"), qrels, 10)
    tevatron = read_published_negatives("tevatron", download.fetch_source("tevatron/msmarco-passage"), qrels, 10)
    for negatives in (triples, tevatron):
        assert set(negatives) == set(qrels)
        assert all(len(p) == 10 and not set(p) & set(qrels[q]) for q, p in negatives.items())


def test_checksum_mismatch_in_the_mirror_names_file_and_both_hashes(mirror: Path) -> None:
    (mirror / "qrels.train.tsv").write_text("1\t0\t2\t1\n")  # changed after the manifest was written
    with pytest.raises(HarnessError) as err:
        download.fetch_source("msmarco-passage/qrels-train")
    text = str(err.value)
    want = json.loads((mirror / download.FIXTURE_MANIFEST).read_text())["files"]["qrels.train.tsv"]["sha256"]
    got = hashlib.sha256(b"1\t0\t2\t1\n").hexdigest()
    assert "qrels.train.tsv" in text and want in text and got in text
    folder = download.downloads_dir()
    assert not (folder / "qrels.train.tsv").exists() and not list(folder.glob("qrels.train.tsv.part"))


def test_publisher_checksum_applies_without_a_fixture_manifest(mirror: Path) -> None:
    (mirror / download.FIXTURE_MANIFEST).unlink()  # a plain mirror: the publisher's md5 applies
    with pytest.raises(HarnessError, match="733fb9fe12d93e497f7289409316eccf"):
        download.fetch_source("msmarco-passage/qrels-train")


def test_interrupted_download_resumes_from_the_partial_file(tmp_path, monkeypatch) -> None:
    data = bytes(range(256)) * 4096
    src = tmp_path / "src" / "big.bin"
    src.parent.mkdir()
    src.write_bytes(data)
    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / "big.bin.part").write_bytes(data[:300_000])  # what a killed transfer left behind
    offsets = []
    real_open = download._open

    def spy(url, offset):
        offsets.append(offset)
        return real_open(url, offset)

    monkeypatch.setattr(download, "_open", spy)
    path = download.fetch(src.as_uri(), dest, sha256=hashlib.sha256(data).hexdigest())
    assert offsets == [300_000] and path.read_bytes() == data
    assert not (dest / "big.bin.part").exists()


def test_failed_transfer_keeps_the_partial_file(tmp_path, monkeypatch) -> None:
    data = b"x" * 5_000_000
    src = tmp_path / "big.bin"
    src.write_bytes(data)

    class Cut:
        def __init__(self, fh):
            self.fh, self.sent = fh, 0

        def read(self, n):
            if self.sent >= 2 << 20:
                raise OSError("connection reset")
            block = self.fh.read(n)
            self.sent += len(block)
            return block

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.fh.close()

    real_open = download._open
    monkeypatch.setattr(
        download, "_open", lambda url, offset: (lambda s, t, r: (Cut(s), t, r))(*real_open(url, offset))
    )
    with pytest.raises(HarnessError, match="the next try continues it"):
        download.fetch(src.as_uri(), tmp_path / "dest")
    assert (tmp_path / "dest" / "big.bin.part").stat().st_size == 2 << 20
    monkeypatch.setattr(download, "_open", real_open)
    assert download.fetch(src.as_uri(), tmp_path / "dest").read_bytes() == data


def test_changed_mirror_file_is_downloaded_and_extracted_again(mirror: Path) -> None:
    import io
    import tarfile

    assert "\t" in download.msmarco_queries_path("train").read_text()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        data = b"7\tan updated query\n"
        info = tarfile.TarInfo("queries.train.tsv")
        info.size = len(data)
        tf.addfile(info, io.BytesIO(data))
    (mirror / "queries.tar.gz").write_bytes(buf.getvalue())
    manifest = json.loads((mirror / download.FIXTURE_MANIFEST).read_text())
    manifest["files"]["queries.tar.gz"]["sha256"] = hashlib.sha256(buf.getvalue()).hexdigest()
    (mirror / download.FIXTURE_MANIFEST).write_text(json.dumps(manifest))
    # the cached download no longer matches the mirror's checksum: fetched anew, and its folder re-extracted
    assert download.msmarco_queries_path("train").read_text() == "7\tan updated query\n"


def test_paper_dry_run_lists_missing_downloads_with_fetch_commands(monkeypatch) -> None:
    monkeypatch.delenv(download.MIRROR_ENV, raising=False)
    spec = load_method("cotmae", "paper")
    from harness.data.setting import data_setting

    with data_setting(spec):
        keys = required_sources(spec, spec.get("datasets"))
        lines = missing_inputs(spec, spec.get("datasets"))
    assert keys == [
        "msmarco-docs",
        "msmarco-passage/queries",
        "msmarco-passage/qrels-train",
        "msmarco-passage/collection",
        "rocketqa/marco",
        "msmarco-passage/triples",
    ]
    assert len(lines) == len(keys) and all("fetch: python -m harness fetch " in line for line in lines)


def test_fixture_mirror_leaves_no_missing_data(mirror: Path) -> None:
    from harness.data.setting import data_setting

    for method in pretraining_methods("paper"):
        spec = load_method(method, "paper")
        with data_setting(spec):
            assert missing_inputs(spec, list(spec.get("datasets"))) == [], method


def test_beir_fixture_zips_load_through_the_catalog(mirror: Path) -> None:
    forum = get_benchmark("cqadupstack-android")
    judged = {d for docs in forum.qrels().values() for d in docs}  # the embedded test judgements
    corpus = dict(forum.iter_corpus())  # the fixture zip's forum folder: judged documents of 10 queries
    assert corpus and set(corpus) <= judged
    fiqa = dict(get_benchmark("fiqa").iter_corpus())
    assert fiqa and all(doc["text"].startswith("fixture document") for doc in fiqa.values())


def test_fetch_command_lists_fetches_and_names_unknown_downloads(mirror: Path, capsys) -> None:
    from harness.cli import main

    assert main(["fetch", "--list"]) == 0
    listed = capsys.readouterr().out
    assert "msmarco-passage/qrels-train" in listed and "here" in listed  # the mirror holds it
    assert main(["fetch", "msmarco-passage/qrels-train"]) == 0
    assert "(verified)" in capsys.readouterr().out
    assert (download.downloads_dir() / "qrels.train.tsv").is_file()
    assert main(["fetch", "msmarco-passage/qrels"]) == 2
    assert "did you mean" in capsys.readouterr().err.lower()


def test_fetch_model_without_the_hub_is_one_clear_line(monkeypatch, capsys) -> None:
    from harness.cli import main

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert main(["fetch", "--model", "Luyu/condenser"]) == 2
    err = capsys.readouterr().err
    assert "Luyu/condenser" in err and "models/Luyu/condenser" in err and "Traceback" not in err
