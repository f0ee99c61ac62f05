"""One encoding per (model, corpus): the corpus-vector cache (harness/retrieval/corpus_vectors.py) is keyed by
the corpus's files, not the benchmark's name, so MS MARCO's mining, dev, DL19 and DL20 searches with one
model read one encoding of the passages; the dry-run plan and the run's stage entries say which."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np

from harness.data.catalog import get_benchmark
from harness.run.runner import run_method

MSMARCO = ("msmarco-passage-train", "msmarco-dev", "dl19", "dl20")


def test_dense_paper_plan_encodes_the_msmarco_corpus_once_per_model(mirror, capsys):
    result = run_method("cocondenser", "paper", dry_run=True)
    out = capsys.readouterr().out
    searches = [e for e in result.stages if e["stage"] == "dense_retrieve"]
    by_model: dict[str, set[str]] = defaultdict(set)  # retriever -> the vectors its searches read
    for e in searches:
        bench, _, label = e["dataset"].split("/")
        assert bench in MSMARCO, e
        by_model["retriever1" if label == "mine" else label].add(e["vectors"])
    assert set(by_model) == {"retriever1", "retriever2"}
    # mining, dev, DL19 and DL20 with retriever 1 read one encoding; retriever 2's three searches another
    assert all(len(tags) == 1 for tags in by_model.values()) and len(set.union(*by_model.values())) == 2
    assert len({e["key"] for e in searches}) == len(searches)  # still one search (stage key) each
    mine = next(i for i, e in enumerate(result.stages, 1) if (e["dataset"] or "").endswith("/mine"))
    assert f"read by steps {mine}, " in out and f"those of step {mine} (not encoded again)" in out
    # the time projection counts each encoding once: two dense_retrieve encoding rows (mining and retriever
    # 2's first), and every search once, in its own "(search)" row
    timed = out.split("projection (per stage")[1].split("memory and disk of the data stages")[0]
    rows = [line for line in timed.splitlines() if line.strip().startswith("dense_retrieve/")]
    assert len([line for line in rows if "(search)" not in line]) == 2, timed
    assert len([line for line in rows if "(search)" in line]) == len(searches), timed
    # the footprint counts each encoding's disk once: two dense_retrieve rows write vectors (mining with
    # retriever 1 and retriever 2's first search), the others read them ("shared")
    footprint = out.split("memory and disk of the data stages")[1]
    projected = [line for line in footprint.splitlines() if line.strip().startswith("dense_retrieve/")]
    writing = [line for line in projected if "shared" not in line]
    assert len(projected) == 4 and len(writing) == 2, projected


def _tiny_encoder(folder: Path):
    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    from harness.retrieval.encoder import load_encoder

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *"the a of and to in is for what how".split()]
    folder.mkdir(parents=True)
    BertTokenizerFast(vocab={w: i for i, w in enumerate(vocab)}).save_pretrained(folder)
    torch.manual_seed(0)
    BertModel(
        BertConfig(
            vocab_size=len(vocab),
            hidden_size=16,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=32,
            max_position_embeddings=64,
        )
    ).save_pretrained(folder)
    return load_encoder(folder, query_max_length=16, passage_max_length=16)


def test_benchmarks_over_one_corpus_read_one_encoding(mirror, tmp_path):
    from harness.retrieval.corpus_vectors import corpus_embeddings, embeddings_key
    from harness.stages.checkpoints import model_fingerprint

    encoder = _tiny_encoder(tmp_path / "model")
    fingerprint = model_fingerprint(tmp_path / "model")
    infos, vectors = {}, {}
    for name in MSMARCO:
        ids, emb, infos[name] = corpus_embeddings(encoder, get_benchmark(name), fingerprint, 64, show_progress=False)
        vectors[name] = (ids, np.array(emb))
    assert [infos[n]["cached"] for n in MSMARCO] == [False, True, True, True]  # encoded by the first only
    assert len({infos[n]["key"] for n in MSMARCO}) == 1
    # the batching the vectors were encoded with, kept in the cache for the searches that read them (a CPU's)
    assert all(
        infos[n]["batching"] == {"sorted_by": "characters", "order": "longest first", "batch_size": 64} for n in MSMARCO
    )
    assert all(
        vectors[n][0] == vectors[MSMARCO[0]][0] and np.array_equal(vectors[n][1], vectors[MSMARCO[0]][1])
        for n in MSMARCO
    )
    # another corpus (a BEIR set) is another encoding
    assert embeddings_key(fingerprint, encoder, get_benchmark("scifact")) != infos["dl19"]["key"]
