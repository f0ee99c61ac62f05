"""Sentence splitting with NLTK Punkt, trained offline on the corpus itself.

The QC paper splits documents "with NLTK" (the official script calls ``nltk.sent_tokenize``,
i.e. the pre-trained English Punkt model). That model must be downloaded (``punkt_tab``),
which is impossible offline, and ``nltk.download`` fails silently. We therefore train
Punkt's unsupervised model (``PunktTrainer``) on the corpus that is being split, which is
what Punkt was designed for, plus a short list of common English abbreviations so small
corpora do not break after "e.g." or "et al.".

Determinism: the trainer's decisions are per word type and do not depend on set order;
texts are fed in corpus order in fixed-size chunks; parameters are stored as sorted JSON
under a folder named by the hash of the training texts and the config.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nltk.tokenize.punkt import PunktParameters, PunktSentenceTokenizer, PunktTrainer

from harness.stages import artifacts

log = logging.getLogger(__name__)

# Abbreviation types as Punkt stores them: lower case, no final period.
DEFAULT_ABBREVIATIONS: tuple[str, ...] = (
    "e.g",
    "i.e",
    "al",
    "etc",
    "vs",
    "cf",
    "fig",
    "figs",
    "eq",
    "ref",
    "refs",
    "approx",
    "ca",
    "dr",
    "mr",
    "mrs",
    "ms",
    "prof",
    "st",
    "jr",
    "sr",
    "inc",
    "ltd",
    "co",
    "corp",
    "dept",
    "jan",
    "feb",
    "mar",
    "apr",
    "jun",
    "jul",
    "aug",
    "sep",
    "sept",
    "oct",
    "nov",
    "dec",
)
# Texts are fed to the trainer in chunks this large: bounded memory, same result every run.
TRAIN_CHUNK_CHARS = 1_000_000
# Punkt's statistics saturate long before MS MARCO size; cap training text (corpus order).
DEFAULT_MAX_TRAIN_CHARS = 50_000_000
_PARAGRAPH = re.compile(r"\n\s*\n")


def _params_to_json(p: PunktParameters) -> dict[str, Any]:
    return {
        "abbrev_types": sorted(p.abbrev_types),
        "collocations": sorted([a, b] for a, b in p.collocations),
        "sent_starters": sorted(p.sent_starters),
        "ortho_context": {k: p.ortho_context[k] for k in sorted(p.ortho_context)},
    }


def _params_from_json(d: dict[str, Any]) -> PunktParameters:
    p = PunktParameters()
    p.abbrev_types = set(d["abbrev_types"])
    p.collocations = {(a, b) for a, b in d["collocations"]}
    p.sent_starters = set(d["sent_starters"])
    for k, v in d["ortho_context"].items():
        p.ortho_context[k] = int(v)
    return p


@dataclass
class SentenceSplitter:
    """Splits text into sentences with trained Punkt parameters."""

    params: PunktParameters

    def __post_init__(self) -> None:
        self._tok = PunktSentenceTokenizer(self.params)

    def split(self, text: str) -> list[str]:
        """Sentences in order; blank-line-separated paragraphs never share a sentence."""
        out: list[str] = []
        for para in _PARAGRAPH.split(text):
            for s in self._tok.tokenize(para):
                s = " ".join(s.split())  # collapse internal newlines/tabs: passages are one line
                if s:
                    out.append(s)
        return out

    def to_json(self) -> dict[str, Any]:
        return _params_to_json(self.params)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> SentenceSplitter:
        return cls(_params_from_json(d))

    def save(self, path: str | Path) -> None:
        artifacts.atomic_write_text(path, json.dumps(self.to_json(), ensure_ascii=False, indent=0) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> SentenceSplitter:
        return cls.from_json(json.loads(Path(path).read_text(encoding="utf-8")))


def _training_texts(texts: Iterable[str], max_chars: int | None) -> list[str]:
    """The corpus prefix (in corpus order) that training reads."""
    used, total = [], 0
    for t in texts:
        if max_chars is not None and total >= max_chars:
            break
        used.append(t)
        total += len(t)
    return used


def train_punkt(
    texts: Iterable[str],
    extra_abbreviations: Sequence[str] = DEFAULT_ABBREVIATIONS,
    max_train_chars: int | None = DEFAULT_MAX_TRAIN_CHARS,
) -> SentenceSplitter:
    """Train Punkt on ``texts`` (no download, no network)."""
    trainer = PunktTrainer()
    buf: list[str] = []
    size = 0

    def flush() -> None:
        nonlocal buf, size
        if buf:
            trainer.train("\n\n".join(buf), finalize=False)
            buf, size = [], 0

    for t in _training_texts(texts, max_train_chars):
        buf.append(t)
        size += len(t)
        if size >= TRAIN_CHUNK_CHARS:
            flush()
    flush()
    trainer.finalize_training()
    params = trainer.get_params()
    params.abbrev_types.update(a.lower().rstrip(".") for a in extra_abbreviations)
    return SentenceSplitter(params)


def load_or_train_punkt(
    texts: Sequence[str],
    cache_dir: str | Path | None,
    extra_abbreviations: Sequence[str] = DEFAULT_ABBREVIATIONS,
    max_train_chars: int | None = DEFAULT_MAX_TRAIN_CHARS,
) -> SentenceSplitter:
    """Train Punkt on ``texts``, or load it from ``cache_dir/punkt-<hash>/`` if trained before.

    ``texts`` is read twice (hash, then training), so pass a sequence, not a generator.
    """
    used = _training_texts(texts, max_train_chars)
    config = {
        "stage": "punkt",
        "nltk_trainer": "PunktTrainer",
        "extra_abbreviations": sorted(set(extra_abbreviations)),
        "max_train_chars": max_train_chars,
        "chunk_chars": TRAIN_CHUNK_CHARS,
    }
    inputs = {"texts": artifacts.hash_texts(used)}
    key = artifacts.builder_key(config, inputs)
    if cache_dir is None:
        return train_punkt(used, extra_abbreviations, None)
    folder = Path(cache_dir) / f"punkt-{key[:16]}"
    if artifacts.is_finished(folder, key):
        return SentenceSplitter.load(folder / "punkt.json")
    artifacts.clear_finished(folder)
    log.info("training Punkt sentence splitter on %d texts", len(used))
    splitter = train_punkt(used, extra_abbreviations, None)
    splitter.save(folder / "punkt.json")
    artifacts.mark_finished(folder, {"key": key, "config": config, "inputs": inputs, "n_texts": len(used)})
    return splitter
