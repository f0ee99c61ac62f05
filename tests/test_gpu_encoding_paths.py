"""The CUDA encoding and search paths, run on a CPU: token-sorted large batches put back in input order,
and faiss moved to the GPUs when a GPU faiss is present (a fake faiss module stands in for one)."""

from __future__ import annotations

import sys
import types
from typing import Any

import faiss
import numpy as np
import pytest
import torch

from harness.retrieval import dense
from harness.retrieval import encoder as encoder_mod
from harness.retrieval.encoder import (
    CUDA_BATCH_SIZE,
    DEFAULT_BATCH_SIZE,
    Encoder,
    default_batch_size,
    length_batches,
    load_encoder,
)
from harness.retrieval.faiss_gpu import GPU_MAX_K, faiss_gpus, placement
from harness.retrieval.shard_encoding import encode_corpus_sharded
from harness.retrieval.shard_index import index_shards
from harness.retrieval.shard_search import search_merged
from tests.test_retrieval_dense_encoder import WORDS, make_tiny_bert

# Token-sorted batches are padded to other widths than character-sorted ones; with the attention mask the
# vectors differ only by float rounding of other matmul shapes: 7.2e-7 at most here (entries up to 3.5); pinned at 1e-5.
ATOL = 1e-5
CUDA = torch.device("cuda")  # only named, never used: no GPU is needed


def _texts(n: int, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=int(rng.integers(1, 40)))) for _ in range(n)]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Any:
    return load_encoder(make_tiny_bert(tmp_path_factory.mktemp("tiny") / "tiny"))


def test_length_batches_are_a_longest_first_stable_permutation():
    lengths = [3, 7, 7, 1, 5, 7, 2]
    batches = length_batches(lengths, 3)
    order = np.concatenate(batches)
    assert [len(b) for b in batches] == [3, 3, 1]
    assert sorted(order.tolist()) == list(range(len(lengths)))
    assert order.tolist() == [1, 2, 5, 4, 0, 6, 3]  # ties (the three 7s) keep input order
    assert length_batches([], 4) == []


def test_a_cpu_encoder_batches_as_before_and_a_cuda_one_by_tokens(tiny):
    assert tiny.sort_by == "characters" and default_batch_size(tiny.device) == DEFAULT_BATCH_SIZE == 64
    assert tiny.batching() == {"sorted_by": "characters", "order": "longest first", "batch_size": 64}
    on_cuda = Encoder(tiny.spec, tiny.model, tiny.tokenizer, CUDA, "fp16")
    assert on_cuda.sort_by == "tokens" and default_batch_size(CUDA) == CUDA_BATCH_SIZE == 2048
    assert on_cuda.batching() == {"sorted_by": "tokens", "order": "longest first", "batch_size": 2048}


@pytest.mark.parametrize("window", [encoder_mod.SORT_WINDOW, 7])
def test_token_sorted_vectors_equal_the_unsorted_encoding_in_input_order(tiny, monkeypatch, window):
    """The CUDA path (sort_by "tokens") run on the CPU: each row equals that text encoded alone (no padding,
    no sorting), so the order is restored, and the whole matrix equals the CPU path's within ATOL."""
    monkeypatch.setattr(encoder_mod, "SORT_WINDOW", window)  # several windows: offsets restored too
    texts = _texts(41)
    cpu = tiny.encode(texts, batch_size=5, kind="passage", show_progress=False)
    alone = np.stack([tiny.encode([t], batch_size=1, kind="passage", show_progress=False)[0] for t in texts])
    tiny.sort_by = "tokens"
    try:
        by_tokens = tiny.encode(texts, batch_size=5, kind="passage", show_progress=False)
        queries = tiny.encode(texts, kind="query", show_progress=False)  # the CUDA default batch on a CPU
    finally:
        tiny.sort_by = "characters"
    assert by_tokens.dtype == np.float32 and by_tokens.shape == cpu.shape
    assert np.abs(by_tokens - alone).max() <= ATOL
    assert np.abs(by_tokens - cpu).max() <= ATOL
    assert not np.allclose(by_tokens[:-1], by_tokens[1:], atol=1e-3)  # distinct rows: a swap would show
    q_cpu = tiny.encode(texts, kind="query", show_progress=False)
    assert np.abs(queries - q_cpu).max() <= ATOL  # cut at 32 tokens either way


def test_the_cpu_path_is_unchanged_bit_for_bit(tiny):
    """What encode did before: character order, longest first, batches tokenised and padded by the tokenizer."""
    texts = _texts(23, seed=3)
    got = tiny.encode(texts, batch_size=4, kind="passage", show_progress=False)
    order = np.argsort(-np.array([len(t) for t in texts]), kind="stable")
    want = np.zeros_like(got)
    with torch.inference_mode():
        for i in range(0, len(texts), 4):
            idx = order[i : i + 4]
            enc = tiny.tokenizer(
                [texts[j] for j in idx], padding=True, truncation=True, max_length=64, return_tensors="pt"
            )
            want[idx] = tiny.model(**enc).last_hidden_state[:, 0].float().numpy()
    assert np.array_equal(got, want)


# ---------------------------------------------------------------------------- faiss on GPUs (faked)


