"""Readers and writers for retrieval data files, plain or gzip (detected by content).

Readers return plain dicts:

* corpus  ``dict[doc_id, {"title": str, "text": str}]``  (BEIR jsonl, MS MARCO TSV collection)
* queries ``dict[qid, str]``                           (BEIR jsonl, ``qid<TAB>text`` topics)
* qrels   ``dict[qid, dict[doc_id, int]]``             (BEIR tsv, TREC ``qid 0 docid grade``)
* run     ``dict[qid, dict[doc_id, float]]``           (TREC ``qid Q0 docid rank score tag``;
  :func:`iter_trec_run` / :func:`stream_trec_run` read and write one query at a time)

Malformed input raises :class:`harness.core.errors.DataFormatError` naming the file, the
1-based line, the problem and a fix. Blank lines are skipped. Lines are split on
``\\n`` only (bytes), so a stray ``\\r`` inside a passage never breaks a record.
"""

from __future__ import annotations

import gzip
import json
import math
import zlib
from collections.abc import Collection, Iterable, Iterator, Mapping
from pathlib import Path
from typing import IO

from harness.core.errors import DataFormatError
from harness.core.fsutil import NOT_REGULAR, atomic_path, file_problem

Corpus = dict[str, dict[str, str]]
Queries = dict[str, str]
Qrels = dict[str, dict[str, int]]
Run = dict[str, dict[str, float]]

_GZIP_MAGIC = b"\x1f\x8b"
_BEIR_QRELS_HEADER_FIRST = {"query-id", "query_id", "qid", "query"}


# ---------------------------------------------------------------------------- low level


def _open_binary(path: Path) -> IO[bytes]:
    """Open plain or gzip file for binary reading (gzip detected by magic bytes, not name)."""
    if file_problem(path) == NOT_REGULAR:  # open() of a pipe would wait for a writer forever
        raise DataFormatError(path, None, NOT_REGULAR, "give the path of a file (write a pipe's output to one first)")
    try:
        fh = open(path, "rb")
    except FileNotFoundError:
        raise DataFormatError(path, None, "file not found", "check the path") from None
    except IsADirectoryError:
        raise DataFormatError(path, None, "is a folder, not a file", "give the path of the file itself") from None
    if fh.read(2) == _GZIP_MAGIC:
        fh.close()
        return gzip.open(path, "rb")
    fh.seek(0)
    return fh


