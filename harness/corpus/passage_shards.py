"""Passages of a whole corpus written as a stream, resumable by shard: what the ``passages`` stage runs
when it keeps every document (no ``max_passages``), the paper profiles' case (MS MARCO documents, 3.2M).

:func:`harness.corpus.passages.build_passages` holds the corpus, every passage and the joined file at
once; this writes the same ``passages.jsonl``, byte for byte, holding one shard of documents at a time:

1. Punkt is trained on the corpus prefix that ``build_passages`` would read (the first
   ``punkt_train_chars`` characters of text in corpus order), cached in the work folder.
2. The documents are split in shards of :data:`SHARD_DOCS`, in corpus order; each shard's lines go to
   ``shards/part-<k>.jsonl`` and its counts to ``part-<k>.json``, written last: a finished shard.
   The shards are split by a pool of worker processes (:func:`worker_count`: the cores this process
   may use, at most one per unfinished shard; ``HARNESS_PASSAGE_WORKERS`` overrides, never part of the
   stage key), forked once Punkt is trained so every worker shares the splitter and the tokenizer.
   This process reads the corpus and keeps the shards in flight (one per worker, one more waiting);
   each worker holds one shard at a time and writes its files. One core, or one shard left: no pool.
3. The shards are joined in shard order into the output file, then removed: the same bytes for any
   number of workers.

A build killed mid-way (the stage keeps its work folder: ``resumable`` in harness/stages/graph.py)
skips the finished shards when run again and gives the same file.
"""

from __future__ import annotations

import itertools
import json
import multiprocessing
import os
import shutil
import signal
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.core.chunks import chunked
from harness.core.errors import HarnessError, UnknownNameError
from harness.core.fsutil import atomic_path, atomic_write_text
from harness.core.threads import available_cores
from harness.corpus.passages import (
    TITLE_MODES,
    Passage,
    doc_rng,
    document_sentences,
    group_sentences,
    load_tokenizer,
    passage_line,
)
from harness.corpus.sentences import DEFAULT_MAX_TRAIN_CHARS, SentenceSplitter, load_or_train_punkt

SHARD_DOCS = 10_000  # documents per resumable shard
WORKERS_ENV = "HARNESS_PASSAGE_WORKERS"  # worker processes of the passages stage (not in its key)
Docs = Iterable[tuple[str, Mapping[str, str]]]
Shard = list[tuple[str, Mapping[str, str]]]


def punkt_texts(docs: Docs, max_chars: int | None) -> list[str]:
    """The texts Punkt trains on: the corpus prefix, as :func:`harness.corpus.sentences._training_texts`
    takes it from the whole corpus (so the trained splitter, and its cache key, are the same)."""
    used, total = [], 0
    for _, doc in docs:
        if max_chars is not None and total >= max_chars:
            break
        text = doc.get("text") or ""
        used.append(text)
        total += len(text)
    return used


def worker_count(environ: Mapping[str, str] = os.environ) -> int:
    """Worker processes the passages stage may use: ``HARNESS_PASSAGE_WORKERS``, else the cores this
    process may run on (:func:`harness.core.threads.available_cores`: affinity, cgroup quota,
    ``HARNESS_THREADS``). One where a pool cannot be forked (no ``fork``, or a daemonic process)."""
    raw = environ.get(WORKERS_ENV, "").strip()
    if raw:
        if not raw.isdigit() or int(raw) < 1:
            raise HarnessError(f"{WORKERS_ENV}={raw!r}: give a positive whole number of worker processes")
        wanted = int(raw)
    else:
        wanted = available_cores(dict(environ))[0]
    forkable = "fork" in multiprocessing.get_all_start_methods() and not multiprocessing.current_process().daemon
    return wanted if forkable else 1


def _shards(docs: Docs, size: int) -> Iterator[Shard]:
    return chunked(_unique(docs), size)


def _unique(docs: Docs) -> Iterator[tuple[str, Mapping[str, str]]]:
    seen: set[str] = set()  # a repeated id would be one document in build_passages' dict
    for doc_id, doc in docs:
        doc_id = str(doc_id)
        if doc_id in seen:
            raise HarnessError(
                f"document id {doc_id!r} occurs twice in the corpus; passages need unique ids "
                "(fix the corpus file, or build from a deduplicated copy)"
            )
        seen.add(doc_id)
        yield doc_id, doc


@dataclass(frozen=True)
class _Splitting:
    """How every shard is split: the same in this process and in each forked worker."""

    tokenizer: Any
    splitter: SentenceSplitter
    max_tokens: int
    title_mode: str
    short_span_prob: float
    seed: int

    def write(self, k: int, shard: Shard, folder: Path) -> dict[str, int]:
        """Split shard ``k`` into ``part-<k>.jsonl``, then mark it finished with its counts."""
        lines: list[str] = []
        with_passages = passages = 0
        for doc_id, doc in shard:
            rng = doc_rng(self.seed, doc_id) if self.short_span_prob > 0 else None
            groups = group_sentences(
                document_sentences(doc, self.splitter, self.title_mode),
                self.tokenizer,
                self.max_tokens,
                self.short_span_prob,
                rng,
            )
            lines.extend(
                passage_line(Passage(pid=f"{doc_id}#{i}", doc_id=doc_id, text=" ".join(g)))
                for i, g in enumerate(groups)
            )
            with_passages += bool(groups)
            passages += len(groups)
        atomic_write_text(folder / f"part-{k:06d}.jsonl", "".join(lines))
        counts = {"documents": len(shard), "with_passages": with_passages, "passages": passages}
        atomic_write_text(folder / f"part-{k:06d}.json", json.dumps(counts))  # last: the shard is finished
        return counts


