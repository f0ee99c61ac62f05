"""What a pipeline gets from the runner: the resolved spec, the tracker, the stage log and the
stage cache (:meth:`RunContext.cached_stage`), so the pipelines never import the runner."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from harness.cache import StageCache
from harness.fsutil import exclusive_lock
from harness.spec import MethodSpec
from harness.tracking import Tracker


@dataclass
class StageLog:
    """What happened in each stage, for the run record and the final summary."""

    entries: list[dict[str, Any]] = field(default_factory=list)

    def add(self, name: str, dataset: str | None, cached: bool, elapsed: float, **extra: Any) -> None:
        self.entries.append({"stage": name, "dataset": dataset, "cached": cached, "seconds": round(elapsed, 2), **extra})


@dataclass
class RunContext:
    """One run of one method: every pipeline stage goes through :meth:`cached_stage`."""

    spec: MethodSpec
    tracker: Tracker
    stages: StageLog
    force: bool = False
    efficiency: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)
    forced: set[str] = field(default_factory=set)  # stage keys this run already rebuilt under --force
    started: float = field(default_factory=time.time)

    def cached_stage(self, name: str, dataset: str | None, config: dict[str, Any], inputs: dict[str, str],
                     build: Callable[[Path], dict[str, Any] | None], code_version: str = "1",
                     resumable: bool = False) -> StageCache:
        """Run `build(workdir)` unless a finished output with the same hash exists.

        `resumable` stages keep their unfinished work folder (checkpoints, partial files) so a
        killed run continues where it stopped instead of starting the stage again.
        """
        cache = StageCache(name, config, inputs, code_version)
        label = f"{name}/{dataset}" if dataset else name
        # One builder per stage output: a second process (another terminal, a second --force)
        # waits here for the first instead of writing into the same .partial folder.
        with exclusive_lock(cache.lock_path, label) as waited:
            done = cache.is_done()
            # --force rebuilds a stage once per run, unless a concurrent run finished it while
            # we waited (then it is as fresh as ours would be). The old output stays readable
            # until the new one replaces it (StageCache.finish).
            rebuild = (self.force and done and cache.key not in self.forced
                       and not (waited and cache.meta().get("finished", 0) >= self.started))
            self.forced.add(cache.key)
            if done and not rebuild:
                print(f"[{label}] cached ({cache.dir})")
                self.stages.add(name, dataset, True, 0.0, key=cache.key)
                return cache
            started = time.time()
            with self.tracker.stage(label, {"stage": name, "dataset": dataset, **config}):
                if resumable and cache.partial.exists():
                    print(f"[{label}] resuming from {cache.partial}")
                meta = build(cache.begin(keep_partial=resumable)) or {}
                cache.finish(meta)
                self.tracker.log_metrics({k: v for k, v in meta.items() if isinstance(v, (int, float))})
        self.stages.add(name, dataset, False, time.time() - started, key=cache.key, output=meta)
        return cache
