"""Content-addressed stage cache: a stage's output lives in cache/<stage>/<hash>/.

The hash covers the stage config, the hashes of its inputs and the stage's code version,
so a changed hyper-parameter re-runs only what depends on it. A stage writes into
`<dir>.partial/` and is renamed into place when it finishes, so a killed stage never
leaves a half-written output that looks finished.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.fsutil import atomic_write_text
from harness.paths import cache_dir
from harness.spec import config_hash


@dataclass
class StageCache:
    stage: str
    config: dict[str, Any]
    inputs: dict[str, str]
    code_version: str = "1"

    @property
    def key(self) -> str:
        return config_hash({"stage": self.stage, "config": self.config, "inputs": self.inputs, "code": self.code_version})

    @property
    def dir(self) -> Path:
        return cache_dir() / self.stage / self.key

    @property
    def partial(self) -> Path:
        return self.dir.with_name(self.dir.name + ".partial")

    @property
    def lock_path(self) -> Path:
        return self.dir.with_name(self.dir.name + ".lock")

    def is_done(self) -> bool:
        return (self.dir / "done.json").exists()

    def meta(self) -> dict[str, Any]:
        return json.loads((self.dir / "done.json").read_text())

    def begin(self, keep_partial: bool = False) -> Path:
        """Fresh work folder (kept when the stage can resume from its own checkpoints)."""
        if self.partial.exists() and not keep_partial:
            shutil.rmtree(self.partial)
        self.partial.mkdir(parents=True, exist_ok=True)
        return self.partial

    def finish(self, meta: dict[str, Any] | None = None) -> Path:
        payload = {"stage": self.stage, "key": self.key, "config": self.config, "inputs": self.inputs,
                   "finished": time.time(), **(meta or {})}
        atomic_write_text(self.partial / "done.json", json.dumps(payload, indent=1, default=str))
        # Swap in two renames so a reader of the old output never finds the folder missing
        # for longer than a rename; the old one is deleted after.
        old = None
        if self.dir.exists():
            old = self.dir.with_name(f"{self.dir.name}.old-{os.getpid()}")
            self.dir.rename(old)
        self.partial.rename(self.dir)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
        return self.dir

    def clear(self) -> None:
        for path in (self.dir, self.partial):
            if path.exists():
                shutil.rmtree(path)
