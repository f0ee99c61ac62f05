"""Every status word the harness prints, declared once: what it means, whether it fails the gate,
and its badge colour.

Three kinds of rows share one vocabulary, because ``python -m harness check`` prints them side by
side: the verdict of a reported cell or a claimed effect (``harness.evaluation.verdict``, the one
grading rule), a re-run against its accepted reference (PASS / NEAR / FAIL), and a record or file
as a whole (CORRUPT, MISSING, ...). Each status is of one kind:

* ``pass``: reproduced, or matching its reference;
* ``fail``: the gate fails on it, always;
* ``neutral``: said, not failing; a neutral status marked ``strict`` fails under ``check --strict``
  (and ``check --rerun``): a row that is not wrong yet cannot vouch for anything either.

The declaration order is the order ``check`` counts them in, failures first. Every other module
names a status by its constant here (the verdicts also through ``harness.evaluation.verdict``),
never by its string, so a legend, a badge colour or the set of failing statuses cannot miss one.
Imports nothing: the gate, the grading rule and the leaderboard all read it.
"""

from __future__ import annotations

from dataclasses import dataclass

PASS_KIND, FAIL_KIND, NEUTRAL_KIND = "pass", "fail", "neutral"
# A badge's colour by kind (Material 800 shades, legible on white); a status may choose its own.
KIND_COLOURS = {PASS_KIND: "#2e7d32", FAIL_KIND: "#c62828", NEUTRAL_KIND: "#9e9e9e"}
AMBER, BLUE = "#f9a825", "#1565c0"
# A re-run outside its tolerance but within this many tolerances is NEAR rather than FAIL.
NEAR_FACTOR = 1.5


@dataclass(frozen=True)
class Status:
    """One status word and what it says."""

    name: str
    kind: str  # PASS_KIND | FAIL_KIND | NEUTRAL_KIND
    meaning: str  # one line, for every legend
    colour: str  # the leaderboard's badge colour
    strict: bool = False  # a neutral status that fails under --strict

    @property
    def fails(self) -> bool:
        """Whether the gate fails on a row with this status (without --strict)."""
        return self.kind == FAIL_KIND


STATUSES: dict[str, Status] = {}


def _declare(name: str, kind: str, meaning: str, *, colour: str | None = None, strict: bool = False) -> str:
    STATUSES[name] = Status(name, kind, meaning, colour or KIND_COLOURS[kind], strict)
    return name


