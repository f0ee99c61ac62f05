"""Sharded, resumable corpus encoding (harness.retrieval.shard_*; its command line: harness.evaluation.sharded).

Fast tests run the ranks one after another in this process on a toy corpus with a tiny
random-init BERT. The slow test goes the whole way on the DL19 smoke subset (5,000 real MS MARCO
passages): download from a local mirror (checksummed) -> 2 gloo processes under torchrun -> one
run killed (SIGKILL of a worker once it has written a chunk) -> resumed -> merged -> searched ->
scored, and checks files, embeddings and metrics are identical to an uninterrupted run and the
embeddings match the single-process path.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from harness.core.errors import HarnessError
from harness.core.fsutil import is_temp, temp_name
from harness.retrieval.encoder import load_encoder
from harness.retrieval.shard_distributed import encode_distributed
from harness.retrieval.shard_encoding import ShardReport, encode_corpus_sharded
from harness.retrieval.shard_index import index_shards
from harness.retrieval.shard_layout import corpus_fingerprint, encoder_fingerprint
from harness.retrieval.shard_manifest import shards_complete
from harness.retrieval.shard_merge import merge_shards
from harness.retrieval.shard_search import search_merged

PROJECT_ROOT = Path(__file__).resolve().parent.parent
WORDS = "apple banana cherry grape lemon mango melon peach pear plum red yellow green sweet sour fruit tree".split()
THROTTLE_ENV = "SHARDED_TEST_THROTTLE_S"  # the killed run's workers sleep this long per chunk


def make_tiny_bert(folder: Path, tokenizer_from: Path | None = None) -> Path:
    """A random-init 2-layer BERT folder; with ``tokenizer_from``, that folder's (real) vocabulary."""
    from transformers import AutoTokenizer, BertConfig, BertModel, BertTokenizerFast

    folder.mkdir(parents=True, exist_ok=True)
    if tokenizer_from is not None:
        tok = AutoTokenizer.from_pretrained(str(tokenizer_from), local_files_only=True)
    else:
        vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]
        tok = BertTokenizerFast(vocab={w: i for i, w in enumerate(vocab)})
    tok.save_pretrained(folder)
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(tok),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=160,
        initializer_range=0.2,
    )
    BertModel(config).save_pretrained(folder)
    return folder


def toy_corpus(n: int = 23, seed: int = 0) -> dict[str, dict[str, str]]:
    rng = random.Random(seed)
    return {
        f"d{i}": {
            "title": rng.choice(["", "fruit", "tree"]),
            "text": " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 30))),
        }
        for i in range(n)
    }


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return make_tiny_bert(tmp_path_factory.mktemp("models") / "tiny")


@pytest.fixture(scope="module")
def encoder(model_dir):
    return load_encoder(model_dir)


def encode_all(encoder, corpus, out, world_size=2, **kw) -> list[ShardReport]:
    kw = {"shard_size": 4, "batch_size": 3, "show_progress": False, **kw}
    return [encode_corpus_sharded(encoder, corpus, out, rank=r, world_size=world_size, **kw) for r in range(world_size)]


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if not p.name.startswith(".")}


# ---------------------------------------------------------------------------- fast


def test_sharded_equals_single_process_path(encoder, tmp_path):
    corpus = toy_corpus()
    reports = encode_all(encoder, corpus, tmp_path / "s", world_size=3)
    assert [(r.start, r.end) for r in reports] == [(0, 7), (7, 15), (15, 23)]  # contiguous, disjoint, covering
    assert [r.chunks for r in reports] == [2, 2, 2] and all(r.chunks_skipped == 0 for r in reports)
    ids, emb = merge_shards(tmp_path / "s")
    ref_ids, ref = encoder.encode_corpus(corpus, batch_size=5, show_progress=False)
    assert ids == ref_ids == list(corpus)
    assert emb.dtype == np.float32 and emb.shape == (23, 32)
    np.testing.assert_allclose(emb, ref, atol=1e-5, rtol=0)
    names = sorted(p.name for p in (tmp_path / "s").iterdir() if not p.name.startswith(".lock"))
    assert "manifest.json" in names and "rank2-chunk00001.npy" in names and "rank2-chunk00001.json" in names
    assert not [n for n in names if is_temp(n)]
    manifest = json.loads((tmp_path / "s" / "manifest.json").read_text())
    assert (manifest["world_size"], manifest["shard_size"], manifest["passages"]) == (3, 4, 23)
    assert manifest["corpus"] == corpus_fingerprint(corpus)
    assert manifest["encoder"] == encoder_fingerprint(encoder)


