"""The learned-sparse (LexMAE) pipeline end to end on a shrunk tiny spec: three retrievers, impact
indexes, TREC runs that evaluate, every stage cached on a second call, efficiency recorded."""

from __future__ import annotations

import hashlib
import json
import time

import pytest

from harness.core.errors import HarnessError
from harness.core.paths import cache_dir
from harness.data.catalog import get_benchmark
from harness.data.formats import read_trec_run
from harness.evaluation.measures import evaluate
from harness.pipelines.context import RunContext, StageLog, input_key
from harness.pipelines.learned_sparse import configured_reranker, grouped_examples, masked_lm_init, run_learned_sparse
from harness.records.tracker import Tracker
from harness.run.runner import pipeline_for
from harness.spec.block_settings import RetrievalSettings
from harness.spec.conditions import derived
from harness.spec.files import deep_merge
from harness.spec.method import MethodSpec, load_method
from harness.stages.checkpoints import weights_sha256

# Everything small. The pre-training stages are left out (the control's seeded random init, whose
# encoder-only folder also exercises the fresh-MLM-head fallback): building the pre-training passages
# alone takes minutes. SciFact is both the training and the evaluation corpus, so the retrievers'
# impact indexes serve mining and evaluation alike.
SHRINK = {
    "datasets": ["scifact"],
    # Barely trained SPLADE vectors are dense (hundreds of terms): cap them so search is quick.
    "retrieval": {"topk_sparsify": 32, "max_query_terms": 64},
    "tokenizer": {"vocab_size": 2000},
    "model": {"layers": 1, "hidden": 32, "heads": 2, "intermediate": 64},
    "pretrain": {"objective": "none"},
    "finetune": {
        "train_queries": "scifact-train",
        "max_train_queries": 40,
        "max_p_len": 32,
        "max_q_len": 16,
        "lr": 5e-4,
        "retriever1": {"negative_depth": 50, "global_queries": 8, "passages_per_query": 3, "epochs": 1},
        "mine": {"depth": 30},
        "retriever2": {"negative_depth": 30, "global_queries": 8, "passages_per_query": 3, "epochs": 1},
        "retriever3": {
            "negative_depth": 30,
            "global_queries": 8,
            "passages_per_query": 3,
            "epochs": 1,
            "reranker_train": {"queries_per_device": 8, "passages_per_query": 3, "epochs": 1, "max_length": 96},
        },
    },
}


def shrunk_spec(over: dict | None = None) -> MethodSpec:
    base = load_method("lexmae", "tiny")
    return MethodSpec(base.name, base.profile, base.path, deep_merge(deep_merge(base.config, SHRINK), over or {}))


def context(spec: MethodSpec) -> RunContext:
    return RunContext(spec, Tracker(experiment="lexmae-test", run_name="test", tags={}), StageLog())


def test_pipeline_is_registered_for_learned_sparse():
    assert pipeline_for(load_method("lexmae", "tiny")) is run_learned_sparse


def test_retrieval_settings_are_checked():
    assert RetrievalSettings.from_spec(load_method("lexmae", "paper")).impact() == {
        "index": "lucene-impact",
        "quantization": 100,
        "topk_sparsify": None,
        "max_query_terms": 1024,
        "threads": 2,
    }
    with pytest.raises(HarnessError, match="topk_sparsify"):
        RetrievalSettings.from_spec(shrunk_spec({"retrieval": {"topk_sparsify": 0}}))
    with pytest.raises(HarnessError, match="max_query_terms"):
        RetrievalSettings.from_spec(shrunk_spec({"retrieval": {"max_query_terms": 2048}}))


def test_paper_reranker_missing_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_MODELS_DIR", str(tmp_path / "models"))
    spec = load_method("lexmae", "paper")
    with pytest.raises(HarnessError, match="zhou2022b-ranker.*not available locally") as err:
        configured_reranker(context(spec))
    assert "reranker_checkpoint" in str(err.value)
    assert configured_reranker(context(load_method("lexmae", "tiny"))) is None
    (tmp_path / "models" / "zhou2022b-ranker").mkdir(parents=True)
    (tmp_path / "models" / "zhou2022b-ranker" / "config.json").write_text("{}")
    teacher = configured_reranker(context(spec))
    # keyed by the checkpoint's content (harness.pipelines.context.input_key), not by its name or folder
    assert teacher.path == tmp_path / "models" / "zhou2022b-ranker"
    assert teacher.key == f"checkpoint:{input_key(teacher.path)}" and teacher.key.startswith("checkpoint:sha256:")
    assert teacher.kind == "cross-encoder"


def test_a_teacher_is_the_weights_its_spec_identifies_not_its_folder_name(tmp_path, monkeypatch, capsys):
    """Another model under the paper teacher's folder name is caught by its weights' sha256."""
    monkeypatch.setenv("HARNESS_MODELS_DIR", str(tmp_path / "models"))
    folder = tmp_path / "models" / "zhou2022b-ranker"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(b"the intended teacher")
    intended = hashlib.sha256(b"the intended teacher").hexdigest()
    assert weights_sha256(folder) == intended  # `sha256sum model.safetensors`, as the Hub lists it
    paper = load_method("lexmae", "paper")
    # unidentified: the run goes on, says so and states its teacher as unidentified
    assert configured_reranker(context(paper)).path == folder
    assert f"weights sha256 {intended}, not identified" in capsys.readouterr().out
    assert derived(paper.config)["reranker_teacher"].startswith("zhou2022b-ranker (weights unidentified")
    identified = MethodSpec(
        paper.name,
        paper.profile,
        paper.path,
        deep_merge(paper.config, {"finetune": {"retriever3": {"reranker_sha256": intended}}}),
    )
    assert derived(identified.config)["reranker_teacher"] == "zhou2022b-ranker"
    assert configured_reranker(context(identified)).path == folder
    (folder / "config.json").write_text('{"re-saved": true}')  # only the weights identify it
    assert configured_reranker(context(identified)).path == folder
    (folder / "model.safetensors").write_bytes(b"another cross-encoder")  # same folder name, other weights
    with pytest.raises(
        HarnessError,
        match=r"zhou2022b-ranker: the stage-3 teacher's weights have sha256 "
        rf"{hashlib.sha256(b'another cross-encoder').hexdigest()}, not the {intended}",
    ):
        configured_reranker(context(identified))
    (folder / "model.safetensors").unlink()
    with pytest.raises(HarnessError, match="no weights file"):
        configured_reranker(context(identified))


