"""What each data stage of a plan would hold in memory and write to disk at the plan's corpus sizes
(the papers': MS MARCO's 8.8M passages, psgs_w100's 21M where a plan pre-trains on Wikipedia), next to
this machine's memory and the free disk under the cache, so ``run --dry-run`` names a stage that would
not fit before anything runs (issue 39 item 4). For a stage that uses no GPU (Punkt, Lucene, files:
``gpu`` in harness/stages/graph.py) it also gives the wall time at the bench's measured seconds line, and
the GPU-hours a run on the spec's declared GPUs holds idle meanwhile (:func:`idle_lines`; the
projection of harness/run/projection.py counts the GPU stages only).

Measured, not estimated: ``bench/bench_scale.py`` runs each data stage on synthetic corpora of growing
size and writes ``{"rows": [{"stage", "passages", "seconds", "peak_rss_mib", "disk_mib"}]}``; the newest
committed ``bench/results/bench_scale_cpu_*.json`` is read. Per bench stage, a line (intercept + slope
per passage) through its two largest sizes, for peak RSS and for disk, is extended to the plan's size,
never below the larger measured value (a flat stage's slope may come out slightly negative in noise).

A plan stage is one or more bench stages (:data:`PARTS`): its peak memory is the largest of its parts'
(they run one after another), its disk the sum over what they write, a part that only reads another's
output (a search over the stored vectors) or rewrites it (the encoding's chunks merged into one store)
counted once in its group (:data:`DISK_GROUP`). A stage none of whose parts was measured at two sizes
says "not measured"; one measured in part names the parts missing.

The vector stages (:data:`VECTOR_PARTS`) were measured at the row's ``dim`` (bench_scale's 128 for the
store and the search, its tiny model's 32 for encoding); a plan's vectors have its encoder's hidden size
(:func:`harness.run.model_shape.shape_of`: 768 for bert-base). Their disk is the measured line with the
float32 vectors' bytes at the plan's dim instead of the row's (passages x dim x 4; the doc ids beside
them do not scale); their memory is the measured line plus the difference in the vectors they hold at once
(:func:`held_mib`): the search one chunk of :data:`harness.retrieval.dense.CHUNK_BYTES` (2 GiB in a run,
where the bench reads smaller chunks: the row's ``chunk_rows``), the store and the encoding one chunk of
:data:`harness.retrieval.corpus_vectors.CHUNK_PASSAGES` passages. The encoding's model is the bench's
tiny one: its memory is not the plan's model's (the line says so).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.core import benchmarks as declared
from harness.core.hardware import total_memory_gib
from harness.core.paths import PROJECT_ROOT, cache_dir
from harness.data import sampled
from harness.data.sampled import base_name
from harness.retrieval.corpus_vectors import CHUNK_PASSAGES
from harness.retrieval.dense import chunk_rows as search_chunk_rows
from harness.retrieval.java import lucene_heap
from harness.run.model_shape import shape_of
from harness.run.projection import CORPUS_PASSAGES, MSMARCO_PASSAGES, corpus_size, format_hours
from harness.spec.block_settings import CorpusSettings
from harness.stages.graph import STAGES

RESULTS = PROJECT_ROOT / "bench" / "results"
PATTERN = "bench_scale_cpu_*.json"
# The pre-training corpora by passages (projection.CORPUS_PASSAGES): MS MARCO documents split into
# passages are counted as the paper's MS MARCO corpus (8.8M; the split's own count is not published).
# plan stage -> the bench_scale stages it is made of (mining adds the negatives it writes)
PARTS = {
    "passages": ("passages",),
    "index": ("index",),
    "retrieve": ("retrieve",),
    "bm25_negatives": ("negatives",),
    "hard_negatives": ("negatives",),
    "pretrain": ("pretrain_data",),
    "teacher_scores": ("teacher_pairs",),
    "impact_index": ("impact_index",),
    "dense_retrieve": ("encode", "vector_store", "search"),
}
MINING_PARTS = ("encode", "vector_store", "search", "negatives")
# parts whose disk is one output: the encoding's chunks become the store that the search reads
DISK_GROUP = {"encode": "vectors", "vector_store": "vectors", "search": "vectors"}
VECTOR_PARTS = ("encode", "vector_store", "search")  # measured at the row's dim, scaled to the plan's
MIB = 2**20


@dataclass(frozen=True)
class Line:
    """``intercept + slope * passages``, fitted through two measured sizes."""

    intercept: float
    slope: float
    largest: float  # the value at the larger size: a projection never goes below it
    sizes: tuple[int, int]

    def at(self, passages: int) -> float:
        return max(self.intercept + self.slope * passages, self.largest)


@dataclass(frozen=True)
class Slopes:
    """One bench stage's fitted lines (MiB)."""

    rss: Line
    disk: Line
    dim: int | None = None  # the vectors' dimension at the larger size (vector stages' rows carry it)
    chunk_rows: int | None = None  # the search's rows per chunk there
    seconds: Line | None = None  # wall seconds on the bench's machine (None: a row without them)


