"""What a paper profile declares about itself, and how those declarations merge across ``extends:``.

``deviations`` (where the profile departs from a setting its paper states; each ``touches`` the
conditions whose cells it makes NOT-COMPARABLE) and ``assumptions`` (values the papers leave
unstated) are lists of entries, each identified by ``about``: the setting or block it is about, as a
key path (``pretrain.warmup_ratio``, ``corpus``). Replacing such a list wholesale, as a plain merge
would, let a variant silently lose what its method declares (cocondenser_qc dropped coCondenser's
assumptions); so the lists merge by identity: a child inherits its parent's entries (and a fragment's),
replaces one by declaring an entry ``about`` the same key path, and drops one only explicitly, with
``{drop: <about>}``. The same rule merges a profile block's entries over the top level's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

DECLARATIONS = ("deviations", "assumptions")
DROP = "drop"  # {drop: <about>} removes the inherited entry about that key path


def is_drop(entry: Any) -> bool:
    return isinstance(entry, Mapping) and DROP in entry


def identity(entry: Any) -> str:
    """The key path an entry is about (or drops); a malformed entry (reported by the spec checks)
    is identified by its own text, so it never replaces another."""
    if isinstance(entry, Mapping):
        about = entry.get(DROP) if DROP in entry else entry.get("about")
        if isinstance(about, str) and about:
            return about
    return repr(entry)


def merge_declarations(base: list[Any], over: list[Any]) -> list[Any]:
    """``over``'s entries merged over ``base``'s: a replaced entry keeps its parent's place, a new one
    comes after the inherited ones, a drop removes its target. A drop whose target ``base`` does not
    hold is kept, for a later merge (a spec's drop of its parent's entry passes through the merge
    with its fragments first) or for the checks to report."""
    merged: dict[str, Any] = {}
    pending: list[Any] = []
    for i, entry in enumerate(base):
        if is_drop(entry):
            pending.append(entry)
        else:
            merged[_unique(merged, identity(entry), i)] = entry
    seen: set[str] = set()
    for i, entry in enumerate(over):
        key = identity(entry)
        if is_drop(entry):
            if key in merged:
                del merged[key]
            else:
                pending.append(entry)
        else:
            # one list naming a key path twice keeps both, so the checks report it
            merged[_unique(merged, key, i) if key in seen else key] = entry
            seen.add(key)
    return list(merged.values()) + pending


def _unique(merged: Mapping[str, Any], key: str, i: int) -> str:
    """``key``, or a slot of its own when one list already holds it (a duplicate the checks name)."""
    return key if key not in merged else f"{key}#{i}"


def describe(entry: Any, key: str) -> str:
    """One printable line of a declaration (``validate``, the leaderboard's method page)."""
    if not isinstance(entry, Mapping):
        return str(entry)
    about = entry.get("about")
    head = f"{about}" if about else ""
    if key == "deviations":
        touches = entry.get("touches")
        names = [touches] if isinstance(touches, str) else list(touches or [])
        head = f"{head}, touches {', '.join(map(str, names))}" if head else f"touches {', '.join(map(str, names))}"
    return f"{head}: {entry.get('why', '')}" if head else str(entry.get("why", ""))
