"""The `rehearsal` profile: a method's paper profile with the smallest change that runs every stage
on 2 CPU cores in minutes, so a GPU user's first paper run is not the first integration test.

Kept from the paper profile: every shape (bert-base dimensions, sequence lengths, per-device batch,
passages per query, negative depths (mining searches to them), decoder layers, mask rates, gradient-cache
chunks, queries per passage, LexMAE's three stages and its impact index), the data formats and the
stage graph. Changed, each by one rule below (``validate`` prints the resulting differences key by
key, computed from the two resolved specs, so the list cannot drift from what runs):

* weights: bert-base-uncased's shape, randomly initialised (no Hub here), with bert-base-uncased's
  own WordPiece vocabulary (the one all-MiniLM-L6-v2 ships);
* query generation: the term sampler fitted on the training pairs instead of doc2query-T5;
* LexMAE's stage-3 teacher: a cross-encoder trained here (no released reranker here);
* optimiser steps: one pre-training step at the per-device batch (the global batch is that one
  device's batch: the record's ``effective_batch`` says so; an objective that accumulates and has
  no gradient cache steps over it in micro-batches of :data:`MICRO_BATCH`, for memory and time), one step per
  fine-tuning stage at one device's share of the paper's queries per step, at most 4 for memory
  (:func:`device_share`: CoT-MAE 64 / 16 = 4, coCondenser 64 / 8 = 8 -> 4, LexMAE 24 / 8 = 3 and
  16 / 8 = 2), one epoch, and no learning-rate warm-up (:data:`WARMUP_RATIO`: linear warm-up starts at
  lr 0, so a one-step stage under the paper's warm-up trains nothing, and the four dense methods'
  rehearsals came out identical; validation refuses such a stage, harness.run.validation);
* learned-sparse documents: their top :data:`SPARSE_TOPK` terms (``retrieval.topk_sparsify``, the
  paper's top-K sparsifying, Fig. 3) where the paper keeps all: a randomly initialised MLM head
  weights ~29,600 of 30,522 terms in every passage, and the Lucene impact index writes each term as
  often as its impact (1.8M tokens a passage), which took 2/3 of the LexMAE rehearsal's time;
* data: every upstream file from the fixture mirror (``data.mirror``: tests/fixtures/msmarco_mirror,
  the same file names and formats as the publishers', a few hundred lines each), MS MARCO dev and
  BEIR as seeded samples (``<name>@sample``: :data:`harness.data.sampled.QUERIES` judged queries,
  at most ``JUDGED_PER_QUERY`` of each one's judged documents, and ``DISTRACTORS`` others), and the
  BEIR sets only whose corpora ship with the project.

fp32 on CPU, the paper's precision on CUDA (the precision setting stays the paper's; the
engine falls back on CPU and says so).
"""

from __future__ import annotations

import copy
from typing import Any

from harness.core import benchmarks as declared
from harness.data import sampled
from harness.spec.block_settings import LUCENE_MAX_CLAUSES

# bert-base-uncased's architecture (Devlin et al. 2019), in the spec's `model:` keys.
BERT_BASE_ARCH = {"init": "scratch", "layers": 12, "hidden": 768, "heads": 12, "intermediate": 3072}
VOCABULARY_OF = "all-minilm-l6-v2"  # ships bert-base-uncased's WordPiece vocabulary (30,522)
PRETRAIN_STEPS = 1
# Every rehearsal stage takes one optimiser step: with any warm-up that step would be at lr 0.
WARMUP_RATIO = 0.0
FIXTURE_MIRROR = "tests/fixtures/msmarco_mirror"  # relative to the project root
# At most this many queries per fine-tuning step on a 24 GiB CPU machine: an fp32 dense step of 8 x 16
# passages of 144 tokens peaks at ~14 GiB before the optimiser's state exists, and its second step ran
# out of memory (coCondenser, measured); 4 x 16 fits. CPDAE's paper states no hardware (64 on 1).
FINETUNE_QUERIES = 4
PRETRAIN_PASSAGES = 600
# Sequences of 144 tokens per accumulated micro-batch; objectives that cannot accumulate use their
# grad_cache_chunk instead. Measured on 2 cores (AMD EPYC, 2026-11-26), LexMAE's 256-passage step:
# micro-batches of 64 took 235 s and peaked at 19 GiB (its [64 x 144 x 30,522] bottleneck logits),
# 32: 175 s / 12 GiB, 16: 159 s / 7.3 GiB, 8: 150 s / 5.1 GiB.
MICRO_BATCH = 16
# Terms a learned-sparse document keeps in the rehearsal: as many as a query may (Lucene's clause limit).
SPARSE_TOPK = LUCENE_MAX_CLAUSES
# The BEIR sets whose corpora are embedded: the others are downloads this machine cannot make.
EMBEDDED_BEIR = declared.with_embedded_corpus("beir")
# The evaluation sets over the MS MARCO passages (their corpus is the fixture collection in a rehearsal).
ON_MSMARCO = declared.on_corpus("msmarco-passage")


