"""Each method's paper profile and what it declares about itself: its deviations from its paper and
the values it assumes where the papers say nothing.

Read by ``validate`` (harness.commands.validate) and by the leaderboard (leaderboard_app.tables), so
it lives below the CLI: the leaderboard never imports a command.
"""

from __future__ import annotations

from typing import Any

from harness.core.errors import HarnessError
from harness.spec.declarations import describe, is_drop


def paper_profiles() -> list[Any]:
    """The paper profile of each spec that loads (a spec with a problem is listed as such, not here)."""

    try:
        from harness.spec.files import list_methods
        from harness.spec.method import load_method
    except ImportError:  # as in harness.commands.validate's spec check: no spec module, no specs
        return []
    specs = []
    for name in list_methods():
        try:
            specs.append(load_method(name, "paper"))
        except HarnessError:
            continue
    return specs


def paper_deviations(key: str = "deviations", papers: list[Any] | None = None) -> dict[str, list[str]]:
    """Each method's declared deviations of its paper profile from its paper (spec ``deviations:``,
    each with the setting it is about and the conditions it touches), or with ``key="assumptions"``
    the values it picks where the papers say nothing, inherited ones included. ``papers``: the paper profiles (default: every spec's that loads)."""
    out = {}
    # the specs that load: one with a problem still leaves the others' counted
    for spec in paper_profiles() if papers is None else papers:
        name, items = spec.name, [d for d in spec.get(key) or [] if not is_drop(d)]
        if items:
            out[name] = [describe(d, key) for d in items]
    return out
