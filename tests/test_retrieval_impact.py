"""Learned-sparse retrieval: encoding, top-k, quantisation, terms, and the impact index vs brute force."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import pytest
import torch

from harness.core.errors import HarnessError
from harness.retrieval.impact import (
    INDEX_INFO_FILE,
    brute_force_search,
    build_impact_index,
    encode_sparse,
    load_sparse_encoder,
    lucene_term,
    quantise,
    search_impact,
    sparsify_topk,
    write_vector_collection,
)
from harness.retrieval.splade_model import encode_splade_max, splade_max, write_lexical_settings

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_finetune_splade import VOCAB, make_tiny_mlm

TEXTS = ["apple pie.", "the sweet mango , lemons", "", "red", "banana tree juice seed sour . a"]


@pytest.fixture
def model_dir(tmp_path):
    folder = make_tiny_mlm(tmp_path / "splade", seed=5)
    write_lexical_settings(folder, query_max_length=8, passage_max_length=16, title_separator=" ")
    return folder


def test_quantise_floors_and_drops_zeros():
    assert quantise({"a": 1.234, "b": 0.009, "c": 0.0, "d": 2.0, "e": 0.29}) == {"a": 123, "d": 200, "e": 28}
    assert quantise({"a": 0.5}, scale=10) == {"a": 5}
    with pytest.raises(HarnessError, match="non-negative"):
        quantise({"a": -0.5})
    with pytest.raises(HarnessError, match="non-negative"):
        quantise({"a": float("nan")})


def test_sparsify_topk_keeps_the_k_largest():
    w = {"a": 0.1, "b": 2.0, "c": 0.7, "d": 1.5, "e": 0.7}
    assert sparsify_topk(w, 2) == {"b": 2.0, "d": 1.5}
    assert sparsify_topk(w, 3) == {"b": 2.0, "d": 1.5, "c": 0.7}  # tie with "e" broken by token
    assert sparsify_topk(w, 10) == w


def test_lucene_terms_are_kept_or_escaped_one_to_one():
    for token in ("##s", ".", ",", "[CLS]", "über", "$", "(", "a-b"):
        assert lucene_term(token) == token  # the whitespace analyzer keeps punctuation intact
    escaped = {t: lucene_term(t) for t in ("a b", "a\\u0020b", "c\td", "x\\y", "x\\\\y", "\u3000")}
    assert len(set(escaped.values())) == len(escaped)
    assert all(not any(ch.isspace() for ch in term) for term in escaped.values())
    with pytest.raises(HarnessError, match="empty"):
        lucene_term("")
    with pytest.raises(HarnessError, match="255"):
        lucene_term("x" * 300)


def test_encode_sparse_matches_the_model_and_topk_keeps_the_largest(model_dir):
    from transformers import AutoTokenizer, BertForMaskedLM

    vectors = encode_sparse(model_dir, TEXTS, kind="passage", batch_size=2, show_progress=False)
    model = BertForMaskedLM.from_pretrained(model_dir).eval()
    tok = AutoTokenizer.from_pretrained(model_dir)
    for text, got in zip(TEXTS, vectors):
        enc = tok([text], truncation=True, max_length=16, return_tensors="pt")
        with torch.no_grad():
            ref = splade_max(model(**enc).logits, enc["attention_mask"])[0]
        expected = {VOCAB[i]: float(ref[i]) for i in range(len(VOCAB)) if ref[i] > 0}
        assert got.keys() == expected.keys()
        assert all(got[t] == pytest.approx(expected[t], abs=1e-5) for t in got)
    assert any(len(v) > 5 for v in vectors)
    top = encode_sparse(model_dir, TEXTS, kind="passage", batch_size=3, topk=3, show_progress=False)
    for full, cut in zip(vectors, top):
        assert cut.keys() == sparsify_topk(full, 3).keys()
    # A loaded encoder is reused as is; queries use the folder's query length (8 tokens).
    enc = load_sparse_encoder(model_dir)
    assert enc.max_length("query", None) == 8 and enc.max_length("passage", None) == 16
    assert encode_sparse(enc, TEXTS[:2], kind="query", show_progress=False)[0]


def test_the_head_on_used_positions_only_gives_the_full_logits_max_exactly(model_dir):
    """Encoding runs the MLM head on the non-padding rows only: bit for bit the literal path's
    ``splade_max(model(**enc).logits, mask)`` on a padded batch (an empty text included)."""
    enc = load_sparse_encoder(model_dir)
    batch = enc.tokenizer(TEXTS, padding=True, truncation=True, max_length=16, return_tensors="pt")
    assert (batch["attention_mask"] == 0).any()  # padding present: the rows left out are real
    with torch.inference_mode():
        literal = splade_max(enc.model(**batch).logits, batch["attention_mask"])
        assert torch.equal(encode_splade_max(enc.model, batch), literal)
    with torch.no_grad():  # left padding takes the literal path
        flipped = {k: v.flip(1) for k, v in batch.items()}
        assert torch.equal(
            encode_splade_max(enc.model, flipped), splade_max(enc.model(**flipped).logits, flipped["attention_mask"])
        )


def test_encoding_refuses_a_folder_without_a_trained_head(tmp_path):
    folder = make_tiny_mlm(tmp_path / "enc", encoder_only=True)
    with pytest.raises(HarnessError, match="no MLM head"):
        encode_sparse(folder, ["apple"], show_progress=False)


def test_index_input_is_checked(tmp_path):
    with pytest.raises(HarnessError, match="not an integer"):
        build_impact_index({"d1": {"a": 1.5}}, tmp_path / "idx")
    with pytest.raises(HarnessError, match="nothing to index"):
        build_impact_index({"d1": {"a": 0}}, tmp_path / "idx2")
    with pytest.raises(HarnessError, match="no Lucene index"):
        search_impact(tmp_path, {"q": {"a": 1}})


def _hand_made() -> tuple[dict, dict]:
    """~20 documents over tokens Lucene could mistreat, plus a term present in every document."""
    rng = random.Random(7)
    tokens = [
        "apple",
        "##s",
        "##ing",
        ".",
        ",",
        "[CLS]",
        "[SEP]",
        "(",
        ")",
        "$",
        "über",
        "a-b",
        "x\\y",
        "a b",
        "c\td",
        "10",
        "the",
        "'",
    ]
    docs = {}
    for i in range(20):
        vec = {t: rng.randint(1, 40) for t in rng.sample(tokens, rng.randint(3, 9))}
        vec["everywhere"] = rng.randint(1, 5)  # idf 0: pyserini's default min_idf would drop it
        docs[f"doc{i:02d}"] = vec
    queries = {
        f"q{i}": {t: rng.randint(1, 30) for t in rng.sample(tokens + ["everywhere", "unseen"], 5)} for i in range(8)
    }
    queries["q-every"] = {"everywhere": 3}
    queries["q-empty"] = {}
    return docs, queries


@pytest.mark.slow
def test_impact_index_ranks_exactly_like_a_brute_force_dot_product(tmp_path, model_dir):
    docs, queries = _hand_made()
    # Model-encoded, quantised documents and queries share the index (real SPLADE vectors).
    texts = ["apple pie . sweet", "mango lemons , sour", "banana tree juice", "red cherry seed", "the a peach"]
    for i, v in enumerate(encode_sparse(model_dir, texts, show_progress=False)):
        docs[f"model{i}"] = {**quantise(v), "everywhere": 1}
    for i, v in enumerate(encode_sparse(model_dir, ["apple juice", "sour seed"], kind="query", show_progress=False)):
        queries[f"model-q{i}"] = quantise(v)
    docs["empty"] = {"apple": 0}

    stats = build_impact_index(docs, tmp_path / "index", threads=2)
    assert stats["documents"] == len(docs) - 1 and stats["empty_documents"] == 1
    assert stats["avg_doc_nonzeros"] == pytest.approx(
        sum(len(v) for k, v in docs.items() if k != "empty") / (len(docs) - 1)
    )
    assert stats["index_bytes"] > 0 and (tmp_path / "index" / INDEX_INFO_FILE).is_file()
    assert not (tmp_path / "index.collection").exists()

    run, search_stats = search_impact(tmp_path / "index", queries, k=100, threads=2)
    expected = brute_force_search(docs, queries, k=100)
    for qid in queries:
        assert run[qid] == expected[qid], qid  # same documents, same integer scores
        ranked = sorted(run[qid].items(), key=lambda kv: (-kv[1], kv[0]))
        assert [d for d, _ in ranked] == [d for d, _ in sorted(expected[qid].items(), key=lambda kv: (-kv[1], kv[0]))]
    assert run["q-empty"] == {}
    assert len(run["q-every"]) == len(docs) - 1  # the idf-0 term (in every document) was not dropped
    assert sum(len(r) for r in run.values()) > 50
    assert search_stats["qps"] > 0 and search_stats["index_bytes"] == stats["index_bytes"]
    assert search_stats["avg_query_nonzeros"] == pytest.approx(sum(len(q) for q in queries.values()) / len(queries))
    assert search_stats["docs"] == len(docs) - 1 and search_stats["scores_exact"] is True
    # k cuts the list at the top-k of the brute-force order (no ties at the cut in this data).
    top3, _ = search_impact(tmp_path / "index", {"model-q0": queries["model-q0"]}, k=3)
    assert set(top3["model-q0"]) <= set(expected["model-q0"]) and len(top3["model-q0"]) == min(
        3, len(expected["model-q0"])
    )
    json.dumps(search_stats)  # records must be able to keep it


@pytest.mark.slow
def test_an_impact_collection_in_several_files_gives_the_same_runs_ties_at_the_cut_included(tmp_path):
    """One file per thread changes Lucene's internal document order, not the runs: tied scores at the
    k-th hit are cut by external doc id (the brute-force order), whichever file a document was in."""
    rng = random.Random(21)
    terms = ["a", "b", "c", "d"]
    docs = {
        f"d{rng.randrange(10**6):06d}": {t: rng.randint(1, 2) for t in rng.sample(terms, rng.randint(1, 3))}
        for _ in range(300)
    }  # few distinct scores: long runs of ties
    queries = {f"q{i}": {t: 1 for t in rng.sample(terms, rng.randint(1, 2))} for i in range(12)}
    one = write_vector_collection(docs, tmp_path / "one" / "docs.jsonl", files=1)
    four = write_vector_collection(docs, tmp_path / "four" / "docs.jsonl", files=4)
    assert one == four and len(list((tmp_path / "four").iterdir())) == 4
    runs = {}
    for threads in (1, 4):
        build_impact_index(docs, tmp_path / f"index{threads}", threads=threads)
        runs[threads], _ = search_impact(tmp_path / f"index{threads}", queries, k=25, threads=threads)
    expected = brute_force_search(docs, queries, k=25)
    every = brute_force_search(docs, queries, k=len(docs))
    cut_ties = [
        q
        for q in queries
        if sum(s == min(expected[q].values()) for s in every[q].values())
        > sum(s == min(expected[q].values()) for s in expected[q].values())
    ]
    assert len(cut_ties) >= len(queries) // 2  # the data has ties across the k-th hit
    for qid in queries:
        assert runs[1][qid] == runs[4][qid] == expected[qid], qid
