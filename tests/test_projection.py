"""The dry-run's projection: FLOPs from the counted steps, scaled by the plan's batches and steps."""

from __future__ import annotations

import copy
import dataclasses

import pytest

from harness.core.hardware import Hardware
from harness.run import model_shape, projection
from harness.run.runner import plan_method
from harness.spec.method import MethodSpec, load_method, pretraining_methods

CPU = Hardware("cpu", 1, (), 2)


def _describe(spec: MethodSpec, entries: list[dict]) -> list[str]:
    """The projection's lines on CPU, with the costs computed as the plan computes them (once)."""
    return projection.describe(spec, entries, CPU, projection.stage_costs(spec, entries))


def _costs(spec: MethodSpec) -> dict[str, projection.Cost]:
    entries = plan_method(spec, list(spec.get("datasets"))).stages.entries
    return {c.stage: c for c in projection.stage_costs(spec, entries)}


def test_the_h100_measurement_holds_the_papers_objectives() -> None:
    assert {"cocondenser", "cotmae", "cpdae", "lexmae", "finetune", "encode"} <= set(projection.measured())


def test_pretraining_flops_scale_with_steps_and_batch() -> None:
    spec = load_method("cotmae", "paper")
    base = _costs(spec)["pretrain"].tflop
    measured = projection.measured()["cotmae"]
    assert base == pytest.approx(50_000 * 16_384 * measured["tflop_per_step"] / measured["batch"])
    config = copy.deepcopy(spec.config)
    config["pretrain"]["steps"] = 100_000
    doubled = MethodSpec(spec.name, spec.profile, spec.path, config)
    assert _costs(doubled)["pretrain"].tflop == pytest.approx(2 * base)


def test_every_paper_plan_projects_its_training_stages(capsys) -> None:
    for method in pretraining_methods("paper"):
        spec = load_method(method, "paper")
        costs = _costs(spec)
        assert costs["retriever1"].tflop, method
        # an objective measured by bench/paper_shape_smoke.py is projected; a new one is not, never guessed
        measured = spec.get("pretrain.objective") in projection.measured()
        assert bool(costs["pretrain"].tflop) == measured, method
        lines = _describe(spec, plan_method(spec, list(spec.get("datasets"))).stages.entries)
        text = "\n".join(lines)
        assert "torch.utils.flop_counter" in text and "assumptions:" in text
        if spec.get("hardware.hours"):
            assert f"the paper states {spec.get('hardware.hours')} h" in text, method
    # query generation is priced too (test_qgen_flops_at_t5_base_are_pinned): nothing is left unpriced
    for method in ("cotmae_qc", "cocondenser_qc"):
        assert all(c.tflop is not None for c in _costs(load_method(method, "paper")).values()), method


def test_qgen_flops_at_t5_base_are_pinned() -> None:
    """doc2query-T5 over MS MARCO (8,841,823 passages of 144 tokens, 5 queries of up to 32 tokens each):
    the encoder once per passage, the decoder per generated token of each query, at t5-base shape."""
    d, ff, layers, vocab, n, new = 768, 3072, 12, 32128, 144, 32
    encoder = layers * (2 * n * (4 * d * d + 2 * d * ff) + 4 * n * n * d)
    per_token = layers * 2 * (6 * d * d + 2 * d * ff) + 2 * d * vocab
    attention = layers * sum(4 * d * (p + 1 + n) for p in range(new))
    decoder = new * per_token + attention + layers * 4 * d * d * n  # + cross-attention keys/values
    per_passage = encoder + 5 * decoder
    assert per_passage == pytest.approx(8.6161e10, rel=1e-4)  # 86 GFLOP a passage
    cost = _costs(load_method("cotmae_qc", "paper"))["qgen"]
    assert cost.tflop == pytest.approx(8_841_823 * per_passage / 1e12)
    assert cost.tflop == pytest.approx(7.618e5, rel=1e-3) and "t5-base" in cost.note


def test_cached_stages_cost_nothing() -> None:
    spec = load_method("cotmae", "paper")
    entries = [dict(e, plan="cached") for e in plan_method(spec, ["dl19"]).stages.entries]
    assert projection.stage_costs(spec, entries) == []


def test_cqadupstack_is_counted_once_per_retriever() -> None:
    spec = load_method("lexmae", "paper")
    entries = plan_method(spec, ["cqadupstack"]).stages.entries
    forums = [c for c in projection.stage_costs(spec, entries) if c.stage.startswith("impact_index/cqadupstack-")]
    assert len(forums) == 3  # retrievers 1, 2 and 3: each encodes the 457,199 documents once
    assert {c.tflop for c in forums} == {457_199 * projection.SPLADE_HEAD_FACTOR * projection._per_sequence("encode")}


