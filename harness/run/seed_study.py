"""A pre-registered seed study: ``run --method M --profile paper --seeds 42-46 [--pretrain-seeds 42,43]``.

The same spec fine-tuned under each seed, one run after another on the declared GPUs. The stages
before fine-tuning (corpus, pre-training, BM25: ``graph.SEED_SHARED_STEPS``) are seed 42's, run once and
shared, so what varies is the fine-tuning seed only: the seed spread of one run at paper scale that
``sigma_rep`` needs. Every seed's record, 42's too, goes to ``runs/seeds/``, where
``margins.own_paper_seeds`` reads it as same-recipe evidence (``seeds - 1`` degrees of freedom per
method): no step between the study and the verdicts. ``--dry-run`` prints the plan of one seed and
the study's GPU-hours on the declared hardware (``projection.declared_total`` of the per-seed stages,
times the seeds).

``--pretrain-seeds``: every pre-training seed x fine-tuning seed, in this process (:func:`run_design`).
The stages that draw from a pre-training seed (``graph.PRETRAIN_SEEDED``: query generation, pre-training,
a random init) run once per pre-training seed, keyed by it, and are shared by its fine-tuning seeds; the
rest before fine-tuning (tokenizer, passages, BM25) stay seed 42's. Each record carries its
``pretrain_seed``, from which ``noise.pretrain_spread_of`` estimates the pre-training part sigma_pt.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

from harness.core.seeds import DEFAULT_SEED
from harness.run import projection
from harness.spec.kinds import SEED_MAX
from harness.stages.graph import PRETRAIN_SEEDED, seed_shared

MAX_STUDY = 50  # more seeds than this is a typo (42-4600), not a study


def parse_seeds(text: str) -> list[int]:
    """``42-46`` / ``42,43,50`` / ``42-44,50``: distinct seeds in [0, SEED_MAX], at least two, in order
    given; raises ValueError with what is wrong."""
    seeds: list[int] = []
    for part in (p.strip() for p in text.split(",")):
        low, dash, high = part.partition("-")
        if not low.strip().isdigit() or (dash and not high.strip().isdigit()):
            raise ValueError(f"{part!r} is not a seed or a range of seeds (e.g. 42-46 or 42,43,44)")
        first, last = int(low), int(high) if dash else int(low)
        if last < first:
            raise ValueError(f"{part!r} runs backwards: write the smaller seed first")
        if last > SEED_MAX:
            raise ValueError(f"{last} is out of range: a seed must be in [0, {SEED_MAX}]")
        if last - first + 1 > MAX_STUDY:
            raise ValueError(f"{part!r} is {last - first + 1} seeds: a study of at most {MAX_STUDY}")
        seeds.extend(range(first, last + 1))
    twice = sorted({s for s in seeds if seeds.count(s) > 1})
    if twice:
        raise ValueError(f"seed {', '.join(map(str, twice))} given more than once")
    if len(seeds) < 2:
        raise ValueError("a seed study needs at least 2 seeds (one gives no spread), e.g. 42-46")
    if len(seeds) > MAX_STUDY:
        raise ValueError(f"{len(seeds)} seeds: a study of at most {MAX_STUDY}")
    return seeds


def ordered(seeds: Sequence[int]) -> list[int]:
    """Seed 42 first: it builds the shared stages the other seeds read."""
    return sorted(seeds, key=lambda s: (s != DEFAULT_SEED, seeds.index(s)))


def per_seed_entries(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The plan's entries each seed runs (fine-tuning on), as to run whatever the cache holds."""
    return [{**e, "plan": "to run"} for e in entries if not seed_shared(e["stage"], True)]


def shared_entries(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The plan's entries run once for the study (seed 42's), as the cache has them."""
    return [e for e in entries if seed_shared(e["stage"], True)]


def pretrain_entries(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The plan's entries each pre-training seed of a ``--pretrain-seeds`` study runs, as to run."""
    return [{**e, "plan": "to run"} for e in entries if e["stage"] in PRETRAIN_SEEDED]