class _ToyBenchmark:
    name = "toy"

    def __init__(self, corpus):
        self._corpus = corpus

    def corpus(self):
        return self._corpus

    def iter_corpus(self):
        return iter(self._corpus.items())

    def corpus_files(self):
        return {"corpus": "toy"}

    def sub_benchmarks(self):
        return []


class _StreamOnlyBenchmark(_ToyBenchmark):
    """A benchmark whose corpus can only be streamed: the cached path must never ask for the dict."""

    def corpus(self):
        raise AssertionError("the whole corpus dict was asked for")


@pytest.mark.parametrize("world_size", [1, 2, 3])
def test_a_streamed_corpus_writes_the_files_a_dict_writes(encoder, tmp_path, world_size):
    """encode_corpus_sharded reads a stream (iter_corpus) one chunk at a time: the manifest and every chunk
    file are the bytes the dict gives, whatever the ranks' layout (23 passages, chunks of 4)."""
    corpus = toy_corpus()
    encode_all(encoder, corpus, tmp_path / "dict", world_size=world_size)
    reads = []

    def stream():
        reads.append(1)
        return iter(corpus.items())

    encode_all(encoder, stream, tmp_path / "stream", world_size=world_size)
    assert snapshot(tmp_path / "stream") == snapshot(tmp_path / "dict")
    assert len(reads) == world_size * (2 if world_size == 1 else 3)  # survey (+ ids), encode: per rank


def test_a_stream_that_changes_between_passes_is_refused(encoder, tmp_path):
    corpus = toy_corpus()
    changed = {k if k != "d6" else "x6": v for k, v in corpus.items()}  # the second pass renames one id
    sources = iter([corpus.items(), changed.items()])
    with pytest.raises(HarnessError, match="corpus changed while .*chunk rank0-chunk00001"):
        encode_corpus_sharded(
            encoder, lambda: iter(next(sources)), tmp_path, rank=0, world_size=1, shard_size=4, show_progress=False
        )


def test_a_corpus_of_one_chunk_is_encoded_as_one_call_byte_for_byte(encoder, tmp_path, monkeypatch):
    """Tiny and mini corpora fit in one chunk (CHUNK_PASSAGES): the streamed, cached path sorts the same
    window longest first and gives the very vectors Encoder.encode_corpus gives for the whole dict."""
    from harness.retrieval import corpus_vectors

    monkeypatch.setattr(corpus_vectors, "CHUNK_PASSAGES", 23)
    bench = _StreamOnlyBenchmark(toy_corpus())
    ids, emb, info = corpus_vectors.corpus_embeddings(encoder, bench, "fp", 5, show_progress=False)
    ref_ids, ref = encoder.encode_corpus(toy_corpus(), batch_size=5, show_progress=False)
    assert ids == ref_ids and not info["cached"]
    assert np.asarray(emb).tobytes() == ref.tobytes()
    cached = corpus_vectors.corpus_embeddings(encoder, bench, "fp", 5, show_progress=False)
    assert cached[2]["cached"] and np.asarray(cached[1]).tobytes() == ref.tobytes()


