"""Query generation for query-as-context (QC paper §3.1, §4.1).

Each passage goes through a local seq2seq checkpoint (doc2query/all-with-prefix-t5-base-v1
in the paper, input prefix "text2query: "; the tiny profile's in-harness T5 otherwise) and
C = ``num_queries`` candidate queries are drawn by nucleus sampling (top_k 25, top_p 0.95,
``num_return_sequences`` = C). The official script caps output at 64 tokens.

Output: a JSONL file of ``{"pid": ..., "queries": [...]}``, appended and flushed per batch.
Restart-safe: on restart the pids already in the file are skipped, a torn last line is
cut off, and because every batch's sampler is seeded with ``seed + index of its first
passage`` (global index in ``passages``), a resumed run writes the identical file.
Sharding: ``passages`` is cut into global batches of ``batch_size`` and rank r takes batches
``r::world_size``, writing its own file (``out_path`` gets a ``.rank{r}-of-{w}`` suffix when
world_size > 1). A batch is the same passages with the same seed whatever the world size, so
:func:`merge_query_shards` (passage order) writes the bytes a one-process run writes.
A ``<file>.done.json`` marker keyed by model, passages and config says it is complete;
a partial file written under a different key is discarded rather than mixed.
Memory: ``passages`` is read by index, one batch at a time (a :class:`~harness.corpus.passage_file.PassageFile`
reads the lines asked for), so a rank holds its current batch, never the corpus or its whole share.
Precision: fp32 on a CPU (the tiny profiles' files unchanged); on CUDA the weights in half precision
(bf16 where the card computes it, else fp16), which changes the sampled queries, so the dtype is keyed.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from harness.core.errors import DataFormatError, HarnessError
from harness.core.fsutil import atomic_path, is_temp
from harness.corpus.passages import Passage
from harness.stages import artifacts
from harness.stages.checkpoints import load_pretrained, model_fingerprint

log = logging.getLogger(__name__)

DOC2QUERY_PREFIX = "text2query: "
SUPPORTED_NUM_QUERIES = (1, 5, 10, 20)  # the paper's ablation; any C >= 1 works


@dataclass
class QGenResult:
    path: Path
    num_passages: int  # in this rank's shard
    num_generated: int  # in this call (0 when everything was cached)
    num_resumed: int  # already in the file at start
    samples: list[dict[str, Any]] = field(default_factory=list)


def shard_path(out_path: str | Path, rank: int, world_size: int) -> Path:
    out_path = Path(out_path)
    if world_size == 1:
        return out_path
    return out_path.with_name(f"{out_path.stem}.rank{rank}-of-{world_size}{out_path.suffix}")


def _marker_names(path: Path) -> tuple[str, str]:
    return f"{path.name}.done.json", f"{path.name}.key"


def _read_existing(path: Path) -> dict[str, list[str]]:
    """Records already written; a torn final line (killed mid-write) is truncated away."""
    done: dict[str, list[str]] = {}
    if not path.exists():
        return done
    data = path.read_bytes()
    good = data.rfind(b"\n") + 1
    if good < len(data):
        with open(path, "r+b") as f:
            f.truncate(good)
        data = data[:good]
    for n, line in enumerate(data.decode("utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            done[str(rec["pid"])] = [str(q) for q in rec["queries"]]
        except (ValueError, KeyError, TypeError) as exc:
            raise DataFormatError(path, n, f"not a query record ({exc})", "delete the file to regenerate") from exc
    return done


def sample_text(sample: dict[str, Any], width: int = 70) -> str:
    """One generated sample as a person reads it: 'passage 123 "The cell ..." -> q1 | q2' (the
    passage cut to ``width`` characters; the raw dict is what the MLflow artifact keeps)."""
    passage = " ".join(str(sample.get("passage") or "").split())
    shown = f' "{passage[:width]}{"..." if len(passage) > width else ""}"' if passage else ""
    queries = " | ".join(str(q) for q in sample.get("queries") or []) or "(none)"
    return f"passage {sample.get('pid')}{shown} -> {queries}"


def load_queries(path: str | Path) -> dict[str, list[str]]:
    """{pid: queries} from one JSONL file, or from all ``*.jsonl`` shards in a folder."""
    path = Path(path)
    files = sorted(f for f in path.glob("*.jsonl") if not is_temp(f)) if path.is_dir() else [path]
    if not files or not all(f.exists() for f in files):
        raise HarnessError(f"no generated queries at {path}; run query generation first")
    out: dict[str, list[str]] = {}
    for f in files:
        out.update(_read_existing(f))
    return out


def shard_batches(n: int, batch_size: int, rank: int, world_size: int) -> Iterator[range]:
    """The global batches (passage index ranges) rank ``rank`` generates for, lazily: ``rank::world_size``."""
    for start in range(rank * batch_size, n, world_size * batch_size):
        yield range(start, min(start + batch_size, n))


def generation_dtype(device: str) -> str:
    """The weights' dtype for generating on ``device``: fp32 on a CPU; bf16 on a CUDA card that computes
    it (no fp16 overflow in T5's feed-forward), else fp16 (V100)."""
    import torch

    if not device.startswith("cuda"):
        return "fp32"
    return "bf16" if torch.cuda.is_bf16_supported() else "fp16"


def shard_indices(n: int, batch_size: int, rank: int, world_size: int) -> list[int]:
    """The global passage indices rank ``rank`` generates for: the global batches ``rank::world_size``
    (every batch but the last is full, so cutting this list by ``batch_size`` gives those batches)."""
    return [i for batch in shard_batches(n, batch_size, rank, world_size) for i in batch]


def merge_query_shards(out_path: str | Path, passages: Sequence[Passage], world_size: int) -> int:
    """The ranks' shard files of ``out_path`` (complete) written into ``out_path`` in passage order, the
    bytes a one-process :func:`generate_queries` writes; the shard files and their markers (of any world
    size, a resumed run's too) are removed. Returns the passages written."""
    out_path = Path(out_path)
    merged: dict[str, list[str]] = {}
    for rank in range(world_size):
        merged.update(_read_existing(shard_path(out_path, rank, world_size)))
    missing = [p.pid for p in passages if p.pid not in merged]
    if missing:
        raise HarnessError(f"query shards of {out_path} lack {len(missing)} passage(s), e.g. {missing[0]}")
    with atomic_path(out_path) as tmp, open(tmp, "w", encoding="utf-8") as out:
        for p in passages:
            out.write(json.dumps({"pid": p.pid, "queries": merged[p.pid]}, ensure_ascii=False) + "\n")
    for stale in out_path.parent.glob(f"{out_path.stem}.rank*-of-*{out_path.suffix}*"):
        stale.unlink(missing_ok=True)
    return len(passages)


def _passages_fingerprint(passages: Sequence[Passage]) -> str:
    """A hash of every passage, read in order (one at a time: nothing kept)."""
    return artifacts.hash_texts(t for i in range(len(passages)) for t in (passages[i].pid, passages[i].text))


def generate_queries(
    model_dir: str | Path,
    passages: Sequence[Passage],
    num_queries: int = 5,
    top_k: int = 25,
    top_p: float = 0.95,
    batch_size: int = 32,
    input_prefix: str = DOC2QUERY_PREFIX,
    max_new_tokens: int = 64,
    seed: int = 42,
    rank: int = 0,
    world_size: int = 1,
    out_path: str | Path = "queries.jsonl",
    *,
    max_input_tokens: int = 512,
    device: str | None = None,
    num_samples: int = 3,
    show_progress: bool = True,
    stop_after_batches: int | None = None,
    passages_key: str | None = None,
) -> QGenResult:
    """Generate ``num_queries`` queries per passage of this rank's shard into ``out_path``.

    ``stop_after_batches`` ends the call early after that many new batches (tests use it
    to simulate an interruption; re-calling resumes). ``passages_key`` names the passages in the
    marker's key (a pipeline passes its file's key); without it every passage is hashed here.
    """
    import torch

    model_dir = Path(model_dir)
    _check_arguments(model_dir, num_queries, batch_size, rank, world_size)
    path = shard_path(out_path, rank, world_size)
    done_name, key_name = _marker_names(path)
    n_shard = sum(len(b) for b in shard_batches(len(passages), batch_size, rank, world_size))
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    dtype = generation_dtype(device)
    sampling = _Sampling(num_queries, top_k, top_p, max_new_tokens, max_input_tokens, input_prefix, seed, device)
    config = _marker_config(sampling, batch_size, rank, world_size, dtype)
    inputs = {"model": model_fingerprint(model_dir), "passages": passages_key or _passages_fingerprint(passages)}
    key = artifacts.builder_key(config, inputs)

    if artifacts.is_finished(path.parent, key, name=done_name) and path.exists():
        existing = _read_existing(path)
        return QGenResult(
            path,
            n_shard,
            0,
            len(existing),
            _first_samples(passages, batch_size, rank, world_size, existing, num_samples),
        )
    key_file = _resume_or_restart(path, key, done_name, key_name)
    existing = _read_existing(path)

    model, tokenizer = _load_generator(model_dir, device, dtype)
    path.parent.mkdir(parents=True, exist_ok=True)
    progress = tqdm(
        total=-(-n_shard // batch_size),
        desc="generating queries" + (f" (rank {rank} of {world_size})" if world_size > 1 else ""),
        unit="batch",
        disable=not show_progress,
    )
    batches = shard_batches(len(passages), batch_size, rank, world_size)
    generated, samples, finished = _write_batches(
        path, passages, batches, existing, model, tokenizer, sampling, progress, num_samples, stop_after_batches
    )
    if not finished:
        log.info("qgen stopped early after %d batches; re-run to resume", stop_after_batches)
        return QGenResult(path, n_shard, generated, len(existing), samples)
    artifacts.mark_finished(
        path.parent,
        {"key": key, "config": config, "inputs": inputs, "num_passages": n_shard, "file": path.name},
        name=done_name,
    )
    key_file.unlink(missing_ok=True)
    if not samples:  # everything came from the file: show what is there
        samples = _first_samples(passages, batch_size, rank, world_size, existing, num_samples)
    for s in samples:
        log.info("qgen sample %s: %s -> %s", s["pid"], s["passage"][:80], s["queries"])
    return QGenResult(path, n_shard, generated, len(existing), samples)


@dataclass(frozen=True)
class _Sampling:
    """How the queries of a batch are drawn (the generation settings of ``generate_queries``)."""

    num_queries: int
    top_k: int
    top_p: float
    max_new_tokens: int
    max_input_tokens: int
    input_prefix: str
    seed: int
    device: str


def _write_batches(
    path: Path,
    passages: Sequence[Passage],
    batches: Iterable[range],
    existing: Mapping[str, list[str]],
    model: Any,
    tokenizer: Any,
    sampling: _Sampling,
    progress: Any,
    num_samples: int,
    stop_after_batches: int | None,
) -> tuple[int, list[dict[str, Any]], bool]:
    """Append the queries of every passage not in ``existing`` to ``path``, batch by batch (each fsynced:
    an interruption loses at most one batch); return how many were generated, the first ``num_samples``
    of them, and whether every batch was done (False: stopped after ``stop_after_batches`` new ones)."""
    samples: list[dict[str, Any]] = []
    generated = 0
    new_batches = 0
    with open(path, "a", encoding="utf-8") as out:
        for batch_range in batches:
            batch = [passages[i] for i in batch_range]  # read now, dropped after the batch
            if all(p.pid in existing for p in batch):
                progress.update(1)
                continue
            if stop_after_batches is not None and new_batches >= stop_after_batches:
                progress.close()
                return generated, samples, False
            new_batches += 1
            # Seed from the batch's first global passage index: resume == uninterrupted run.
            decoded = _sample_queries(
                model, tokenizer, [sampling.input_prefix + p.text for p in batch], sampling, batch_range.start
            )
            for n, p in enumerate(batch):
                qs = decoded[n * sampling.num_queries : (n + 1) * sampling.num_queries]
                if p.pid in existing:
                    continue
                out.write(json.dumps({"pid": p.pid, "queries": qs}, ensure_ascii=False) + "\n")
                generated += 1
                if len(samples) < num_samples:
                    samples.append({"pid": p.pid, "passage": p.text, "queries": qs})
            out.flush()
            os.fsync(out.fileno())
            progress.update(1)
    progress.close()
    return generated, samples, True


def _marker_config(sampling: _Sampling, batch_size: int, rank: int, world_size: int, dtype: str) -> dict[str, Any]:
    """The settings the shard's key is made of (in the order they always had)."""
    return {
        "stage": "qgen",
        "num_queries": sampling.num_queries,
        "top_k": sampling.top_k,
        "top_p": sampling.top_p,
        "batch_size": batch_size,
        "input_prefix": sampling.input_prefix,
        "max_new_tokens": sampling.max_new_tokens,
        "max_input_tokens": sampling.max_input_tokens,
        "seed": sampling.seed,
        "rank": rank,
        "world_size": world_size,
        **({"dtype": dtype} if dtype != "fp32" else {}),  # fp32 keys as before: the CPU files are unchanged
    }


def _load_generator(model_dir: Path, device: str, dtype: str) -> tuple[Any, Any]:
    """The seq2seq query generator (in eval mode, on ``device`` in ``dtype``) and its tokenizer."""
    import torch
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)
    model = load_pretrained(AutoModelForSeq2SeqLM, model_dir, "a query generator")
    model.to(device=device, dtype={"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[dtype]).eval()
    return model, tokenizer


def _check_arguments(model_dir: Path, num_queries: int, batch_size: int, rank: int, world_size: int) -> None:
    """Refuse a missing generator or impossible settings before anything is written."""
    if not (model_dir / "config.json").is_file():
        raise HarnessError(
            f"query generator not found: {model_dir} has no config.json "
            "(give a local seq2seq checkpoint folder, e.g. doc2query/all-with-prefix-t5-base-v1 "
            "downloaded beforehand, or train the tiny T5 with harness.corpus.tiny_t5)"
        )
    if num_queries < 1:
        raise HarnessError(f"num_queries must be >= 1, got {num_queries}")
    if world_size < 1 or not 0 <= rank < world_size:
        raise HarnessError(f"invalid shard: rank {rank} of world size {world_size}")
    if batch_size < 1:
        raise HarnessError(f"batch_size must be >= 1, got {batch_size}")


def _resume_or_restart(path: Path, key: str, done_name: str, key_name: str) -> Path:
    """Keep a partial ``path`` only when it was written under ``key`` (else start afresh); record the key
    beside it and return that key file (removed once the shard is finished)."""
    artifacts.clear_finished(path.parent, name=done_name)
    key_file = path.parent / key_name
    if path.exists() and (not key_file.exists() or key_file.read_text().strip() != key):
        log.warning("discarding %s: written with a different model/passages/config", path)
        path.unlink()
    artifacts.atomic_write_text(key_file, key + "\n")
    return key_file


def _sample_queries(model: Any, tokenizer: Any, texts: list[str], sampling: _Sampling, offset: int) -> list[str]:
    """``num_queries`` sampled queries per text (text after text), whitespace-normalised, seeded by the
    seed plus ``offset``."""
    import torch

    enc = tokenizer(texts, padding=True, truncation=True, max_length=sampling.max_input_tokens, return_tensors="pt")
    enc = {k: v.to(sampling.device) for k, v in enc.items() if k in ("input_ids", "attention_mask")}
    torch.manual_seed(sampling.seed + offset)
    with torch.no_grad():
        outs = model.generate(
            **enc,
            do_sample=True,
            top_k=sampling.top_k,
            top_p=sampling.top_p,
            num_return_sequences=sampling.num_queries,
            max_new_tokens=sampling.max_new_tokens,
            min_new_tokens=1,
        )
    return [" ".join(q.split()) for q in tokenizer.batch_decode(outs, skip_special_tokens=True)]


def _first_samples(
    passages: Sequence[Passage], batch_size: int, rank: int, world_size: int, queries: Mapping[str, list[str]], n: int
) -> list[dict[str, Any]]:
    """The first ``n`` passages of this rank's shard with their queries from the file."""
    first = next(shard_batches(len(passages), batch_size, rank, world_size), range(0))
    return [
        {"pid": p.pid, "passage": p.text, "queries": queries.get(p.pid, [])} for p in (passages[i] for i in first[:n])
    ]


def query_grounding(passages: Sequence[Passage], queries: Mapping[str, Sequence[str]]) -> dict[str, float]:
    """How much generated queries depend on their passage: the share of a query's words
    (4+ letters) found in its own passage, against the share found in a passage half the
    corpus away (another document). Close values mean the generator ignores its input."""

    def words(text: str) -> set[str]:
        return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if len(w) >= 4}

    own, other = [], []
    n = len(passages)
    for i, p in enumerate(passages):
        mine, far = words(p.text), words(passages[(i + n // 2) % n].text)
        for q in queries.get(p.pid, []):
            qw = words(q)
            if qw:
                own.append(len(qw & mine) / len(qw))
                other.append(len(qw & far) / len(qw))
    if not own:
        return {"query_word_overlap_own": 0.0, "query_word_overlap_other": 0.0}
    return {"query_word_overlap_own": sum(own) / len(own), "query_word_overlap_other": sum(other) / len(other)}
