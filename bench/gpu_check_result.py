"""What each part of bench/gpu_check.py hands back to the driver: a pass, a fail or a skip, one line saying
which with its thresholds, and the figures measured (written as JSON by the part's own process)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class CheckResult:
    name: str
    status: str  # "pass", "fail" or "skip" (a dependency missing on this machine: said, not failed)
    line: str  # one line: the figure, the threshold it met or missed, or why it was skipped
    figures: dict[str, Any] = field(default_factory=dict)

    def write(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self), indent=1))

    @staticmethod
    def read(path: Path) -> CheckResult:
        return CheckResult(**json.loads(path.read_text()))


def judged(name: str, ok: bool, line: str, figures: dict[str, Any]) -> CheckResult:
    status = "pass" if ok else "fail"
    return CheckResult(name, status, f"{status.upper()} {name}: {line}", figures)


def skipped(name: str, missing: str) -> CheckResult:
    why = f"SKIP {name}: python module '{missing}' is not installed on this machine (carry its wheel to run it)"
    return CheckResult(name, "skip", why, {"missing": missing})