def test_a_gpu_type_is_calibrated_from_another_papers_stated_hours() -> None:
    """Leave one family out: CoT-MAE's V100 scale comes from coCondenser's 90 h and the reverse, so each
    paper's own hours stay a check; LexMAE, alone on A100, matches its own hours and says so."""
    cotmae_scale, cotmae_why = projection.calibration("V100", "cotmae_qc")
    assert "cocondenser 90 h" in cotmae_why and "cotmae" not in cotmae_why.split("from", 1)[1]
    cocondenser_scale, why = projection.calibration("V100", "cocondenser")
    assert "cotmae 60 h" in why and cotmae_scale != cocondenser_scale
    assert "by construction" in projection.calibration("A100", "lexmae")[1]
    assert projection.calibration("H100", "cotmae") == (1.0, "measured on one H100")
    spec = load_method("lexmae", "paper")
    text = "\n".join(_describe(spec, plan_method(spec, ["dl19"]).stages.entries))
    assert "the paper states 14 h of pre-training on 8 x A100 (spec hardware; projected here: 14.0 h)" in text
    assert "the projection matches the stated hours within 10%" in text


def test_a_stated_vs_projected_gap_gets_a_word() -> None:
    """Issue 63: "paper states 60 h ... projected here: 5.2 d" said nothing of the gap."""
    line = projection._gap_line(5.2 * 24, 60.0)
    assert "projected 2.1x the stated hours" in line and "assumed" in line and len(line) <= 120


def test_teacher_scoring_counts_the_pairs_the_code_scores_and_grad_cache_its_forward() -> None:
    costs = _costs(load_method("lexmae", "paper"))
    teacher = costs["teacher_scores"]
    assert "72 scored pairs per query" in teacher.note
    assert teacher.tflop == pytest.approx(projection.MSMARCO_TRAIN_QUERIES * 72 * projection._per_sequence("encode"))
    cocondenser = _costs(load_method("cocondenser", "paper"))["pretrain"]
    assert "gradient caching" in cocondenser.note
    assert projection.grad_cache_factor(load_method("cotmae", "paper")) == 1.0  # accumulation: no extra forward


def _with_model(spec: MethodSpec, **model) -> MethodSpec:
    config = copy.deepcopy(spec.config)
    config["model"] = {**config.get("model", {}), **model}
    return MethodSpec(spec.name, spec.profile, spec.path, config)


def test_the_flops_follow_the_specs_own_model_size() -> None:
    """Issue 41 item 7: a 2-layer tiny spec was projected with bert-base's FLOPs. The same paper plan
    (same steps, batches, corpora) with the tiny model is projected far cheaper, and its retriever
    stages (encoder layers only) scale exactly with the layer count."""
    paper = load_method("cotmae", "paper")
    tiny_model = {"init": "scratch", "layers": 2, "hidden": 128, "heads": 2, "intermediate": 512}
    full, small = _costs(paper), _costs(_with_model(paper, **tiny_model))
    # the vocabulary head (bert-base's 30,522 words here) keeps pre-training's share larger
    assert small["pretrain"].tflop < 0.05 * full["pretrain"].tflop
    assert small["retriever1"].tflop < 0.01 * full["retriever1"].tflop
    deeper = _costs(_with_model(paper, **{**tiny_model, "layers": 4}))
    assert deeper["retriever1"].tflop == pytest.approx(2 * small["retriever1"].tflop)
    # pre-training: two more layers' work on top of 2 layers + 1 decoder layer + the vocabulary head
    shape = model_shape.shape_of(_with_model(paper, **tiny_model))
    layer, head = model_shape.layer_flops(shape, 144), model_shape.head_flops(shape, 144)
    assert deeper["pretrain"].tflop / small["pretrain"].tflop == pytest.approx((5 * layer + head) / (3 * layer + head))
    # the tiny profile itself: its own model block, far below the paper plan's per-sequence cost
    tiny = load_method("cotmae", "tiny")
    assert "2 layers, hidden 128" in projection.shape_line(tiny)
    assert projection.flop_ratio(tiny, "cotmae") < 0.02 and projection.flop_ratio(paper, "cotmae") == 1.0


