"""Passages written as a stream, resumable by shard (harness.corpus.passage_shards): the same file as
build_passages + save_passages, byte for byte; a build killed after shard k resumes from shard k + 1
and gives the same file; a pool of N worker processes writes the bytes one process writes."""

from __future__ import annotations

import random

import pytest

from harness.core.errors import HarnessError
from harness.corpus.passage_shards import write_passages
from harness.corpus.passages import build_passages, save_passages
from harness.corpus.tokenizer import train_wordpiece
from harness.stages.graph import STAGES

WORDS = "aspirin stroke risk vitamin blood levels trial patients placebo dose effect cohort mortality insulin".split()


def corpus(n: int = 57) -> dict[str, dict[str, str]]:
    rng = random.Random(3)

    def sentence() -> str:
        return " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 40))).capitalize() + ". "

    docs = {
        f"d{i}": {"title": f"Study {i}" if i % 4 else "", "text": "".join(sentence() for _ in range(rng.randint(0, 9)))}
        for i in range(n)
    }
    docs["Dr. Smith"] = {"title": "", "text": "Dr. Smith et al. found no effect. The trial was stopped."}
    return docs


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    from transformers import AutoTokenizer

    texts = [d["title"] + " " + d["text"] for d in corpus().values()]
    return AutoTokenizer.from_pretrained(
        str(train_wordpiece(texts, tmp_path_factory.mktemp("wp"), vocab_size=80, min_frequency=1))
    )


@pytest.mark.parametrize("short_span_prob", [0.0, 0.3])
def test_stream_writes_the_file_build_passages_writes(tok, tmp_path, short_span_prob):
    docs = corpus()
    want = tmp_path / "want.jsonl"
    save_passages(
        build_passages(
            docs,
            tok,
            24,
            seed=5,
            short_span_prob=short_span_prob,
            punkt_cache_dir=tmp_path / "w0",
            punkt_train_chars=3000,
        ),
        want,
    )
    got = tmp_path / "got.jsonl"
    counts = write_passages(
        lambda: iter(docs.items()),
        tok,
        got,
        tmp_path / "w1",
        24,
        seed=5,
        short_span_prob=short_span_prob,
        punkt_train_chars=3000,
        shard_docs=10,
    )
    assert got.read_bytes() == want.read_bytes()
    lines = want.read_text().splitlines()
    assert 1 <= counts.pop("workers") <= 6  # 6 shards
    assert counts == {
        "passages": len(lines),
        "corpus_documents": len(docs),
        "documents": len({line.split('"doc_id": ')[1].split(",")[0] for line in lines}),
    }
    assert not (tmp_path / "w1" / "shards-10").exists()  # the shards are joined, then removed


def test_a_build_killed_after_shard_k_resumes_from_shard_k_plus_1(tok, tmp_path, monkeypatch):
    docs = corpus()
    work, out = tmp_path / "work", tmp_path / "passages.jsonl"
    reads: list[str] = []

    def stream():
        yield from docs.items()

    class Killed(Exception):
        pass

    def kill_after_2(k: int) -> None:
        if k == 2:
            raise Killed

    with pytest.raises(Killed):
        write_passages(stream, tok, out, work, 24, shard_docs=10, workers=1, after_shard=kill_after_2)
    assert not out.exists()
    assert sorted(p.name for p in (work / "shards-10").glob("part-*.json")) == [
        "part-000000.json",
        "part-000001.json",
        "part-000002.json",
    ]

    import harness.corpus.passage_shards as shards

    real = shards.group_sentences

    def counting(sentences, *args, **kwargs):
        reads.append(sentences[0] if sentences else "")
        return real(sentences, *args, **kwargs)

    monkeypatch.setattr(shards, "group_sentences", counting)
    finished: list[int] = []
    write_passages(stream, tok, out, work, 24, shard_docs=10, workers=1, after_shard=finished.append)
    assert finished == [3, 4, 5]  # shards 0-2 were not split again
    assert len(reads) == len(docs) - 30
    fresh = tmp_path / "fresh.jsonl"
    write_passages(stream, tok, fresh, tmp_path / "fresh-work", 24, shard_docs=10, workers=1)
    assert out.read_bytes() == fresh.read_bytes()


def test_repeated_document_ids_are_refused(tok, tmp_path):
    docs = [("a", {"title": "", "text": "One. Two."}), ("a", {"title": "", "text": "Three."})]
    with pytest.raises(HarnessError, match="'a' occurs twice"):
        write_passages(lambda: iter(docs), tok, tmp_path / "p.jsonl", tmp_path / "w", 24)


def test_the_passages_stage_keeps_its_work_folder_to_resume():
    assert STAGES["passages"].resumable


