"""The rehearsal profile: derived from the paper profile, every shape kept, the changes listed."""

from __future__ import annotations

import os

import pytest

from harness.data.catalog import get_benchmark
from harness.data.sampled import SampledBenchmark
from harness.data.setting import PASSAGES_ENV, data_setting, msmarco_passages
from harness.evaluation.compare import comparability
from harness.spec import rehearsal
from harness.spec.conditions import derived, run_conditions
from harness.spec.method import load_method, pretraining_methods, profiles_of

TRAINED = pretraining_methods("paper")  # every method that pre-trains and has a paper profile to rehearse

# Every key the rehearsal may change, relative to the paper profile (anything else would be a shape change).
ALLOWED = (
    "model.",
    "tokenizer.from",
    "pretrain.steps",
    "pretrain.epochs",
    "pretrain.global_batch",
    "pretrain.per_device_batch",
    "hardware.devices",
    "hardware.hours",
    "corpus.max_passages",
    "data.mirror",
    "datasets",
    "qgen.model",
    "qgen.train_pairs",
    "finetune.max_train_queries",
    "finetune.precision",  # the paper's fp16 needs CUDA: the rehearsal fine-tunes fp32 on a CPU, as its references did
    "finetune.global_queries",
    "finetune.epochs",
    "finetune.retriever1.global_queries",
    "finetune.retriever1.epochs",
    "finetune.retriever2.global_queries",
    "finetune.retriever2.epochs",
    "finetune.retriever3.global_queries",
    "finetune.retriever3.epochs",
    "finetune.retriever3.reranker",
    "finetune.retriever3.reranker_train",
    "finetune.warmup_ratio",
    "finetune.retriever1.warmup_ratio",
    "finetune.retriever2.warmup_ratio",
    "finetune.retriever3.warmup_ratio",
    "pretrain.warmup_ratio",
    "retrieval.topk_sparsify",
)


@pytest.mark.parametrize("method", TRAINED)
def test_rehearsal_changes_only_steps_weights_and_data(method: str) -> None:
    paper, rehearsed = load_method(method, "paper"), load_method(method, "rehearsal")
    changes = rehearsal.differences(paper.config, rehearsed.config)
    assert changes, "a rehearsal must differ from the paper profile"
    for line in changes:
        assert line.startswith(ALLOWED), line
    # shapes the paper run crosses are kept
    # the device's batch is one optimiser step, in micro-batches for memory where the objective accumulates
    assert rehearsed.get("pretrain.global_batch") in (None, paper.get("pretrain.per_device_batch"))
    for key in (
        "pretrain.max_length",
        "pretrain.grad_cache_chunk",
        "pretrain.objective_params",
        "pretrain.precision",
        "finetune.passages_per_query",
        "finetune.max_p_len",
        "finetune.max_q_len",
        "finetune.retriever2.negative_depth",
        "qgen.num_queries",
        "stages",
        "corpus.max_tokens",
        "data.msmarco_passages",
    ):
        assert rehearsed.get(key) == paper.get(key), key
    assert rehearsed.get("model.hidden") == 768 and rehearsed.get("model.layers") == 12
    # a rehearsal states its own step count, so no paper cell (50K, 120K steps...) is graded against it
    if paper.get("pretrain.steps"):
        assert run_conditions(rehearsed.config, method, "rehearsal")["pretrain_steps"] == rehearsal.PRETRAIN_STEPS
    assert "rehearsal" in profiles_of(method)


def test_bm25_has_no_rehearsal() -> None:
    assert "rehearsal" not in profiles_of("bm25")


def test_rehearsal_global_batch_is_one_device_batch() -> None:
    spec = load_method("cocondenser", "rehearsal")
    assert spec.get("pretrain.global_batch") == spec.get("pretrain.per_device_batch") == 256
    assert spec.get("pretrain.steps") == 1


def test_lexmae_rehearsal_keeps_three_stages_and_embedded_beir_samples() -> None:
    spec = load_method("lexmae", "rehearsal")
    assert "finetune_r3" in spec.get("stages")
    assert spec.get("datasets") == ["msmarco-dev@sample", "dl19", "dl20", "nfcorpus@sample", "scifact@sample"]
    assert spec.get("finetune.retriever3.passages_per_query") == 24


