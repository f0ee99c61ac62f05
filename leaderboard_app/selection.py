"""Which runs a paper-comparison grid shows, and what the page says about the others.

A tiny run scores near chance (1.01 beside the paper's 31.9), a rehearsal takes one step per stage
on 20 sampled queries, a mini run is a MiniLM on a corpus slice: set beside a paper's cell, each
reads as a failed reproduction. So the grids show by default only the profiles a paper can be
compared with (paper, a released checkpoint: ``harness.gate.grading.PAPER_GRADED``); the others
come behind one switch, and whenever they are shown the page says, on the same screen, what their
profile is and why their numbers are no paper's. Runs older than their method's accepted
reference (SUPERSEDED, as ``check`` calls them) are folded the same way.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from harness.gate.grading import PAPER_GRADED
from harness.records.store import RunRecord
from leaderboard_app.display import md_text

PAPER_COMPARABLE = tuple(PAPER_GRADED)  # the profiles whose runs are graded against the papers' cells
SMALL_SWITCH = "Show small-profile runs (tiny, mini, rehearsal: not comparable with the papers)"
SUPERSEDED_SWITCH = "Show superseded runs (older than their method's accepted reference)"

# What each small profile is, and why its numbers are not the papers' (docs/profiles-and-hardware.md).
PROFILE_CAVEATS = {
    "rehearsal": (
        "a rehearsal checks shapes, not results: the paper plan at the papers' shapes (bert-base, "
        "randomly initialised) takes one optimiser step per stage on 2 CPU cores and is scored on "
        "20 sampled queries of the fixture data, so its numbers (0.00 [0.00, 0.00], or one value "
        "shared by several methods) say nothing about the method, only that every stage ran"
    ),
    "tiny": (
        "tiny is the fast code-path check: a 2-layer BERT (hidden 128) from random init, 3,000 passages, "
        "a few hundred steps on CPU; it does not learn, so its scores sit near chance"
    ),
    "mini": (
        "mini is a CPU miniature that learns: all-MiniLM-L6-v2 continued on a corpus slice and fine-tuned "
        "on a few hundred queries; it shows whether a method learns at that scale, not the papers' numbers"
    ),
}


def caveat(profile: str) -> str:
    """One profile's caveat ("profile X: not comparable with the papers" for one not described)."""
    return PROFILE_CAVEATS.get(profile, f"profile {profile}: not one the papers ran, so not comparable with them")


def caveat_md(profile: str) -> str:
    """``caveat`` as markdown: a described profile's caveat is the page's own text; another one names the
    record's profile, which is shown as text (display.md_text), never rendered."""
    return PROFILE_CAVEATS[profile] if profile in PROFILE_CAVEATS else md_text(caveat(profile))


def superseded_ids(records: Iterable[RunRecord], references: Iterable[str]) -> set[str]:
    """Run ids older than the accepted reference of their method and profile (``check``'s SUPERSEDED):
    the reference, and any run newer than it, stay."""
    records = list(records)
    refs = set(references)
    latest = {(r.method, r.profile): r for r in records if r.run_id in refs}
    return {
        r.run_id
        for r in records
        if (ref := latest.get((r.method, r.profile))) is not None
        and r.run_id != ref.run_id
        and (r.created, r.run_id) < (ref.created, ref.run_id)
    }


def grid_records(
    records: Sequence[RunRecord], *, small: bool = False, superseded: Iterable[str] = (), show_superseded: bool = False
) -> list[RunRecord]:
    """The runs a paper-comparison grid shows: paper-comparable profiles only unless ``small``, and
    without the ``superseded`` run ids unless ``show_superseded``."""
    folded = set() if show_superseded else set(superseded)
    return [r for r in records if (small or r.profile in PAPER_COMPARABLE) and r.run_id not in folded]


def hidden_note(
    records: Sequence[RunRecord], *, small: bool = False, superseded: Iterable[str] = (), show_superseded: bool = False
) -> str:
    """What the switches hide from a grid (as ``grid_records`` with the same switches), in one line;
    "" when nothing is hidden."""
    folded = set() if show_superseded else set(superseded)
    n_small = sum(not small and r.profile not in PAPER_COMPARABLE for r in records)
    n_old = sum((small or r.profile in PAPER_COMPARABLE) and r.run_id in folded for r in records)
    parts = [f"{n_small} small-profile run(s) (not comparable with the papers)"] if n_small else []
    parts += [f"{n_old} superseded run(s)"] if n_old else []
    return f"Hidden: {' and '.join(parts)}; the switches in the sidebar show them." if parts else ""


def shown_caveats(records: Iterable[RunRecord]) -> list[str]:
    """The caveat of every small profile among ``records``, in the order of PROFILE_CAVEATS: said on the
    screen that shows their numbers."""
    profiles = {r.profile for r in records if r.profile not in PAPER_COMPARABLE}
    order = [*PROFILE_CAVEATS, *sorted(profiles - set(PROFILE_CAVEATS))]
    return [f"**{md_text(p)}**: {caveat_md(p)}." for p in order if p in profiles]
