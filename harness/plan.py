"""The stage plan and hardware mapping of a resolved spec (what `run --dry-run` prints).

The paper profiles declare their hardware (e.g. 16 x V100 for CoT-MAE + QC). On other
hardware the harness keeps the global batch: per-device batch x devices x accumulation, or
gradient caching when a contrastive loss needs the whole batch at once.
"""

from __future__ import annotations

from typing import Any

from harness.hardware import Hardware, detect
from harness.spec import MethodSpec

STAGE_HELP = {
    "index": "build the Lucene index of each corpus",
    "retrieve": "top-k search for every test query",
    "corpus": "train Punkt on the corpus, group sentences into passages, build pairs",
    "qgen": "generate candidate queries per passage (query-as-context)",
    "pretrain": "pre-train the encoder with the objective, export it as a plain BERT",
    "finetune_r1": "retriever 1: fine-tune on BM25 negatives",
    "mine": "mine hard negatives with retriever 1",
    "finetune_r2": "retriever 2: fine-tune on mined negatives",
    "finetune_r3": "stage 3: distil a cross-encoder reranker",
    "evaluate": "encode, index, retrieve and evaluate every benchmark; compare with the papers",
}


def world_size(hw: Hardware) -> int:
    return hw.devices if hw.device_type == "cuda" else 1


def describe(spec: MethodSpec, datasets: list[str], hw: Hardware | None = None) -> str:
    hw = hw or detect()
    lines = [f"plan for {spec.name} [{spec.profile}] (spec hash {spec.spec_hash}, seed 42)"]
    declared = spec.get("hardware") or {}
    on_cpu = declared.get("device_type", "cpu") == "cpu"  # a tiny profile inherits the paper's gpu/hours keys
    decl = (f"{declared.get('devices', 1)} x {'cpu' if on_cpu else declared.get('gpu') or declared.get('device_type')}"
            + (f", {declared['hours']} h" if declared.get("hours") and not on_cpu else ""))
    lines.append(f"  hardware: declared {decl}; detected {hw.describe()}")
    stages = list(spec.get("stages", []))
    if "qgen" not in stages and spec.get("pretrain.context") in ("qc", "mixed"):
        stages.insert(stages.index("pretrain") if "pretrain" in stages else 0, "qgen")
    lines.append("  stages:")
    for i, stage in enumerate(stages, 1):
        lines.append(f"    {i}. {stage:<12} {STAGE_HELP.get(stage, '')}")
        lines.extend(f"         {detail}" for detail in stage_details(spec, stage, hw))
    lines.append(f"  benchmarks: {', '.join(datasets)}")
    return "\n".join(lines)


def stage_details(spec: MethodSpec, stage: str, hw: Hardware) -> list[str]:
    if stage == "pretrain":
        return pretrain_details(spec, hw)
    if stage == "qgen":
        q = spec.get("qgen") or {}
        return [f"model {q.get('model')}, {q.get('num_queries')} queries/passage, top_k {q.get('top_k')}, "
                f"top_p {q.get('top_p')}, prefix {q.get('input_prefix')!r}; sharded over {world_size(hw)} rank(s)"]
    if stage.startswith("finetune_r"):
        return finetune_details(spec, stage, hw)
    if stage == "mine":
        mine = spec.get("finetune.mine") or {}
        return [f"depth {mine.get('depth')} with {mine.get('with')} through a faiss index"]
    if stage in ("index", "retrieve"):
        r = spec.get("retrieval") or {}
        return [", ".join(f"{k} {v}" for k, v in r.items())] if r else []
    return []


def pretrain_details(spec: MethodSpec, hw: Hardware) -> list[str]:
    from harness.pretrain.objectives import OBJECTIVES
    from harness.pretrain.trainer import plan_batches

    pre = spec.get("pretrain") or {}
    cls = OBJECTIVES[pre["objective"]]
    n = world_size(hw)
    lines = [f"objective {pre['objective']} ({pre.get('context', 'span')} context), params {pre.get('objective_params') or {}}",
             f"init {spec.get('model.init')}, steps {pre.get('steps') or str(pre.get('epochs')) + ' epochs'}, "
             f"lr {pre.get('lr')}, warm-up {pre.get('warmup_ratio')}, max length {pre.get('max_length')}"]
    declared_n = int((spec.get("hardware") or {}).get("devices", 1))
    try:
        declared_plan = plan_batches(pre["global_batch"], pre["per_device_batch"], declared_n,
                                     cls.supports_accumulation, pre.get("grad_cache_chunk"), cls.gathers_across_ranks)
        lines.append(f"declared: {declared_plan['note']}")
        here = plan_batches(pre["global_batch"], pre["per_device_batch"], n, cls.supports_accumulation,
                            pre.get("grad_cache_chunk"), cls.gathers_across_ranks)
        lines.append(f"here:     {here['note']}")
    except Exception as exc:  # noqa: BLE001 - the plan reports the problem instead of failing
        lines.append(f"batch mapping problem: {exc}")
    precision = pre.get("precision", "fp32")
    if precision != "fp32" and hw.device_type != "cuda":
        lines.append(f"precision: {precision} declared; fp32 here (mixed precision needs CUDA)")
    else:
        lines.append(f"precision: {precision}")
    return lines


def finetune_details(spec: MethodSpec, stage: str, hw: Hardware) -> list[str]:
    ft = dict(spec.get("finetune") or {})
    sub = ft.get(stage.replace("finetune_r", "retriever"), {}) or {}
    merged: dict[str, Any] = {**{k: v for k, v in ft.items() if not isinstance(v, dict)}, **sub}
    n = world_size(hw)
    q = merged.get("global_queries")
    p = merged.get("passages_per_query")
    lines = [f"init {sub.get('init', 'pretrained')}, negatives {sub.get('negatives')}, depth {sub.get('negative_depth', 200)}, "
             f"epochs {sub.get('epochs')}, lr {merged.get('lr')}"]
    if q and p:
        per = q // n if q % n == 0 else q / n
        lines.append(f"effective batch {q} queries x {p} passages = {q * p} ({n} device(s) x {per} queries each)")
    for key in ("flops_lambda", "distill", "contrastive_weight"):
        if key in sub:
            lines.append(f"{key} {sub[key]}")
    return lines
