"""Punkt trained offline on the corpus: sensible, deterministic, cached."""

from __future__ import annotations

import nltk
import pytest

from harness.corpus.sentences import SentenceSplitter, load_or_train_punkt, train_punkt
from harness.stages import artifacts

TRAIN = [
    "Dr. Smith studied aspirin in 120 patients. The risk of stroke fell by a third. "
    "Side effects, e.g. bleeding, were rare. Prof. Jones confirmed the result in 2019.",
    "Vitamin D was measured in blood. Levels were low in winter. Smith et al. reported similar data. "
    "The trial ended early. Dr. Brown wrote the protocol.",
] * 10

TEXT = (
    "Dr. Smith met Prof. Jones in 2019. They compared aspirin with placebo, e.g. in older adults. "
    "Smith et al. found no effect. The trial ended."
)
EXPECTED = [
    "Dr. Smith met Prof. Jones in 2019.",
    "They compared aspirin with placebo, e.g. in older adults.",
    "Smith et al. found no effect.",
    "The trial ended.",
]


@pytest.fixture(autouse=True)
def no_download(monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("nltk.download must never be called")

    monkeypatch.setattr(nltk, "download", refuse)


def test_splits_known_text_sensibly():
    assert train_punkt(TRAIN).split(TEXT) == EXPECTED


def test_paragraphs_and_whitespace():
    s = train_punkt(TRAIN)
    out = s.split("First part without period\n\nSecond   part.\nStill second. Third.")
    assert out == ["First part without period", "Second part.", "Still second.", "Third."]
    assert s.split("") == [] and s.split("  \n ") == []


def test_deterministic_and_json_roundtrip(tmp_path):
    a, b = train_punkt(TRAIN), train_punkt(list(TRAIN))
    assert a.to_json() == b.to_json()
    a.save(tmp_path / "p.json")
    c = SentenceSplitter.load(tmp_path / "p.json")
    assert c.to_json() == a.to_json() and c.split(TEXT) == EXPECTED


def test_without_default_abbreviations_splits_worse():
    # Guards that the abbreviation list matters (the test can fail): "e.g." is rare here.
    plain = train_punkt(TRAIN[:1], extra_abbreviations=())
    assert plain.split(TEXT) != EXPECTED


def test_cached_by_corpus_hash(tmp_path, monkeypatch):
    s1 = load_or_train_punkt(TRAIN, tmp_path)
    folders = list(tmp_path.glob("punkt-*"))
    assert len(folders) == 1 and (folders[0] / "done.json").exists()
    key = artifacts.finished_meta(folders[0])["key"]

    import harness.corpus.sentences as mod

    monkeypatch.setattr(mod, "train_punkt", lambda *a, **k: pytest.fail("retrained despite cache"))
    s2 = load_or_train_punkt(TRAIN, tmp_path)
    assert s2.to_json() == s1.to_json()
    monkeypatch.undo()
    load_or_train_punkt(TRAIN + ["Another document. With two sentences."], tmp_path)
    assert len(list(tmp_path.glob("punkt-*"))) == 2
    assert artifacts.finished_meta(folders[0])["key"] == key
