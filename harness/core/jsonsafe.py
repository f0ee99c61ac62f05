"""JSON of user files read with depth and size bounded: grade files, run records, the references manifest.

``json.loads`` recurses once per level, so 10,000 nested lists were a RecursionError traceback; and
what it returns is walked again by recursive validators. Both bounds come from :mod:`yamlsafe` (one
rule for every parsed input), and a refusal is a ``json.JSONDecodeError``, so each reader's own
handler reports it as one line naming the file, as it does any invalid JSON.
"""

from __future__ import annotations

import json
from typing import Any

from harness.core.yamlsafe import DEPTH_MAX

RECORD_CHARS_MAX = 256 * 1024 * 1024  # a run record holds per-query scores: larger than a spec


def _depth_over(data: Any, limit: int) -> bool:
    """Whether ``data`` nests deeper than ``limit`` levels (iterative: no recursion)."""
    stack: list[tuple[Any, int]] = [(data, 0)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        if depth + 1 > limit:
            return True
        stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))
    return False


def loads(text: str, chars_max: int = RECORD_CHARS_MAX, depth_max: int = DEPTH_MAX, **kwargs: Any) -> Any:
    """``json.loads(text, **kwargs)``, refused (JSONDecodeError) past ``chars_max`` characters or
    ``depth_max`` levels of nesting."""
    if len(text) > chars_max:
        raise json.JSONDecodeError(f"{len(text):,} characters, more than the {chars_max:,} allowed", text, 0)
    try:
        data = json.loads(text, **kwargs)
    except RecursionError:
        raise json.JSONDecodeError(f"nested deeper than {depth_max} levels", text, 0) from None
    if _depth_over(data, depth_max):
        raise json.JSONDecodeError(f"nested deeper than {depth_max} levels", text, 0)
    return data