def iter_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, line)`` without the line end; blank lines are skipped."""
    path = Path(path)
    lineno = 0
    with _open_binary(path) as fh:
        lines = iter(fh)
        while True:
            try:
                raw = next(lines, None)
            except (gzip.BadGzipFile, EOFError, zlib.error, OSError) as exc:
                raise DataFormatError(
                    path, lineno + 1, f"corrupt or truncated gzip data ({exc})", "re-create or re-download the file"
                ) from None
            if raw is None:
                return
            lineno += 1
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise DataFormatError(
                    path, lineno, f"not valid UTF-8 (byte {exc.start})", "re-encode the file as UTF-8"
                ) from None
            if lineno == 1:
                line = line.lstrip("\ufeff")
            line = line.rstrip("\n").rstrip("\r")
            if line.strip():
                yield lineno, line


def _split_columns(line: str) -> list[str]:
    """TSV columns; whitespace-separated lines (no tab at all) are accepted too."""
    return line.split("\t") if "\t" in line else line.split()


def _json_object(path: Path, lineno: int, line: str) -> dict:
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise DataFormatError(
            path, lineno, f"bad JSON line ({exc.msg} at column {exc.colno})", "each line must be one JSON object"
        ) from None
    if not isinstance(obj, dict):
        raise DataFormatError(
            path, lineno, f"bad JSON line (a {type(obj).__name__}, not an object)", "each line must be one JSON object"
        )
    return obj


def _id_field(path: Path, lineno: int, obj: dict, key: str = "_id") -> str:
    if key not in obj:
        raise DataFormatError(path, lineno, f"missing field '{key}'", f"every line needs '{key}'")
    value = obj[key]
    if isinstance(value, bool) or not isinstance(value, (str, int)) or str(value) == "":
        raise DataFormatError(
            path, lineno, f"field '{key}' must be a non-empty string, got {value!r}", f"write '{key}' as a string"
        )
    return str(value)


def _text_field(path: Path, lineno: int, obj: dict, key: str, required: bool) -> str:
    if key not in obj or obj[key] is None:
        if required:
            raise DataFormatError(path, lineno, f"missing field '{key}'", f"every line needs '{key}'")
        return ""
    value = obj[key]
    if not isinstance(value, str):
        raise DataFormatError(
            path, lineno, f"field '{key}' must be a string, got {type(value).__name__}", f"write '{key}' as a string"
        )
    return value


def _columns(path: Path, lineno: int, line: str, expected: int, layout: str) -> list[str]:
    cols = _split_columns(line)
    if len(cols) != expected:
        raise DataFormatError(
            path,
            lineno,
            f"wrong column count: expected {expected} ({layout}), got {len(cols)}",
            f"each line must be: {layout}",
        )
    return cols


def _grade(path: Path, lineno: int, value: str) -> int:
    try:
        return int(value)
    except ValueError:
        pass
    try:
        as_float = float(value)
    except ValueError:
        as_float = math.nan
    if math.isfinite(as_float) and as_float == int(as_float):
        return int(as_float)
    raise DataFormatError(path, lineno, _not_numeric("grade", value), "relevance grades are integers (0, 1, 2, ...)")


def _not_numeric(what: str, value: str) -> str:
    """Why ``value`` is refused: "non-numeric" only for text; ``inf`` and ``nan`` are numbers, just not
    finite ones, and 1.5 is a number but not the integer a grade or rank must be."""
    try:
        number = float(value)
    except ValueError:
        return f"non-numeric {what} '{value}'"
    if math.isfinite(number):
        return f"{what} '{value}' is not an integer"
    return f"{what} '{value}' is not a finite number"


def _add_judgement(
    path: Path,
    lineno: int,
    qrels: Qrels,
    qid: str,
    docid: str,
    grade: int,
    known_queries: Collection[str] | None,
    topics_source: str | None,
) -> None:
    if known_queries is not None and qid not in known_queries:
        src = f" ({topics_source})" if topics_source else ""
        raise DataFormatError(
            path,
            lineno,
            f"qrels for query '{qid}' unknown to the topics{src}",
            "use the topics file that belongs to these qrels",
        )
    per_query = qrels.setdefault(qid, {})
    if docid in per_query:
        raise DataFormatError(
            path, lineno, f"duplicate (qid, docid) ('{qid}', '{docid}')", "keep one judgement per query and document"
        )
    per_query[docid] = grade


# ---------------------------------------------------------------------------- BEIR


def iter_beir_corpus(path: str | Path) -> Iterator[tuple[str, dict[str, str]]]:
    """Stream a BEIR ``corpus.jsonl``: ``_id`` and ``text`` required, ``title`` optional (as in
    BEIR's own loader), other keys (``metadata``) ignored. Duplicate ids raise."""
    path = Path(path)
    seen: set[str] = set()
    for lineno, line in iter_lines(path):
        obj = _json_object(path, lineno, line)
        doc_id = _id_field(path, lineno, obj)
        doc = {
            "title": _text_field(path, lineno, obj, "title", required=False),
            "text": _text_field(path, lineno, obj, "text", required=True),
        }
        if doc_id in seen:
            raise DataFormatError(path, lineno, f"duplicate doc id '{doc_id}'", "document ids must be unique")
        seen.add(doc_id)
        yield doc_id, doc


def read_beir_corpus(path: str | Path) -> Corpus:
    """BEIR ``corpus.jsonl`` -> ``{doc_id: {"title", "text"}}``."""
    return dict(iter_beir_corpus(path))


def read_beir_queries(path: str | Path) -> Queries:
    """BEIR ``queries.jsonl`` -> ``{qid: text}`` (``metadata`` ignored)."""
    path = Path(path)
    queries: Queries = {}
    for lineno, line in iter_lines(path):
        obj = _json_object(path, lineno, line)
        qid = _id_field(path, lineno, obj)
        text = _text_field(path, lineno, obj, "text", required=True)
        if qid in queries:
            raise DataFormatError(path, lineno, f"duplicate query id '{qid}'", "query ids must be unique")
        queries[qid] = text
    return queries


def read_beir_qrels(
    path: str | Path, known_queries: Collection[str] | None = None, topics_source: str | None = None
) -> Qrels:
    """BEIR ``qrels/<split>.tsv`` (``query-id corpus-id score``; the header line is optional).

    With ``known_queries``, a judged query missing from them raises (with its line).
    """
    path = Path(path)
    qrels: Qrels = {}
    first = True
    for lineno, line in iter_lines(path):
        cols = _columns(path, lineno, line, 3, "query-id<TAB>corpus-id<TAB>score")
        if first and cols[0].strip().lower() in _BEIR_QRELS_HEADER_FIRST:
            first = False
            continue
        first = False
        _add_judgement(
            path, lineno, qrels, cols[0], cols[1], _grade(path, lineno, cols[2]), known_queries, topics_source
        )
    return qrels


# ---------------------------------------------------------------------------- TREC


def read_trec_qrels(
    path: str | Path, known_queries: Collection[str] | None = None, topics_source: str | None = None
) -> Qrels:
    """TREC qrels ``qid iteration docid grade`` (whitespace separated)."""
    path = Path(path)
    qrels: Qrels = {}
    for lineno, line in iter_lines(path):
        qid, _, docid, grade = _columns(path, lineno, line, 4, "qid 0 docid grade")
        _add_judgement(path, lineno, qrels, qid, docid, _grade(path, lineno, grade), known_queries, topics_source)
    return qrels


def read_qrels(
    path: str | Path, known_queries: Collection[str] | None = None, topics_source: str | None = None
) -> Qrels:
    """Qrels in either layout: 4 columns on the first data line -> TREC, otherwise BEIR tsv."""
    for _, line in iter_lines(path):
        if len(_split_columns(line)) == 4:
            return read_trec_qrels(path, known_queries, topics_source)
        break
    return read_beir_qrels(path, known_queries, topics_source)


def _run_line(path: Path, lineno: int, line: str) -> tuple[str, str, float]:
    """One TREC run line checked: ``(qid, docid, score)``."""
    qid, _, docid, rank, score, _tag = _columns(path, lineno, line, 6, "qid Q0 docid rank score tag")
    try:
        int(rank)
    except ValueError:
        raise DataFormatError(path, lineno, _not_numeric("rank", rank), "ranks are integers 1, 2, ...") from None
    try:
        value = float(score)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise DataFormatError(path, lineno, _not_numeric("score", score), "scores are finite numbers")
    return qid, docid, value


def read_trec_run(path: str | Path) -> Run:
    """TREC run ``qid Q0 docid rank score tag`` -> ``{qid: {docid: score}}``.

    Ranks must be integers but are otherwise ignored: ordering is by score, as trec_eval does.
    """
    path = Path(path)
    run: Run = {}
    for lineno, line in iter_lines(path):
        qid, docid, value = _run_line(path, lineno, line)
        per_query = run.setdefault(qid, {})
        if docid in per_query:
            raise DataFormatError(
                path,
                lineno,
                f"duplicate (qid, docid) ('{qid}', '{docid}')",
                "a document may appear once per query in a run",
            )
        per_query[docid] = value
    return run


def iter_trec_run(path: str | Path) -> Iterator[tuple[str, dict[str, float]]]:
    """A TREC run one query at a time, ``(qid, {docid: score})`` in file order: what
    :func:`read_trec_run` holds whole, in the same order, with one query's ranking in memory (a
    depth-200 run of MS MARCO's 502,939 training queries is a 100M-entry dict read whole).

    The file must list its queries in ascending id order, each query's lines together, as
    :func:`write_trec_run` writes them (checked, so nothing that grows with the run is kept); a file
    in another order is read with :func:`read_trec_run`.
    """
    path = Path(path)
    qid_now: str | None = None
    ranking: dict[str, float] = {}
    for lineno, line in iter_lines(path):
        qid, docid, value = _run_line(path, lineno, line)
        if qid != qid_now:
            if qid_now is not None:
                if qid < qid_now:
                    raise DataFormatError(
                        path,
                        lineno,
                        f"query '{qid}' after '{qid_now}': the query ids do not ascend",
                        "write the run with write_trec_run, or read it with read_trec_run",
                    )
                yield qid_now, ranking
            qid_now, ranking = qid, {}
        if docid in ranking:
            raise DataFormatError(
                path,
                lineno,
                f"duplicate (qid, docid) ('{qid}', '{docid}')",
                "a document may appear once per query in a run",
            )
        ranking[docid] = value
    if qid_now is not None:
        yield qid_now, ranking


def _atomic_write_lines(path: Path, lines: Iterator[str]) -> Path:
    """Write text lines to ``path`` via a temp file (:func:`harness.core.fsutil.atomic_path`); ``.gz``
    paths get reproducible gzip."""
    path = Path(path)
    with atomic_path(path) as tmp:
        if path.suffix == ".gz":
            with open(tmp, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz:
                for line in lines:
                    gz.write(line.encode("utf-8"))
        else:
            with open(tmp, "w", encoding="utf-8", newline="\n") as fh:
                fh.writelines(lines)
    return path


def by_score_then_id(ranking: Iterable[tuple[str, float]]) -> list[tuple[str, float]]:
    """The one order of every run the harness writes or cuts (dense, impact, BM25): descending score, ties
    by doc id (as trec_eval and ir-measures read them). The dense searches keep the same rule when they
    cut at the k-th place (:func:`harness.retrieval.exact_search.doc_id_order`)."""
    return sorted(ranking, key=lambda kv: (-kv[1], kv[0]))


def _trec_lines(rankings: Iterable[tuple[str, Mapping[str, float]]], tag: str, depth: int | None) -> Iterator[str]:
    """The lines of :func:`write_trec_run`; query ids must come in ascending order (checked)."""
    if not tag or any(c.isspace() for c in tag):
        raise ValueError(f"run tag must be one non-empty word, got {tag!r}")
    last: str | None = None
    for qid, ranking in rankings:
        if last is not None and qid <= last:
            raise ValueError(f"run queries must come in ascending order without repeats: {qid!r} after {last!r}")
        last = qid
        ranked = by_score_then_id(ranking.items())
        if depth is not None:
            ranked = ranked[:depth]
        for rank, (docid, score) in enumerate(ranked, start=1):
            yield f"{qid} Q0 {docid} {rank} {float(score)!r} {tag}\n"


def write_trec_run(
    run: Mapping[str, Mapping[str, float]], path: str | Path, tag: str = "harness", depth: int | None = None
) -> Path:
    """Write a TREC run file: queries in sorted order, documents by descending score
    (ties broken by doc id, so the file is deterministic), ranks from 1, at most ``depth`` per query."""
    if not tag or any(c.isspace() for c in tag):
        raise ValueError(f"run tag must be one non-empty word, got {tag!r}")
    return _atomic_write_lines(Path(path), _trec_lines(((q, run[q]) for q in sorted(run)), tag, depth))


def stream_trec_run(
    rankings: Iterable[tuple[str, Mapping[str, float]]],
    path: str | Path,
    tag: str = "harness",
    depth: int | None = None,
) -> int:
    """:func:`write_trec_run` from ``(qid, ranking)`` pairs in ascending qid order, one query at a
    time: the same bytes without the whole run in memory. Returns the number of queries written."""
    count = 0

    def counted() -> Iterator[tuple[str, Mapping[str, float]]]:
        nonlocal count
        for pair in rankings:
            count += 1
            yield pair

    _atomic_write_lines(Path(path), _trec_lines(counted(), tag, depth))
    return count


def write_trec_qrels(qrels: Mapping[str, Mapping[str, int]], path: str | Path) -> Path:
    """Write TREC qrels (``qid 0 docid grade``), sorted by query then document id."""

    def lines() -> Iterator[str]:
        for qid in sorted(qrels):
            for docid in sorted(qrels[qid]):
                yield f"{qid} 0 {docid} {int(qrels[qid][docid])}\n"

    return _atomic_write_lines(Path(path), lines())


# ---------------------------------------------------------------------------- TSV topics / MS MARCO


def read_topics_tsv(path: str | Path) -> Queries:
    """Topics ``qid<TAB>text`` (Anserini topics, MS MARCO ``queries.*.tsv``) -> ``{qid: text}``."""
    path = Path(path)
    queries: Queries = {}
    for lineno, line in iter_lines(path):
        cols = line.split("\t")
        if len(cols) != 2:
            raise DataFormatError(
                path,
                lineno,
                f"wrong column count: expected 2 (qid<TAB>text), got {len(cols)}",
                "each line must be: qid<TAB>text, with no tab inside the text",
            )
        qid, text = cols[0].strip(), cols[1]
        if not qid:
            raise DataFormatError(path, lineno, "empty query id", "each line must be: qid<TAB>text")
        if qid in queries:
            raise DataFormatError(path, lineno, f"duplicate query id '{qid}'", "query ids must be unique")
        queries[qid] = text
    return queries


read_msmarco_queries = read_topics_tsv


def iter_msmarco_collection(path: str | Path) -> Iterator[tuple[str, dict[str, str]]]:
    """Stream MS MARCO ``collection.tsv`` (``pid<TAB>passage``) as corpus entries with an empty title."""
    path = Path(path)
    seen: set[str] = set()
    for lineno, line in iter_lines(path):
        cols = line.split("\t")
        if len(cols) != 2:
            raise DataFormatError(
                path,
                lineno,
                f"wrong column count: expected 2 (pid<TAB>text), got {len(cols)}",
                "each line must be: pid<TAB>passage text",
            )
        pid = cols[0].strip()
        if not pid:
            raise DataFormatError(path, lineno, "empty passage id", "each line must be: pid<TAB>passage text")
        if pid in seen:
            raise DataFormatError(path, lineno, f"duplicate doc id '{pid}'", "passage ids must be unique")
        seen.add(pid)
        yield pid, {"title": "", "text": cols[1]}


def join_titles(
    passages: Iterator[tuple[str, dict[str, str]]], titles_path: str | Path
) -> Iterator[tuple[str, dict[str, str]]]:
    """Give each MS MARCO passage its title from RocketQA's ``para.title.txt`` (``pid<TAB>title``, in
    collection order; "-" means no title). Read in step with the collection, so the 8.8M titles are
    never held in memory; the titles file may list passages the collection lacks, never the reverse."""
    titles_path = Path(titles_path)
    rows = iter_lines(titles_path)
    for pid, doc in passages:
        while True:
            try:
                lineno, line = next(rows)
            except StopIteration:
                raise DataFormatError(
                    titles_path,
                    None,
                    f"no title for passage '{pid}' (the file ended)",
                    "use the para.title.txt that belongs to this collection.tsv",
                ) from None
            cols = line.split("\t")
            if len(cols) > 2:
                raise DataFormatError(
                    titles_path,
                    lineno,
                    f"wrong column count: expected 2 (pid<TAB>title), got {len(cols)}",
                    "each line must be: pid<TAB>title",
                )
            if cols[0].strip() == pid:
                title = cols[1].strip() if len(cols) == 2 else ""
                yield pid, {"title": "" if title == "-" else title, "text": doc["text"]}
                break


def read_msmarco_collection(path: str | Path) -> Corpus:
    """MS MARCO ``collection.tsv`` -> corpus dict (title "")."""
    return dict(iter_msmarco_collection(path))


# ---------------------------------------------------------------------------- cross-file checks


def check_qrels_topics(
    qrels: Mapping[str, Mapping[str, int]], queries: Collection[str], qrels_path: str | Path, topics_path: str | Path
) -> None:
    """Raise if a judged query is absent from the topics (for data loaded separately).

    Readers given ``known_queries`` do this while reading and can name the line; this
    variant names the query only.
    """
    missing = sorted(q for q in qrels if q not in queries)
    if missing:
        shown = ", ".join(f"'{q}'" for q in missing[:5]) + (" ..." if len(missing) > 5 else "")
        raise DataFormatError(
            qrels_path,
            None,
            f"qrels for {len(missing)} queries unknown to the topics ({topics_path}): {shown}",
            "use the topics file that belongs to these qrels",
        )