def describe(
    spec: Any, entries: list[dict[str, Any]], seeds: Sequence[int], pretrain: Sequence[int] | None = None
) -> list[str]:
    """The dry-run's lines: what runs per seed and once (and per pre-training seed: ``pretrain``), and the
    GPU-hours on the declared hardware."""
    runs = len(seeds) * (len(pretrain) if pretrain else 1)
    each = projection.declared_total(spec, per_seed_entries(entries))
    once = projection.declared_total(
        spec, [e for e in shared_entries(entries) if not pretrain or e["stage"] not in PRETRAIN_SEEDED]
    )
    stages = list(dict.fromkeys(e["stage"] for e in per_seed_entries(entries)))
    lines = [
        f"seed study: {spec.name} [{spec.profile}] under {len(seeds)} seeds ({', '.join(map(str, ordered(seeds)))}); "
        f"per seed: {', '.join(stages)}; shared (seed {DEFAULT_SEED}'s, run once): the "
        + ("other " if pretrain else "")
        + "stages before fine-tuning",
    ]
    if pretrain:
        lines += _pretrain_lines(spec, entries, seeds, pretrain)
    if each.hours is None:
        lines.append(f"  GPU-hours: not projected ({each.hardware})")
    else:
        devices = int((spec.get("hardware") or {}).get("devices") or 1)
        gpu_hours = each.hours * devices * runs
        lines.append(
            f"  per seed: {projection.format_hours(each.hours)} on {each.hardware}; the study: "
            f"{projection.format_hours(each.hours * runs)} wall, {gpu_hours:.0f} GPU-hours"
            + (f" (not projected: {', '.join(each.unprojected)})" if each.unprojected else "")
        )
        if once.hours:
            lines.append(
                f"  once, before the seeds (not cached yet): {projection.format_hours(once.hours)} wall, "
                f"{once.hours * devices:.0f} GPU-hours"
            )
    per = f" per pre-training seed, {len(pretrain) * (len(seeds) - 1)} in all" if pretrain else ""
    lines.append(
        f"  records go to runs/seeds/ and enter sigma_rep as {len(seeds) - 1} degrees of freedom{per} "
        "(python -m harness noise --margins shows them)"
    )
    return lines


def _pretrain_lines(
    spec: Any, entries: list[dict[str, Any]], seeds: Sequence[int], pretrain: Sequence[int]
) -> list[str]:
    """The dry-run's lines of a ``--pretrain-seeds`` study: what each pre-training seed runs, and its hours."""
    stages = list(dict.fromkeys(e["stage"] for e in pretrain_entries(entries)))
    cost = projection.declared_total(spec, pretrain_entries(entries))
    lines = [
        f"  pre-training seeds {', '.join(map(str, ordered(pretrain)))}: {', '.join(stages)} run once per "
        f"pre-training seed and are shared by its {len(seeds)} fine-tuning seeds ({len(pretrain) * len(seeds)} runs, "
        "each record carrying its pretrain_seed: sigma_pt is measured from them)"
    ]
    if cost.hours:
        devices = int((spec.get("hardware") or {}).get("devices") or 1)
        lines.append(
            f"  per pre-training seed: {projection.format_hours(cost.hours)} wall, {cost.hours * devices:.0f} "
            f"GPU-hours; all {len(pretrain)}: {cost.hours * devices * len(pretrain):.0f} GPU-hours"
        )
    return lines


def run(seeds: Sequence[int], run_seed: Callable[[int], int]) -> int:
    """``run_seed(seed)`` (one seed's run, in this process) for each seed, 42 first; stop at the first
    seed that fails (an exit code, or an error, raised on) and return its exit code."""
    for i, seed in enumerate(ordered(seeds), 1):
        print(f"seed study: seed {seed} ({i}/{len(seeds)})", flush=True)
        try:
            rc = run_seed(seed)
        except BaseException:
            print(f"seed study: seed {seed} failed; the seeds after it did not run", file=sys.stderr, flush=True)
            raise
        if rc:
            print(f"seed study: seed {seed} failed (exit {rc}); the seeds after it did not run", file=sys.stderr)
            return rc
    return 0


def run_design(pretrain: Sequence[int], seeds: Sequence[int], run_one: Callable[[int, int], int]) -> int:
    """``run_one(pretrain_seed, seed)`` for every pre-training seed x fine-tuning seed, 42 first in both: a
    pre-training seed's fine-tuning seed 42 builds its pre-training, its other seeds read it; stop at the
    first run that fails and return its exit code."""
    for i, p in enumerate(ordered(pretrain), 1):
        print(f"seed study: pre-training seed {p} ({i}/{len(pretrain)})", flush=True)
        rc = run(seeds, lambda seed, p=p: run_one(p, seed))
        if rc:
            print(f"seed study: the pre-training seeds after {p} did not run", file=sys.stderr, flush=True)
            return rc
    return 0


STUDY_FLAGS = ("--seeds", "--pretrain-seeds")


def without_seeds(argv: Sequence[str]) -> list[str]:
    """``argv`` with its ``--seeds X`` / ``--seeds=X`` (and ``--pretrain-seeds``) removed."""
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg in STUDY_FLAGS:
            skip = True
        elif not arg.startswith(tuple(f"{flag}=" for flag in STUDY_FLAGS)):
            out.append(arg)
    return out