class FakeGpuFaiss(types.ModuleType):
    """The real faiss-cpu plus the GPU entry points a GPU build has, recording what was moved or searched."""

    def __init__(self, gpus: int):
        super().__init__("faiss")
        self.gpus, self.moved, self.knn_gpu_calls = gpus, [], 0

    def __getattr__(self, name: str) -> Any:
        return getattr(faiss, name)

    def get_num_gpus(self) -> int:
        return self.gpus

    class StandardGpuResources:
        pass

    class GpuMultipleClonerOptions:
        shard = False

    def index_cpu_to_all_gpus(self, index: Any, co: Any = None) -> Any:
        self.moved.append((index.ntotal, co.shard))
        return faiss.clone_index(index)  # stands in for the GPU copy: same searches

    def knn_gpu(self, res: Any, xq: Any, xb: Any, k: int, metric: Any = None) -> Any:
        assert isinstance(res, FakeGpuFaiss.StandardGpuResources)
        self.knn_gpu_calls += 1
        return faiss.knn(xq, xb, k, metric=metric)


@pytest.fixture
def gpu_faiss(monkeypatch) -> FakeGpuFaiss:
    fake = FakeGpuFaiss(2)
    monkeypatch.setitem(sys.modules, "faiss", fake)
    return fake


def _vectors(n: int = 300, dim: int = 16, seed: int = 0) -> tuple[list[str], np.ndarray, list[str], np.ndarray]:
    rng = np.random.default_rng(seed)
    docs = rng.standard_normal((n, dim)).astype(np.float32)
    queries = rng.standard_normal((9, dim)).astype(np.float32)
    return [f"d{i}" for i in range(n)], docs, [f"q{i}" for i in range(9)], queries


def test_gpu_faiss_is_used_only_on_a_cuda_run_with_a_gpu_build(gpu_faiss, monkeypatch):
    assert faiss_gpus(CUDA) == 2 and faiss_gpus("cuda:1") == 2
    assert faiss_gpus(torch.device("cpu")) == 0 and faiss_gpus(None) == 0  # a CPU run stays on the CPU
    assert faiss_gpus(CUDA, k=GPU_MAX_K + 1) == 0
    assert placement(2) == "2 GPUs (faiss GPU)" and placement(1) == "1 GPU (faiss GPU)"
    assert placement(0, CUDA, GPU_MAX_K + 1) == f"cpu (k {GPU_MAX_K + 1} > faiss GPU's {GPU_MAX_K})"
    monkeypatch.setitem(sys.modules, "faiss", faiss)  # faiss-cpu, as installed: no StandardGpuResources
    assert faiss_gpus(CUDA) == 0 and placement(0, CUDA) == "cpu (faiss-cpu)" and placement(0) == "cpu"


def test_the_merged_index_moves_to_the_gpus_and_the_label_says_so(gpu_faiss, capsys):
    doc_ids, docs, qids, queries = _vectors()
    cpu_run, cpu_stats = search_merged(doc_ids, docs, qids, queries, k=10)
    assert gpu_faiss.moved == [] and cpu_stats["index_device"] == "cpu"
    assert cpu_stats["index"] == "faiss.IndexFlatIP (exact inner product, fp32)"  # the CPU label as before
    run, stats = search_merged(doc_ids, docs, qids, queries, k=10, device=CUDA)
    assert gpu_faiss.moved == [(300, True)]  # the exact index, sharded over every GPU
    assert stats["index_device"] == "2 GPUs (faiss GPU)" and stats["index"].endswith("on 2 GPUs (faiss GPU)")
    assert "on 2 GPUs (faiss GPU): 300 x 16 x 4 B" in capsys.readouterr().out
    assert run == cpu_run
    _, fp16_stats = search_merged(doc_ids, docs, qids, queries, k=10, fp16=True, device=CUDA)
    assert fp16_stats["index_device"] == "cpu (fp16 storage)"
    assert len(gpu_faiss.moved) == 1  # fp16 storage stays on the CPU


def test_stored_vectors_are_searched_on_a_gpu_with_knn_gpu(gpu_faiss):
    doc_ids, docs, qids, queries = _vectors(n=2500)
    cpu_run, cpu_stats = dense.retrieve_vectors(qids, queries, doc_ids, docs, k=20, rows=1024)
    assert gpu_faiss.knn_gpu_calls == 0 and cpu_stats["index_device"] == "cpu"
    run, stats = dense.retrieve_vectors(qids, queries, doc_ids, docs, k=20, rows=1024, device=CUDA)
    assert gpu_faiss.knn_gpu_calls == 3  # one per chunk of 1,024 rows
    assert stats["index_device"] == "1 GPU (faiss GPU)" and stats["index"].endswith(", on 1 GPU (faiss GPU)")
    assert run == cpu_run
    _, deep = dense.retrieve_vectors(qids, queries, doc_ids, docs, k=GPU_MAX_K + 1, device=CUDA)
    assert deep["index_device"] == f"cpu (k {GPU_MAX_K + 1} > faiss GPU's {GPU_MAX_K})"


def test_dense_retrieve_and_shard_indexes_move_to_the_gpus(gpu_faiss, tmp_path, tiny):
    doc_ids, docs, qids, queries = _vectors()
    run, stats = dense.dense_retrieve(qids, queries, doc_ids, docs, k=5, device=CUDA)
    assert gpu_faiss.moved == [(300, True)] and stats["index_device"] == "2 GPUs (faiss GPU)"
    assert run == dense.dense_retrieve(qids, queries, doc_ids, docs, k=5)[0]
    corpus = {f"d{i}": {"title": "", "text": t} for i, t in enumerate(_texts(30))}
    encode_corpus_sharded(tiny, corpus, tmp_path / "chunks", rank=0, world_size=1, shard_size=8)
    ids, index, label = index_shards(tmp_path / "chunks", device=CUDA)
    assert gpu_faiss.moved[-1] == (30, True) and label.endswith("on 2 GPUs (faiss GPU)") and len(ids) == 30
