"""Every ``HARNESS_*`` environment control, declared once (name, type, range, meaning) and checked at
start-up (:func:`check`, from ``cli.main``), whether or not this run reads it.

A control read only where it is used was refused late or never: ``HARNESS_PASSAGE_WORKERS=abc`` passed
a run that never reached the passages stage, ``HARNESS_SHARE_GPU=2`` was silently off, a bad
``HARNESS_LUCENE_HEAP`` failed after the index was built. Each reader keeps its own parsing (the same
rule); this module only refuses a bad value up front, in one line naming the control and the fix.
A new control is one :func:`register` call here; tests/test_env_controls.py fails on a ``HARNESS_``
name in the code that is not registered, and on docs/commands.md's table not matching :func:`table`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

from harness.core.errors import HarnessError

KINDS = ("path", "text", "int", "number", "choice", "heap")
_HEAP = re.compile(r"[1-9][0-9]{0,6}[mMgG]")


@dataclass(frozen=True)
class Control:
    """One environment control: ``kind`` is how its value is read (KINDS); ``low``/``high`` bound a
    number, ``choices`` a choice; ``meaning`` is its line in docs/commands.md."""

    name: str
    kind: str
    meaning: str
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] = ()

    def expected(self) -> str:
        if self.kind == "choice":
            return "one of " + ", ".join(self.choices)
        if self.kind == "heap":
            return "a heap size such as 2g or 1536m"
        if self.kind in ("int", "number"):
            what = "a whole number" if self.kind == "int" else "a number"
            return f"{what} in [{_num(self.low)}, {_num(self.high)}]"
        return "a folder, file or URL" if self.kind == "path" else "text"

    def problem(self, raw: str) -> str | None:
        """Why ``raw`` is not a value of this control, or None."""
        value = raw.strip()
        if self.kind == "choice":
            return None if value in self.choices else "not " + self.expected()
        if self.kind == "heap":
            return None if _HEAP.fullmatch(value) else "not " + self.expected()
        if self.kind in ("int", "number"):
            try:
                number = int(value) if self.kind == "int" else float(value)
            except ValueError:
                return "not " + self.expected()
            low = -math.inf if self.low is None else self.low
            high = math.inf if self.high is None else self.high
            return None if low <= number <= high else "out of range: " + self.expected()
        return "holds a NUL byte" if "\0" in value else None


def _num(x: float | None) -> str:
    return "-inf" if x is None else f"{int(x):,}" if float(x).is_integer() else str(x)


CONTROLS: dict[str, Control] = {}


def register(control: Control) -> Control:
    """Add ``control`` to the registry (a name registered twice is a programming error)."""
    if control.kind not in KINDS or control.name in CONTROLS or not control.name.startswith("HARNESS_"):
        raise ValueError(f"bad or duplicate control {control}")
    CONTROLS[control.name] = control
    return control


for _c in (
    Control("HARNESS_CACHE_DIR", "path", "the stage cache and downloads (default: cache/)"),
    Control("HARNESS_RUNS_DIR", "path", "run records and the local MLflow store (default: runs/)"),
    Control(
        "HARNESS_SPECS_DIR", "path", "a folder of one's own specs, fragments and benchmarks/ (default: baselines/)"
    ),
    Control("HARNESS_MODELS_DIR", "path", "where local model folders are looked up before models/"),
    Control("HARNESS_CHECKPOINTS", "path", "another released-checkpoint registry file"),
    Control("HARNESS_DATA_MIRROR", "path", "a folder or URL holding the data files under their own names"),
    Control("HARNESS_MODEL_MIRROR", "path", "a folder or URL holding <model>/<file>"),
    Control("HARNESS_LEADERBOARD_RECORDS", "path", "set by `leaderboard --records` for the Streamlit app"),
    Control("HARNESS_LEADERBOARD_REPORTED", "path", "set by `leaderboard --reported` for the Streamlit app"),
    Control(
        "HARNESS_MSMARCO_PASSAGES",
        "choice",
        "the MS MARCO passage variant (a spec sets it)",
        choices=("plain", "titled"),
    ),
    Control("HARNESS_THREADS", "int", "CPU threads (default: the cores this process may use)", 1, 4096),
    Control("HARNESS_PASSAGE_WORKERS", "int", "worker processes of the passages stage (default: the cores)", 1, 4096),
    Control(
        "HARNESS_PREFETCH", "choice", "collate batches in the background (default: on CUDA only)", choices=("0", "1")
    ),
    Control(
        "HARNESS_CHECKPOINT_MINUTES", "number", "minutes between wall-clock checkpoints (default 30; 0: none)", 0, 10**6
    ),
    Control("HARNESS_LUCENE_HEAP", "heap", "the Lucene JVMs' -Xmx (default: sized from the index)"),
    Control("HARNESS_SHARE_GPU", "choice", "ranks may share one GPU, over gloo (the GPU check)", choices=("0", "1")),
    Control("HARNESS_PG_TIMEOUT", "int", "seconds before a training collective fails (default 1,800)", 1, 10**8),
    Control("HARNESS_STAGE_WAIT", "int", "seconds a rank waits for another's stage (default 7 days)", 1, 10**8),
    Control(
        "HARNESS_OWN_LAUNCHER",
        "choice",
        "set by `run --nproc-per-node` in its workers (torchrun's is not)",
        choices=("1",),
    ),
    Control(
        "HARNESS_PLANNED_WORLD_SIZE", "int", "set by `run --dry-run --nproc-per-node`: the planned processes", 1, 10**6
    ),
):
    register(_c)


def check(environ: Mapping[str, str]) -> None:
    """HarnessError (one line) on the first registered control set to a value it cannot hold; an empty
    value counts as unset, as the readers take it. Names not registered are left alone (another tool's)."""
    for name in sorted(environ):
        control = CONTROLS.get(name)
        raw = environ[name]
        if control is None or not raw.strip():
            continue
        problem = control.problem(raw)
        if problem:
            raise HarnessError(
                f"environment variable {name}={raw!r}: {problem} ({control.meaning}); fix: unset it or give "
                f"{control.expected()}"
            )


def table() -> str:
    """docs/commands.md's table of the controls (a test compares the two)."""
    rows = ["| variable | value | meaning |", "|---|---|---|"]
    rows += [f"| `{c.name}` | {c.expected()} | {c.meaning} |" for c in CONTROLS.values()]
    return "\n".join(rows)
