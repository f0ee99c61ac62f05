"""The pre-training part of a run's seed spread as measured on file (issue 61 item 3).

A `run --seeds S --pretrain-seeds P` study writes records that carry their ``pretrain_seed`` (runs/seeds/);
the paper-profile records of one method and settings under two or more pre-training seeds give
``noise.pretrain_spread_of`` per benchmark and measure. :func:`own_pretrain_spreads` gathers them so the
verdicts (``compare``, ``claims``) count the measured sigma_pt where a run pre-trains, instead of the
stand-in ``verdict.PRETRAIN_STANDIN`` that says fine-tune-only evidence is a lower bound.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from harness.core.paths import runs_dir
from harness.evaluation.noise import PretrainSpread, pretrain_spread_of
from harness.evaluation.tolerances import canonical_measure
from harness.records.store import load_records
from harness.spec.hashing import settings_hash

PAPER_PROFILE = "paper"
PretrainSpreads = Mapping[tuple[str, str], PretrainSpread]  # (benchmark, canonical measure) -> sigma_pt


def spreads_of(records: Iterable[Any]) -> dict[tuple[str, str], PretrainSpread]:
    """sigma_pt per (benchmark, canonical measure) of records of one spec and settings whose pre-training
    seeds differ; where several specs measure one, the one with the most runs (its df are the widest)."""
    groups: dict[tuple[str, str], list[Any]] = {}
    for r in records:
        groups.setdefault((r.method, settings_hash(r.spec or {})), []).append(r)
    out: dict[tuple[str, str], PretrainSpread] = {}
    for group in groups.values():
        if len({r.pretrain_seed for r in group}) < 2:
            continue  # one pre-training: nothing measures its part
        for bench in sorted(set.intersection(*(set(r.metrics) for r in group))):
            for measure in sorted(set.intersection(*(set(r.metrics[bench]) for r in group))):
                got = pretrain_spread_of(group, bench, measure)
                key = (bench, canonical_measure(measure))
                if got is not None and (key not in out or got.runs > out[key].runs):
                    out[key] = got
    return out


def own_pretrain_spreads(runs: Path | None = None) -> dict[tuple[str, str], PretrainSpread]:
    """sigma_pt from the harness's own paper-profile records under several pre-training seeds (runs/seeds/)."""
    runs = runs or runs_dir()
    records = [
        r
        for r in load_records(runs / "seeds")[0]
        if r.profile == PAPER_PROFILE and r.pretrain_seed is not None and not r.integrity_problems
    ]
    return spreads_of(records)


@lru_cache(maxsize=1)
def on_file() -> dict[tuple[str, str], PretrainSpread]:
    """:func:`own_pretrain_spreads` of runs/ (HARNESS_RUNS_DIR), read once: what the verdicts count by default."""
    return own_pretrain_spreads()


def same_commit_study(runs: Path | None = None) -> tuple[list[Any], dict[tuple[str, str], PretrainSpread]]:
    """The largest small-profile seed study of one spec, settings and clean commit under two or more
    pre-training seeds (runs/seeds/), and its sigma_pt per (benchmark, measure): what `noise` prints beside
    the control's spread. It enters no verdict (the verdicts read paper-profile studies: :func:`on_file`)."""
    runs = runs or runs_dir()
    groups: dict[tuple[str, str, str, str], list[Any]] = {}
    for r in load_records(runs / "seeds")[0]:
        commit = (r.git or {}).get("commit")
        if r.pretrain_seed is None or r.profile == PAPER_PROFILE or r.integrity_problems:
            continue
        if commit and not (r.git or {}).get("dirty"):
            groups.setdefault((r.method, r.profile, settings_hash(r.spec or {}), str(commit)), []).append(r)
    studies = [g for g in groups.values() if len({r.pretrain_seed for r in g}) >= 2]
    if not studies:
        return [], {}
    study = max(studies, key=len)
    return sorted(study, key=lambda r: (r.pretrain_seed, r.seed)), spreads_of(study)
