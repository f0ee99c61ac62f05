"""What the mini profile's numbers are called (issue 37 item 8): SciFact is in-corpus, not zero-shot, since
mini pre-trains on its passages; mini effects are a learning check, never set beside the papers' effects."""

from __future__ import annotations

import re

from harness.core.paths import PROJECT_ROOT
from harness.spec.method import load_method, pretraining_methods

PAGES = ("README.md", "docs/results.md", "docs/profiles-and-hardware.md")


def _section(text: str, heading: str) -> str:
    """From ``heading`` to the next line that starts a section (``#``) or a paragraph after a list."""
    start = text.index(heading)
    end = re.search(r"\n#|\n\nEvery row", text[start + 1 :])
    return text[start : start + 1 + end.start()] if end else text[start:]


def test_scifact_is_in_mini_s_pre_training_corpus_so_no_page_calls_it_zero_shot():
    for method in pretraining_methods("mini"):
        assert "scifact" in load_method(method, "mini").get("corpus.source"), method
    for page in PAGES:
        text = " ".join((PROJECT_ROOT / page).read_text().split())
        assert not re.search(r"SciFact test \(?zero-shot", text), page
        assert "SciFact test (in-corpus" in text or "SciFact test in-corpus" in text, page


def test_mini_effects_are_a_learning_check_with_no_paper_effect_beside_them():
    readme = _section((PROJECT_ROOT / "README.md").read_text(), "What the mini profile shows")
    results = _section((PROJECT_ROOT / "docs/results.md").read_text(), "## What the mini profile shows")
    for name, text in (("README.md", readme), ("docs/results.md", results)):
        assert "learning check" in text, name
        # a printed effect beside a mini one: "(paper: +2.1 / +5.1)", "the QC paper's BEIR gains are ..."
        assert not re.search(r"paper: [+-]\d|paper's [A-Za-z ]*gains", text), name
