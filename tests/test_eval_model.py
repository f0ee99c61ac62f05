"""`python -m harness eval --model PATH --dataset D`: zero-shot evaluation of a checkpoint folder.

Fast tests use a tiny random-init BERT (plain Hugging Face folder, and the same weights wrapped as
a sentence-transformers folder) on an in-memory BEIR-kind fixture benchmark, and check the numbers
against a brute-force ranking. One slow test runs the real all-MiniLM-L6-v2 on NFCorpus.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
import torch

import harness.cli as cli
from harness.data import catalog
from harness.data.catalog import Benchmark
from harness.data.formats import read_trec_run
from harness.evaluation.measures import evaluate
from harness.stages import artifacts

WORDS = "apple banana cherry grape lemon mango melon peach pear plum red yellow green sweet sour fruit tree".split()

DOCS = {
    "d1": {"title": "apple", "text": "red sweet apple tree fruit"},
    "d2": {"title": "", "text": "banana yellow sweet fruit"},
    "d3": {"title": "lemon", "text": "sour yellow lemon"},
    "d4": {"title": "", "text": "green pear tree"},
    "d5": {"title": "plum", "text": "plum plum red sour"},
    "d6": {"title": "", "text": "mango melon peach grape cherry"},
    "q3": {"title": "", "text": "cherry grape red fruit"},  # doc id equal to a query id: a BEIR self-hit
}
QUERIES = {"q1": "red apple", "q2": "yellow fruit", "q3": "cherry grape"}
QRELS = {"q1": {"d1": 1, "d5": 1}, "q2": {"d2": 2, "d3": 1}, "q3": {"d6": 1}}


class ToyBenchmark(Benchmark):
    """A BEIR-kind benchmark held in memory (7 documents, 3 judged test queries)."""

    kind = "beir"

    def __init__(self) -> None:
        super().__init__("toy-beir", "test fixture")

    def _read(self, split):
        return dict(QUERIES), {q: dict(d) for q, d in QRELS.items()}

    def has_corpus(self) -> bool:
        return True

    def iter_corpus(self):
        return iter({k: dict(v) for k, v in DOCS.items()}.items())

    def files(self):
        return self.corpus_files()

    def corpus_files(self):
        return {"fixture/corpus": hashlib.sha256(json.dumps(DOCS, sort_keys=True).encode()).hexdigest()}


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setitem(catalog._REGISTRY, "toy-beir", ToyBenchmark)
    catalog.get_benchmark.cache_clear()
    yield catalog.get_benchmark("toy-beir")
    catalog.get_benchmark.cache_clear()


def make_tiny_bert(folder: Path) -> Path:
    from transformers import BertConfig, BertModel, BertTokenizerFast

    folder.mkdir(parents=True, exist_ok=True)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
        initializer_range=0.2,
    )
    BertModel(config).save_pretrained(folder)
    BertTokenizerFast(vocab={w: i for i, w in enumerate(vocab)}).save_pretrained(folder)
    return folder


def make_tiny_st(folder: Path, max_seq_length: int = 24) -> Path:
    """The tiny BERT as a sentence-transformers folder: mean pooling, Normalize, max_seq_length."""
    make_tiny_bert(folder)
    (folder / "modules.json").write_text(
        json.dumps(
            [
                {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
                {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
                {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
            ]
        )
    )
    (folder / "1_Pooling").mkdir()
    (folder / "1_Pooling" / "config.json").write_text(
        json.dumps({"word_embedding_dimension": 32, "pooling_mode_cls_token": False, "pooling_mode_mean_tokens": True})
    )
    (folder / "sentence_bert_config.json").write_text(
        json.dumps({"max_seq_length": max_seq_length, "do_lower_case": False})
    )
    return folder


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory) -> Path:
    return make_tiny_bert(tmp_path_factory.mktemp("models") / "tiny-bert")


@pytest.fixture(scope="module")
def tiny_st_dir(tmp_path_factory) -> Path:
    return make_tiny_st(tmp_path_factory.mktemp("models") / "tiny-st")


@pytest.fixture
def run_cli(monkeypatch, capsys):
    monkeypatch.setattr(cli, "COMMANDS", ["eval"])

    def call(*argv: str) -> tuple[int, str, str]:
        rc = cli.main(["eval", *map(str, argv)])
        out = capsys.readouterr()
        return rc, out.out, out.err

    return call


def brute_force_run(model_dir: Path, pooling: str, normalize: bool, qlen: int, plen: int) -> dict:
    """Reference ranking: every passage scored by q . d, encoded one text at a time."""
    from transformers import AutoModel, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModel.from_pretrained(model_dir).eval()

    def vec(text: str, max_length: int) -> np.ndarray:
        with torch.inference_mode():
            hidden = model(
                **tok([text], return_tensors="pt", truncation=True, max_length=max_length)
            ).last_hidden_state[0]
        v = hidden[0] if pooling == "cls" else hidden.mean(dim=0)
        return (torch.nn.functional.normalize(v, dim=0) if normalize else v).numpy()

    docs = {d: vec(f"{x['title']} {x['text']}" if x["title"] else x["text"], plen) for d, x in DOCS.items()}
    return {q: {d: float(vec(text, qlen) @ v) for d, v in docs.items()} for q, text in QUERIES.items()}


def _summary(path: Path) -> dict:
    return json.loads(path.read_text())


# ---------------------------------------------------------------------------- plain Hugging Face folder


def test_plain_folder_end_to_end_matches_brute_force(tiny_dir, toy, tmp_path, run_cli):
    out, run_file = tmp_path / "out.json", tmp_path / "run.trec"
    rc, stdout, err = run_cli(
        "--model", tiny_dir, "--dataset", "toy-beir", "--json", out, "--save-run", run_file, "--depth", "3"
    )
    assert rc == 0, err
    s = _summary(out)
    assert set(s["metrics"]) == {"toy-beir"} and set(s["metrics"]["toy-beir"]) == {"nDCG@10", "R@100"}
    enc = s["encoder"]
    assert (enc["pooling"], enc["normalize"], enc["format"]) == ("cls", False, "huggingface")
    assert enc["sources"]["pooling"].startswith("default") and enc["sources"]["normalize"].startswith("default")
    assert (enc["query_max_length"], enc["passage_max_length"]) == (32, 64)  # 144 capped at 64 positions
    assert "capped" in enc["sources"]["passage_max_length"]
    eff = s["efficiency"]
    assert eff["docs"] == len(DOCS) and eff["queries"] == 3 and eff["index_bytes"] == len(DOCS) * 32 * 4
    assert eff["corpus_embeddings_cached"] is False and eff["qps"] > 0 and eff["corpus_encode_seconds"] > 0
    assert s["model"] == str(tiny_dir) and s["model_name"] == "tiny-bert" and s["depth"] == 3
    assert s["mlflow"]["run_id"] and s["mlflow"]["experiment"] == "zero-shot"
    assert "zero-shot tiny-bert on toy-beir: nDCG@10" in stdout
    from mlflow.tracking import MlflowClient

    logged = MlflowClient(tracking_uri=s["mlflow"]["tracking_uri"]).get_run(s["mlflow"]["run_id"])
    assert logged.data.tags["dataset"] == "toy-beir" and logged.data.tags["model"] == str(tiny_dir)
    # MLflow gets points at 2 decimals (harness.records.parent_run.in_points); the summary keeps the fraction
    assert logged.data.metrics["toy-beir/nDCG at 10"] == round(100 * s["metrics"]["toy-beir"]["nDCG@10"], 2)
    assert logged.data.params["encoder.pooling"] == "cls" and "qps" in logged.data.metrics

    # The same numbers as an exhaustive dot-product ranking cut to depth 3 after the BEIR self-hit drop.
    ref = brute_force_run(tiny_dir, "cls", False, 32, 64)
    ref = {
        q: dict(sorted(((d, v) for d, v in docs.items() if d != q), key=lambda x: -x[1])[:3]) for q, docs in ref.items()
    }
    expected = evaluate(ref, QRELS, catalog.get_benchmark("toy-beir"))
    for measure, value in expected.aggregate.items():
        assert s["metrics"]["toy-beir"][measure] == pytest.approx(value, abs=1e-6), measure

    # The saved run is what was scored: 3 hits per query, plus the self-hit where it was retrieved.
    saved = read_trec_run(run_file)
    assert all(len(docs) == (4 if q in docs else 3) for q, docs in saved.items())
    assert s["dropped_self_hits"] == sum(q in docs for q, docs in saved.items())
    rc, _, err = run_cli("--run", run_file, "--benchmark", "toy-beir", "--json", tmp_path / "again.json")
    assert rc == 0, err
    assert _summary(tmp_path / "again.json")["metrics"] == s["metrics"]


def test_second_evaluation_reads_cached_embeddings(tiny_dir, toy, tmp_path, run_cli, isolated_dirs):
    rc, _, err = run_cli("--model", tiny_dir, "--dataset", "toy-beir", "--json", tmp_path / "a.json", "--no-track")
    assert rc == 0, err
    cached = list((isolated_dirs / "cache" / "embeddings").glob("*/embeddings.npy"))
    assert len(cached) == 1 and artifacts.is_finished(cached[0].parent)  # a folder written whole, marker inside
    rc, stdout, err = run_cli("--model", tiny_dir, "--dataset", "toy-beir", "--json", tmp_path / "b.json", "--no-track")
    assert rc == 0, err
    a, b = _summary(tmp_path / "a.json"), _summary(tmp_path / "b.json")
    assert b["efficiency"]["corpus_embeddings_cached"] is True and "read from the cache" in stdout
    assert a["metrics"] == b["metrics"] and b["mlflow"] is None
    # Another pooling makes other vectors: a second cache entry, not a stale hit.
    rc, _, err = run_cli("--model", tiny_dir, "--dataset", "toy-beir", "--pooling", "mean", "--no-track")
    assert rc == 0, err
    assert len(list((isolated_dirs / "cache" / "embeddings").glob("*/embeddings.npy"))) == 2


def test_interrupted_corpus_encoding_resumes_from_its_last_chunk(tiny_dir, toy, monkeypatch, isolated_dirs):
    """A big corpus is encoded in chunk files: a run killed mid-encoding resumes after its last
    complete chunk, and the result equals one uninterrupted encoding."""
    from harness.retrieval import corpus_vectors as zs
    from harness.retrieval.encoder import load_zero_shot_encoder
    from harness.stages.checkpoints import model_fingerprint

    monkeypatch.setattr(zs, "CHUNK_PASSAGES", 2)  # 7 documents -> 4 chunks
    encoder = load_zero_shot_encoder(tiny_dir, "cls", False, 16, 16, "cpu", "fp32")
    fingerprint = model_fingerprint(tiny_dir)
    ids_ref, emb_ref = encoder.encode_corpus(toy.corpus(), batch_size=4, show_progress=False)
    real, calls, state = encoder.encode, [], {"kill": True}

    def killed_at_the_second_chunk(texts, **kwargs):
        calls.append(len(texts))
        if state["kill"] and len(calls) == 2:
            raise KeyboardInterrupt
        return real(texts, **kwargs)

    monkeypatch.setattr(encoder, "encode", killed_at_the_second_chunk)
    with pytest.raises(KeyboardInterrupt):
        zs.corpus_embeddings(encoder, toy, fingerprint, 4, show_progress=False)
    state["kill"], calls[:] = False, []
    ids, emb, info = zs.corpus_embeddings(encoder, toy, fingerprint, 4, show_progress=False)
    assert calls == [2, 2, 1]  # chunks 2-4 only: the first was complete
    assert ids == ids_ref and np.allclose(emb, emb_ref, atol=1e-5) and not info["cached"]
    assert [p.name for p in (isolated_dirs / "cache" / "embeddings").iterdir()] == [
        zs.embeddings_key(fingerprint, encoder, toy)
    ]  # the chunks merged into the cache folder, then removed
    assert zs.corpus_embeddings(encoder, toy, fingerprint, 4, show_progress=False)[2]["cached"]


def test_pooling_override_on_a_plain_folder(tiny_dir, toy, tmp_path, run_cli):
    rc, _, err = run_cli(
        "--model",
        tiny_dir,
        "--dataset",
        "toy-beir",
        "--pooling",
        "mean",
        "--normalize",
        "--query-max-length",
        "8",
        "--json",
        tmp_path / "m.json",
        "--no-track",
    )
    assert rc == 0, err
    s = _summary(tmp_path / "m.json")
    enc = s["encoder"]
    assert (enc["pooling"], enc["normalize"], enc["similarity"], enc["query_max_length"]) == ("mean", True, "cosine", 8)
    assert enc["sources"]["pooling"] == enc["sources"]["normalize"] == enc["sources"]["query_max_length"] == "argument"
    ref = brute_force_run(tiny_dir, "mean", True, 8, 64)
    expected = evaluate(ref, QRELS, catalog.get_benchmark("toy-beir"))
    assert s["metrics"]["toy-beir"]["nDCG@10"] == pytest.approx(expected.aggregate["nDCG@10"], abs=1e-6)


# ---------------------------------------------------------------------------- sentence-transformers folder


def test_sentence_transformers_folder_settings_and_overrides(tiny_st_dir, toy, tmp_path, run_cli):
    rc, _, err = run_cli("--model", tiny_st_dir, "--dataset", "toy-beir", "--json", tmp_path / "st.json", "--no-track")
    assert rc == 0, err
    enc = _summary(tmp_path / "st.json")["encoder"]
    assert (enc["format"], enc["pooling"], enc["normalize"]) == ("sentence-transformers", "mean", True)
    assert enc["sources"]["pooling"] == "1_Pooling/config.json" and enc["sources"]["normalize"] == "modules.json"
    assert enc["query_max_length"] == enc["passage_max_length"] == 24
    assert enc["sources"]["passage_max_length"].startswith("sentence_bert_config.json")

    rc, _, err = run_cli(
        "--model",
        tiny_st_dir,
        "--dataset",
        "toy-beir",
        "--pooling",
        "cls",
        "--no-normalize",
        "--passage-max-length",
        "16",
        "--json",
        tmp_path / "o.json",
        "--no-track",
    )
    assert rc == 0, err
    s = _summary(tmp_path / "o.json")
    enc = s["encoder"]
    assert (enc["pooling"], enc["normalize"], enc["passage_max_length"]) == ("cls", False, 16)
    assert enc["sources"]["pooling"] == enc["sources"]["normalize"] == "argument"
    expected = evaluate(brute_force_run(tiny_st_dir, "cls", False, 24, 16), QRELS, catalog.get_benchmark("toy-beir"))
    assert s["metrics"]["toy-beir"]["nDCG@10"] == pytest.approx(expected.aggregate["nDCG@10"], abs=1e-6)


def test_evaluate_model_api_returns_the_summary(tiny_st_dir, toy):
    from harness.evaluation.zero_shot import evaluate_model

    s = evaluate_model(tiny_st_dir, "toy-beir", track=False, show_progress=False)
    assert set(s) >= {"metrics", "model", "encoder", "efficiency"}
    assert 0.0 <= s["metrics"]["toy-beir"]["nDCG@10"] <= 1.0
    json.dumps(s)  # JSON-ready


def test_qrels_judging_a_document_the_corpus_lacks_warn_once(tiny_st_dir, toy, monkeypatch, capsys):
    from harness.evaluation.zero_shot import evaluate_model

    monkeypatch.setitem(QRELS, "q2", {"d2": 2, "d3": 1, "gone": 1})  # before the benchmark reads its qrels
    evaluate_model(tiny_st_dir, "toy-beir", track=False, show_progress=False)
    warned = [line for line in capsys.readouterr().err.splitlines() if "not in the corpus" in line]
    assert warned == [
        "warning: 1 of 6 judged documents are not in the corpus (e.g. gone): scores count them as unretrievable"
    ]


# ---------------------------------------------------------------------------- errors


def test_missing_model_folder_names_the_path(tmp_path, run_cli):
    missing = tmp_path / "no-such-model"
    rc, _, err = run_cli("--model", missing, "--dataset", "scifact")
    assert rc == 2 and f"no model folder at {missing}" in err and "Traceback" not in err


def test_published_name_not_local_says_where_to_put_it(run_cli, monkeypatch, tmp_path):
    monkeypatch.setenv("HARNESS_MODELS_DIR", str(tmp_path / "models"))
    rc, _, err = run_cli("--model", "Luyu/co-condenser-marco-retriever", "--dataset", "scifact")
    assert rc == 2, err
    assert "models/Luyu/co-condenser-marco-retriever" in err and "HARNESS_MODELS_DIR" in err


def test_published_name_found_under_models_dir(tiny_dir, toy, run_cli, monkeypatch, tmp_path):
    import shutil

    shutil.copytree(tiny_dir, tmp_path / "models" / "Org" / "tiny-retriever")
    monkeypatch.setenv("HARNESS_MODELS_DIR", str(tmp_path / "models"))
    rc, stdout, err = run_cli("--model", "Org/tiny-retriever", "--dataset", "toy-beir", "--no-track")
    assert rc == 0, err
    assert "zero-shot tiny-retriever on toy-beir" in stdout


def test_folder_without_config_is_refused(tmp_path, run_cli):
    (tmp_path / "empty").mkdir()
    rc, _, err = run_cli("--model", tmp_path / "empty", "--dataset", "scifact")
    assert rc == 2 and "no config.json" in err


def test_corpus_not_embedded_gives_the_download_error(tiny_dir, run_cli, monkeypatch, tmp_path):
    (tmp_path / "mirror").mkdir()
    monkeypatch.setenv("HARNESS_DATA_MIRROR", str(tmp_path / "mirror"))  # an empty mirror: fails fast, offline
    rc, _, err = run_cli("--model", tiny_dir, "--dataset", "arguana", "--no-track")
    assert rc == 2 and "not embedded and must be downloaded" in err and "arguana.zip" in err


def test_model_options_are_refused_with_a_run_file(tmp_path, run_cli):
    run = tmp_path / "r.trec"
    run.write_text("1 Q0 d 1 1.0 t\n")
    rc, _, err = run_cli("--run", run, "--benchmark", "scifact", "--pooling", "mean")
    assert rc == 2 and "--pooling only apply with --model" in err
    with pytest.raises(SystemExit):  # argparse: --run and --model are mutually exclusive
        run_cli("--model", tmp_path, "--run", run, "--benchmark", "scifact")


def test_dataset_and_benchmark_are_the_same_option(tmp_path, run_cli):
    run = tmp_path / "r.trec"
    run.write_text("1 Q0 31715818 1 1.0 t\n")
    rc, out, err = run_cli("--run", run, "--dataset", "scifact")
    assert rc == 0 and "scifact" in out, err


def test_bad_depth_and_unknown_dataset(tiny_dir, toy, run_cli):
    rc, _, err = run_cli("--model", tiny_dir, "--dataset", "toy-beir", "--depth", "0")
    assert rc == 2 and "depth must be positive" in err
    rc, _, err = run_cli("--model", tiny_dir, "--dataset", "scifakt")
    assert rc == 2 and "Did you mean: scifact" in err


# ---------------------------------------------------------------------------- real model (slow)

# `eval --model` on the packaged all-MiniLM-L6-v2 (NFCorpus, the published range) runs in
# tests/test_reproduce_checkpoint.py::test_minilm_scored_by_eval_then_reproduced_from_the_same_encoding, whose
# `reproduce` reads the corpus vectors that `eval --model` cached.
