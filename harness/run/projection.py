"""What a planned run would cost: FLOPs, wall time and peak memory per stage, for the declared
hardware and for the hardware present, printed by ``run --dry-run``.

Measured, not estimated: the FLOPs of one step of each kind (each pre-training objective at its
paper per-device batch, one fine-tuning step of 64 queries x 16 passages, encoding 512 passages; all
at bert-base shape and 144 tokens) were counted by ``torch.utils.flop_counter`` on the step itself,
with its wall time and peak memory, by ``bench/paper_shape_smoke.py`` on one H100 (bf16); the rows
are :data:`MEASURED`. A stage's FLOPs are that step's scaled by its batch and step count, by the
cost function registered for its stage (``cost=PROJECTED`` in harness/stages/graph.py; the built-in stages'
are defined here).

Assumptions, stated with every projection:
* utilisation: on an H100/H200 each kind of step reaches the fraction of the dense fp16/bf16 peak it
  reached in the measurement (11-39%); on another GPU type those fractions are scaled by what a
  paper's own stated pre-training hours on that type imply (:func:`calibration`: from another
  paper on the same type where there is one, so the paper's own hours stay a check; else from its
  own, said so); a stage every rank runs (training) or shares (sharded query generation, encoding and
  teacher scoring, harness/stages/graph.py ``ranks``) scales linearly over the devices (no communication
  cost); a stage rank 0 runs alone takes one device while the others idle: its GPU-hours count every
  device the run holds, its idle GPU-hours the others;
* encoding runs at the end-to-end rate measured on the H100 (tokenisation included), 1/15 of the
  forward-only rate (:data:`ENCODE_END_TO_END`, bench/README.md);
* gradient caching (a contrastive objective whose batch does not fit) adds one forward pass to each
  step: 4/3 of a plain step's FLOPs; its peak memory is that of one chunk (``grad_cache_chunk``), not of
  the per-device batch;
* precision: a training stage is priced at the precision it trains in (its key's): fp16/bf16 at the
  measured half-precision fraction of the card's fp16/bf16 peak, fp32 at the same fraction of the
  card's fp32 peak (:data:`GPU_FP32_PEAK`: TF32 tensor cores on A100/H100/H200, which the engine turns
  on, plain fp32 on a V100); encoding on CUDA runs under fp16 autocast (harness.training.precision);
* search: an exact inner-product search is 2 x queries x corpus x dim FLOPs (the top-k selection not
  counted), each rank scoring its own shard of the corpus vectors on its own GPU, so it is divided over
  every device the run holds, at the fraction of the fp16 peak the encoding's forward reached (a
  matmul-bound step: :data:`SEARCH_KIND`); its memory is the shard of fp16 vectors a device keeps;
* the CPU present runs at half of the fp32 matrix-multiply rate measured when the plan is printed;
* memory: the measured peak scaled linearly with the per-device batch (activations dominate);
* model: the measured steps scaled to the spec's own encoder shape and sequence lengths by the ratio
  of their analytic FLOPs (harness/run/model_shape.py; exactly 1 at bert-base and the measured lengths);
* sizes: corpora as published (MS MARCO 8,841,823 passages; BEIR: Thakur et al. 2021, Table 1).
* query generation: the analytic FLOPs of harness/run/generation_flops.py (checked against
  ``torch.utils.flop_counter`` on a generation step by bench/bench_qgen.py) at t5-base shape for a
  checkpoint (doc2query), every passage of the pre-training corpus at ``pretrain.max_length`` tokens
  and ``num_queries`` x ``max_new_tokens`` generated tokens (the cap: an upper bound), at the
  encoding's rate (inference, tokenisation-bound: :data:`ENCODE_END_TO_END`);
* the tiny T5's training (``qgen_model``) and the tiny cross-encoder's (``reranker``): forward and backward
  (x3) of their shapes at the encoding's / the fine-tuning step's utilisation (no measured step of their own);
* Lucene searches (BM25 ``retrieve``, LexMAE's ``impact_search``): no FLOP count; rank 0's CPU seconds by
  postings traversed ~ queries x passages at a stated rate (:func:`lucene_search_cost`), every GPU idle;
* a mining search also states rank 0's merge memory (harness/retrieval/rank_search.py ``merge_bytes``).
Every stage is priced; a stage whose queries or corpus size is not declared says "not counted".
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from harness.core import benchmarks as declared
from harness.core.errors import HarnessError
from harness.core.hardware import planned_world_size
from harness.core.paths import PROJECT_ROOT
from harness.data.sampled import base_name
from harness.pretrain.objectives import objective_class
from harness.retrieval.rank_search import MERGE_QUERIES, merge_bytes
from harness.run.generation_flops import T5_BASE, TINY_T5, generation_flops, training_flops
from harness.run.model_shape import BERT_BASE, flop_ratio, shape_of
from harness.spec.block_settings import CorpusSettings, QgenSettings
from harness.spec.files import load_yaml, spec_path
from harness.spec.method import load_method, pretraining_methods
from harness.spec.run_settings import FinetuneSettings, HardwareSettings
from harness.spec.stage_settings import PretrainSettings, RerankerSettings, StageSettings, pretrains
from harness.stages import registry
from harness.stages.graph import ALL_RANKS, NOT_PROJECTED, STAGES

MEASURED = PROJECT_ROOT / "bench" / "results" / "paper_shape_h100_2026-11-24.json"
MEASURED_ON_PEAK = 989.0  # H100 SXM dense bf16 TFLOP/s (NVIDIA's datasheet)
# Dense fp16/bf16 tensor-core peak TFLOP/s per GPU (NVIDIA datasheets; SXM parts).
GPU_PEAK = {"V100": 125.0, "A100": 312.0, "H100": 989.0, "H200": 989.0}
# Dense fp32 TFLOP/s per GPU as PyTorch computes fp32 matmuls with TF32 on (NVIDIA datasheets; SXM
# parts): TF32 tensor cores on A100/H100/H200, the V100's plain fp32 (it has no TF32).
GPU_FP32_PEAK = {"V100": 15.7, "A100": 156.0, "H100": 494.5, "H200": 494.5}
HALF, FP32 = "half", "fp32"  # Cost.precision: fp16/bf16 (the measured rows), or fp32
SEARCH_KIND = "search"  # Cost.kind of an exact search, priced at the encoding forward's utilisation
LUCENE_KIND = "lucene"  # Cost.kind of a Lucene search: CPU seconds on rank 0 (Cost.cpu_seconds), no FLOPs
VECTOR_BYTES = 2  # the search keeps its corpus vectors in half precision on the GPU (fp32 accumulation)
CPU_UTILISATION = 0.5
MSMARCO_PASSAGES = declared.corpus_passages("msmarco-passage")
MSMARCO_TRAIN_QUERIES = 502_939  # judged training queries (qrels.train.tsv)
# Corpus sizes as declared (BEIR paper, Thakur et al. 2021, Table 1); cqadupstack is the 12 forums together.
BEIR_CORPUS = {name: declared.get(name).passages for name in declared.beir()}
# Passages of the pre-training corpora trained on by epochs (DPR's psgs_w100: 21,015,324).
PRETRAIN_PASSAGES = {"wikipedia": 21_015_324, "msmarco-passage": MSMARCO_PASSAGES}
# every corpus a pre-training stage reads, MS MARCO documents' passages counted as 8.8M
CORPUS_PASSAGES = {**PRETRAIN_PASSAGES, "msmarco-passage-docs": MSMARCO_PASSAGES}
# the SPLADE head (768 x 30,522 per token) over a BERT forward: encoding an impact index costs more
SPLADE_HEAD_FACTOR = 1.27
# bench/README.md (H100, 2026-11-24): bench_encode.py encoded 991 passages/s end to end (tokenisation
# included) where the forward alone ran at ~15,000: real encoding is tokenisation-bound at 1/15 of it.
ENCODE_END_TO_END = 1 / 15
MEASURED_TOKENS = 144  # the measured steps' passage length (module docstring)
GRAD_CACHE_FACTOR = 4 / 3  # a forward + backward is ~3 forwards; gradient caching adds one forward
MEASURED_GPUS = ("H100", "H200")  # the types whose utilisation is the measurement's own


@dataclass
class Cost:
    stage: str
    tflop: float | None
    kind: str  # which measured row it scales
    batch: float = 0  # one device's share of a step, in the measured row's batch unit (memory scales with it)
    note: str = ""
    parallel: bool = True  # every rank runs or shares it (Stage.ranks); else rank 0 alone, the others idle
    precision: str = HALF  # what it computes in: HALF (fp16/bf16, as measured) or FP32
    resident_gib: float = 0.0  # memory spread over the devices (a search's corpus vectors), GiB in all
    cpu_seconds: float | None = None  # a Lucene search: wall seconds on rank 0's CPU (no FLOP count; no GPU)


@functools.lru_cache(maxsize=1)
def measured() -> dict[str, dict[str, Any]]:
    """The bf16 rows of the H100 measurement, by kind (objective, finetune, encode)."""
    rows = json.loads(MEASURED.read_text())["rows"]
    out = {}
    for row in rows:
        if row["precision"] == "bf16":
            out[row["objective"].split()[0]] = row
    return out


@functools.lru_cache(maxsize=1)
def cpu_tflops() -> float:
    """fp32 matrix-multiply rate of this machine now (TFLOP/s), best of 3 short runs."""
    import torch

    a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
    a @ b
    best = math.inf
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(4):
            a @ b
        best = min(best, time.perf_counter() - start)
    return 4 * 2 * 1024**3 / best / 1e12


def _per_sequence(kind: str) -> float:
    row = measured()[kind]
    return row["tflop_per_step"] / row["batch"]


def corpus_size(dataset: str) -> int | None:
    name = base_name(dataset.split("/")[0])
    if declared.forum_parent(name):
        return None  # a forum: its share of the 457,199 is not published per forum; counted once below
    decl = declared.find(name)
    return decl.corpus_passages() if decl else None


def stage_costs(spec: Any, entries: list[dict[str, Any]]) -> list[Cost]:
    """Projected TFLOPs of each planned stage that runs (``to run``; cached and reused cost nothing), by
    its stage's declared ``cost`` (harness/stages/graph.py) and the function registered for it."""

    costs: list[Cost] = []
    counted: set[str] = set()  # shared by the entries' cost functions: what is counted once per plan
    for entry in entries:
        stage = STAGES.get(entry["stage"])
        if entry.get("plan") != "to run" or stage is None or stage.cost is None:
            continue
        parallel = stage.ranks in ALL_RANKS
        if stage.cost == NOT_PROJECTED:
            costs.append(
                Cost(_label(entry), None, "", note="not projected (no measured step of this kind)", parallel=parallel)
            )
        else:
            found = registry.COSTS.function(stage.name)(spec, entry, counted)
            for cost in found if isinstance(found, list) else [found]:
                if cost is not None:
                    costs.append(dataclasses.replace(cost, parallel=parallel and cost.cpu_seconds is None))
    return costs


