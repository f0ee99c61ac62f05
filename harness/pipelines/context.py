"""What a pipeline gets from the runner: the resolved spec, the tracker, the stage log and the
stage cache (:meth:`RunContext.cached_stage`), so the pipelines never import the runner.

Plan mode (``plan_only``, what ``run --dry-run`` uses) runs the same pipeline code without building
anything: :meth:`RunContext.cached_stage` computes each stage's cache key exactly as a run does,
logs the stage (finished in the cache or still to run) and returns its :class:`StageCache`, so the
stages a dry-run lists are the stages a run executes, with the same keys."""

from __future__ import annotations

import contextlib
import functools
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.core import ranks
from harness.core.errors import DiskFull, HarnessError
from harness.core.fsutil import exclusive_lock
from harness.core.memory import measure_peak, release_memory
from harness.core.paths import cache_dir
from harness.core.seeds import DEFAULT_SEED
from harness.records.tracker import Tracker
from harness.spec.method import MethodSpec
from harness.stages.artifacts import (
    BUILD_SECONDS,
    STAGE_BOOKKEEPING,
    StageCache,
    hash_dir,
    hash_file,
)
from harness.stages.checkpoints import candidates, resolve_checkpoint
from harness.stages.graph import ALL_RANKS, EVERY_RANK, STAGES, Stage, StopAfterStage

STOP = "a run stops here: "  # a plan note on something missing that stops a run at that point


def input_key(path: Path) -> str:
    """What a stage's cache key says of an input folder or file: its content, never where it lives.

    A stage output (``cache/<stage>/<key>/...``) is named by its stage and key, which already hash
    its content's recipe; anything else (a checkpoint under models/, a packaged model in
    site-packages) by the sha256 of its files. So a checkout moved to another folder, another
    HARNESS_CACHE_DIR or another machine computes the same keys. A path that is not there (a
    dry-run's missing checkpoint) is named as missing, by its folder name.
    """
    path = Path(path)
    try:
        return "/".join(path.resolve().relative_to(cache_dir().resolve()).parts)
    except ValueError:
        pass
    if not path.exists():
        return f"missing:{path.name}"
    return f"sha256:{_content_hash(path.resolve(), _stamp(path))}"


