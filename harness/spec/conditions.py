"""What a run states about its setting, derived from the settings that ran (never typed by hand).

A reported cell states the conditions it was produced under (``harness.papers.schema.CONDITION_KEYS``);
a run is graded against it only when it states the same ones with equal values
(``harness.evaluation.compare.comparability``). Every condition here is computed from the
resolved spec, so a spec with ``pretrain.steps: 1000`` states 1000 steps and no 50K-step cell is
graded against it. Declared ``deviations`` (each naming the conditions it ``touches``, or
``recipe`` for the method's whole result) make the cells stating those conditions NOT-COMPARABLE.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.core import benchmarks as declared
from harness.data.sampled import base_name
from harness.spec.stage_settings import BI_ENCODER_TEACHER, CONFIGURED_RERANKER, TINY_RERANKER

RECIPE = "recipe"  # a deviation that touches every number the method produces
# LexMAE's stage-3 teacher: the off-the-shelf ranker of Zhou et al. (2022b, arXiv 2206.08063), which
# the paper distils; a configured checkpoint is found by its folder under models/, this by default, and
# identified by its weights (the spec's reranker_sha256; no copy of this one has been checked here yet).
PAPER_RERANKER = "zhou2022b-ranker"
UNIDENTIFIED = "weights unidentified: no finetune.retriever3.reranker_sha256"


def teacher_condition(r3: Mapping[str, Any]) -> str:
    """What a run states as its stage-3 teacher: the kind of one trained or scored here (tiny-cross-encoder,
    bi-encoder); a checkpoint teacher by its name only when the spec identifies its weights
    (``reranker_sha256``, which the run checks before it scores): a folder name says nothing of what is in
    it, so an unidentified teacher is graded against no cell of a named one."""
    choice = str(r3["reranker"])
    if choice in (TINY_RERANKER, BI_ENCODER_TEACHER):
        return choice
    name = str(r3.get("reranker_checkpoint") or PAPER_RERANKER) if choice == CONFIGURED_RERANKER else choice
    return name if r3.get("reranker_sha256") else f"{name} ({UNIDENTIFIED})"


def derived(config: Mapping[str, Any]) -> dict[str, Any]:
    """The conditions that follow from a resolved spec's settings."""
    out: dict[str, Any] = {}
    family = config.get("family")
    pretrain = config.get("pretrain") or {}
    finetune = config.get("finetune") or {}
    data = config.get("data") or {}
    if family != "lexical":
        objective = pretrain.get("objective")
        if objective in (None, "none"):
            out["pretrain_steps"] = 0
        else:
            if pretrain.get("steps"):  # an epoch-based schedule (CPDAE) states no step count
                out["pretrain_steps"] = int(pretrain["steps"])
            corpus = (config.get("corpus") or {}).get("source")
            out["pretrain_corpus"] = "+".join(corpus) if isinstance(corpus, list) else str(corpus)
        init = (config.get("model") or {}).get("init")
        if init:
            out["init"] = str(init)
        train = finetune.get("train_queries")
        if train:
            out["finetune_data"] = str(train)
        if finetune.get("max_train_queries"):
            out["finetune_queries"] = int(finetune["max_train_queries"])
        r3 = finetune.get("retriever3") or {}
        if r3.get("reranker"):
            out["reranker_teacher"] = teacher_condition(r3)
    top_k = (config.get("retrieval") or {}).get("topk_sparsify")
    if top_k:  # sparse retrievers keeping only the top-k terms per document (LexMAE Table 4)
        out["sparsify_top_k"] = int(top_k)
    context = pretrain.get("context")
    if context in ("qc", "mixed"):  # query-as-context: how many generated queries, and mixed contexts
        out["query_number"] = (config.get("qgen") or {}).get("num_queries")
        out["mixed"] = context == "mixed"
    if _reads_msmarco_passages(config):  # titled or not: a known source of mismatch (texttron/tevatron#106)
        out["msmarco_passages"] = data.get("msmarco_passages", "plain")
    if str(finetune.get("train_queries") or "").startswith("msmarco-passage"):
        out["bm25_negatives"] = data.get("bm25_negatives", "own")  # which negatives retriever 1 trained on
    return out


def _reads_msmarco_passages(config: Mapping[str, Any]) -> bool:
    """Whether a trained method fine-tunes or evaluates on the MS MARCO passage collection."""

    if config.get("family") == "lexical":
        return False
    train = str((config.get("finetune") or {}).get("train_queries") or "")
    return train.startswith("msmarco-passage") or any(
        base_name(str(d)) in declared.on_corpus("msmarco-passage") for d in config.get("datasets") or []
    )


def deviations(config: Mapping[str, Any]) -> dict[str, str]:
    """condition (or ``recipe``) -> the declared deviation that touches it."""
    out: dict[str, str] = {}
    for item in config.get("deviations") or []:
        if isinstance(item, Mapping):
            touches = item.get("touches")
            for key in [touches] if isinstance(touches, str) else list(touches or []):
                out.setdefault(str(key), str(item.get("why", "")))
    return out


def graded_method(config: Mapping[str, Any], name: str) -> str:
    """The method whose papers' cells a run of spec ``name`` is graded against: its own, or for a declared
    variant (``variant_of``: e.g. cpdae_pairwise, CPDAE with the paper's own fine-tuning) the method it is
    a variant of; which of those cells it grades is then the condition rule's (its deviations, its stages)."""
    return str(config.get("variant_of") or name)


def run_conditions(config: Mapping[str, Any], method: str, profile: str) -> dict[str, Any]:
    """Everything a run states for grading: derived conditions, profile, the method it is graded as
    (:func:`graded_method`), deviations."""
    out = derived(config)
    out.update(profile=profile, method=graded_method(config, method))
    touched = deviations(config)
    if touched:
        out["deviations"] = touched
    return out
