"""Named benchmarks over the embedded data: official counts, splits, names, checksums."""

from __future__ import annotations

import pytest

from harness.core.errors import HarnessError, UnknownNameError
from harness.data import catalog
from harness.data.catalog import get_benchmark, list_benchmarks

COMMON_NAMES = [
    "msmarco-dev",
    "dl19",
    "dl20",
    "trec-covid",
    "nfcorpus",
    "nq",
    "hotpotqa",
    "fiqa",
    "arguana",
    "webis-touche2020",
    "cqadupstack",
    "quora",
    "dbpedia-entity",
    "scidocs",
    "fever",
    "climate-fever",
    "scifact",
]


def _lines(qrels: dict) -> int:
    return sum(len(v) for v in qrels.values())


def test_names():
    names = list_benchmarks()
    assert set(COMMON_NAMES) <= set(names)
    assert {f"cqadupstack-{f}" for f in catalog.CQADUPSTACK_FORUMS} <= set(names)
    assert "msmarco-dl19-subset" in names and len(names) == len(set(names)) == 3 + 1 + 14 + 12 + 1 + 3
    assert get_benchmark("msmarco-passage-train").kind == "msmarco-train"
    assert {n for n in names if get_benchmark(n).kind == "corpus"} == set(catalog.PRETRAIN_CORPORA)
    kinds = {n: get_benchmark(n).kind for n in names}
    assert kinds["msmarco-dev"] == "msmarco" and kinds["dl19"] == kinds["dl20"] == "trec-dl"
    assert all(kinds[n] == "beir" for n in catalog.BEIR_NAMES)


@pytest.mark.parametrize(
    "typo,expected",
    [("scifcat", "scifact"), ("dl-19", "dl19"), ("msmarco_dev", "msmarco-dev"), ("trec_covid", "trec-covid")],
)
def test_unknown_name_suggests(typo, expected):
    with pytest.raises(UnknownNameError) as info:
        get_benchmark(typo)
    assert expected in info.value.suggestions
    assert "Did you mean:" in str(info.value) and expected in str(info.value).split("Known:")[0]


def test_msmarco_dev_counts():
    b = get_benchmark("msmarco-dev")
    assert len(b.queries()) == 6980 and len(b.qrels()) == 6980 and _lines(b.qrels()) == 7437
    assert b.splits() == ["dev"] and b.eval_split == "dev"
    assert b.qrels("test") == b.qrels("dev") == b.qrels()  # "test" is an alias of its evaluation split
    assert {g for q in b.qrels().values() for g in q.values()} == {1}  # MS MARCO dev: binary, all positive


def test_trec_dl_judged_queries_only():
    dl19, dl20 = get_benchmark("dl19"), get_benchmark("dl20")
    assert len(dl19.queries()) == 43 and _lines(dl19.qrels()) == 9260
    assert len(dl20.queries("test")) == 54 and _lines(dl20.qrels()) == 11386
    assert set(dl20.queries()) == set(dl20.qrels())
    assert max(g for q in dl19.qrels().values() for g in q.values()) == 3


def test_scifact_and_nfcorpus():
    sf, nf = get_benchmark("scifact"), get_benchmark("nfcorpus")
    assert sf.splits() == ["train", "test"] and nf.splits() == ["train", "dev", "test"]
    assert len(sf.queries()) == 300 and _lines(sf.qrels()) == 339
    assert len(sf.queries("train")) == 809 and _lines(sf.qrels("train")) == 919
    assert len(nf.queries("test")) == 323 and _lines(nf.qrels()) == 12334
    assert len(nf.queries("dev")) == 324 and len(nf.queries("train")) == 2590
    assert not set(sf.queries("train")) & set(sf.queries("test"))
    assert sf.has_corpus() and nf.has_corpus()
    sc, nc = sf.corpus(), nf.corpus()
    assert len(sc) == 5183 and len(nc) == 3633
    assert set(sc["4983"]) == {"title", "text"} and sc["4983"]["title"].startswith("Microstructural")
    for b, corpus in ((sf, sc), (nf, nc)):  # every judged document exists
        for split in b.splits():
            assert all(d in corpus for q in b.qrels(split).values() for d in q)