def test_mini_teacher_is_the_packaged_bi_encoder():
    teacher = configured_reranker(context(load_method("lexmae", "mini")))
    assert teacher.kind == "bi-encoder" and teacher.scale == 20.0 and (teacher.path / "config.json").exists()
    assert teacher.key == f"bi-encoder:{input_key(teacher.path)}:scale=20:len=128"
    with pytest.raises(HarnessError, match="needs reranker_checkpoint"):
        configured_reranker(context(shrunk_spec({"finetune": {"retriever3": {"reranker": "bi-encoder"}}})))


def test_grouped_examples_keep_query_ids_and_skip_unusable_queries():
    queries = {"q1": "one", "q2": "two", "q3": "three"}
    qrels = {"q1": {"d1": 1}, "q2": {"d2": 0}, "q3": {"d3": 2}}
    pools = [{"q1": ["d4", "d5"], "q2": ["d1"], "q3": []}]
    assert grouped_examples(queries, qrels, pools) == [("q1", "one", ["d1"], ["d4", "d5"])]


def test_masked_lm_init_prefers_the_mlm_folder(tmp_path, capsys):
    (tmp_path / "encoder").mkdir()
    assert masked_lm_init(tmp_path / "encoder") == tmp_path / "encoder"
    assert "no pre-trained masked LM" in capsys.readouterr().out
    (tmp_path / "mlm").mkdir()
    (tmp_path / "mlm" / "config.json").write_text("{}")
    assert masked_lm_init(tmp_path / "encoder") == tmp_path / "mlm"


@pytest.mark.slow
def test_lexmae_pipeline_end_to_end_and_cached():
    spec = shrunk_spec()
    ctx = context(spec)
    started = time.time()
    runs = run_learned_sparse(ctx, ["scifact"])
    first_seconds = time.time() - started
    assert list(runs) == ["retriever1", "retriever2", "retriever3"]

    bench = get_benchmark("scifact")
    qrels = bench.qrels(bench.eval_split)
    for label, by_dataset in runs.items():
        run = read_trec_run(by_dataset["scifact"])
        assert len(run) == 300, label
        assert max(len(docs) for docs in run.values()) <= 1000
        assert all(float(s).is_integer() for docs in run.values() for s in docs.values())  # integer impacts
        result = evaluate(run, qrels, "scifact")
        assert 0.0 <= result.aggregate["nDCG@10"] <= 1.0
        eff = ctx.efficiency[label]["scifact"]
        assert eff["qps"] > 0 and eff["index_bytes"] > 0 and 0 < eff["avg_doc_nonzeros"] <= 32
        assert "avg_query_nonzeros" in eff

    names = [e["stage"] for e in ctx.stages.entries]
    for stage in (
        "random_init",
        "retriever1",
        "retriever2",
        "reranker",
        "teacher_scores",
        "retriever3",
        "impact_index",
        "impact_search",
    ):
        assert stage in names, stage
    # One impact index per (retriever, corpus), built once: mining reuses it for evaluation.
    built = sorted(e["dataset"] for e in ctx.stages.entries if e["stage"] == "impact_index" and not e["cached"])
    assert built == ["scifact/retriever1", "scifact/retriever2", "scifact/retriever3"]
    searches = [e["dataset"] for e in ctx.stages.entries if e["stage"] == "impact_search"]
    assert searches == [
        "scifact/train/mine-retriever1",
        "scifact/train/mine-retriever2",
        "scifact/test/retriever1",
        "scifact/test/retriever2",
        "scifact/test/retriever3",
    ]

    by_stage = {e["stage"]: e for e in ctx.stages.entries if not e["cached"]}
    teacher = by_stage["teacher_scores"]["output"]
    # Scored: what one epoch samples, 1 positive + (passages_per_query - 1) negatives per query.
    assert teacher["groups"] > 0 and 2 * teacher["groups"] <= teacher["pairs"] <= 3 * teacher["groups"]
    assert 0.0 <= teacher["teacher_pairwise_accuracy"] <= 1.0
    assert by_stage["retriever1"]["output"]["mlm_head"] == "initialised"  # encoder-only init: fresh head
    assert by_stage["retriever3"]["output"]["groups"] == teacher["groups"]
    mine_key = next(e["key"] for e in ctx.stages.entries if e["dataset"] == "scifact/train/mine-retriever1")
    mined = read_trec_run(cache_dir() / "impact_search" / mine_key / "run.trec")
    assert 0 < len(mined) <= 40 and max(len(d) for d in mined.values()) <= 30  # the training queries, depth 30
    print(
        f"first run {first_seconds:.1f}s; stages:",
        json.dumps({e["stage"] + "/" + str(e["dataset"]): e["seconds"] for e in ctx.stages.entries}),
    )

    again = context(spec)
    runs2 = run_learned_sparse(again, ["scifact"])
    assert runs2 == runs
    assert again.stages.entries and all(e["cached"] for e in again.stages.entries)
    assert again.efficiency == ctx.efficiency