def device_share(global_queries: int, devices: int) -> int:
    """One device's queries of a fine-tuning step: the paper's global batch over its declared devices,
    at least 2 (in-batch negatives need another query), at most :data:`FINETUNE_QUERIES` (memory)."""
    return max(2, min(FINETUNE_QUERIES, global_queries // max(1, devices)))


def rehearsal_overrides(paper: dict[str, Any]) -> dict[str, Any]:
    """What the rehearsal sets over the resolved paper profile ``paper`` (deep-merged over it)."""
    out: dict[str, Any] = {
        "model": dict(BERT_BASE_ARCH),
        "tokenizer": {"from": VOCABULARY_OF},
        "data": {"mirror": FIXTURE_MIRROR},
        # one device: the plan maps the batches onto it (the global batch is that device's batch)
        "hardware": {"devices": 1, "hours": None},
        "corpus": {"max_passages": PRETRAIN_PASSAGES},
        "substitutions": [
            f"weights: bert-base-uncased's shape ({BERT_BASE_ARCH['layers']} x {BERT_BASE_ARCH['hidden']}), "
            "randomly initialised, with its WordPiece vocabulary, instead of a pre-trained checkpoint",
            f"a rehearsal of the paper plan: {PRETRAIN_STEPS} pre-training step, one step per fine-tuning stage "
            "(no learning-rate warm-up: a one-step stage under linear warm-up would train at lr 0), "
            f"data from the fixture mirror ({FIXTURE_MIRROR}), sampled evaluation sets (<name>{sampled.SUFFIX}: "
            f"{sampled.QUERIES} queries, <= {sampled.JUDGED_PER_QUERY} judged documents each + {sampled.DISTRACTORS} "
            "distractors); its numbers "
            "say nothing about the method",
        ],
    }
    pretrain = _pretrain_overrides(paper.get("pretrain") or {}, out["substitutions"])
    if pretrain is not None:
        out["pretrain"] = pretrain
    if paper.get("family") == "learned-sparse" and not (paper.get("retrieval") or {}).get("topk_sparsify"):
        out["retrieval"] = {"topk_sparsify": SPARSE_TOPK}
        out["substitutions"].append(
            f"impact index: documents keep their top {SPARSE_TOPK} terms (the paper keeps all): a randomly "
            "initialised MLM head weights nearly every one of the 30,522 terms in each passage, and Lucene writes "
            "each term as often as its impact"
        )
    if paper.get("qgen"):
        out["qgen"] = {"model": "term-sampler", "train_pairs": paper["finetune"]["train_queries"]}
        out["substitutions"].append("queries: a term sampler fitted on the training pairs instead of doc2query-T5")
    out["finetune"] = _finetune_overrides(paper, out["substitutions"])
    # TREC DL's 43/54 judged queries over the fixture collection are small already; MS MARCO dev's
    # 6,980 queries and the BEIR corpora are sampled; BEIR sets whose corpora are downloads are left out.
    datasets = list(paper.get("datasets") or [])
    if any(d not in ON_MSMARCO for d in datasets):
        datasets = [d for d in datasets if d in ON_MSMARCO] + list(EMBEDDED_BEIR)
    out["datasets"] = [d if declared.get(d).kind == "trec-dl" else d + sampled.SUFFIX for d in datasets]
    return out


def _pretrain_overrides(pretrain: dict[str, Any], substitutions: list[str]) -> dict[str, Any] | None:
    """The rehearsal's pre-training (None when the paper pre-trains nothing): its few steps over one device's
    batch, accumulated in micro-batches that fit; each change is added to ``substitutions``."""
    if pretrain.get("objective") in (None, "none"):
        return None
    device_batch = pretrain.get("per_device_batch") or pretrain.get("global_batch")
    out: dict[str, Any] = {
        "steps": PRETRAIN_STEPS,
        "epochs": None,
        "global_batch": device_batch,
        "warmup_ratio": WARMUP_RATIO,
    }
    if not pretrain.get("grad_cache_chunk") and (device_batch or 0) > MICRO_BATCH:
        # the same optimiser step over the device's batch, accumulated in micro-batches that fit
        out["per_device_batch"] = MICRO_BATCH
        substitutions.append(
            f"pre-training memory: the per-device batch of {device_batch} is one optimiser step over "
            f"{int(device_batch or 0) // MICRO_BATCH} accumulated micro-batches of {MICRO_BATCH} (an fp32 step at "
            f"{device_batch} x {pretrain.get('max_length')} tokens does not fit a 24 GiB CPU machine); the "
            "gradient is the same sum"
        )
    return out


def _finetune_overrides(paper: dict[str, Any], substitutions: list[str]) -> dict[str, Any]:
    """The rehearsal's fine-tuning: one step per stage at one device's share of the paper's batch (as many
    training queries as one step takes, one epoch); each key is set where the paper profile sets it (the
    top level or a stage's own block), nowhere else; each change is added to ``substitutions``."""
    paper_ft = paper.get("finetune") or {}
    devices = int((paper.get("hardware") or {}).get("devices") or 1)
    finetune: dict[str, Any] = {}
    shares = []
    for block, where in [(paper_ft, finetune)] + [
        (paper_ft[s], finetune.setdefault(s, {})) for s in ("retriever1", "retriever2", "retriever3") if s in paper_ft
    ]:
        if "global_queries" in block:
            where["global_queries"] = device_share(int(block["global_queries"]), devices)
            shares.append(where["global_queries"])
            if where["global_queries"] < int(block["global_queries"]) // devices:
                capped = f"{block['global_queries']} / {devices} device(s)"
                substitutions.append(
                    f"fine-tuning memory: {where['global_queries']} queries per step instead "
                    f"of one device's share of the paper's ({capped}); an fp32 step at that "
                    "size does not fit a 24 GiB CPU machine"
                )
        if "epochs" in block:
            where["epochs"] = 1
        if "warmup_ratio" in block:
            where["warmup_ratio"] = WARMUP_RATIO
    finetune["warmup_ratio"] = WARMUP_RATIO  # the shared key: a stage that states none reads it
    finetune["max_train_queries"] = max(shares or [FINETUNE_QUERIES])
    r3 = paper_ft.get("retriever3") or {}
    if r3.get("reranker") == "configured-checkpoint":
        finetune["retriever3"].update(
            reranker="tiny-cross-encoder",
            reranker_train={
                "epochs": 1,
                "queries_per_device": finetune["max_train_queries"],
                "warmup_ratio": WARMUP_RATIO,
            },
        )
        substitutions.append(
            "stage-3 teacher: a cross-encoder trained here for one epoch instead of the paper's off-the-shelf reranker"
        )
    return finetune


def apply(paper: dict[str, Any], own: dict[str, Any] | None, merge: Any) -> dict[str, Any]:
    """The rehearsal's resolved config: paper, then the rules, then the spec's own `rehearsal` block."""
    over = rehearsal_overrides(paper)
    resolved = merge(copy.deepcopy(paper), {k: v for k, v in over.items() if k != "substitutions"})
    resolved["substitutions"] = list(paper.get("substitutions") or []) + over["substitutions"]
    resolved.pop("deviations", None)  # the paper's deviations are the paper profile's; the rehearsal lists its own
    resolved.pop("assumptions", None)
    # The paper's half-precision fine-tuning needs CUDA; the rehearsal runs on a CPU in fp32 (as before the
    # paper profiles stated it), so its settings and its committed references stay the same.
    (resolved.get("finetune") or {}).pop("precision", None)
    return merge(resolved, own or {})


def differences(paper: dict[str, Any], rehearsal: dict[str, Any], prefix: str = "") -> list[str]:
    """Every key whose value the rehearsal changes, as ``key: paper -> rehearsal`` lines."""
    lines = []
    for key in sorted(set(paper) | set(rehearsal), key=str):
        if key in ("profile", "substitutions", "deviations", "assumptions", "conditions"):
            continue
        a, b = paper.get(key), rehearsal.get(key)
        if isinstance(a, dict) or isinstance(b, dict):  # a block only one side has is listed key by key
            if isinstance(a or {}, dict) and isinstance(b or {}, dict):
                lines += differences(a or {}, b or {}, f"{prefix}{key}.")
                continue
        if a != b:
            lines.append(f"{prefix}{key}: {a!r} -> {b!r}")
    return lines