def _stamp(path: Path) -> tuple[tuple[str, int, int], ...]:
    """(name, size, mtime) of every file under `path`: when it changes, the content is hashed again."""
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    return tuple((str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in files)


@functools.lru_cache(maxsize=64)
def _content_hash(path: Path, stamp: tuple[tuple[str, int, int], ...]) -> str:
    return (hash_file(path) if path.is_file() else hash_dir(path, exclude=()))[:16]


def declared_stage(name: str, inputs: dict[str, str]) -> Stage:
    """The declaration of stage `name`, after checking that each input read from another stage's output
    (``<stage>/<key>/...``, :func:`input_key`) comes from a stage it declares it needs."""
    if name not in STAGES:
        raise HarnessError(f"stage '{name}' is not declared in harness/stages/graph.py (declared: {', '.join(STAGES)})")
    stage = STAGES[name]
    for label, value in inputs.items():
        source = str(value).split("/", 1)[0]
        if source in STAGES and source not in stage.needs:
            raise HarnessError(
                f"stage '{name}' reads {label} from stage '{source}', which harness/stages/graph.py does "
                f"not declare it needs ({', '.join(stage.needs) or 'none'}): declare it there"
            )
    return stage


@dataclass
class StageLog:
    """What happened in each stage, for the run record and the final summary."""

    entries: list[dict[str, Any]] = field(default_factory=list)
    total: int = 0  # stages the run's plan holds (0: unknown): the N of "[k/N] stage ..."
    # (stage, dataset) -> MiB it would write, projected (harness/run/footprint.py): a full disk says it
    needs_mib: dict[tuple[str, str | None], float] = field(default_factory=dict)
    announced: int = 0

    def add(self, name: str, dataset: str | None, cached: bool, elapsed: float, **extra: Any) -> None:
        self.entries.append(
            {"stage": name, "dataset": dataset, "cached": cached, "seconds": round(elapsed, 2), **extra}
        )

    def announce(self, label: str, what: str) -> None:
        """'[k/N] stage <label>: <what>' as a stage starts (built, cached or scored): a run says where
        it is at every stage, the first ones included."""
        self.announced += 1
        of = f"/{max(self.total, self.announced)}" if self.total else ""
        print(f"[{self.announced}{of}] stage {label}: {what}", flush=True)


def _cached_outputs(cache: StageCache) -> dict[str, Any]:
    """A cached stage's entry carries what its build returned (losses, counts), as if it had run, so
    a resumed run's record is as complete as a fresh one's, and the build time it saved."""
    stored = cache.meta()
    output = {k: v for k, v in stored.items() if k not in STAGE_BOOKKEEPING}
    return {"output": output, **({"built_seconds": stored[BUILD_SECONDS]} if BUILD_SECONDS in stored else {})}


def _cuda() -> Any:
    """torch.cuda when a stage has imported torch and a GPU is there; else None (never imports torch:
    BM25-only runs do not load it). A counter never reset counts from the process start."""
    torch = sys.modules.get("torch")
    return torch.cuda if torch is not None and torch.cuda.is_available() else None


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
    plan_only: bool = False  # --dry-run: plan the stages, build none (see the module docstring)
    # Plan mode: lines shown in the plan before stage entry <index>: "a run stops here: ..." (a
    # missing checkpoint or input, see plan_stop) or "note: ...".
    plan_notes: list[tuple[int, str]] = field(default_factory=list)
    # checkpoint names the pipeline asked for (name -> what it is): the preflight checks them, the record names them
    models_read: dict[str, str] = field(default_factory=dict)
    # Plan mode: the output folder of each stage the run would build (not finished yet) -> stage name.
    planned: dict[Path, str] = field(default_factory=dict)
    stop_after: str | None = None  # run --stage NAME: stop once the first stage of that name is done
    seed: int = DEFAULT_SEED  # run --seed N: every stage that draws anything at random draws from it
    seed_study: bool = False  # one seed of `run --seeds`: the stages before fine-tuning are seed 42's
    pretrain_seed: int = DEFAULT_SEED  # a study's pre-training seed (`run --pretrain-seeds`): what they draw from

    @property
    def pretraining_seed(self) -> int:
        """The seed the pre-training stages (``graph.PRETRAIN_SEEDED``) draw from: in a seed study its
        pre-training seed (42 without ``--pretrain-seeds``), shared by its fine-tuning seeds; else the run's."""
        return self.pretrain_seed if self.seed_study else self.seed

    def cached_stage(
        self,
        name: str,
        dataset: str | None,
        config: dict[str, Any],
        inputs: dict[str, str],
        build: Callable[[Path], dict[str, Any] | None],
        code_version: str = "1",
        tags: dict[str, Any] | None = None,
    ) -> StageCache:
        """Run `build(workdir)` unless a finished output with the same hash exists.

        ``tags``: fields added to the stage's log entry, in the plan and the record alike, never to its key
        (e.g. ``vectors``: which shared corpus encoding a dense search reads).

        The stage is declared in harness/stages/graph.py: an input from a stage it does not declare it
        reads is refused (the graph stays the one that runs), and a resumable stage keeps its
        unfinished work folder (checkpoints, partial files) so a killed run continues where it
        stopped instead of starting the stage again.
        """
        stage = declared_stage(name, inputs)
        resumable, tags = stage.resumable, tags or {}
        cache = StageCache(name, config, inputs, code_version, self.seed, self.seed_study, self.pretrain_seed)
        if self.plan_only:
            return self._stop_if_asked(name, self._plan_stage(cache, name, dataset, resumable, tags))
        label = f"{name}/{dataset}" if dataset else name
        with self._says_needs(name, dataset):
            if ranks.world_size() > 1:  # a launched run, outside a block rank 0 builds alone
                cache = self._ranked_stage(stage, cache, dataset, config, build, label, tags)
            else:
                self._one_builder(stage, cache, dataset, config, build, label, tags)
        return self._stop_if_asked(name, cache)

    @contextlib.contextmanager
    def _says_needs(self, name: str, dataset: str | None) -> Iterator[None]:
        """A full disk while the stage builds says what the plan projected it writes, when it did."""
        try:
            yield
        except DiskFull as exc:
            if exc.needs_mib is None:
                exc.needs_mib = self.stages.needs_mib.get((name, dataset))
            raise

    def _one_builder(
        self,
        stage: Stage,
        cache: StageCache,
        dataset: str | None,
        config: dict[str, Any],
        build: Callable[[Path], dict[str, Any] | None],
        label: str,
        tags: dict[str, Any],
    ) -> None:
        # One builder per stage output: a second process (another terminal, a second --force)
        # waits here for the first instead of writing into the same .partial folder.
        with exclusive_lock(cache.lock_path, label) as waited:
            if self._reuse(cache, dataset, waited, label, tags):
                return
            self.stages.announce(label, "running")
            with cache.building(keep_partial=self._resumes(stage, cache, label)) as work:
                self._build(cache, dataset, config, build, label, work, True, tags)

    def _reuse(self, cache: StageCache, dataset: str | None, waited: bool, label: str, tags: dict[str, Any]) -> bool:
        """Whether the finished output is used as it is (logged as a cached entry); the caller holds the lock.

        --force rebuilds a stage once per run, unless a concurrent run finished it while we waited
        (then it is as fresh as ours would be). An output whose files no longer match the digests taken
        when it was built (:meth:`StageCache.changed_output`) is rebuilt, saying which file changed. The
        old output stays readable until the new one replaces it (StageCache.building)."""
        done = cache.is_done()
        rebuild = (
            self.force
            and done
            and cache.key not in self.forced
            and not (waited and cache.meta().get("finished", 0) >= self.started)
        )
        self.forced.add(cache.key)
        if done and not rebuild and (changed := cache.changed_output()) is not None:
            print(f"[{label}] cached output changed since it was built ({changed}): rebuilding", flush=True)
            return False
        if done and not rebuild:
            self.stages.announce(label, f"cached ({cache.dir})")
            self.stages.add(cache.stage, dataset, True, 0.0, key=cache.key, **tags, **_cached_outputs(cache))
            return True
        return False

    def _resumes(self, stage: Stage, cache: StageCache, label: str) -> bool:
        resume = stage.resumable and not self.force  # --force recomputes: no resume from old work either
        if resume and cache.partial.exists():
            print(f"[{label}] resuming from {cache.partial}")
        return resume

    def _build(
        self,
        cache: StageCache,
        dataset: str | None,
        config: dict[str, Any],
        build: Callable[[Path], dict[str, Any] | None],
        label: str,
        work: Path,
        finish: bool,
        tags: dict[str, Any],
        processes: int = 1,
    ) -> None:
        """`build(work)` timed and tracked as the stage's MLflow child run; `finish`: mark it finished (rank 0);
        `processes`: how many ran the build (the entry says so)."""
        started = time.time()
        if (cuda := _cuda()) is not None:
            cuda.reset_peak_memory_stats()
        with self.tracker.stage(label, {"stage": cache.stage, "dataset": dataset, **config}), measure_peak() as rss:
            meta = build(work) or {}
            if finish:
                cache.mark_finished(work, {**meta, BUILD_SECONDS: round(time.time() - started, 2)})
            self.tracker.log_metrics({k: v for k, v in meta.items() if isinstance(v, (int, float))})
        release_memory()  # what the stage freed goes back to the OS before the next stage starts
        cuda = _cuda()  # the stage may have imported torch itself
        peak = {"cuda_peak_gib": round(cuda.max_memory_allocated() / 2**30, 2)} if cuda is not None else {}
        elapsed = time.time() - started
        # Peak RSS is an observation of this machine, kept in the log entry and never in the stage's key.
        self.stages.add(
            cache.stage,
            dataset,
            False,
            elapsed,
            key=cache.key,
            **tags,
            output=meta,
            processes=processes,
            **rss.fields(),
            **peak,
        )
        print(f"[{label}] done in {elapsed:.1f} s{rss.describe()}", flush=True)

    def _ranked_stage(
        self,
        stage: Stage,
        cache: StageCache,
        dataset: str | None,
        config: dict[str, Any],
        build: Callable[[Path], dict[str, Any] | None],
        label: str,
        tags: dict[str, Any],
    ) -> StageCache:
        """One stage of a multi-process run. Rank 0 alone holds the stage's lock and decides whether the
        cached output is used; every rank hears its answer. A training stage (``ranks`` EVERY_RANK) is
        built by every rank together in rank 0's work folder (DDP; rank 0 writes the model); any other
        stage by rank 0 alone (:func:`harness.core.ranks.solo`) while the others wait. No rank leaves
        before rank 0 has marked the output finished, so every rank may read it next. A sharded stage
        (``SHARDED``) runs like a training stage: every rank builds its share in rank 0's work folder and the
        build merges them on rank 0. Each built entry states how many processes ran it."""
        from harness.training import distributed as D

        main, processes = ranks.is_main(), ranks.world_size()
        with exclusive_lock(cache.lock_path, label) if main else contextlib.nullcontext(False) as waited:
            reuse = D.control_broadcast(self._reuse(cache, dataset, waited, label, tags) if main else None)
            self.forced.add(cache.key)
            if not reuse and main:
                self.stages.announce(label, "running")
            if reuse:
                if not main:
                    self.stages.add(cache.stage, dataset, True, 0.0, key=cache.key, **tags, **_cached_outputs(cache))
                return cache
            if stage.ranks in ALL_RANKS:
                if main:
                    with cache.building(keep_partial=self._resumes(stage, cache, label)) as work:
                        D.control_broadcast(str(work))
                        self._build(cache, dataset, config, build, label, work, False, tags, processes)
                        D.control_barrier()  # every rank's share is done before the output is marked
                        cache.mark_finished(
                            work,
                            {
                                **self.stages.entries[-1].get("output", {}),
                                BUILD_SECONDS: self.stages.entries[-1]["seconds"],
                            },
                        )
                else:
                    work = Path(D.control_broadcast(None))
                    doing = "training" if stage.ranks == EVERY_RANK else "building its share"
                    print(f"[{label}] rank {ranks.rank()}: {doing} with the other ranks in {work}", flush=True)
                    self._build(cache, dataset, config, build, label, work, False, tags, processes)
                    D.control_barrier()
            elif main:
                with ranks.solo(), cache.building(keep_partial=self._resumes(stage, cache, label)) as work:
                    self._build(cache, dataset, config, build, label, work, True, tags)
            else:
                print(f"[{label}] rank {ranks.rank()}: waiting for rank 0 to build it", flush=True)
                self.stages.add(cache.stage, dataset, False, 0.0, key=cache.key, **tags, built_by="rank 0", processes=1)
            D.control_barrier()  # rank 0 has renamed the output into place
        return cache

    def _stop_if_asked(self, name: str, cache: StageCache) -> StageCache:
        if name == self.stop_after:
            raise StopAfterStage(name, cache.dir)
        return cache

    def _plan_stage(
        self, cache: StageCache, name: str, dataset: str | None, resumable: bool, tags: dict[str, Any]
    ) -> StageCache:
        """Plan mode: log what a run would do with this stage; build, lock and create nothing.

        ``plan`` is ``cached`` (finished in the cache), ``to run``, or ``reused`` (a stage this run
        builds or takes from the cache earlier, e.g. one impact index for mining and evaluation);
        ``cached`` is whether the run would not build it here, as in a run's own entries.
        """
        if cache.key in self.forced:  # `forced` holds every key this run has met, as in a run
            status = "reused"
        elif cache.is_done() and not self.force:
            status = "cached"
        else:
            status = "to run"
            if not cache.is_done():
                self.planned[cache.dir] = name
        self.forced.add(cache.key)
        extra = {"resumes": True} if status == "to run" and resumable and cache.partial.exists() else {}
        self.stages.add(name, dataset, status != "to run", 0.0, key=cache.key, plan=status, **tags, **extra)
        return cache

    def planned_builder(self, path: Path) -> str | None:
        """Plan mode: the stage this run would build `path` in (its output does not exist yet); else None.

        A pipeline that looks into a stage's output outside the stage's `build` asks this first: in plan
        mode the output is not there, and it goes by what the stage will write instead."""
        for parent in (path, *path.parents):
            if parent in self.planned:
                return self.planned[parent]
        return None

    def plan_note(self, text: str) -> None:
        """Plan mode: a line shown in the plan at this point (between the stages planned so far and the next)."""
        self.plan_notes.append((len(self.stages.entries), text))

    def plan_stop(self, problem: str) -> None:
        """Plan mode: a run would stop here (`problem`: what is missing); the plan goes on past it."""
        self.plan_note(f"{STOP}{problem}")

    def stage_meta(self, cache: StageCache) -> dict[str, Any]:
        """A finished stage's ``done.json``; in plan mode, where it may not be built, ``{}`` unless it is."""
        if self.plan_only and not cache.is_done():
            return {}
        return cache.meta()

    def checkpoint(self, name: str, what: str, hint: str = "") -> Path:
        """:func:`harness.stages.checkpoints.resolve_checkpoint` as a path; `hint` is added to its error.

        A run fails here when the checkpoint is missing (before it builds anything that needs it). In plan
        mode the missing checkpoint becomes a line of the plan instead ("a run stops here: ...") and the
        plan goes on as if the checkpoint were at models/<name>, so that a dry-run of a paper profile
        lists all its stages on a machine without the paper's off-line checkpoints.
        """

        self.models_read.setdefault(name, what)
        try:
            return Path(resolve_checkpoint(name, what))
        except HarnessError as exc:
            if not self.plan_only:
                if hint:
                    raise HarnessError(f"{exc}{hint}") from None
                raise
            self.plan_stop(f"{exc}{hint}")
            return candidates(name)[-1]
