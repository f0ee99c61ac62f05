"""What a run states about its setting, derived from the settings that ran (never typed by hand).

A reported cell states the conditions it was produced under (``harness.papers.schema.CONDITION_KEYS``);
a run is graded against it only when it states the same ones with equal values
(``harness.evaluation.compare.comparability``). Every condition here is computed from the
resolved spec, so a spec with ``pretrain.steps: 1000`` states 1000 steps and no 50K-step cell is
graded against it. Declared ``deviations`` (each naming the conditions it ``touches``, or
``recipe`` for the method's whole result) make the cells stating those conditions NOT-COMPARABLE.

A declared variant (``variant_of: {method, conditions}``: QC with one query per passage, LexMAE
pre-trained on the BEIR collections) states its parent's method, so its paper runs are graded against
the parent's cells, but only those that state one of the conditions it names (``VARIANT``): a cell that
names none of them is the parent's own setting, which the variant does not run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from harness.core import benchmarks as declared
from harness.data.sampled import base_name
from harness.papers.released import load_checkpoints
from harness.spec.stage_settings import BI_ENCODER_TEACHER, CONFIGURED_RERANKER, TINY_RERANKER

RECIPE = "recipe"  # a deviation that touches every number the method produces
# LexMAE's stage-3 teacher: the off-the-shelf ranker of Zhou et al. (2022b, arXiv 2206.08063), which
# the paper distils; a configured checkpoint is found by its folder under models/, this by default, and
# identified by its weights (the spec's reranker_sha256; no copy of this one has been checked here yet).
PAPER_RERANKER = "zhou2022b-ranker"
UNIDENTIFIED = "weights unidentified: no finetune.retriever3.reranker_sha256"
VARIANT = "variant_conditions"  # a variant run's conditions, one of which a cell must state to be graded
VARIANT_SPEC = "variant"  # the variant's own spec name (its runs state the parent's method)


@dataclass(frozen=True)
class Variant:
    """What a ``variant_of`` block declares: the method whose cells it grades, and which of them."""

    method: str
    conditions: tuple[str, ...]


def variant_of(config: Mapping[str, Any]) -> Variant | None:
    """The spec's declared variant, or None for a method of its own."""
    block = config.get("variant_of")
    if not isinstance(block, Mapping) or not block.get("method"):
        return None
    return Variant(str(block["method"]), tuple(str(c) for c in block.get("conditions") or ()))


def graded_method(config: Mapping[str, Any], method: str) -> str:
    """The method whose papers' cells a run of this spec is graded against: its own, or its parent's."""
    variant = variant_of(config)
    return variant.method if variant else method


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


# What LexMAE Table 3's cells state as their pre-training corpus ("we pre-train LexMAE on BEIR collections").
BEIR_COLLECTIONS = "BEIR collections"


def released_pretrained(init: Any) -> str | None:
    """The released pre-trained checkpoint (baselines/released/checkpoints.yaml) an init names, by its source."""
    for ckpt in load_checkpoints().checkpoints.values():
        if init and ckpt.kind == "pretrained" and ckpt.source == str(init):
            return ckpt.name
    return None


def corpus_condition(source: Any) -> str:
    """A pre-training corpus as a cell states it: the collections of a BEIR average the papers print
    (LexMAE's twelve), united, are "BEIR collections"; any other list is its names joined by '+'."""
    if not isinstance(source, list):
        return str(source)
    if any(set(source) == set(members) for _, members, _ in declared.aggregates()):
        return BEIR_COLLECTIONS
    return "+".join(map(str, source))


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
            released = released_pretrained((config.get("model") or {}).get("init"))
            if released:  # fine-tuned from a released pre-trained model (LexMAE Table 7's coCondenser row)
                out["checkpoint"] = released
        else:
            if pretrain.get("steps"):  # an epoch-based schedule (CPDAE) states no step count
                out["pretrain_steps"] = int(pretrain["steps"])
            out["pretrain_corpus"] = corpus_condition((config.get("corpus") or {}).get("source"))
        init = (config.get("model") or {}).get("init")
        if init:
            out["init"] = str(init)
        train = finetune.get("train_queries")
        if train:  # a published hard-negative file is what the retriever trained on (QC v2's BEIR table)
            out["finetune_data"] = str(finetune.get("hard_negatives") or train)
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
    if str(finetune.get("train_queries") or "").startswith("msmarco-passage") and not finetune.get("hard_negatives"):
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


def run_conditions(config: Mapping[str, Any], method: str, profile: str) -> dict[str, Any]:
    """Everything a run states for grading: derived conditions, profile, method, deviations."""
    out = derived(config)
    variant = variant_of(config)
    out.update(profile=profile, method=variant.method if variant else method)
    if variant:
        out.update({VARIANT: list(variant.conditions), VARIANT_SPEC: method})
    touched = deviations(config)
    if touched:
        out["deviations"] = touched
    return out