def test_chunks_of_torchrun_ranks_are_merged_by_the_zero_shot_cache(encoder, tmp_path, monkeypatch, capsys):
    """What `reproduce` under torchrun does: ranks 0 and 1 encode their slices into the cache's
    chunk folder, then the single-process path merges them instead of encoding again."""
    from harness.retrieval import corpus_vectors as zero_shot

    monkeypatch.setattr(zero_shot, "CHUNK_PASSAGES", 5)
    bench = _ToyBenchmark(toy_corpus())
    zero_shot.encode_corpus_shards(encoder, bench, "fp", 3, rank=1, world_size=2, show_progress=False)
    chunks = next((tmp_path / "cache" / "embeddings").glob(".*.partial.tmp"))  # the cache folder's work folder
    assert not shards_complete(chunks)  # rank 0 has not run
    zero_shot.encode_corpus_shards(encoder, bench, "fp", 3, rank=0, world_size=2, show_progress=False)
    assert shards_complete(chunks)
    capsys.readouterr()
    ids, emb, info = zero_shot.corpus_embeddings(encoder, bench, "fp", 3, show_progress=False)
    assert "[sharded]" not in capsys.readouterr().err  # merged, nothing encoded again
    ref_ids, ref = encoder.encode_corpus(bench.corpus(), batch_size=3, show_progress=False)
    assert ids == ref_ids and not info["cached"] and not chunks.exists()
    np.testing.assert_allclose(emb, ref, atol=1e-5, rtol=0)
    zero_shot.encode_corpus_shards(encoder, bench, "fp", 3, rank=0, world_size=2, show_progress=False)
    assert not chunks.exists()  # cached embeddings: nothing to encode


