"""The paper profiles' pre-training corpora are catalog entries with a download/mirror path: a
paper-profile run gets past corpus loading on a local mirror, or stops with a one-line error
saying where to put the file (never an unknown-name error)."""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import shutil
from pathlib import Path

import pytest

from harness.cli import main
from harness.core.errors import HarnessError
from harness.data import catalog, download, structure
from harness.spec.files import list_methods
from harness.spec.method import load_method
from harness.stages.checkpoints import packaged_checkpoint

DOCS = "".join(
    f"D{i}\thttp://example.org/{i}\tTitle {i}\tFirst sentence of document {i} about topic {i % 3}. "
    f"A second sentence follows here. And a third one closes document {i}.\n"
    for i in range(40)
)
WIKI = "id\ttext\ttitle\n" + "".join(
    f"{i}\tPassage {i} of the encyclopedia, with some words.\tArticle {i}\n" for i in range(1, 6)
)


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("HARNESS_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.delenv(download.MIRROR_ENV, raising=False)
    # The mirrored corpora here are a few lines long: keep the structural checks, not the publishers' counts.
    monkeypatch.setitem(structure.CHECKS, "msmarco-docs", structure.tsv_gz(columns=4))
    monkeypatch.setitem(structure.CHECKS, "wikipedia-dpr", structure.tsv_gz(columns=3, header="id\ttext\ttitle"))
    catalog.get_benchmark.cache_clear()
    yield
    catalog.get_benchmark.cache_clear()


def _mirror(monkeypatch, tmp_path: Path, files: dict[str, bytes], pin: dict[str, str] | None = None) -> None:
    mirror = tmp_path / "mirror"
    mirror.mkdir(exist_ok=True)
    for name, data in files.items():
        (mirror / name).write_bytes(data)
    monkeypatch.setenv(download.MIRROR_ENV, str(mirror))
    for key, name in (pin or {}).items():  # a fixture is not the upstream bytes: pin its md5
        monkeypatch.setitem(
            download.SOURCES,
            key,
            dataclasses.replace(download.SOURCES[key], md5=hashlib.md5(files[name]).hexdigest(), sha256=None),
        )


def test_every_paper_profile_corpus_is_a_catalog_entry():
    for method in list_methods():
        source = load_method(method, "paper").get("corpus.source")
        for name in [] if source is None else source if isinstance(source, list) else [source]:
            bench = catalog.get_benchmark(name)  # never UnknownNameError
            assert bench.has_corpus() or bench.corpus_files(), (method, name)


def test_documents_and_wikipedia_read_through_a_mirror_and_record_their_checksum(tmp_path, monkeypatch):
    _mirror(
        monkeypatch,
        tmp_path,
        {"msmarco-docs.tsv.gz": gzip.compress(DOCS.encode()), "psgs_w100.tsv.gz": gzip.compress(WIKI.encode())},
    )
    docs = catalog.get_benchmark("msmarco-passage-docs")
    assert docs.corpus_files() == {"downloads/msmarco-docs.tsv.gz": "unpinned"}  # named before the download
    corpus = docs.corpus()
    assert len(corpus) == 40 and corpus["D3"]["title"] == "Title 3" and corpus["D3"]["text"].startswith("First")
    recorded = docs.corpus_files()["downloads/msmarco-docs.tsv.gz"]
    assert recorded == hashlib.sha256(gzip.compress(DOCS.encode())).hexdigest() or len(recorded) == 64
    wiki = catalog.get_benchmark("wikipedia").corpus()
    assert wiki["2"] == {"title": "Article 2", "text": "Passage 2 of the encyclopedia, with some words."}
    with pytest.raises(HarnessError, match="pre-training corpus: it has no queries"):
        catalog.get_benchmark("wikipedia").qrels()


def test_a_malformed_corpus_line_names_file_and_line(tmp_path, monkeypatch):
    bad = {"psgs_w100.tsv.gz": gzip.compress((WIKI + "7\tno title field\n").encode())}
    _mirror(monkeypatch, tmp_path, bad)  # unpinned: refused at download, never marked verified
    with pytest.raises(HarnessError, match=r"psgs_w100.tsv.gz from .* line 7 has 2 tab-separated fields, expected 3"):
        catalog.get_benchmark("wikipedia").corpus()
    _mirror(monkeypatch, tmp_path, bad, pin={"wikipedia-dpr": "psgs_w100.tsv.gz"})  # pinned: the reader says it
    catalog.get_benchmark.cache_clear()
    with pytest.raises(HarnessError, match=r"psgs_w100.tsv.gz:7: expected 3 tab-separated fields"):
        catalog.get_benchmark("wikipedia").corpus()


def test_offline_the_error_says_where_to_put_the_file(tmp_path, monkeypatch):
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv(download.MIRROR_ENV, str(empty))
    with pytest.raises(HarnessError) as info:
        catalog.get_benchmark("wikipedia").corpus()
    message = str(info.value)
    assert "\n" not in message and "psgs_w100.tsv.gz" in message and download.MIRROR_ENV in message


@pytest.mark.slow
def test_a_paper_run_missing_its_weights_refuses_before_the_corpus_stage(tmp_path, monkeypatch, capsys):
    """cotmae --profile paper --stage pretrain with the MS MARCO documents on a mirror and bert-base-uncased's
    tokenizer files but not its weights: the preflight refuses before the first stage (nothing built), and its
    one error names the weights among the missing inputs, each with its fetch command."""
    tok = tmp_path / "models" / "bert-base-uncased"
    tok.mkdir(parents=True)
    for name in ("config.json", "vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copy(Path(packaged_checkpoint("all-minilm-l6-v2")) / name, tok / name)
    monkeypatch.setenv("HARNESS_MODELS_DIR", str(tmp_path / "models"))
    _mirror(monkeypatch, tmp_path, {"msmarco-docs.tsv.gz": gzip.compress(DOCS.encode())})
    assert main(["run", "--method", "cotmae", "--profile", "paper", "--stage", "pretrain", "--allow-cpu"]) == 2
    err = capsys.readouterr().err
    assert not (tmp_path / "cache" / "passages").exists(), "a stage started although an input was missing"
    error_lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(error_lines) == 1 and "not started" in error_lines[0]
    weights = [line for line in err.splitlines() if "bert-base-uncased" in line and line.strip().startswith("!")]
    assert weights and all("fetch" in line for line in weights), err
    assert "UnknownName" not in err and "Traceback" not in err