def test_n_workers_write_the_bytes_one_process_writes(tok, tmp_path):
    docs = corpus(140)
    files, counts = {}, {}
    for n in (1, 3):
        files[n] = tmp_path / f"p{n}.jsonl"
        counts[n] = write_passages(
            lambda: iter(docs.items()),
            tok,
            files[n],
            tmp_path / f"w{n}",
            24,
            short_span_prob=0.3,
            shard_docs=9,  # 16 shards
            workers=n,
        )
    assert files[3].read_bytes() == files[1].read_bytes()
    assert counts[1]["workers"] == 1 and counts[3]["workers"] == 3
    assert {k: v for k, v in counts[3].items() if k != "workers"} == {
        k: v for k, v in counts[1].items() if k != "workers"
    }


def test_a_pool_build_killed_mid_way_resumes_to_the_same_bytes(tok, tmp_path):
    docs = corpus(80)

    class Killed(Exception):
        pass

    def kill_after_1(k: int) -> None:
        if k == 1:
            raise Killed

    work, out = tmp_path / "work", tmp_path / "passages.jsonl"
    with pytest.raises(Killed):
        write_passages(
            lambda: iter(docs.items()), tok, out, work, 24, shard_docs=10, workers=2, after_shard=kill_after_1
        )
    done = sorted(p.name for p in (work / "shards-10").glob("part-*.json"))
    assert done[:2] == ["part-000000.json", "part-000001.json"] and len(done) < 9  # stopped, not run out
    finished: list[int] = []
    counts = write_passages(
        lambda: iter(docs.items()), tok, out, work, 24, shard_docs=10, workers=2, after_shard=finished.append
    )
    assert finished == sorted(finished) and set(finished).isdisjoint(int(n[5:11]) for n in done)
    fresh = tmp_path / "fresh.jsonl"
    write_passages(lambda: iter(docs.items()), tok, fresh, tmp_path / "fresh-work", 24, shard_docs=10, workers=1)
    assert out.read_bytes() == fresh.read_bytes()
    assert counts["corpus_documents"] == len(docs)


def test_a_failing_shard_stops_the_pool_with_its_error(tok, tmp_path, monkeypatch):
    import harness.corpus.passage_shards as shards

    real = shards.group_sentences

    def fails_on_boom(sentences, *args, **kwargs):  # inherited by the forked workers
        if "Boom." in sentences:
            raise ValueError("boom in a worker")
        return real(sentences, *args, **kwargs)

    monkeypatch.setattr(shards, "group_sentences", fails_on_boom)
    docs = [(f"d{i}", {"title": "", "text": "One. Two." if i != 12 else "Boom."}) for i in range(30)]
    with pytest.raises(ValueError, match="boom in a worker"):
        write_passages(lambda: iter(docs), tok, tmp_path / "p.jsonl", tmp_path / "w", 24, shard_docs=5, workers=2)
    assert not (tmp_path / "w" / "shards-5" / "part-000002.json").exists()
    docs[12] = ("d3", {"title": "", "text": "x"})
    with pytest.raises(HarnessError, match="'d3' occurs twice"):  # found while this process reads ahead
        write_passages(lambda: iter(docs), tok, tmp_path / "p.jsonl", tmp_path / "v", 24, shard_docs=5, workers=2)


@pytest.mark.parametrize(
    ("environ", "cores", "want"), [({}, 4, 4), ({"HARNESS_PASSAGE_WORKERS": "2"}, 8, 2), ({}, 1, 1)]
)
def test_the_workers_are_the_cores_this_process_may_use_unless_told(monkeypatch, environ, cores, want):
    import harness.corpus.passage_shards as shards

    monkeypatch.setattr(shards, "available_cores", lambda env: (cores, "test"))
    assert shards.worker_count(environ) == want


def test_the_workers_follow_harness_threads():
    from harness.corpus.passage_shards import worker_count

    assert worker_count({"HARNESS_THREADS": "3"}) == 3


def test_a_single_shard_or_one_worker_runs_inline(tok, tmp_path, monkeypatch):
    import harness.corpus.passage_shards as shards

    def no_pool(*args, **kwargs):
        raise AssertionError("a pool was started")

    monkeypatch.setattr(shards, "_pool_write", no_pool)
    docs = corpus(8)
    one_shard = write_passages(lambda: iter(docs.items()), tok, tmp_path / "a.jsonl", tmp_path / "a", 24, workers=4)
    assert one_shard["workers"] == 1
    one_core = write_passages(
        lambda: iter(docs.items()), tok, tmp_path / "b.jsonl", tmp_path / "b", 24, shard_docs=2, workers=1
    )
    assert one_core["workers"] == 1
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()


def test_a_bad_worker_count_is_refused():
    from harness.corpus.passage_shards import worker_count

    with pytest.raises(HarnessError, match="HARNESS_PASSAGE_WORKERS='0'"):
        worker_count({"HARNESS_PASSAGE_WORKERS": "0"})
