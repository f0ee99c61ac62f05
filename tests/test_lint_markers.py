"""Every silenced lint or type finding says why on its own line.

`bash setup.sh lint` runs ruff and mypy (configured in pyproject.toml). A ``# noqa`` or ``# type: ignore``
turns one of their findings off; without a reason beside it, nobody can tell later whether it still holds.
"""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("harness", "leaderboard_app", "bench", "tests")
# The marker with its codes; what must follow it is a reason (any words).
MARKER = re.compile(
    r"#\s*(noqa(?::\s*[A-Z]+[0-9]+(?:\s*,\s*[A-Z]+[0-9]+)*)?|type:\s*ignore(?:\[[\w\-, ]+\])?)(?P<rest>.*)"
)


def unexplained(source: str) -> list[int]:
    """Line numbers of the comments in ``source`` whose noqa / type-ignore marker has no reason after it."""
    lines = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type != tokenize.COMMENT:
            continue
        match = MARKER.search(tok.string)
        if match and not re.search(r"\w", match.group("rest")):
            lines.append(tok.start[0])
    return lines


def test_the_rule_reads_markers_and_reasons() -> None:
    source = (
        "x = 1  # noqa: E731\n"
        "y = 2  # noqa: BLE001 - one bad record must not stop the gate\n"
        "z = 3  # type: ignore[arg-type]\n"
        "w = 4  # type: ignore[arg-type]  # torch's stubs miss the overload\n"
        "s = '# noqa'\n"
    )
    assert unexplained(source) == [1, 3]


def test_every_noqa_and_type_ignore_gives_its_reason() -> None:
    found = []
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            found += [f"{path.relative_to(ROOT)}:{n}" for n in unexplained(path.read_text(encoding="utf-8"))]
    assert not found, "a noqa / type: ignore without a reason on its line (say why, or fix the finding):\n" + "\n".join(
        found
    )
