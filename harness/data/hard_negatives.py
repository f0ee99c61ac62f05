"""sentence-transformers' MS MARCO hard negatives (``msmarco-hard-negatives.jsonl.gz``), read and selected
as Thakur et al.'s BEIR recipe selects them, into the negative pool of each training query.

The file (QC v2 §3.2, footnote 2: https://sbert.net/datasets/msmarco-hard-negatives.jsonl.gz) has one
JSON object per MS MARCO training query: ``qid``, ``pos`` (its judged passages) and ``neg``, a mapping from
each system that mined negatives (``bm25`` and a dozen dense retrievers, 50 passages each) to its list.
Two published forms exist under that name, and both are read:

* sbert.net's (the one the QC paper cites, read by BEIR's ``train_msmarco_v3.py`` and sentence-transformers'
  ``train_bi-encoder-v3.py``): each entry is ``{"pid": ..., "ce-score": ...}``, a cross-encoder's score
  (cross-encoder/ms-marco-MiniLM-L-6-v2) of that passage for the query;
* the Hub's (``sentence-transformers/msmarco-hard-negatives``): each entry is a bare pid; its scores are in
  a separate pickle, which is not read here (a pickle runs code when loaded), so these entries are not denoised.

The selection (:func:`select_negatives`), as BEIR's ``train_msmarco_v3.py``: a negative is dropped when its
cross-encoder score is above the query's lowest positive score minus :data:`CE_SCORE_MARGIN` (likely a
false negative); each system then gives its first :data:`NEGATIVES_PER_SYSTEM` passages not taken
already, in the file's system order; a judged passage is never a negative.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.core.errors import DataFormatError
from harness.data.formats import iter_lines

# BEIR's train_msmarco_v3.py (Thakur et al. 2021's training of their MS MARCO bi-encoders).
CE_SCORE_MARGIN = 3.0
NEGATIVES_PER_SYSTEM = 5
# finetune.hard_negatives -> the download (harness.data.download.SOURCES) it is read from
HARD_NEGATIVE_SOURCES = {"msmarco-sbert-hard-negatives": "sbert/msmarco-hard-negatives"}
_FIX = 'each line must be a JSON object {"qid": ..., "pos": [...], "neg": {"<system>": [...]}}'


@dataclass(frozen=True)
class Scored:
    """One passage of a line: its id and, in sbert.net's form, the cross-encoder's score (None: the Hub's form)."""

    pid: str
    ce_score: float | None = None


@dataclass(frozen=True)
class HardNegativeLine:
    """One training query of the file: its positives and each system's negatives, in the file's order."""

    qid: str
    positives: tuple[Scored, ...]
    negatives: tuple[tuple[str, tuple[Scored, ...]], ...]  # (system, its passages)


def _entry(item: Any) -> Scored:
    """A list entry: a bare pid, or sbert.net's ``{"pid", "ce-score"}``."""
    if isinstance(item, bool):
        raise TypeError(f"entry {item!r} is no passage id")
    if isinstance(item, (int, str)):
        return Scored(str(item))
    if isinstance(item, Mapping) and "pid" in item:
        score = item.get("ce-score")
        if score is not None and (isinstance(score, bool) or not isinstance(score, (int, float))):
            raise TypeError(f"ce-score {score!r} is no number")
        return Scored(str(item["pid"]), None if score is None else float(score))
    raise TypeError(f"entry {item!r} is neither a pid nor an object with a pid")


def _parse(line: str) -> HardNegativeLine:
    row = json.loads(line)
    if not isinstance(row, dict):
        raise TypeError("not a JSON object")
    missing = [k for k in ("qid", "pos", "neg") if k not in row]
    if missing:
        raise KeyError(", ".join(missing))
    if not isinstance(row["pos"], list) or not isinstance(row["neg"], dict):
        raise TypeError("pos must be a list and neg an object of lists")
    negatives = []
    for system, items in row["neg"].items():
        if not isinstance(items, list):
            raise TypeError(f"neg[{system!r}] is not a list")
        negatives.append((str(system), tuple(_entry(i) for i in items)))
    return HardNegativeLine(str(row["qid"]), tuple(_entry(i) for i in row["pos"]), tuple(negatives))


def iter_hard_negatives(path: Path) -> Iterator[HardNegativeLine]:
    """Every line of the file; a malformed one is a DataFormatError naming the file and the line."""
    for lineno, line in iter_lines(path):
        try:
            yield _parse(line)
        except (ValueError, KeyError, TypeError) as exc:
            problem = f"missing {exc.args[0]}" if isinstance(exc, KeyError) else str(exc)
            raise DataFormatError(path, lineno, f"not a hard-negatives line ({problem})", _FIX) from None


def select_negatives(
    line: HardNegativeLine,
    judged: Sequence[str] = (),
    per_system: int = NEGATIVES_PER_SYSTEM,
    margin: float = CE_SCORE_MARGIN,
) -> list[str]:
    """The line's negatives as BEIR's recipe takes them (module doc); ``judged``: the query's judged
    passages (the qrels), never negatives, beside the line's own positives."""
    scores = [p.ce_score for p in line.positives if p.ce_score is not None]
    threshold = min(scores) - margin if scores else None
    exclude = set(judged) | {p.pid for p in line.positives}
    out: list[str] = []
    taken: set[str] = set()
    for _system, items in line.negatives:
        added = 0
        for item in items:
            if added >= per_system:
                break
            if threshold is not None and item.ce_score is not None and item.ce_score > threshold:
                continue  # scored as relevant as a positive: likely a false negative
            if item.pid in exclude or item.pid in taken:
                continue
            out.append(item.pid)
            taken.add(item.pid)
            added += 1
    return out


@dataclass(frozen=True)
class NegativePools:
    """The selected negatives per training query, and what the selection saw (printed and recorded)."""

    pools: dict[str, list[str]]
    lines: int  # lines of the file read
    unjudged: int  # lines whose query has no judgement in the training qrels (not trained on)
    denoised: bool  # whether the file carried cross-encoder scores (sbert.net's form)


def read_negative_pools(path: Path, qrels: Mapping[str, Mapping[str, int]]) -> NegativePools:
    """``{qid: [pid, ...]}`` for the judged training queries of the file (module doc: the selection)."""
    pools: dict[str, list[str]] = {}
    lines = unjudged = 0
    denoised = False
    for line in iter_hard_negatives(path):
        lines += 1
        denoised = denoised or any(p.ce_score is not None for p in line.positives)
        judged = qrels.get(line.qid)
        if not judged:
            unjudged += 1
            continue
        chosen = select_negatives(line, [pid for pid, rel in judged.items() if rel > 0])
        if chosen:
            pools[line.qid] = chosen
    return NegativePools(pools, lines, unjudged, denoised)