def test_anserini_and_beir_copies_agree_and_disagreement_is_caught():
    from harness.data import embedded
    from harness.data import formats as F

    for name in ("scifact", "nfcorpus"):
        b = get_benchmark(name)
        beir_qrels = F.read_beir_qrels(embedded.path(f"beir/{name}/qrels/test.tsv"))
        beir_queries = F.read_beir_queries(embedded.path(f"beir/{name}/queries.jsonl"))
        assert b.qrels("test") == beir_qrels
        assert all(beir_queries[q] == t for q, t in b.queries("test").items())
    fresh = catalog.BeirBenchmark("scifact", "scifact")
    topics, qrels = fresh._test()
    qrels = {q: dict(d) for q, d in qrels.items()}
    next(iter(qrels.values()))["not-a-doc"] = 1
    with pytest.raises(HarnessError, match="Anserini and BEIR copies disagree"):
        fresh._check_against_beir(topics, qrels)


def test_beir_test_sets():
    expected = {
        "trec-covid": 50,
        "nq": 3452,
        "hotpotqa": 7405,
        "fiqa": 648,
        "arguana": 1406,
        "webis-touche2020": 49,
        "quora": 10000,
        "dbpedia-entity": 400,
        "scidocs": 1000,
        "fever": 6666,
        "climate-fever": 1535,
    }
    for name, n in expected.items():
        b = get_benchmark(name)
        queries = b.queries()
        assert len(queries) == n, name
        assert set(b.qrels()) == set(queries), name
        assert not b.has_corpus()


def test_cqadupstack_is_the_mean_of_its_forums():
    cqa = get_benchmark("cqadupstack")
    subs = cqa.sub_benchmarks()
    assert [s.name for s in subs] == [f"cqadupstack-{f}" for f in catalog.CQADUPSTACK_FORUMS]
    assert sum(len(s.queries()) for s in subs) == 13145
    assert get_benchmark("cqadupstack-android").sub_benchmarks() == []
    with pytest.raises(HarnessError, match="sub_benchmarks"):
        cqa.qrels()
    assert len(cqa.files()) == 24 + 1


def test_smoke_subset_is_labelled():
    b = get_benchmark("msmarco-dl19-subset")
    assert b.smoke and "SMOKE" in b.description
    assert len(b.queries()) == 43 and _lines(b.qrels()) == 4102 and len(b.corpus()) == 5000
    assert not get_benchmark("dl19").smoke


def test_unknown_split():
    with pytest.raises(UnknownNameError, match="split of benchmark 'scifact'.*Known: test, train"):
        get_benchmark("scifact").queries("dev")


def test_files_are_checksums_of_embedded_files():
    from harness.data.embedded import sha256 as files_of

    files = get_benchmark("scifact").files()
    assert "embedded/beir/scifact/corpus.jsonl.gz" in files
    assert "embedded/topics-and-qrels/qrels.beir-v1.0.0-scifact.test.txt.gz" in files
    assert all(len(v) == 64 for v in files.values()) and len(files) == 6
    assert get_benchmark("scifact").corpus_files() == {
        "embedded/beir/scifact/corpus.jsonl.gz": files["embedded/beir/scifact/corpus.jsonl.gz"]
    }
    # a download is identified by the checksum it is verified against, before and after fetching it
    assert get_benchmark("dl20").files() == {
        "embedded/topics-and-qrels/topics.dl20.txt.gz": files_of("topics-and-qrels/topics.dl20.txt.gz"),
        "embedded/topics-and-qrels/qrels.dl20-passage.txt.gz": files_of("topics-and-qrels/qrels.dl20-passage.txt.gz"),
        "downloads/collection.tar.gz": "md5:87dd01826da3e2ad45447ba5af577628",
    }
    assert get_benchmark("fiqa").corpus_files() == {"downloads/fiqa.zip": "md5:17918ed23cd04fb15047f73e6c3bd9d9"}
    assert get_benchmark("cqadupstack").corpus_files() == {
        "downloads/cqadupstack.zip": "md5:4e41456d7df8ee7760a7f866133bda78"
    }


def test_returned_dicts_are_copies():
    b = get_benchmark("dl19")
    b.qrels()["19335"]["x"] = 3
    b.queries().clear()
    assert "x" not in b.qrels()["19335"] and len(b.queries()) == 43