def test_rank_and_world_size_come_from_the_environment(encoder, tmp_path, monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    report = encode_corpus_sharded(encoder, toy_corpus(), tmp_path, shard_size=4, show_progress=False)
    assert (report.rank, report.world_size, report.start, report.end) == (1, 2, 11, 23)
    with pytest.raises(HarnessError, match="chunk rank0-chunk00000 .* missing"):
        merge_shards(tmp_path)  # rank 0 never ran


def test_resume_skips_complete_chunks_and_is_byte_identical(encoder, tmp_path):
    corpus, out = toy_corpus(), tmp_path / "s"
    encode_all(encoder, corpus, out)
    before = snapshot(out)
    # A kill mid-chunk: the chunk's files are absent and a writer's temp file may be left behind.
    for suffix in (".npy", ".json"):
        (out / f"rank1-chunk00001{suffix}").unlink()
    temp_name(out / "rank1-chunk00001.npy").write_bytes(b"half a file")
    (out / ".rank1-chunk00001.json.x1y2.tmp").write_bytes(b"{")  # an older writer's name
    again = encode_all(encoder, corpus, out)
    assert (again[0].chunks_skipped, again[0].passages_encoded) == (3, 0)
    assert (again[1].chunks_skipped, again[1].passages_encoded) == (2, 4)
    assert snapshot(out) == before
    assert not [p for p in out.iterdir() if is_temp(p)]


@pytest.mark.parametrize(
    "change, expected",
    [
        ({"shard_size": 5}, "shard_size 4 -> 5"),
        ({"world_size": 3}, "world size 2 -> 3"),
        ({"batch_size": 8}, "batch_size 3 -> 8"),
        ({"corpus": "edit"}, "corpus "),
    ],
)
def test_other_settings_are_refused_in_one_line(encoder, tmp_path, change, expected):
    corpus = toy_corpus()
    encode_all(encoder, corpus, tmp_path)
    kw = {"shard_size": 4, "batch_size": 3, "world_size": 2, "show_progress": False, **change}
    if kw.pop("corpus", None):
        corpus = {**corpus, "d5": {"title": "", "text": "a changed passage"}}
    with pytest.raises(HarnessError) as err:
        encode_corpus_sharded(encoder, corpus, tmp_path, rank=0, **kw)
    assert expected in str(err.value) and "other settings" in str(err.value) and "\n" not in str(err.value)


def test_merge_refuses_missing_or_disagreeing_chunks(encoder, tmp_path):
    out = tmp_path / "s"
    encode_all(encoder, toy_corpus(), out)
    saved = snapshot(out)

    (out / "rank0-chunk00001.json").unlink()
    with pytest.raises(HarnessError, match=r"chunk rank0-chunk00001 \(passages 4-8, rank 0\) is missing") as err:
        merge_shards(out)
    assert "\n" not in str(err.value)
    (out / "rank0-chunk00001.json").write_bytes(saved["rank0-chunk00001.json"])

    meta = json.loads(saved["rank1-chunk00000.json"])
    meta["ids"][0], meta["ids"][1] = meta["ids"][1], meta["ids"][0]
    (out / "rank1-chunk00000.json").write_text(json.dumps(meta))
    with pytest.raises(HarnessError, match="doc ids of chunk rank1-chunk00000 disagree"):
        merge_shards(out)
    (out / "rank1-chunk00000.json").write_bytes(saved["rank1-chunk00000.json"])

    rows = np.load(out / "rank1-chunk00002.npy")
    np.save(out / "rank1-chunk00002.npy", rows + 1)  # same header, other bytes: only the sha256 tells
    with pytest.raises(HarnessError, match="does not match the sha256"):
        merge_shards(out)


def test_progress_line_shows_rate_and_eta(encoder, tmp_path, capsys):
    encode_corpus_sharded(encoder, toy_corpus(), tmp_path, rank=0, world_size=1, shard_size=4, show_progress=True)
    err = capsys.readouterr().err
    assert "encode rank 0/1" in err and "passage/s" in err and "<" in err  # tqdm: [elapsed<eta, rate]
    assert "0 already complete, 23 passages to encode" in err and "passages/s)" in err


def test_index_memory_figure_and_fp16_label(encoder, tmp_path, capsys):
    corpus = toy_corpus(200)
    ids, emb = encoder.encode_corpus(corpus, show_progress=False)
    qids, q = encoder.encode_queries({"q1": "red apple", "q2": "sour lemon tree"}, show_progress=False)
    exact, stats32 = search_merged(ids, emb, qids, q, k=10)
    half, stats16 = search_merged(ids, emb, qids, q, k=10, fp16=True)
    out = capsys.readouterr().out
    assert "IndexFlatIP (exact inner product, fp32): 200 x 32 x 4 B = 25.0 KiB" in out
    assert "fp16" in stats16["index"] and "200 x 32 x 2 B = 12.5 KiB" in out
    assert stats32["index_bytes"] == 200 * 32 * 4 and stats16["index_bytes"] == 200 * 32 * 2
    for qid in qids:  # fp16 storage: the same top hit, scores within fp16 rounding
        assert next(iter(exact[qid])) == next(iter(half[qid]))
        for doc, score in half[qid].items():
            if doc in exact[qid]:
                assert score == pytest.approx(exact[qid][doc], abs=5e-3 * max(1.0, abs(score)))


def test_index_built_chunk_by_chunk_equals_the_merged_index(encoder, tmp_path, capsys):
    from harness.retrieval.dense import Shard, build_index, retrieve

    corpus = toy_corpus(50)
    encode_all(encoder, corpus, tmp_path / "s", world_size=3)
    qids, q = encoder.encode_queries({"q1": "red apple", "q2": "sour lemon tree"}, show_progress=False)
    ids, emb = merge_shards(tmp_path / "s")
    merged, _ = retrieve(qids, q, Shard(build_index(emb), ids), k=20)
    for fp16 in (False, True):
        s_ids, index, label = index_shards(tmp_path / "s", fp16=fp16)
        assert s_ids == ids and index.ntotal == 50 and ("fp16" in label) == fp16
        streamed, _ = retrieve(qids, q, Shard(index, s_ids), k=20)
        if not fp16:
            assert streamed == merged  # same vectors, same order: the same run
    assert "50 x 32 x 2 B = 3.1 KiB (built chunk by chunk)" in capsys.readouterr().out


def test_driver_without_torchrun_is_one_process_that_merges(model_dir, tmp_path):
    corpus = toy_corpus()
    result = encode_distributed(model_dir, corpus, tmp_path, shard_size=10, show_progress=False)
    assert (result.rank, result.world_size, len(result.reports)) == (0, 1, 1)
    assert result.doc_ids == list(corpus) and result.embeddings.shape == (23, 32)
    assert result.summary["passages_encoded"] == 23 and result.summary["chunks_skipped"] == 0
    again = encode_distributed(model_dir, corpus, tmp_path, shard_size=10, show_progress=False)
    assert again.summary["chunks_skipped"] == 3 and np.array_equal(again.embeddings, result.embeddings)


# ---------------------------------------------------------------------------- slow: end to end


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _torchrun(target: list[str], args: list[str]) -> list[str]:
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nnodes",
        "1",
        "--nproc_per_node",
        "2",
        "--master_addr",
        "127.0.0.1",
        "--master_port",
        str(_free_port()),
        *target,
        *args,
    ]


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)  # HARNESS_CACHE_DIR / HARNESS_RUNS_DIR: this test's tmp folders
    env["PYTHONPATH"] = f"{PROJECT_ROOT}{os.pathsep}{env.get('PYTHONPATH', '')}"
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1", **extra)
    return env


