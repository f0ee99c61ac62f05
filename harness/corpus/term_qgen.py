"""A learned extractive query source for query-as-context at CPU scale (the ``mini`` profile).

The QC paper draws C queries per passage from doc2query-T5. Where no such generator can be had
(no Hub here, and a seq2seq model trained from scratch in CPU minutes writes queries that ignore
their passage), this source stands in for it. It is learned from (query, relevant document)
training pairs, never from test queries:

* ``fit_term_model`` estimates, for every word, how often it appears in a query about a document
  that contains it: ``p(w) = (n_q&d(w) + s * prior) / (n_d(w) + s)`` (``s`` smoothing towards the
  corpus-wide rate ``prior``), and keeps the observed query lengths in content words;
* ``sample_queries`` writes C queries per passage: a length drawn from those lengths, then that
  many distinct content words of the passage drawn without replacement with odds ``p(w)``, kept
  in passage order. Seeded per passage (seed, pid), so the output is the same on every run.

Such queries are bags of the passage's most query-like words, not fluent questions; doc2query's
queries also reuse passage words heavily, which is what QC pre-training relies on (the
decoder reconstructs the passage from a short, passage-dependent context). docs/profiles-and-hardware.md and the
run record say when this source substitutes for doc2query-T5.
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.core.errors import HarnessError
from harness.core.fsutil import atomic_write_text
from harness.corpus.passages import Passage

WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
# Function words never make a query word on their own (doc2query keeps them, but they carry no
# passage dependence, which is the point of the query as context).
STOPWORDS = frozenset(
    "a an and are as at be been but by can do does for from had has have how in into is it its may more "
    "most of on or other our so such than that the their them then there these they this those to was we "
    "were what when where which while who why will with within without you your".split()
)


def content_words(text: str) -> list[str]:
    return [w for w in WORD.findall(text.lower()) if w not in STOPWORDS and not w.isdigit()]


@dataclass(frozen=True)
class TermModel:
    keep: dict[str, float]  # p(word appears in a query | word is in the relevant document)
    prior: float
    lengths: tuple[int, ...]  # content words per training query
    pairs: int

    def weight(self, word: str) -> float:
        return self.keep.get(word, self.prior)


def fit_term_model(pairs: Iterable[tuple[str, str]], smoothing: float = 2.0) -> TermModel:
    """Word keep-rates and query lengths from (query, document text) training pairs."""
    in_doc: Counter[str] = Counter()
    in_both: Counter[str] = Counter()
    lengths: list[int] = []
    n = 0
    for query, doc in pairs:
        q, d = content_words(query), set(content_words(doc))
        if not q or not d:
            continue
        n += 1
        lengths.append(len(q))
        in_doc.update(d)
        in_both.update(set(q) & d)
    if not n:
        raise HarnessError("term query source: no usable (query, document) training pairs")
    prior = sum(in_both.values()) / max(1, sum(in_doc.values()))
    keep = {w: (in_both[w] + smoothing * prior) / (c + smoothing) for w, c in in_doc.items()}
    return TermModel(keep, prior, tuple(lengths), n)


def sample_queries(model: TermModel, passage: Passage, num_queries: int, seed: int) -> list[str]:
    """``num_queries`` queries for one passage (deterministic for a given seed and pid)."""
    rng = random.Random(f"{seed}/{passage.pid}")
    words = list(dict.fromkeys(content_words(passage.text)))  # distinct, in passage order
    if not words:
        # A fragment with no content word ("OR 1.18).") still gets a query from its own text,
        # so every passage has its query-as-context pair: its plain words, else the text itself.
        words = list(dict.fromkeys(WORD.findall(passage.text.lower()))) or [passage.text.strip() or passage.pid]
    queries = []
    for _ in range(num_queries):
        length = min(len(words), max(1, rng.choice(model.lengths)))
        # Efraimidis-Spirakis: keys u^(1/w) give a weighted sample without replacement.
        keyed = sorted(range(len(words)), key=lambda i: rng.random() ** (1.0 / model.weight(words[i])), reverse=True)
        chosen = sorted(keyed[:length])
        queries.append(" ".join(words[i] for i in chosen))
    return queries


def write_term_queries(
    model: TermModel, passages: Sequence[Passage], num_queries: int, seed: int, out_path: Path
) -> None:
    """The queries of every passage as JSONL ``{"pid", "queries"}`` (the format ``load_queries`` reads)."""
    if num_queries < 1:
        raise HarnessError(f"num_queries must be >= 1, got {num_queries}")
    lines = [json.dumps({"pid": p.pid, "queries": sample_queries(model, p, num_queries, seed)}) for p in passages]
    atomic_write_text(out_path, "\n".join(lines) + "\n")