def test_a_rank_0_stage_is_never_divided_by_the_device_count() -> None:
    """A stage rank 0 builds alone takes as long on 8 devices as on 1 and leaves 7 idle; a sharded or
    every-rank stage is divided over them and leaves none idle."""
    costs = _costs(load_method("lexmae", "paper"))
    impact, teacher = next(c for n, c in costs.items() if n.startswith("impact_index")), costs["teacher_scores"]
    assert impact.parallel  # impact encoding: sharded over every rank (harness/retrieval/impact_shards.py)
    assert teacher.parallel  # teacher scoring: sharded over every rank (harness/finetune/teacher_shards.py)
    assert costs["pretrain"].parallel and costs["retriever1"].parallel
    assert _costs(load_method("cotmae_qc", "paper"))["qgen"].parallel  # sharded over every rank
    alone = dataclasses.replace(impact, parallel=False)  # what impact encoding cost when rank 0 ran it alone
    one, eight = projection.stage_time(alone, 1, 100.0), projection.stage_time(alone, 8, 100.0)
    assert eight[0] == one[0] and eight[1] == 8 * one[1] and eight[2] == pytest.approx(7 * one[1])
    for shared in (impact, teacher):
        assert projection.stage_time(shared, 8, 100.0)[0] == pytest.approx(
            projection.stage_time(shared, 1, 100.0)[0] / 8
        )
        assert projection.stage_time(shared, 8, 100.0)[2] == 0


def test_the_dry_run_names_gpu_hours_idle_hours_and_the_stages_without_a_gpu() -> None:
    spec = load_method("cotmae_qc", "paper")
    entries = plan_method(spec, list(spec.get("datasets"))).stages.entries
    text = "\n".join(_describe(spec, entries))
    assert "GPU-h" in text and "idle GPU-h" in text
    assert "stages that use no GPU (rank 0; Lucene/BM25, files, scoring): passages, bm25_negatives, evaluate" in text
    rows = [line for line in text.splitlines() if line.startswith("    ") and "(rank 0 alone)" in line]
    assert not rows, rows  # every projected stage of a dense QC plan runs on every rank
    assert "stages rank 0 runs on one GPU while the others idle" not in text
    lexmae = load_method("lexmae", "paper")
    lexmae_entries = plan_method(lexmae, list(lexmae.get("datasets"))).stages.entries
    _, idle = projection.unshared_stages(lexmae_entries)
    assert not {"impact_index", "impact_search", "teacher_scores"} & set(idle)  # all sharded over every rank
    text = "\n".join(_describe(lexmae, lexmae_entries))
    alone = [line for line in text.splitlines() if "(rank 0 alone)" in line]
    assert alone and all("(Lucene)" in line for line in alone)  # only Lucene's searches, on rank 0's CPU


def _plan(spec: MethodSpec) -> list[dict]:
    return plan_method(spec, list(spec.get("datasets"))).stages.entries


@pytest.mark.parametrize("method", ["cocondenser", "cocondenser_qc", "cotmae", "cotmae_qc", "cpdae", "nopretrain"])
def test_every_dense_search_is_priced_at_2_q_n_d_over_every_device(method: str) -> None:
    spec = load_method(method, "paper")
    entries = _plan(spec)
    searches = [e for e in entries if e["stage"] == "dense_retrieve" and e.get("plan") == "to run"]
    costs = _costs(spec)
    assert searches, method
    for entry in searches:
        cost = costs[f"{projection._label(entry)} (search)"]
        dataset = entry["dataset"]
        queries = (
            502_939
            if dataset.endswith("/mine")
            else {"msmarco-dev": 6980, "dl19": 43, "dl20": 54}[dataset.split("/")[0]]
        )
        assert cost.tflop == pytest.approx(2 * queries * 8_841_823 * 768 / 1e12)
        assert cost.parallel  # every rank searches its own shard
    lines = "\n".join(_describe(spec, entries))
    assert "(search)" in lines and "2 x 6,980 queries x 8,841,823 passages x 768" in lines


def test_a_search_divides_over_the_declared_gpus() -> None:
    search = projection.Cost("s", 1000.0, projection.SEARCH_KIND, parallel=True)
    one = projection.stage_time(search, 1, 10.0)
    sixteen = projection.stage_time(search, 16, 10.0)
    assert sixteen[0] == pytest.approx(one[0] / 16) and sixteen[1] == pytest.approx(one[1]) and sixteen[2] == 0