def _run(cmd: list[str], **extra: str) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, env=_env(**extra), capture_output=True, text=True, timeout=240, cwd=PROJECT_ROOT)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    return proc


def _complete(out: Path, rank: int) -> list[str]:
    return sorted(p.stem for p in out.glob(f"rank{rank}-chunk*.json"))


@pytest.fixture
def mirrored_corpus(tmp_path, monkeypatch) -> Path:
    """The smoke subset's corpus served from a local HARNESS_DATA_MIRROR, fetched and checksummed."""
    from harness.data import download, embedded

    rel = "msmarco-passage/dl19-relevant-subset/corpus.jsonl.gz"
    sha = embedded.manifest()[rel]["sha256"]
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    shutil.copy(embedded.path(rel), mirror / "corpus.jsonl.gz")
    monkeypatch.setenv(download.MIRROR_ENV, str(mirror))
    src = download.Source("msmarco-dl19-subset/corpus", download.MSMARCO_BASE_URL, "corpus.jsonl.gz", sha256=sha)
    assert src.url() == (mirror / "corpus.jsonl.gz").as_uri()
    path = download.fetch(src.url(), download.downloads_dir(), sha256=src.sha256)
    assert path.parent == download.downloads_dir() and download.recorded_sha256(path) == sha
    return path