def held_mib(part: str, dim: int, passages: int, chunk_rows: int | None = None) -> float:
    """MiB of float32 vectors a vector stage holds at once: the search one chunk (``chunk_rows``, a run's
    :func:`harness.retrieval.dense.chunk_rows` by default), capped by the corpus; the store a chunk file read and parsed (two
    copies); the encoding one chunk's output."""
    if part == "search":
        rows = chunk_rows or search_chunk_rows(dim)
        return min(passages, rows) * dim * 4 / MIB
    if part == "vector_store":
        return 2 * min(passages, CHUNK_PASSAGES) * dim * 4 / MIB
    return min(passages, CHUNK_PASSAGES) * dim * 4 / MIB


def at_dim(part: str, slopes: Slopes, passages: int, dim: int | None) -> tuple[float, float]:
    """(peak RSS MiB, disk MiB) of a bench stage at ``passages`` with vectors of ``dim`` (the module
    docstring: the vectors' bytes on disk at that dimension, memory by the vectors held at once)."""
    rss, disk = slopes.rss.at(passages), slopes.disk.at(passages)
    if part not in VECTOR_PARTS or not slopes.dim or not dim or dim == slopes.dim:
        return rss, disk
    measured = held_mib(part, slopes.dim, slopes.rss.sizes[1], slopes.chunk_rows)
    vectors = passages * (dim - slopes.dim) * 4 / MIB  # the float32 vectors' bytes; the doc ids do not scale
    return rss - measured + held_mib(part, dim, passages), disk + vectors


def newest_results(folder: Path = RESULTS) -> Path | None:
    """The newest bench_scale result on CPU (dated names sort by date); None when there is none."""
    found = sorted(folder.glob(PATTERN))
    return found[-1] if found else None


def measured_slopes(results: Path | None = None) -> dict[str, Slopes]:
    """The fitted lines of the newest (or the given) bench_scale result; {} when there is none."""
    results = results or newest_results()
    return fit(json.loads(results.read_text())["rows"]) if results else {}


def fit(rows: Iterable[dict[str, Any]]) -> dict[str, Slopes]:
    """Per bench stage measured at two sizes or more: the lines through its two largest sizes (the
    largest value where a size was measured more than once)."""
    by_stage: dict[str, dict[int, dict[str, float]]] = {}
    vectors: dict[tuple[str, int], tuple[int | None, int | None]] = {}  # (stage, size) -> (dim, chunk rows)
    for row in rows:
        sizes = by_stage.setdefault(str(row["stage"]), {})
        seen = sizes.setdefault(int(row["passages"]), {"rss": 0.0, "disk": 0.0, "seconds": 0.0})
        seen["rss"] = max(seen["rss"], float(row.get("peak_rss_mib") or 0.0))
        seen["disk"] = max(seen["disk"], float(row.get("disk_mib") or 0.0))
        seen["seconds"] = max(seen["seconds"], float(row.get("seconds") or 0.0))
        if row.get("dim"):
            vectors[(str(row["stage"]), int(row["passages"]))] = (int(row["dim"]), row.get("chunk_rows"))
    out = {}
    for stage, sizes in by_stage.items():
        if len(sizes) < 2:
            continue
        small, large = sorted(sizes)[-2:]
        dim, rows_per_chunk = vectors.get((stage, large), (None, None))
        line = {k: _line(small, sizes[small][k], large, sizes[large][k]) for k in ("rss", "disk", "seconds")}
        out[stage] = Slopes(
            line["rss"],
            line["disk"],
            dim=dim,
            chunk_rows=int(rows_per_chunk) if rows_per_chunk else None,
            seconds=line["seconds"] if sizes[small]["seconds"] and sizes[large]["seconds"] else None,
        )
    return out


