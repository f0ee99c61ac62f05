"""What kind of value a setting takes: its type and, where no trainer config checks it, its range.

A :class:`Kind` is declared once per setting (the typed spec blocks in harness/spec/stage_settings.py and
harness/spec/block_settings.py, the objectives' parameters in harness/pretrain/objective_params.py) and checked from there both
when a stage reads the value and when ``validate`` / ``run`` check a spec before its first stage,
so a value that would fail hours into a run fails in the first second. Imports nothing heavy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, cast

# No machine holds more than this many of anything a setting counts (queries, steps, passages), and no
# rate or weight is meaningful past it: a larger value is a typo (``global_queries: 99999999999999999999999``
# projected a run of 10^19 days) and is refused with the range, whether or not the setting declares a bound.
LIMIT = 10**12
# What numpy's legacy seeding and every torch generator accept (``seed + rank`` stays far below 2^64).
SEED_MAX = 2**32 - 1


@dataclass(frozen=True)
class Kind:
    """Accepted python types (``noun`` names them for people), optional bounds or choices, and an
    example value shown with a problem (``e.g. steps: 400``)."""

    types: tuple[type, ...]
    noun: str
    example: Any
    low: float | None = None
    low_open: bool = False  # low itself is out of range
    high: float | None = None
    high_open: bool = False
    choices: tuple[Any, ...] = ()

    def problem(self, value: Any) -> str | None:
        """Why ``value`` is not of this kind (``'four hundred' is not a whole number``), or None."""
        # bool is an int to python, never to a spec: `lr: true` is a mistake
        if isinstance(value, bool) and bool not in self.types or not isinstance(value, self.types):
            return f"{value!r} is not {self.noun}"
        if self.choices and value not in self.choices:
            return f"{value!r} is not one of {', '.join(map(str, self.choices))}"
        if isinstance(value, float) and not math.isfinite(value):  # `lr: .inf` ran to a NaN loss at step 2
            return f"{value!r} is not a finite number ({self.range(capped=True)})"
        if isinstance(value, (int, float)) and not isinstance(value, bool) and abs(value) > LIMIT:
            return f"{value!r} is out of range: {self.range(capped=True)}"
        number = cast(float, value)  # past the type check above, a bounded kind's value is a number
        too_low = self.low is not None and (number < self.low or self.low_open and number == self.low)
        too_high = self.high is not None and (number > self.high or self.high_open and number == self.high)
        return f"{value!r} is out of range: {self.range()}" if too_low or too_high else None

    def range(self, capped: bool = False) -> str:
        """The bounds in words: ``must be in (0, 1)``, ``must be >= 1``; ``capped``: with LIMIT standing
        for a bound the kind does not declare (``must be in [1, 1e+12]``)."""
        low, high = self.low, self.high
        if capped:
            low = -LIMIT if low is None else low
            high = LIMIT if high is None else high
        if low is not None and high is not None:
            return (
                f"must be in {'(' if self.low_open else '['}{_bound(low)}, {_bound(high)}"
                f"{')' if self.high_open else ']'}"
            )
        if low is not None:
            return f"must be {'>' if self.low_open else '>='} {_bound(low)}"
        return f"must be {'<' if self.high_open else '<='} {_bound(high)}" if high is not None else ""


def _bound(value: float) -> str:
    """A bound as people read it: ``0.5``, ``4294967295`` (a whole one in full), ``1e+12``."""
    return str(value) if isinstance(value, int) and abs(value) < LIMIT else f"{value:g}"


NUM = (int, float)
WHOLE = Kind((int,), "a whole number", 400)
SEED_KIND = Kind((int,), "a whole number", 42, low=0, high=SEED_MAX)
POSITIVE_WHOLE = Kind((int,), "a whole number", 1, low=1)
NUMBER = Kind(NUM, "a number", 0.1)
NON_NEGATIVE = Kind(NUM, "a number", 0.1, low=0)
POSITIVE = Kind(NUM, "a number", 1.0, low=0, low_open=True)
RATIO = Kind(NUM, "a number", 0.3, low=0, low_open=True, high=1, high_open=True)  # a share strictly in (0, 1)
TEXT = Kind((str,), "text", "name")
FLAG = Kind((bool,), "true or false", True)
MAPPING = Kind((dict,), "a mapping", {})


def one_of(*choices: str) -> Kind:
    """Text that must be one of ``choices`` (the first is the example)."""
    return Kind((str,), "text", choices[0], choices=tuple(choices))


def example_text(value: Any) -> str:
    """A value as a spec would write it (``1.0e-04``, ``true``, ``fp32``)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value and abs(value) < 1e-3:
        mantissa, _, exponent = f"{value:.1e}".partition("e")
        return f"{mantissa}e{int(exponent)}"  # 1.0e-4, as the specs write it
    return str(value)