def test_fine_tuning_is_priced_at_its_own_precision() -> None:
    spec = load_method("cotmae", "paper")  # 16 x V100: fp16 tensor cores 125 TFLOP/s, fp32 15.7
    assert _costs(spec)["retriever1"].precision == projection.HALF
    config = copy.deepcopy(spec.config)
    config["finetune"]["precision"] = "fp32"
    fp32 = MethodSpec(spec.name, spec.profile, spec.path, config)
    assert _costs(fp32)["retriever1"].precision == projection.FP32
    half_h = projection.declared_total(spec, _plan(spec)).hours
    fp32_h = projection.declared_total(fp32, _plan(fp32)).hours
    assert half_h is not None and fp32_h is not None
    half_ft, fp32_ft = (projection._rate(_costs(s)["retriever1"], "V100", 1.0) for s in (spec, fp32))
    assert half_ft / fp32_ft == pytest.approx(125.0 / 15.7)
    assert fp32_h > half_h  # the two fp32 retriever stages cost more on the V100s


def test_grad_cache_memory_is_one_chunks() -> None:
    spec = load_method("cocondenser", "paper")
    pre = _costs(spec)["pretrain"]
    assert pre.batch == min(int(spec.get("pretrain.per_device_batch")), int(spec.get("pretrain.grad_cache_chunk")))
    assert "memory of chunks of" in pre.note


SEARCH_STAGES = ("dense_retrieve", "impact_search", "retrieve")  # every stage that searches a corpus


@pytest.mark.parametrize("method", pretraining_methods("paper") + ["bm25"])
def test_every_search_stage_of_a_paper_plan_is_priced(method: str) -> None:
    """Dense searches by their FLOPs, Lucene's (BM25, impact) by their CPU seconds: none left unpriced."""
    spec = load_method(method, "paper")
    costs = _costs(spec)
    searches = [e for e in _plan(spec) if e["stage"] in SEARCH_STAGES and e.get("plan") == "to run"]
    assert searches, method
    for entry in searches:
        suffix = " (search)" if entry["stage"] == "dense_retrieve" else " (Lucene)"
        cost = costs[projection._label(entry) + suffix]
        assert cost.tflop is not None or cost.cpu_seconds is not None, (method, cost)


def test_a_lucene_search_is_priced_by_its_stated_rate_on_rank_0() -> None:
    spec = load_method("lexmae", "paper")
    costs = _costs(spec)
    impact = costs["impact_search/msmarco-dev/dev/retriever1 (Lucene)"]
    assert impact.cpu_seconds == pytest.approx(6980 / 45.83)  # LexMAE's stated QPS at MS MARCO's size
    assert not impact.parallel and impact.tflop is None and "45.83 QPS" in impact.note
    mined = costs["impact_search/msmarco-passage-train/train/mine-retriever1 (Lucene)"]
    assert mined.cpu_seconds == pytest.approx(502_939 / 45.83)
    # every device the run holds waits while rank 0 searches
    wall, gpu_h, idle_h = projection.stage_time(impact, 8, 1.0)
    assert wall == impact.cpu_seconds and gpu_h == idle_h == pytest.approx(wall * 8 / 3600)
    per, _ = projection.bm25_seconds_per_query_passage()
    bm25 = costs["retrieve/msmarco-passage-train (Lucene)"]
    assert per > 0 and bm25.cpu_seconds == pytest.approx(502_939 * 8_841_823 * per)


def test_mining_states_rank_0s_merge_memory() -> None:
    from harness.retrieval.rank_search import MERGE_QUERIES

    spec = load_method("cotmae_qc", "paper")  # 16 x V100, mining to retriever 2's depth of 200
    cost = _costs(spec)["dense_retrieve/msmarco-passage-train/train/mine (search)"]
    held = MERGE_QUERIES * 200 * 16 * 12 / 2**30
    assert f"{held:.2f} GiB of 16 ranks' top-200 lists" in cost.note
    assert f"all 502,939 at once: {502_939 * 200 * 16 * 12 / 2**30:.1f} GiB" in cost.note


def test_no_stage_of_any_dry_run_is_not_projected() -> None:
    """Every method x profile's projection prices every stage it lists (the tiny T5 and cross-encoder too)."""
    from harness.spec.files import list_methods
    from harness.spec.method import profiles_of

    assert projection.NOT_PROJECTED not in {s.cost for s in projection.STAGES.values()}
    for method, profile in [(m, p) for m in list_methods() for p in profiles_of(m)]:
        spec = load_method(method, profile)
        unpriced = [c for c in _costs(spec).values() if c.tflop is None and c.cpu_seconds is None]
        assert not unpriced, (method, profile, unpriced)
        text = "\n".join(_describe(spec, _plan(spec)))
        assert "not projected (no measured step" not in text, (method, profile)