def stage_time(cost: Cost, devices: int, rate: float) -> tuple[float, float, float]:
    """(wall seconds, GPU-hours, idle GPU-hours) of a projected stage on ``devices`` devices of ``rate``
    FLOP/s each (TFLOP/s, its utilisation applied): an every-rank or sharded stage is divided over the
    devices; a rank-0 stage runs on one while the run holds all of them."""
    if cost.cpu_seconds is not None:  # rank 0's CPU: every device the run holds waits
        return cost.cpu_seconds, cost.cpu_seconds * devices / 3600, cost.cpu_seconds * devices / 3600
    used = devices if cost.parallel else 1
    seconds = (cost.tflop or 0.0) / (used * rate)
    return seconds, seconds * devices / 3600, seconds * (devices - used) / 3600


def unshared_stages(entries: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """The planned stages (to run) rank 0 builds alone while the other ranks wait: (those whose work can
    use no GPU: BM25/Lucene, file and scoring work; those that could use one but are not sharded)."""
    names = {e["stage"] for e in entries if e.get("plan") == "to run"}
    alone = [s for s in STAGES.values() if s.name in names and s.ranks not in ALL_RANKS]
    return [s.name for s in alone if not s.gpu], [s.name for s in alone if s.gpu]


def _label(entry: dict[str, Any]) -> str:
    return f"{entry['stage']}/{entry['dataset']}" if entry.get("dataset") else entry["stage"]


# The cost functions of the stages declaring `cost=PROJECTED` in harness/stages/graph.py, registered for them:
# (spec, a "to run" plan entry, counted) -> its Cost, or None.


@registry.cost("pretrain")
def pretrain_cost(spec: Any, entry: dict[str, Any], counted: set[str]) -> Cost:
    """The measured row of the objective the spec pre-trains with (the QC variants share their family's);
    an objective not measured yet is not projected."""
    pre = PretrainSettings.as_stated(spec)  # priced at its stated precision: `auto` runs fp32 on a GPU profile
    objective = pre.objective if pre.objective in measured() else None
    sequences = (pre.steps or 0) * pre.global_batch
    note = ""
    if not sequences and pre.epochs:  # epochs over the corpus's passages
        corpus = CorpusSettings.from_spec(spec)
        size = corpus.max_passages or PRETRAIN_PASSAGES.get(str(corpus.source))
        sequences = int(pre.epochs) * (size or 0)
        note = f"{pre.epochs} epochs over {size:,} passages" if size else "corpus size unknown"
    factor = grad_cache_factor(spec)
    batch = pre.per_device_batch
    if factor != 1.0:
        chunk = pre.grad_cache_chunk
        batch = min(batch, int(chunk)) if chunk else batch  # one chunk's activations are held at a time
        note = "; ".join(
            filter(None, [note, f"gradient caching: one extra forward per step (x4/3), memory of chunks of {batch}"])
        )
    per_sequence = _per_sequence(objective) * flop_ratio(spec, objective) if objective else 0.0
    return Cost(
        _label(entry),
        sequences * per_sequence * factor if objective and sequences else None,
        objective or "",
        batch,
        note,
        precision=priced_precision(pre.precision),
    )


def priced_precision(precision: str) -> str:
    """What a stage stating ``precision`` is priced at on a GPU: HALF for fp16/bf16, else FP32 (``auto``
    runs fp32 on a GPU profile: harness.training.precision.resolve_precision)."""
    return HALF if precision in ("fp16", "bf16") else FP32


def grad_cache_factor(spec: Any, devices: int | None = None) -> float:
    """:data:`GRAD_CACHE_FACTOR` when the spec's pre-training runs in gradient-cache mode on `devices`
    (default: its declared devices), else 1."""
    from harness.pretrain.trainer import plan_batches

    try:
        pre = PretrainSettings.as_stated(spec)
        cls = objective_class(pre.objective)
        plan = plan_batches(
            pre.global_batch,
            pre.per_device_batch,
            devices or HardwareSettings.from_spec(spec).devices,
            cls.supports_accumulation,
            pre.grad_cache_chunk,
            cls.gathers_across_ranks,
        )
    except Exception:  # noqa: BLE001 - no objective or an impossible layout: the plan's batch lines say so
        return 1.0
    return GRAD_CACHE_FACTOR if plan["mode"] == "grad_cache" else 1.0


@registry.cost("retriever1", "retriever2", "retriever3")
def finetune_cost(spec: Any, entry: dict[str, Any], counted: set[str]) -> Cost:
    """A retriever's fine-tuning: the measured step of 64 queries x 16 passages, scaled by its passages."""

    s = StageSettings.from_spec(spec, entry["stage"])
    ft = FinetuneSettings.from_spec(spec)
    queries = ft.max_train_queries or (MSMARCO_TRAIN_QUERIES if str(ft.train_queries).startswith("msmarco") else None)
    if queries is None:
        return Cost(_label(entry), None, "finetune", note="training queries not counted")
    steps = s.epochs * math.ceil(queries / s.global_queries)
    tflop = (
        steps * s.global_queries * s.passages_per_query * _per_sequence("finetune") * flop_ratio(spec, "finetune") / 16
    )
    devices = HardwareSettings.from_spec(spec).devices
    per_device = max(1, s.global_queries // devices) * s.passages_per_query / 16  # measured: queries of 16
    precision = priced_precision(s.precision)
    note = f"{s.precision}" + (" (TF32 where the card has it)" if precision == FP32 else "")
    return Cost(_label(entry), tflop, "finetune", per_device, note, precision=precision)


@registry.cost("dense_retrieve")
def dense_retrieve_cost(spec: Any, entry: dict[str, Any], counted: set[str]) -> list[Cost | None]:
    """A dense search stage: its corpus encoding (once per shared vectors, :func:`encode_cost`) and the
    search itself (:func:`search_cost`), two rows."""
    return [encode_cost(spec, entry, counted), search_cost(spec, entry, counted)]


def search_queries(spec: Any, dataset: str) -> int | None:
    """The queries a search scores: the training queries for mining (``.../mine``), else the benchmark's
    judged queries as declared (harness/core/benchmarks.yaml); None where neither is known."""
    if dataset.rsplit("/", 1)[-1].startswith("mine"):
        return FinetuneSettings.from_spec(spec).max_train_queries or MSMARCO_TRAIN_QUERIES
    decl = declared.find(base_name(dataset.split("/")[0]))
    return decl.queries if decl else None


def search_size(spec: Any, entry: dict[str, Any], counted: set[str]) -> tuple[int, int, str] | None:
    """(queries, passages, what the note says) a search stage scores; a cqadupstack forum's search is
    priced once per retriever as the whole archive's queries over its whole corpus (its forums' shares are
    not published: an upper bound), the other forums' as counted there; None where not declared."""
    dataset = entry.get("dataset") or ""
    name = base_name(dataset.split("/")[0])
    queries, size = search_queries(spec, dataset), corpus_size(dataset)
    if entry["stage"] == "retrieve" and name.endswith("-train"):  # BM25 of the training queries (negatives)
        queries = FinetuneSettings.from_spec(spec).max_train_queries or MSMARCO_TRAIN_QUERIES
    parent = declared.forum_parent(name)
    if parent and size is None:
        tag = f"search/{entry['stage']}/{parent}/{dataset.rsplit('/', 1)[-1]}"
        if tag in counted:
            return 0, 0, f"counted with the first {parent} forum"
        counted.add(tag)
        whole = declared.get(parent)
        queries, size = whole.queries, whole.passages
        note = f"{parent}'s 12 forums together (an upper bound): "
    else:
        note = ""
    return (queries, size, note) if queries and size else None


def search_cost(spec: Any, entry: dict[str, Any], counted: set[str] | None = None) -> Cost:
    """An exact inner-product search: 2 x queries x corpus x dim FLOPs over the shards of every device."""
    dim = shape_of(spec).hidden
    label = f"{_label(entry)} (search)"
    sized = search_size(spec, entry, set() if counted is None else counted)
    if sized is None:
        return Cost(label, None, SEARCH_KIND, note="queries or corpus size not declared: not counted")
    queries, size, where = sized
    note = f"{where}2 x {queries:,} queries x {size:,} passages x {dim}" if size else where
    if size and footprint_of_merge(entry):
        note += "; " + merge_note(spec, entry, queries)
    return Cost(
        label,
        search_flops(queries, size, dim) / 1e12,
        SEARCH_KIND,
        note=note,
        resident_gib=size * dim * VECTOR_BYTES / 2**30,
    )


def footprint_of_merge(entry: dict[str, Any]) -> bool:
    """A mining search (the training queries): the one whose merged lists on rank 0 are large."""
    return "/mine" in str(entry.get("dataset") or "")


def merge_note(spec: Any, entry: dict[str, Any], queries: int) -> str:
    """Rank 0's merge memory for a mining search on the declared devices: the per-rank top-k lists of one
    query chunk (harness/retrieval/rank_search.py), against all of them at once."""
    k = StageSettings.from_spec(spec, "retriever2").negative_depth  # mining searches to retriever 2's depth
    devices = HardwareSettings.from_spec(spec).devices
    held = merge_bytes(queries, k, devices) / 2**30
    whole = merge_bytes(queries, k, devices, chunk=queries) / 2**30
    return (
        f"rank 0 merges {MERGE_QUERIES:,} queries at a time: {held:.2f} GiB of {devices} ranks' top-{k} lists "
        f"(all {queries:,} at once: {whole:.1f} GiB)"
    )


# Lucene searches (BM25, LexMAE's impact search) run on rank 0's CPU: no FLOP count. Their cost model:
# the postings traversed, which grow as queries x passages (every posting list grows with the corpus at a
# fixed term distribution), at a rate per query-passage taken from a stated measurement.
LEXMAE_QPS = 45.83  # LexMAE (ICLR 2023) abstract: MS MARCO passage retrieval at 45.83 QPS "on a CPU machine"
BM25_RATE_SOURCE = PROJECT_ROOT / "bench" / "results" / "bench_scale_cpu_2026-11-26.json"


@functools.lru_cache(maxsize=1)
def bm25_seconds_per_query_passage() -> tuple[float, str]:
    """Wall seconds of one BM25 query per corpus passage: the slope of bench/bench_scale.py's ``retrieve``
    rows (a fixed query set over two corpus sizes; the intercept, the JVM start and index opening, left
    out), and its source."""
    rows = [r for r in json.loads(BM25_RATE_SOURCE.read_text())["rows"] if r["stage"] == "retrieve"]
    small, large = sorted(rows, key=lambda r: r["passages"])[:: len(rows) - 1]
    per = (large["seconds"] - small["seconds"]) / (large["items"] * (large["passages"] - small["passages"]))
    return per, (
        f"BM25 rate from {BM25_RATE_SOURCE.relative_to(PROJECT_ROOT)} ({large['items']:,} queries at "
        f"{small['passages']:,} and {large['passages']:,} passages, 2 cores under load)"
    )


@registry.cost("retrieve", "impact_search")
def lucene_search_cost(spec: Any, entry: dict[str, Any], counted: set[str]) -> Cost:
    """A Lucene search on rank 0's CPU, by the postings model above: LexMAE's stated QPS at MS MARCO's size
    (an impact search; the paper's CPU machine, its cores not stated: assumed the node rank 0 has), the
    bench's measured BM25 slope (a BM25 search)."""
    label = f"{_label(entry)} (Lucene)"
    sized = search_size(spec, entry, counted)
    if sized is None:
        return Cost(label, None, LUCENE_KIND, note="queries or corpus size not declared: not counted", parallel=False)
    queries, size, where = sized
    if entry["stage"] == "impact_search":
        seconds = queries * size / (LEXMAE_QPS * MSMARCO_PASSAGES)
        rate = f"at LexMAE's stated {LEXMAE_QPS} QPS over {MSMARCO_PASSAGES:,} passages (its CPU machine, assumed rank 0's)"
    else:
        per, source = bm25_seconds_per_query_passage()
        seconds, rate = queries * size * per, f"at {per:.3g} s per query-passage ({source})"
    note = f"{where}postings ~ {queries:,} queries x {size:,} passages {rate}: {seconds / 3600:.2g} CPU-node-hours"
    return Cost(label, None, LUCENE_KIND, note=note if size else where, parallel=False, cpu_seconds=seconds)


def search_flops(queries: int, passages: int, dim: int) -> float:
    """FLOPs of scoring every query against every passage: one multiply and one add per dimension."""
    return 2.0 * queries * passages * dim


@registry.cost("impact_index")
def encode_cost(spec: Any, entry: dict[str, Any], counted: set[str]) -> Cost | None:
    """Encoding a corpus (dense vectors, or an impact index with the SPLADE head); a cqadupstack forum's
    corpus is counted as the 12 forums together, once per retriever (``counted``), and searches sharing
    one encoding (their ``vectors`` tag, harness/retrieval/corpus_vectors.py) count it once."""
    stage, dataset = entry["stage"], entry.get("dataset") or ""
    if entry.get("vectors"):
        if f"vectors/{entry['vectors']}" in counted:
            return None
        counted.add(f"vectors/{entry['vectors']}")
    size = corpus_size(dataset)
    retriever = dataset.rsplit("/", 1)[-1]
    parent = declared.forum_parent(base_name(dataset.split("/")[0]))
    if size is None and parent:
        if f"{parent}/{retriever}" in counted:
            return None
        size = declared.get(parent).passages  # the 12 forums together, once per retriever
        counted.add(f"{parent}/{retriever}")
    factor = SPLADE_HEAD_FACTOR if stage == "impact_index" else 1.0
    per_sequence = _per_sequence("encode") * flop_ratio(spec, "encode")
    return Cost(_label(entry), size * factor * per_sequence if size else None, "encode", 512)


@registry.cost("qgen")
def qgen_cost(spec: Any, entry: dict[str, Any], counted: set[str]) -> Cost:
    """Query generation over the pre-training corpus (module docstring); the term sampler costs no FLOPs."""
    q = QgenSettings.from_spec(spec)
    if q.model == "term-sampler":
        return Cost(_label(entry), 0.0, "encode", note="term sampler: word counts, no model")
    corpus = CorpusSettings.from_spec(spec)
    size = corpus.max_passages or CORPUS_PASSAGES.get(str(corpus.source))
    if not size:
        return Cost(_label(entry), None, "encode", note="corpus size unknown")
    shape, name = (TINY_T5, "tiny T5") if q.model == "tiny-t5" else (T5_BASE, "t5-base")
    length = PretrainSettings.as_stated(spec).max_length
    per_passage = generation_flops(shape, length, q.num_queries, q.max_new_tokens)
    note = f"{name}: {int(size):,} passages of {length} tokens, {q.num_queries} x {q.max_new_tokens} tokens generated (cap)"
    return Cost(_label(entry), int(size) * per_passage / 1e12, "encode", note=note)


@registry.cost("qgen_model")
def qgen_model_cost(spec: Any, entry: dict[str, Any], counted: set[str]) -> Cost:
    """Training the tiny T5 here (harness/corpus/tiny_t5.py): ``qgen.steps`` steps of its batch, each
    sequence a forward and backward at the tiny T5's shape (:func:`training_flops`), at the encoding's
    utilisation (a small model: no measured step of its own, stated in the note)."""
    from harness.corpus.tiny_t5 import train_tiny_t5

    q = QgenSettings.from_spec(spec)
    defaults = inspect.signature(train_tiny_t5).parameters  # the batch and target length the stage trains at
    batch, target = int(defaults["batch_size"].default), int(defaults["max_target_tokens"].default)
    per_sequence = training_flops(TINY_T5, q.max_input_tokens, target)
    note = (
        f"tiny T5: {q.steps:,} steps x {batch} pairs of {q.max_input_tokens} + {target} tokens, forward and "
        "backward (x3), at the encoding's utilisation (assumed: no measured step of this kind)"
    )
    return Cost(_label(entry), q.steps * batch * per_sequence / 1e12, "encode", note=note)


@registry.cost("reranker")
def reranker_cost(spec: Any, entry: dict[str, Any], counted: set[str]) -> Cost:
    """Training the tiny cross-encoder teacher: every training query's groups for its epochs, each pair
    of ``max_length`` tokens a forward and backward (x3) of the spec's encoder, from the measured
    encoding forward scaled linearly by tokens (attention's quadratic term left out), at the
    fine-tuning step's utilisation."""
    train = RerankerSettings.from_spec(spec).train()
    queries = FinetuneSettings.from_spec(spec).max_train_queries or MSMARCO_TRAIN_QUERIES
    pairs = queries * train.epochs * train.passages_per_query
    per_pair = 3 * _per_sequence("encode") * flop_ratio(spec, "encode") * train.max_length / MEASURED_TOKENS
    per_device = train.queries_per_device * train.passages_per_query / 16  # the measured row: queries of 16
    note = (
        f"{queries:,} queries x {train.epochs} epochs x {train.passages_per_query} pairs of {train.max_length} tokens"
    )
    return Cost(_label(entry), pairs * per_pair, "finetune", per_device, note)


@registry.cost("teacher_scores")
def teacher_scores_cost(spec: Any, entry: dict[str, Any], counted: set[str]) -> Cost:
    """The cross-encoder's forward over the mined candidates of the training queries."""

    stage = StageSettings.from_spec(spec, "retriever3")
    positives, negatives = RerankerSettings.from_spec(spec).scored(stage)  # what the stage scores per query
    pairs = positives + min(negatives, stage.negative_depth)
    queries = FinetuneSettings.from_spec(spec).max_train_queries or MSMARCO_TRAIN_QUERIES
    return Cost(
        _label(entry),
        queries * pairs * _per_sequence("encode"),
        "encode",
        512,
        f"cross-encoder forward over {pairs} scored pairs per query",
    )


def _utilisation(kind: str) -> float:
    """The fraction of the H100's peak a step of `kind` reached in the measurement (a search: the
    encoding forward's, a matmul-bound step)."""
    row = measured()["encode" if kind == SEARCH_KIND else kind]
    return row["tflops"] / MEASURED_ON_PEAK


def _rate(cost: Cost, gpu: str | None, scale: float) -> float:
    """TFLOP/s one device of type ``gpu`` reaches on ``cost``: its measured fraction of the peak of the
    cost's precision, calibrated (``scale``); encoding at its end-to-end share."""
    if cost.kind == LUCENE_KIND:  # rank 0's CPU: timed by Cost.cpu_seconds, no GPU rate
        return 1.0
    peak = (GPU_FP32_PEAK if cost.precision == FP32 else GPU_PEAK).get(gpu or "", 0.0)
    return peak * scale * _utilisation(cost.kind) * (ENCODE_END_TO_END if cost.kind == "encode" else 1.0)


def _gpu_type(name: Any) -> str | None:
    return next((key for key in GPU_PEAK if key in str(name or "")), None)


def _stated_pretraining(method: str) -> tuple[str, float, float] | None:
    """(GPU type, stated hours, implied fraction of the H100-measured utilisation) of a paper spec that
    states its pre-training hours on a known GPU type; None otherwise."""
    spec = load_method(method, "paper")
    hw = HardwareSettings.from_spec(spec)
    gpu, hours = _gpu_type(hw.gpu), hw.hours
    pre = PretrainSettings.as_stated(spec)
    objective, steps, batch = pre.objective, pre.steps, pre.global_batch
    if not (gpu and hours and steps and batch) or objective not in measured():
        return None
    tflop = int(steps) * int(batch) * _per_sequence(objective) * flop_ratio(spec, objective) * grad_cache_factor(spec)
    implied = tflop / (float(hours) * 3600 * hw.devices * GPU_PEAK[gpu])
    return gpu, float(hours), implied / _utilisation(objective)


@functools.cache
def _family(method: str) -> str:
    """The paper a method's stated hours come from: the first spec of its ``extends`` chain (a QC variant,
    a declared variant and a BEIR fine-tuning variant restate their base method's hours)."""
    try:
        parent = load_yaml(spec_path(method)).get("extends")
    except HarnessError:  # no spec file: its own name
        return method
    return _family(str(parent)) if parent else method


@functools.lru_cache(maxsize=16)
def calibration(gpu: str, method: str) -> tuple[float, str]:
    """(scale on the H100-measured utilisations, its source) for `gpu` in `method`'s projection: from the
    stated pre-training hours of another paper on that GPU type where there is one (so `method`'s own
    hours remain a check), else from its own (then its projection equals its hours by construction)."""
    if gpu in MEASURED_GPUS:
        return 1.0, "measured on one H100"
    # One paper per family: a QC variant restates its base method's hours, and so does a declared variant
    # (variant_of) its parent's, so neither is an independent check.
    family = {m: _family(m) for m in pretraining_methods("paper")}
    stated = {family[m]: s for m in sorted(family, reverse=True) if (s := _stated_pretraining(m)) and s[0] == gpu}
    others = {m: s for m, s in stated.items() if m != _family(method)}
    source = others or stated
    if not source:
        return 1.0, f"the H100's fractions carried over (no measurement or stated hours on {gpu})"
    scale = sum(s[2] for s in source.values()) / len(source)
    names = ", ".join(f"{m} {s[1]:g} h" for m, s in source.items())
    own = "" if others else " (its own: the projection matches them by construction)"
    return scale, f"{gpu}: the H100's fractions x {scale:.2f}, from the stated pre-training hours of {names}{own}"


def _gpu_peak(name: Any) -> float | None:
    for key, peak in GPU_PEAK.items():
        if key in str(name or ""):
            return peak
    return None


def _gpu_hours(hours: float) -> str:
    """GPU-hours to one decimal; a short stage's (a search's) to two significant digits, not a bare 0.0."""
    return f"{hours:,.1f}" if hours >= 0.1 or hours == 0 else f"{hours:.2g}"


def _hours(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 72 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


@dataclass(frozen=True)
class Columns:
    """The two hardware columns of :func:`describe`: the spec's declared hardware (its GPU's peak and
    calibration, None without a known GPU) and the hardware present (its GPU's, or the CPU's rate)."""

    devices: int
    gpu: str | None
    peak: float | None
    scale: float
    scale_why: str
    here_name: str
    here_peak: float | None
    here_scale: float
    here_devices: int
    cpu: float  # TFLOP/s of the CPU present at its assumed utilisation; 0 where a GPU is present

    def declared_time(self, cost: Cost) -> tuple[float | None, float, float]:
        """(wall seconds, GPU-hours, idle GPU-hours) on the declared hardware; (None, 0, 0) without a known GPU."""
        if not self.peak:
            return cost.cpu_seconds, 0.0, 0.0
        return stage_time(cost, self.devices, _rate(cost, _gpu_type(self.gpu), self.scale))

    def here_time(self, cost: Cost) -> float:
        """Wall seconds on the hardware present (a Lucene search: at its stated rate)."""
        if cost.cpu_seconds is not None:
            return cost.cpu_seconds
        if self.here_peak:
            return stage_time(cost, self.here_devices, _rate(cost, _gpu_type(self.here_name), self.here_scale))[0]
        return (cost.tflop or 0.0) / self.cpu


def columns(spec: Any, hw: Any) -> Columns:
    """The declared hardware of ``spec`` and the hardware ``hw`` present, as :func:`describe` prices them."""
    stated = HardwareSettings.from_spec(spec)
    gpu = stated.gpu if stated.device_type == "cuda" else None
    peak = _gpu_peak(gpu)
    scale, scale_why = calibration(_gpu_type(gpu), spec.name) if peak else (1.0, "")
    here_name = hw.names[0] if hw.names else ""
    here_peak = _gpu_peak(here_name) if hw.device_type == "cuda" else None
    return Columns(
        devices=stated.devices,
        gpu=gpu,
        peak=peak,
        scale=scale,
        scale_why=scale_why,
        here_name=here_name,
        here_peak=here_peak,
        here_scale=calibration(_gpu_type(here_name), spec.name)[0] if here_peak else 1.0,
        # the processes the run will start
        here_devices=planned_world_size(hw, spec.get("hardware") or {}) if here_peak else 1,
        cpu=0.0 if here_peak else cpu_tflops() * CPU_UTILISATION,
    )


def describe(spec: Any, entries: list[dict[str, Any]], hw: Any, costs: Sequence[Cost]) -> list[str]:
    """The projection's lines for the plan: a header, one row per projected stage, the totals, then
    which stages leave GPUs idle, the paper's stated hours and the assumptions; ``costs``: the plan's
    :func:`stage_costs` (computed once, when the plan is built: harness/run/run_plan.py)."""
    costs = list(costs)
    if not costs:
        return []
    cols = columns(spec, hw)
    width = max(44, *(len(c.stage) for c in costs))
    lines = _header(spec, hw, cols, width)
    measured_shape = is_bert_base(shape_of(spec))  # the memory measurement is not scaled to another shape
    total_decl = total_here = total_gpu = total_idle = 0.0
    for c in costs:
        if c.tflop is None and c.cpu_seconds is None:
            lines.append(
                f"    {c.stage:<{width}} {'-':>9}  {'-':>16}  {'-':>8}  {'-':>10}  {'-':>30}  {'-':>15}  {c.note}"
            )
            continue
        t_decl, gpu_h, idle_h = cols.declared_time(c)
        t_here = cols.here_time(c)
        total_decl += t_decl or 0.0
        total_here += t_here
        total_gpu += gpu_h
        total_idle += idle_h
        lines.append(_row(c, cols, width, (t_decl, gpu_h, idle_h, t_here), _peak_memory(c, cols, measured_shape)))
    peak = cols.peak
    lines.append(
        f"    {'total of the projected stages':<{width}} {'':>9}  {(_hours(total_decl) if peak else '-'):>16}  "
        f"{(f'{total_gpu:,.1f}' if peak else '-'):>8}  {(f'{total_idle:,.1f}' if peak else '-'):>10}  "
        f"{_hours(total_here):>30}"
    )
    return lines + _footer(spec, entries, costs, cols)


def _header(spec: Any, hw: Any, cols: Columns, width: int) -> list[str]:
    """What the columns are: the measurement, the model the FLOPs are scaled to, the column titles."""
    here = "here" + (f" ({hw.describe()})" if cols.here_peak else f" (CPU, {cols.cpu:.2f} TFLOP/s)")
    decl = f"{cols.devices} x {cols.gpu}" if cols.gpu else "declared"
    return [
        f"  projection (per stage; FLOPs counted by torch.utils.flop_counter on one step of each kind at "
        f"bert-base shape, {MEASURED.relative_to(PROJECT_ROOT)}, scaled to the spec's model; GPU-h: the "
        f"{decl} the run holds during the stage, idle: those a rank-0-only stage leaves waiting):",
        f"    model: {shape_line(spec)}",
        f"    {'stage':<{width}} {'PFLOP':>9}  {decl:>16}  {'GPU-h':>8}  {'idle GPU-h':>10}  {here:>30}  "
        f"{'peak GiB/device':>15}",
    ]


def _peak_memory(cost: Cost, cols: Columns, measured_shape: bool) -> float | None:
    """GiB per device: a search's shard of the vectors, else the measured peak scaled by the batch
    (None at a shape other than the measured one)."""
    if cost.kind == SEARCH_KIND:  # the shard of vectors each device keeps
        return cost.resident_gib / (cols.devices if cols.peak else 1)
    if cost.kind == LUCENE_KIND:  # rank 0's CPU: no device memory
        return None
    row = measured()[cost.kind]
    return row["peak_gib"] * cost.batch / row["batch"] if cost.batch and measured_shape else None


def _row(c: Cost, cols: Columns, width: int, times: tuple[float | None, float, float, float], mem: float | None) -> str:
    """One projected stage's line: (declared wall seconds, GPU-hours, idle GPU-hours, wall seconds here)."""
    t_decl, gpu_h, idle_h, t_here = times
    peak = cols.peak
    return (
        f"    {c.stage:<{width}} {(f'{c.tflop / 1000:.3g}' if c.tflop is not None else '-'):>9}  "
        f"{(_hours(t_decl) if t_decl else '-'):>16}  "
        f"{(_gpu_hours(gpu_h) if peak else '-'):>8}  {(_gpu_hours(idle_h) if peak else '-'):>10}  "
        f"{_hours(t_here):>30}  {(f'{mem:.1f}' if mem is not None else '-'):>15}"
        + (f"  {c.note}" if c.note else "")
        + ("" if c.parallel else "  (rank 0 alone)")
    )


def _gap_line(projected_h: float, stated_h: float) -> str:
    """A word on the stated-vs-projected gap: the projection's rate is an assumption (below), the paper's
    hours are its own report, so a gap says how far that assumption is off, not that the paper erred."""
    ratio = projected_h / stated_h
    if 0.9 <= ratio <= 1.1:
        return "      the projection matches the stated hours within 10%"
    return (
        f"      the gap: projected {ratio:.1f}x the stated hours; the GPU rate here is assumed (below), "
        "the paper's hours its own report"
    )


def _footer(spec: Any, entries: list[dict[str, Any]], costs: list[Cost], cols: Columns) -> list[str]:
    """The stages that leave GPUs idle, the paper's stated pre-training hours beside their projection,
    and the assumptions."""
    lines = []
    cpu_only, idle = unshared_stages(entries)
    if cpu_only:
        lines.append(f"    stages that use no GPU (rank 0; Lucene/BM25, files, scoring): {', '.join(cpu_only)}")
    if idle:
        lines.append(f"    stages rank 0 runs on one GPU while the others idle: {', '.join(idle)}")
    pre = next((c for c in costs if c.stage == "pretrain" and c.tflop), None)
    hours = HardwareSettings.from_spec(spec).hours
    if hours and pre and pre.tflop and cols.peak:
        projected = pre.tflop / (cols.devices * _rate(pre, _gpu_type(cols.gpu), cols.scale))
        lines.append(
            f"    the paper states {hours} h of pre-training on {cols.devices} x {cols.gpu} (spec hardware; "
            f"projected here: {_hours(projected)})"
        )
        lines.append(_gap_line(projected / 3600.0, float(hours)))
    lines.append(
        "    assumptions: each step kind reaches the fraction of the GPU's bf16/fp16 peak it reached on one "
        "H100 (11-39%), an fp32 stage the same fraction of the fp32 peak (TF32 where the card has it)"
        + (f"; {cols.scale_why}" if cols.scale_why else "")
        + "; encoding at the H100's end-to-end rate (1/15 of the forward alone: tokenisation-bound); a "
        "search 2 x queries x passages x dim at the encoding forward's fraction of the fp16 peak, over every "
        "device's shard; gradient caching adds a forward; linear "
        f"scaling over devices ({cols.here_devices} here) for every-rank and sharded stages, one device for a "
        "rank-0 stage; the CPU at half its measured fp32 matmul rate; peak "
        "memory scaled from the H100 bf16 measurement by the per-device batch"
    )
    return lines


def shape_line(spec: Any) -> str:
    """The model the FLOPs are scaled to, and by how much (harness/run/model_shape.py)."""
    shape = shape_of(spec)
    if is_bert_base(shape):
        return f"{shape.describe()}: the measured shape"
    objective = PretrainSettings.as_stated(spec).objective if pretrains(spec) else None
    kinds = [objective] if objective in measured() else []
    ratios = ", ".join(f"{kind} x{flop_ratio(spec, kind):.3g}" for kind in [*kinds, "finetune", "encode"])
    return (
        f"{shape.describe()}; FLOPs per sequence against bert-base at the measured lengths: {ratios}; "
        "peak memory not projected (measured at bert-base only)"
    )


def is_bert_base(shape: Any) -> bool:
    return (shape.layers, shape.hidden, shape.intermediate, shape.vocab) == (
        BERT_BASE.layers,
        BERT_BASE.hidden,
        BERT_BASE.intermediate,
        BERT_BASE.vocab,
    )


@dataclass(frozen=True)
class Total:
    """A plan's projected cost on its spec's declared hardware (what ``describe`` sums)."""

    pflop: float  # the projected stages' FLOPs, in PFLOP
    hours: float | None  # wall time on the declared GPUs; None without a known declared GPU
    hardware: str  # "16 x V100-32GB", or "declared hardware unknown"
    unprojected: tuple[str, ...]  # stages with no measured step (said, never guessed)


def declared_total(spec: Any, entries: list[dict[str, Any]]) -> Total:
    """The total of ``describe``'s declared-hardware column for a plan (no torch: the CPU rate is
    measured only for the "here" column)."""
    costs = stage_costs(spec, entries)
    stated = HardwareSettings.from_spec(spec)
    devices = stated.devices
    gpu = stated.gpu if stated.device_type == "cuda" else None
    peak = _gpu_peak(gpu)
    projected = [c for c in costs if c.tflop is not None or c.cpu_seconds is not None]
    scale = calibration(_gpu_type(gpu), spec.name)[0] if peak else 1.0
    hours = sum(stage_time(c, devices, _rate(c, _gpu_type(gpu), scale))[0] for c in projected) / 3600 if peak else None
    return Total(
        sum(c.tflop or 0.0 for c in projected) / 1000,
        hours,
        f"{devices} x {gpu}" if gpu else "declared hardware unknown",
        tuple(c.stage for c in costs if c.tflop is None and c.cpu_seconds is None),
    )


def declared_cost_line(spec: Any, entries: list[dict[str, Any]]) -> str:
    """A plan's projected cost on its declared hardware as one line (the glance's, the report's and
    `harness table`'s wording): hours, hardware, PFLOP and any stage with no measured step."""
    total = declared_total(spec, entries)
    if not total.pflop:
        return (
            "no training: indexing and retrieval only, not projected"
            if spec.get("family") == "lexical"
            else "not projected (no measured step of its stages)"
        )
    hours = format_hours(total.hours) if total.hours is not None else "time not projected"
    unprojected = f"; not projected: {', '.join(total.unprojected)}" if total.unprojected else ""
    return f"{hours} on {total.hardware} ({total.pflop:,.0f} PFLOP){unprojected}"


def format_hours(hours: float) -> str:
    """Hours as ``describe`` prints them (s, min, h or d)."""
    return _hours(hours * 3600)
