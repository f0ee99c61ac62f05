"""Published BM25 negatives of the MS MARCO training queries, read into ``{qid: [pid, ...]}``.

* ``msmarco-triples``: the official ``qidpidtriples.train.full.2.tsv.gz`` (``qid<TAB>pos<TAB>neg``);
  as in coCondenser's / Tevatron's MS MARCO recipe, a query's negatives are the negative pids of its
  lines in file order, each once.
* ``tevatron``: Tevatron's ``train.jsonl.gz`` (``query_id``, ``positive_passages``,
  ``negative_passages`` with ``docid``); it lacks ~100k of the training queries (texttron/tevatron#81).

Only the judged training queries are kept, at most ``depth`` negatives each, never a judged passage.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from harness.core.errors import DataFormatError
from harness.data.formats import iter_lines

# data.bm25_negatives -> the download it is read from (``own``: the harness's own BM25,
# harness.pipelines.bm25.bm25_run).
NEGATIVE_SOURCES = {"msmarco-triples": "msmarco-passage/triples", "tevatron": "tevatron/msmarco-passage"}


def read_published_negatives(
    source: str, path: Path, qrels: Mapping[str, Mapping[str, int]], depth: int
) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    seen: dict[str, set[str]] = {}

    def add(qid: str, pid: str) -> None:
        if qid not in qrels or pid in qrels[qid]:
            return
        got = out.setdefault(qid, [])
        if len(got) < depth and pid not in seen.setdefault(qid, set()):
            got.append(pid)
            seen[qid].add(pid)

    for lineno, line in iter_lines(path):
        if source == "msmarco-triples":
            cols = line.split("\t")
            if len(cols) != 3:
                raise DataFormatError(
                    path,
                    lineno,
                    f"wrong column count: expected 3 (qid, positive pid, negative pid), got {len(cols)}",
                    "use the official qidpidtriples.train.full.2.tsv.gz",
                )
            add(cols[0].strip(), cols[2].strip())
        else:
            try:
                row = json.loads(line)
                qid = str(row["query_id"])
                negatives = [str(p["docid"]) for p in row["negative_passages"]]
            except (ValueError, KeyError, TypeError) as exc:
                raise DataFormatError(
                    path,
                    lineno,
                    f"not a Tevatron training row ({exc})",
                    "each line must be a JSON object with query_id and negative_passages",
                ) from None
            for pid in negatives:
                add(qid, pid)
    return out