@pytest.mark.slow
@pytest.mark.alone  # two ranks, killed mid-stage
def test_killed_and_resumed_two_process_run_equals_an_uninterrupted_one(tmp_path, mirrored_corpus):
    from harness.data.formats import iter_beir_corpus
    from harness.retrieval.encoder import load_zero_shot_encoder
    from harness.stages.checkpoints import packaged_checkpoint

    # Random-init tiny BERT with MiniLM's real WordPiece vocabulary: real passages give distinct vectors.
    model = make_tiny_bert(tmp_path / "tiny-real", tokenizer_from=Path(packaged_checkpoint("all-minilm-l6-v2")))
    corpus = dict(iter_beir_corpus(mirrored_corpus))
    assert len(corpus) == 5000
    common = [
        "--model",
        str(model),
        "--corpus",
        str(mirrored_corpus),
        "--dataset",
        "msmarco-dl19-subset",
        "--shard-size",
        "250",
        "--batch-size",
        "32",
        "--no-progress",
    ]
    full, resumed = tmp_path / "full", tmp_path / "resumed"

    started = time.monotonic()
    cli = ["-m", "harness.evaluation.sharded"]
    _run(_torchrun(cli, [*common, "--out", str(full), "--json", str(tmp_path / "full.json")]))
    full_seconds = time.monotonic() - started
    assert len(_complete(full, 0)) == len(_complete(full, 1)) == 10

    # The run to kill: this file as the torchrun script, whose workers sleep after each chunk.
    pids = tmp_path / "pids"
    cmd = _torchrun([__file__], [*common, "--out", str(resumed)])
    proc = subprocess.Popen(
        cmd,
        env=_env(**{THROTTLE_ENV: "0.5", "SHARDED_TEST_PIDS": str(pids)}),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        cwd=PROJECT_ROOT,
    )
    try:
        deadline = time.monotonic() + 120
        while not _complete(resumed, 1) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert _complete(resumed, 1), f"no chunk written by rank 1: {proc.poll()}"
        os.kill(int((pids / "rank1").read_text()), signal.SIGKILL)
        output, _ = proc.communicate(timeout=90)  # torchrun stops the other worker and fails
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode != 0, output[-3000:]
    done_before = len(_complete(resumed, 0)) + len(_complete(resumed, 1))
    assert 1 <= len(_complete(resumed, 1)) < 10 and done_before < 20  # killed mid-encoding

    _run(_torchrun(cli, [*common, "--out", str(resumed), "--json", str(tmp_path / "resumed.json")]))
    a = json.loads((tmp_path / "full.json").read_text())
    b = json.loads((tmp_path / "resumed.json").read_text())
    assert a["chunks_skipped"] == 0 and b["chunks_skipped"] == done_before
    assert b["passages_encoded"] == 5000 - 250 * done_before
    same = lambda ev: {k: v for k, v in ev.items() if k != "qps"}  # noqa: E731 (timing differs)
    assert same(b["evaluation"]) == same(a["evaluation"])  # identical nDCG@10 etc. (and index label)
    assert a["evaluation"]["primary"] == "nDCG@10" and 0 <= a["evaluation"]["metrics"]["nDCG@10"] <= 1
    assert snapshot(resumed) == snapshot(full)  # every chunk file and the manifest, byte for byte
    ids_a, emb_a = merge_shards(full)
    ids_b, emb_b = merge_shards(resumed)
    assert ids_a == ids_b == list(corpus) and np.array_equal(emb_a, emb_b)

    # The existing single-process path gives the same vectors.
    torch.set_num_threads(1)
    encoder = load_zero_shot_encoder(model)
    started = time.perf_counter()
    ref_ids, ref = encoder.encode_corpus(corpus, batch_size=32, show_progress=False)
    single_pps = len(ref_ids) / (time.perf_counter() - started)
    assert ref_ids == ids_a
    np.testing.assert_allclose(emb_a, ref, atol=1e-5, rtol=0)
    print(
        f"\nsharded: 2 ranks {a['passages_per_second']:,.0f} passages/s (encode only), whole torchrun "
        f"{full_seconds:.1f} s; single process, 1 thread: {single_pps:,.0f} passages/s"
    )


if __name__ == "__main__":  # a torchrun worker of the killed run: slow down, say who it is, run the CLI
    from harness.evaluation import sharded as sharded_cli
    from harness.retrieval.encoder import Encoder

    pid_dir = Path(os.environ["SHARDED_TEST_PIDS"])
    pid_dir.mkdir(parents=True, exist_ok=True)
    (pid_dir / f"rank{os.environ['RANK']}").write_text(str(os.getpid()))
    delay, plain_encode = float(os.environ[THROTTLE_ENV]), Encoder.encode

    def slow_encode(self, *args, **kwargs):
        out = plain_encode(self, *args, **kwargs)
        time.sleep(delay)
        return out

    Encoder.encode = slow_encode
    sys.exit(sharded_cli.main(sys.argv[1:]))
