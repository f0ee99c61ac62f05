"""Readers/writers in harness.data.formats: every malformed case names file, line and problem."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from harness.core.errors import DataFormatError, HarnessError
from harness.core.fsutil import is_temp
from harness.data import formats as F


def _write(tmp_path: Path, name: str, text: str, compress: bool = False) -> Path:
    path = tmp_path / name
    data = text.encode("utf-8")
    path.write_bytes(gzip.compress(data, mtime=0) if compress else data)
    return path


CORPUS_OK = '{"_id": "d1", "title": "T1", "text": "one", "metadata": {"x": 1}}\n{"_id": 2, "text": "two"}\n'

# (reader, file name, content, expected line, expected problem text)
MALFORMED = [
    (F.read_beir_corpus, "corpus.jsonl", '{"_id": "d1", "text": "a"}\n{"_id": "d2", "text": \n', 2, "bad JSON line"),
    (F.read_beir_corpus, "corpus.jsonl", '["d1", "a"]\n', 1, "bad JSON line"),
    (
        F.read_beir_corpus,
        "corpus.jsonl",
        '{"_id": "d1", "text": "a"}\n{"title": "t", "text": "b"}\n',
        2,
        "missing field '_id'",
    ),
    (F.read_beir_corpus, "corpus.jsonl", '{"_id": "d1", "title": "t"}\n', 1, "missing field 'text'"),
    (F.read_beir_corpus, "corpus.jsonl", '{"_id": "d1", "text": 5}\n', 1, "field 'text' must be a string"),
    (
        F.read_beir_corpus,
        "corpus.jsonl",
        '{"_id": "d1", "text": "a"}\n\n{"_id": "d1", "text": "b"}\n',
        3,
        "duplicate doc id 'd1'",
    ),
    (F.read_beir_queries, "queries.jsonl", '{"_id": "q1", "text": "a"}\n{"_id": "q2"}\n', 2, "missing field 'text'"),
    (
        F.read_beir_queries,
        "queries.jsonl",
        '{"_id": "q1", "text": "a"}\n{"_id": "q1", "text": "b"}\n',
        2,
        "duplicate query id 'q1'",
    ),
    (F.read_beir_queries, "queries.jsonl", '{"_id": "q1", "text": "a"\n', 1, "bad JSON line"),
    (F.read_beir_qrels, "test.tsv", "query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\n", 3, "wrong column count"),
    (F.read_beir_qrels, "test.tsv", "query-id\tcorpus-id\tscore\nq1\td1\thigh\n", 2, "non-numeric grade 'high'"),
    (F.read_beir_qrels, "test.tsv", "q1\td1\t1\nq1\td1\t2\n", 2, "duplicate (qid, docid) ('q1', 'd1')"),
    (F.read_trec_qrels, "qrels.txt", "q1 0 d1 1\nq1 0 d2\n", 2, "wrong column count: expected 4"),
    (F.read_trec_qrels, "qrels.txt", "q1 0 d1 1.5\n", 1, "grade '1.5' is not an integer"),
    (F.read_trec_qrels, "qrels.txt", "q1 0 d1 inf\n", 1, "grade 'inf' is not a finite number"),
    (F.read_trec_qrels, "qrels.txt", "q1 0 d1 x\n", 1, "non-numeric grade 'x'"),
    (F.read_trec_qrels, "qrels.txt", "q1 0 d1 1\nq2 0 d1 1\nq1 0 d1 0\n", 3, "duplicate (qid, docid) ('q1', 'd1')"),
    (F.read_trec_run, "run.trec", "q1 Q0 d1 1 2.5 tag\nq1 Q0 d2 2 1.5\n", 2, "wrong column count: expected 6"),
    (F.read_trec_run, "run.trec", "q1 Q0 d1 1 abc tag\n", 1, "non-numeric score 'abc'"),
    (F.read_trec_run, "run.trec", "q1 Q0 d1 1 nan tag\n", 1, "score 'nan' is not a finite number"),
    (F.read_trec_run, "run.trec", "q1 Q0 d1 1 inf tag\n", 1, "score 'inf' is not a finite number"),
    (F.read_trec_run, "run.trec", "q1 Q0 d1 inf 1.0 tag\n", 1, "rank 'inf' is not a finite number"),
    (F.read_trec_run, "run.trec", "q1 Q0 d1 first 1.0 tag\n", 1, "non-numeric rank 'first'"),
    (
        F.read_trec_run,
        "run.trec",
        "q1 Q0 d1 1 2.0 t\nq1 Q0 d2 2 1.0 t\nq1 Q0 d1 3 0.5 t\n",
        3,
        "duplicate (qid, docid) ('q1', 'd1')",
    ),
    (F.read_topics_tsv, "topics.tsv", "1\tfirst query\n2 second query\n", 2, "wrong column count: expected 2"),
    (F.read_topics_tsv, "topics.tsv", "1\tfirst\tquery\n", 1, "wrong column count: expected 2"),
    (F.read_topics_tsv, "topics.tsv", "1\tfirst\n1\tagain\n", 2, "duplicate query id '1'"),
    (F.read_msmarco_collection, "collection.tsv", "0\tpassage zero\n1\n", 2, "wrong column count"),
    (F.read_msmarco_collection, "collection.tsv", "0\tpassage zero\n0\tagain\n", 2, "duplicate doc id '0'"),
]


@pytest.mark.parametrize("compress", [False, True], ids=["plain", "gz"])
@pytest.mark.parametrize(
    "reader,name,content,line,problem", MALFORMED, ids=[f"{m[0].__name__}-{i}" for i, m in enumerate(MALFORMED)]
)
def test_malformed_input_names_file_line_and_problem(tmp_path, reader, name, content, line, problem, compress):
    path = _write(tmp_path, name + (".gz" if compress else ""), content, compress)
    with pytest.raises(DataFormatError) as info:
        reader(path)
    err = info.value
    assert err.path == str(path) and err.line == line
    assert problem in err.problem
    msg = str(err)
    assert f"{path.name}:{line}: " in msg and problem in msg and "fix:" in msg


def test_qrels_for_unknown_query_is_reported_with_its_line(tmp_path):
    topics_path = _write(tmp_path, "topics.tsv", "q1\tfirst\nq2\tsecond\n")
    topics = F.read_topics_tsv(topics_path)
    trec = _write(tmp_path, "qrels.txt", "q1 0 d1 1\nq9 0 d2 1\n")
    with pytest.raises(DataFormatError) as info:
        F.read_trec_qrels(trec, topics, topics_path.name)
    assert info.value.line == 2 and "qrels for query 'q9' unknown to the topics (topics.tsv)" in str(info.value)
    beir = _write(tmp_path, "test.tsv", "query-id\tcorpus-id\tscore\nq2\td1\t1\nq7\td1\t1\n")
    with pytest.raises(DataFormatError) as info:
        F.read_beir_qrels(beir, topics)
    assert "test.tsv:3:" in str(info.value) and "'q7'" in str(info.value)
    # the separate check (data loaded apart) names the query and both files
    with pytest.raises(DataFormatError) as info:
        F.check_qrels_topics({"q1": {"d": 1}, "q8": {"d": 1}}, topics, trec, topics_path)
    assert "'q8'" in str(info.value) and "qrels.txt" in str(info.value) and "topics.tsv" in str(info.value)
    F.check_qrels_topics({"q1": {"d": 1}}, topics, trec, topics_path)


def test_invalid_utf8_and_corrupt_gzip(tmp_path):
    bad = tmp_path / "topics.tsv"
    bad.write_bytes(b"1\tok\n2\t\xff\xfe broken\n")
    with pytest.raises(DataFormatError) as info:
        F.read_topics_tsv(bad)
    assert info.value.line == 2 and "not valid UTF-8" in str(info.value)
    full = gzip.compress(("".join(f"{i}\tquery number {i}\n" for i in range(5000))).encode(), mtime=0)
    cut = tmp_path / "topics.tsv.gz"
    cut.write_bytes(full[: len(full) // 2])
    with pytest.raises(DataFormatError) as info:
        F.read_topics_tsv(cut)
    assert "topics.tsv.gz" in str(info.value) and "gzip" in str(info.value)


def test_missing_file_is_a_data_error(tmp_path):
    with pytest.raises(HarnessError, match="file not found"):
        F.read_trec_run(tmp_path / "nope.trec")


def test_valid_files_plain_and_gz(tmp_path):
    for compress in (False, True):
        sfx = ".gz" if compress else ""
        corpus = F.read_beir_corpus(_write(tmp_path, "c.jsonl" + sfx, CORPUS_OK, compress))
        assert corpus == {"d1": {"title": "T1", "text": "one"}, "2": {"title": "", "text": "two"}}
        queries = F.read_beir_queries(
            _write(tmp_path, "q.jsonl" + sfx, '{"_id": "q1", "text": "hello", "metadata": {}}\n', compress)
        )
        assert queries == {"q1": "hello"}
        qrels = F.read_beir_qrels(
            _write(tmp_path, "t.tsv" + sfx, "query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\t2\t0\n", compress)
        )
        assert qrels == {"q1": {"d1": 1, "2": 0}}
        assert F.read_trec_qrels(_write(tmp_path, "q.txt" + sfx, "q1 0 d1 2\r\nq2 Q0 d3 0\n", compress)) == {
            "q1": {"d1": 2},
            "q2": {"d3": 0},
        }
        assert F.read_topics_tsv(_write(tmp_path, "t.tsv" + sfx, "\ufeff1\tfirst q\n2\tsecond\n", compress)) == {
            "1": "first q",
            "2": "second",
        }
        coll = F.read_msmarco_collection(_write(tmp_path, "coll.tsv" + sfx, "0\tzero\r here\n1\tone\n", compress))
        assert coll == {"0": {"title": "", "text": "zero\r here"}, "1": {"title": "", "text": "one"}}
    # header-less BEIR qrels (as in the smoke subset) and auto-detection
    assert F.read_qrels(_write(tmp_path, "h.tsv", "q1\td1\t1\n")) == {"q1": {"d1": 1}}
    assert F.read_qrels(_write(tmp_path, "t.txt", "q1 0 d1 3\n")) == {"q1": {"d1": 3}}


def test_run_round_trip_is_deterministic(tmp_path):
    run = {"q2": {"a": 1.0, "b": 3.25, "c": 1.0}, "q1": {"z": 0.1 + 0.2}}
    path = F.write_trec_run(run, tmp_path / "run.trec", tag="bm25")
    lines = path.read_text().splitlines()
    assert lines[0] == f"q1 Q0 z 1 {0.1 + 0.2!r} bm25"
    assert [ln.split()[2] for ln in lines[1:]] == ["b", "a", "c"]  # score desc, ties by doc id
    assert [ln.split()[3] for ln in lines[1:]] == ["1", "2", "3"]
    assert F.read_trec_run(path) == run  # scores survive exactly
    gz = F.write_trec_run(run, tmp_path / "run.trec.gz", depth=2)
    assert gz.read_bytes() == F.write_trec_run(run, tmp_path / "again.trec.gz", depth=2).read_bytes()
    assert F.read_trec_run(gz) == {"q1": {"z": 0.1 + 0.2}, "q2": {"b": 3.25, "a": 1.0}}
    assert not [p for p in tmp_path.iterdir() if is_temp(p)]
    with pytest.raises(ValueError):
        F.write_trec_run(run, tmp_path / "x.trec", tag="two words")
    qrels = {"q1": {"d1": 1}, "q0": {"d2": 0}}
    assert F.read_trec_qrels(F.write_trec_qrels(qrels, tmp_path / "qrels.txt")) == qrels