# ----------------------------------------------------------------------------- failing
UNREADABLE = _declare(
    "UNREADABLE",
    FAIL_KIND,
    "a file in the records folder that cannot be read as a record "
    "(truncated, not JSON, a newer schema), or papers' cells that cannot be loaded",
)
CORRUPT = _declare(
    "CORRUPT",
    FAIL_KIND,
    "a record that fails its seal or its integrity check (edited, unsealed, "
    "aggregates that its per-query scores do not give), or differs from the accepted reference",
)
DATA_MISMATCH = _declare(
    "DATA-MISMATCH",
    FAIL_KIND,
    "a record whose data checksums differ from the catalog's "
    "for the same file: it was run on other data (the row names the dataset and file)",
)
MISSING = _declare("MISSING", FAIL_KIND, "references.json names a reference whose record is absent or unusable")
WRONG_REFERENCE = _declare(
    "WRONG-REFERENCE", FAIL_KIND, "references.json names, for a method and profile, a record of another one"
)
ERROR = _declare("ERROR", FAIL_KIND, "a record that loaded but could not be compared (the row says why)")
UNTRAINED = _declare(
    "UNTRAINED",
    FAIL_KIND,
    "a training stage of the record left its weights where they started "
    "(every step at lr 0, or no gradient): what came after it measured an untrained model",
)
FAIL = _declare(
    "FAIL",
    FAIL_KIND,
    f"a re-run differs from its reference by more than {NEAR_FACTOR} times the "
    "tolerance (a training loss: by more than its tolerance)",
)
DIFFERENT_BELOW = _declare(
    "DIFFERENT-BELOW", FAIL_KIND, "below the paper: d = 0 is rejected (Holm) and |d| > Delta, the practical margin"
)
DIFFERENT_ABOVE = _declare(
    "DIFFERENT-ABOVE",
    FAIL_KIND,
    "above the paper: d = 0 is rejected (Holm) and |d| > Delta, the practical margin",
    colour=BLUE,
)
# ----------------------------------------------------------------------------- failing under --strict
NEAR = _declare(
    "NEAR",
    NEUTRAL_KIND,
    f"a re-run outside its reference's tolerance, but within {NEAR_FACTOR} times it",
    colour=AMBER,
    strict=True,
)
UNKNOWN_METHOD = _declare(
    "UNKNOWN-METHOD",
    NEUTRAL_KIND,
    "a record of a method without a spec, or of a checkpoint no longer registered: not gated",
    strict=True,
)
NO_REFERENCE = _declare(
    "NO-REFERENCE", NEUTRAL_KIND, "no reference is accepted for the record's method and profile: not gated", strict=True
)
STALE_REFERENCE = _declare(
    "STALE-REFERENCE",
    NEUTRAL_KIND,
    "the spec's settings changed since the reference ran: re-run, then accept the new run",
    strict=True,
)
SPEC_CHANGED = _declare(
    "SPEC-CHANGED",
    NEUTRAL_KIND,
    "a record whose spec settings are neither its method's "
    "current spec's nor its reference's (an edited spec, or another harness version): not "
    "gated, shown apart on the leaderboard",
    strict=True,
)
# ----------------------------------------------------------------------------- passing
PASS = _declare("PASS", PASS_KIND, "a re-run matches its reference within the tolerance, either way")
REPRODUCED = _declare(
    "REPRODUCED",
    PASS_KIND,
    "the 90% CI of d = run - paper (se from sigma_rep) lies inside +-Delta, the practical margin (TOST)",
)
# ----------------------------------------------------------------------------- neither
INCONCLUSIVE = _declare(
    "INCONCLUSIVE", NEUTRAL_KIND, "neither: this many runs cannot tell; the row says how many seeds would", colour=AMBER
)
NOT_COMPARABLE = _declare(
    "NOT-COMPARABLE",
    NEUTRAL_KIND,
    "the run does not share the cell's setting (profile, steps, data, a declared deviation, ...)",
)
NOT_YET_RUN = _declare(
    "NOT-YET-RUN",
    NEUTRAL_KIND,
    "no run of the method in a profile the papers can be "
    "compared with (paper, checkpoint): its row gives the command and its projected cost",
    colour="#6a1b9a",
)
EFFECT = _declare("EFFECT", NEUTRAL_KIND, "a paired effect (A minus B) that no paper printed: measured, not graded")
REFERENCE = _declare("REFERENCE", NEUTRAL_KIND, "the record is the accepted reference of its method and profile")
SUPERSEDED = _declare("SUPERSEDED", NEUTRAL_KIND, "older than the accepted reference: not gated")
NO_CELLS = _declare("NO-CELLS", NEUTRAL_KIND, "a paper-graded record with no reported cell on its benchmarks")
IN_PROGRESS = _declare(
    "IN-PROGRESS", NEUTRAL_KIND, "a record still being written (a temporary file): never read", strict=True
)

FAILING = tuple(name for name, s in STATUSES.items() if s.fails)
STRICT_ONLY = tuple(name for name, s in STATUSES.items() if s.strict)
STRICT_FAILING = (*FAILING, *STRICT_ONLY)
# The grading rule's outcomes (harness.evaluation.verdict), in the legends' order.
VERDICTS = (REPRODUCED, DIFFERENT_BELOW, DIFFERENT_ABOVE, INCONCLUSIVE, NOT_COMPARABLE)