def _line(n1: int, y1: float, n2: int, y2: float) -> Line:
    slope = (y2 - y1) / (n2 - n1)
    return Line(y1 - slope * n1, slope, y2, (n1, n2))


@dataclass
class Footprint:
    """One planned data stage at its corpus size (GiB; None where nothing was measured)."""

    label: str
    passages: int | None
    rss_gib: float | None = None
    disk_gib: float | None = None
    missing: list[str] = field(default_factory=list)  # its bench stages not measured at two sizes
    shared: bool = False  # it reads corpus vectors an earlier step writes
    count: int = 1  # planned stages of this kind over this corpus, shown as one row
    cpu_hours: float | None = None  # a stage that uses no GPU: its hours on the bench's machine, all of its kind

    def measured(self) -> bool:
        return self.rss_gib is not None

    def merge(self, other: Footprint) -> None:
        """Another planned stage of the same kind over the same corpus (e.g. each retriever's impact
        index of one benchmark): one row, the larger peak, the disk of both."""
        self.count += 1
        if other.cpu_hours is not None:
            self.cpu_hours = (self.cpu_hours or 0.0) + other.cpu_hours
        if other.rss_gib is not None:
            self.rss_gib = max(self.rss_gib or 0.0, other.rss_gib)
            self.disk_gib = (self.disk_gib or 0.0) + (other.disk_gib or 0.0)
        self.shared = self.shared and other.shared


def is_mining(entry: dict[str, Any]) -> bool:
    """A search of the training queries with a retriever, for the next retriever's hard negatives."""
    dataset = str(entry.get("dataset") or "")
    return dataset.endswith("/mine") or "/mine-" in dataset


def stage_passages(spec: Any, entry: dict[str, Any]) -> int | None:
    """The corpus size a planned stage works over: the pre-training corpus for passages and pre-training
    (capped by ``corpus.max_passages``), MS MARCO's for the training queries' negatives and teacher
    scores, else its benchmark's corpus (a cqadupstack forum: the 12 forums' together, an upper bound; a
    rehearsal's sample: its size bound)."""
    stage, dataset = entry["stage"], str(entry.get("dataset") or "")
    if stage in ("passages", "pretrain"):
        corpus = CorpusSettings.from_spec(spec)
        source = corpus.source
        names = source if isinstance(source, list) else [source] if source else []
        sizes = [CORPUS_PASSAGES.get(str(n)) or corpus_size(str(n)) for n in names]
        if not sizes or None in sizes:
            return None
        total = sum(s for s in sizes if s)
        cap = corpus.max_passages
        return min(total, int(cap)) if cap else total
    if stage in ("bm25_negatives", "hard_negatives", "teacher_scores"):
        return MSMARCO_PASSAGES
    if dataset.split("/")[0].endswith(sampled.SUFFIX):  # a rehearsal's sample: its judged + distractors at most
        return sampled.QUERIES * sampled.JUDGED_PER_QUERY + sampled.DISTRACTORS
    size = corpus_size(dataset) if dataset else None
    parent = declared.forum_parent(base_name(dataset.split("/")[0]))
    if size is None and parent:
        return declared.get(parent).passages  # one forum's index holds the whole archive's corpus
    return size


def project(spec: Any, entries: list[dict[str, Any]], slopes: dict[str, Slopes]) -> list[Footprint]:
    """The footprint of each planned data stage that runs (cached and reused ones build nothing); shared
    corpus vectors (a dense search's ``vectors`` tag) are written once."""
    out: dict[str, Footprint] = {}
    written: set[str] = set()
    dim: int | None = None  # the plan's vector dimension, read once a vector stage is projected
    for entry in entries:
        if entry.get("plan", "to run") != "to run" or entry["stage"] not in PARTS:
            continue
        mining = entry["stage"] == "dense_retrieve" and is_mining(entry)
        parts = MINING_PARTS if mining else PARTS[entry["stage"]]
        passages = stage_passages(spec, entry)
        found = [p for p in parts if p in slopes]
        foot = Footprint(_row_label(entry, mining), passages, missing=[p for p in parts if p not in slopes])
        if found and passages:
            if dim is None and any(p in VECTOR_PARTS for p in found):
                dim = shape_of(spec).hidden
            sized = {p: at_dim(p, slopes[p], passages, dim) for p in found}
            foot.rss_gib = max(rss for rss, _ in sized.values()) / 1024
            groups: dict[str, float] = {}
            for part in found:
                group = DISK_GROUP.get(part, part)
                groups[group] = max(groups.get(group, 0.0), sized[part][1])
            if entry.get("vectors") and "vectors" in groups:
                if str(entry["vectors"]) in written:
                    groups["vectors"] = 0.0  # encoded once, by the first search that reads them
                    foot.shared = True
                written.add(str(entry["vectors"]))
            foot.disk_gib = sum(groups.values()) / 1024
            timed = [slopes[p].seconds for p in found]
            if not STAGES[entry["stage"]].gpu and all(timed) and not foot.missing:
                foot.cpu_hours = sum(line.at(passages) for line in timed if line) / 3600
        if foot.label in out:
            out[foot.label].merge(foot)
        else:
            out[foot.label] = foot
    return list(out.values())


