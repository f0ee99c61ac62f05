"""Content-addressed stage cache: a stage's output lives in cache/<stage>/<hash>/.

The hash covers the stage config, the hashes of its inputs and the stage's code version,
so a changed hyper-parameter re-runs only what depends on it. A stage writes into
`<dir>.partial/` and is renamed into place when it finishes, so a killed stage never
leaves a half-written output that looks finished.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
        (self.partial / "done.json").write_text(json.dumps(payload, indent=1, default=str))
        if self.dir.exists():
            shutil.rmtree(self.dir)
        self.partial.rename(self.dir)
        return self.dir

    def clear(self) -> None:
        for path in (self.dir, self.partial):
            if path.exists():
                shutil.rmtree(path)