_WORKER: _Splitting | None = None  # a forked worker's splitting, inherited from the parent (never pickled)


def _start_worker(splitting: _Splitting) -> None:
    global _WORKER
    _WORKER = splitting
    # The parent stops the pool on Ctrl-C or SIGTERM; a worker neither unwinds the harness's handlers
    # nor dies on its own Ctrl-C. Each worker's tokenizer stays on its one core.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.environ["TOKENIZERS_PARALLELISM"] = "false"


def _worker_write(k: int, shard: Shard, folder: Path) -> dict[str, int]:
    assert _WORKER is not None, "a passages worker runs only in a pool started by _pool_write"
    return _WORKER.write(k, shard, folder)


def _pool_write(
    splitting: _Splitting,
    todo: Iterator[tuple[int, Shard]],
    workers: int,
    folder: Path,
    finished: Callable[[int, dict[str, int]], None],
) -> None:
    """Split the shards of ``todo`` in ``workers`` forked processes; ``finished`` sees them in shard order."""
    pool = ProcessPoolExecutor(
        workers, mp_context=multiprocessing.get_context("fork"), initializer=_start_worker, initargs=(splitting,)
    )
    pending: deque[tuple[int, Future[dict[str, int]]]] = deque()
    try:
        for k, shard in todo:
            pending.append((k, pool.submit(_worker_write, k, shard, folder)))
            del shard  # the executor keeps it until its result is back: workers + 1 shards at most
            while len(pending) > workers:  # every worker busy and one shard waiting: read no further
                done, future = pending.popleft()
                finished(done, future.result())
        while pending:
            done, future = pending.popleft()
            finished(done, future.result())
    except BaseException:
        # A failed shard, a test's kill, Ctrl-C or SIGTERM: stop the workers now (a finished shard stays
        # finished, an unfinished one left no marker), not after their current shard. The executor has
        # no public way to stop its workers: its own table of them.
        for process in list((pool._processes or {}).values()):
            process.terminate()
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


def _drain(items: deque[tuple[int, Shard]]) -> Iterator[tuple[int, Shard]]:
    """The read-ahead shards, each let go of once handed on."""
    while items:
        yield items.popleft()


def write_passages(
    docs: Callable[[], Docs],
    tokenizer: Any,
    out: Path,
    work: Path,
    max_tokens: int = 144,
    *,
    title_mode: str = "sentence",
    short_span_prob: float = 0.0,
    seed: int = 42,
    splitter: SentenceSplitter | None = None,
    punkt_train_chars: int | None = None,
    shard_docs: int = SHARD_DOCS,
    workers: int | None = None,
    after_shard: Callable[[int], None] | None = None,
) -> dict[str, int]:
    """Write the passages of every document of ``docs()`` (a fresh ``(doc_id, doc)`` iterator per call,
    corpus order) to ``out``, as ``build_passages`` + ``save_passages`` would; returns the counts
    (``passages``, ``documents`` with a passage, ``corpus_documents``) and ``workers``, the processes
    that split the shards (``workers``: at most this many, default :func:`worker_count`). ``work`` keeps
    the finished shards between tries; ``after_shard(k)`` is called, in shard order, once shard k is
    finished (a test's kill)."""
    if max_tokens < 2:
        raise HarnessError(f"max_tokens must be >= 2, got {max_tokens}")
    if title_mode not in TITLE_MODES:
        raise UnknownNameError("title mode", title_mode, list(TITLE_MODES))
    if shard_docs < 1:
        raise HarnessError(f"shard_docs must be positive, got {shard_docs}")
    if workers is not None and workers < 1:
        raise HarnessError(f"workers must be positive, got {workers}")
    tokenizer = load_tokenizer(tokenizer)
    if splitter is None:
        limit = DEFAULT_MAX_TRAIN_CHARS if punkt_train_chars is None else punkt_train_chars
        splitter = load_or_train_punkt(punkt_texts(docs(), limit), work, max_train_chars=limit)
    splitting = _Splitting(tokenizer, splitter, max_tokens, title_mode, short_span_prob, seed)
    folder = work / f"shards-{shard_docs}"
    folder.mkdir(parents=True, exist_ok=True)
    counts: dict[int, dict[str, int]] = {}

    def unfinished() -> Iterator[tuple[int, Shard]]:
        for k, shard in enumerate(_shards(docs(), shard_docs)):
            done = folder / f"part-{k:06d}.json"
            if done.is_file():
                counts[k] = json.loads(done.read_text(encoding="utf-8"))
            else:
                yield k, shard

    def finished(k: int, shard_counts: dict[str, int]) -> None:
        counts[k] = shard_counts
        if after_shard is not None:
            after_shard(k)

    todo = unfinished()
    most = worker_count() if workers is None else workers
    ahead = deque(itertools.islice(todo, most if most > 1 else 0))  # to cap the pool at the shards left
    used = max(1, min(most, len(ahead)))
    shards = itertools.chain(_drain(ahead), todo)
    if used > 1:
        _pool_write(splitting, shards, used, folder, finished)
    else:
        for k, shard in shards:
            finished(k, splitting.write(k, shard, folder))
    with atomic_path(out) as tmp, open(tmp, "wb") as joined:
        for k in range(len(counts)):
            with open(folder / f"part-{k:06d}.jsonl", "rb") as part:
                shutil.copyfileobj(part, joined, 1 << 20)
    shutil.rmtree(folder, ignore_errors=True)
    return {
        "passages": sum(c["passages"] for c in counts.values()),
        "documents": sum(c["with_passages"] for c in counts.values()),
        "corpus_documents": sum(c["documents"] for c in counts.values()),
        "workers": used,
    }