def stage_disk_mib(
    spec: Any, entries: list[dict[str, Any]], slopes: dict[str, Slopes]
) -> dict[tuple[str, str | None], float]:
    """(stage, dataset) -> the MiB a planned data stage would write, each projected on its own: what a full
    disk's message says the stage needs. Left out rather than guessed: unmeasured stages, and a search
    over corpus vectors an earlier stage writes (its own share is not measured apart)."""
    out: dict[tuple[str, str | None], float] = {}
    written: set[str] = set()
    for entry in entries:
        if entry.get("plan", "to run") != "to run" or entry["stage"] not in PARTS:
            continue
        vectors = str(entry.get("vectors") or "")
        if vectors and vectors in written:
            continue
        written.add(vectors)
        feet = project(spec, [entry], slopes)
        if feet and feet[0].disk_gib:
            out[(entry["stage"], entry.get("dataset"))] = feet[0].disk_gib * 1024
    return out


def _row_label(entry: dict[str, Any], mining: bool) -> str:
    """The row a planned stage is shown in: its stage and corpus (a benchmark's split and the retriever
    left out; cqadupstack's forums as one), mining apart from evaluation."""
    if not entry.get("dataset"):
        return entry["stage"]
    name = str(entry["dataset"]).split("/")[0]
    parent = declared.forum_parent(base_name(name))
    name = f"{parent}-*" if parent else name
    return f"{entry['stage']}/{name}" + (" (mining)" if mining else "")


def free_disk_gib(folder: Path | None = None) -> float | None:
    """Free space on the file system that holds the cache folder (its nearest existing parent)."""
    folder = folder or cache_dir()
    for candidate in (folder, *folder.parents):
        if candidate.exists():
            return shutil.disk_usage(candidate).free / 2**30
    return None


def describe(
    spec: Any,
    entries: list[dict[str, Any]],
    results: Path | None = None,
    memory_gib: float | None = None,
    free_gib: float | None = None,
) -> list[str]:
    """The plan's lines: each data stage's projected peak memory and disk, and what would not fit."""
    results = results or newest_results()
    feet = project(spec, entries, measured_slopes(results))
    if not feet:
        return []
    memory_gib = memory_gib if memory_gib is not None else total_memory_gib()
    free_gib = free_gib if free_gib is not None else free_disk_gib()
    source = results.relative_to(PROJECT_ROOT) if results and results.is_relative_to(PROJECT_ROOT) else results
    here = f"this machine: {_gib(memory_gib)} memory, {_gib(free_gib)} free under the cache"
    lines = [
        f"  memory and disk of the data stages at their corpus sizes (lines through each stage's two largest "
        f"sizes in {source or 'no bench_scale result'}; {here}):",
        f"    {'stage':<48} {'passages':>11}  {'peak RSS':>9}  {'disk':>9}  {'time (no GPU)':>13}",
    ]
    for foot in feet:
        size = f"{foot.passages:,}" if foot.passages else "unknown"
        if not foot.measured():
            why = "not measured" if foot.passages else "corpus size unknown"
            lines.append(f"    {foot.label:<48} {size:>11}  {why}")
            continue
        notes = [f"x{foot.count}"] if foot.count > 1 else []
        notes += [f"not measured: {', '.join(foot.missing)}"] if foot.missing else []
        disk = "shared" if foot.shared else _gib(foot.disk_gib)
        hours = format_hours(foot.cpu_hours) if foot.cpu_hours is not None else "-"
        lines.append(
            f"    {foot.label:<48} {size:>11}  {_gib(foot.rss_gib):>9}  {disk:>9}  {hours:>13}"
            + (f"  ({'; '.join(notes)})" if notes else "")
        )
    lines.append(
        "    assumptions: bench_scale's synthetic corpus; vectors at the plan's encoder dimension (the "
        "vectors' bytes on disk at it, memory plus the vectors held at once: a search's 2 GiB chunk, a "
        "store's or an encoding's chunk); the encoding's model memory is the bench's tiny model's; a "
        "stage's memory is its largest part's, its disk what it writes (shared corpus vectors once); "
        "xN: N planned stages over that corpus, the largest peak and all their disk; time (no GPU): the "
        "wall time of a stage that uses no GPU (Punkt, Lucene, files) on the bench's machine, all of its kind"
    )
    lines.extend(idle_lines(spec, feet))
    lines.extend(f"  ! {line}" for line in would_not_fit(feet, memory_gib, free_gib))
    lines.extend(heap_lines(entries, feet))
    return lines