def test_sampled_benchmark_is_seeded_and_holds_the_judged_documents() -> None:
    bench = get_benchmark("scifact@sample")
    assert isinstance(bench, SampledBenchmark) and bench.smoke
    queries, qrels = bench.queries(), bench.qrels()
    assert len(queries) == 20 and set(queries) == set(qrels)
    corpus = bench.corpus()
    kept = {d for docs in qrels.values() for d in sorted(docs, key=lambda d: (-docs[d], d))[:3]}
    assert kept <= set(corpus)  # each query's judged documents, highest grades first, at most 3
    assert len(corpus) == len(kept) + 40
    again = SampledBenchmark(get_benchmark("scifact"))
    assert again.queries() == queries and list(again.corpus()) == list(corpus)
    assert bench.files()["sample/scifact"].startswith("queries=20,judged_per_query=3,distractors=40")
    assert "sample/scifact" not in get_benchmark("scifact").files()


def test_data_setting_applies_and_restores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PASSAGES_ENV, raising=False)
    spec = load_method("cotmae", "paper")
    with data_setting(spec):
        assert msmarco_passages() == "titled"
    assert PASSAGES_ENV not in os.environ and msmarco_passages() == "plain"


def test_titled_condition_separates_runs_from_the_papers_cells() -> None:
    run = run_conditions(load_method("cotmae_qc", "paper").config, "cotmae_qc", "paper")
    cell = {"pretrain_steps": "50K", "query_number": 5, "mixed": False, "msmarco_passages": "titled"}
    assert comparability("cotmae_qc", cell, run) == ("", "")
    plain = {**run, "msmarco_passages": "plain"}
    reason, _ = comparability("cotmae_qc", cell, plain)
    assert "msmarco_passages=titled" in reason and "plain" in reason


def test_runs_state_which_msmarco_passages_and_negatives_they_read() -> None:
    import json

    from harness.core.paths import PROJECT_ROOT
    from harness.run.runner import stage_conditions

    conditions = stage_conditions(load_method("cocondenser", "rehearsal"), "retriever2", "retriever2")
    assert conditions["msmarco_passages"] == "titled" and conditions["bm25_negatives"] == "msmarco-triples"
    assert derived(load_method("lexmae", "rehearsal").config)["bm25_negatives"] == "own"
    # and the committed rehearsal records state them (derived from their sealed resolved spec)
    records = sorted((PROJECT_ROOT / "runs" / "records").glob("*__rehearsal__*.json"))
    assert records, "no committed rehearsal record"
    for path in records:
        stated = derived(json.loads(path.read_text())["spec"])
        assert stated["msmarco_passages"] in ("titled", "plain"), path.name
        if stated.get("finetune_data") == "msmarco-sbert-hard-negatives":  # a *_beir variant mines no BM25 negatives
            continue
        assert stated["bm25_negatives"] in ("own", "msmarco-triples", "tevatron"), path.name


def test_every_rehearsable_method_has_a_committed_accepted_rehearsal_record() -> None:
    """Each spec with a rehearsal (every trained method and variant) has its rehearsal run committed
    and accepted as the reference `check` gates (issue 62: a record for each new variant)."""
    import json

    from harness.core.paths import PROJECT_ROOT
    from harness.spec.method import list_methods

    records = PROJECT_ROOT / "runs" / "records"
    references = json.loads((records / "references.json").read_text())["references"]
    rehearsable = [m for m in list_methods() if "rehearsal" in profiles_of(m)]
    assert len(rehearsable) >= 20, rehearsable
    missing = [m for m in rehearsable if f"{m}/rehearsal" not in references]
    assert not missing, f"no accepted rehearsal reference for {missing}: run it and `check --accept` the record"
    for method in rehearsable:
        path = records / f"{references[f'{method}/rehearsal']['run_id']}.json"
        assert path.is_file(), f"{method}: the accepted rehearsal record {path.name} is not committed"