SEARCHES_LUCENE = ("retrieve", "bm25_negatives", "impact_search")  # stages that start the in-process JVM


def idle_lines(spec: Any, feet: list[Footprint]) -> list[str]:
    """What the GPUs a run holds do while its stages that use no GPU run (the projection above counts
    only the GPU stages): their GPU-hours at the bench's wall times, for the spec's declared GPUs."""
    declared = spec.get("hardware") or {}
    hours = sum(foot.cpu_hours or 0.0 for foot in feet)
    if declared.get("device_type") != "cuda" or not hours:
        return []
    devices = int(declared.get("devices") or 1)
    return [
        f"    stages that use no GPU: {format_hours(hours)} on the bench's machine, while the run holds "
        f"{devices} x {declared.get('gpu') or 'GPU'}: {hours * devices:,.1f} idle GPU-hours (the bench's "
        "seconds were measured under load on 2 cores: an upper bound where the node has more)"
    ]


def heap_lines(entries: list[dict[str, Any]], feet: list[Footprint]) -> list[str]:
    """The Lucene heap the run's searches will get (retrieval/java.py's bound for the largest projected
    index), stated before the run as the searches state it when the JVM starts."""
    if not any(e["stage"] in SEARCHES_LUCENE and e.get("plan", "to run") == "to run" for e in entries):
        return []
    sizes = [f.disk_gib for f in feet if f.label.split("/")[0] in ("index", "impact_index") and f.disk_gib]
    if not sizes:  # the index searched is not built by the plan (a prebuilt one): sized when its search starts
        return [
            "  Lucene heap of the searches: 1 GiB + 1/8 of the index searched, at most a quarter of the memory "
            "(sized when the search starts; HARNESS_LUCENE_HEAP overrides)"
        ]
    bound, why = lucene_heap(index_mib=max(sizes) * 1024)
    return [
        f"  Lucene heap of the searches: {bound} ({why}, the largest projected index; HARNESS_LUCENE_HEAP overrides)"
    ]


def would_not_fit(feet: list[Footprint], memory_gib: float | None, free_gib: float | None) -> list[str]:
    """'would not fit: X needs ~N GiB, this machine has M GiB' per stage over the memory, and the disk the
    stages write together against the free disk."""
    lines = []
    if memory_gib:
        lines += [
            f"would not fit: {f.label} needs ~{_gib(f.rss_gib)} of memory, this machine has {_gib(memory_gib)}"
            for f in feet
            if f.rss_gib is not None and f.rss_gib > memory_gib
        ]
    total = sum(f.disk_gib or 0.0 for f in feet)
    if free_gib is not None and total > free_gib:
        biggest = max((f for f in feet if f.disk_gib), key=lambda f: f.disk_gib or 0.0)
        lines.append(
            f"would not fit: the data stages write ~{_gib(total)} of disk (the most: {biggest.label}, "
            f"~{_gib(biggest.disk_gib)}), {_gib(free_gib)} free under the cache"
        )
    return lines


def _gib(value: float | None) -> str:
    if value is None:
        return "?"
    return f"{value:,.1f} GiB" if value >= 0.1 else f"{value * 1024:,.0f} MiB"
