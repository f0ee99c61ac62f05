"""The seed is an argument (issue 60, item 3): ``run --seed N`` hands it to ``run_method``, which puts it
on the run's context every stage reads; no module reads a seed at import, no process starts itself
again to change it, and a seed study runs its seeds one after the other in one interpreter."""

from __future__ import annotations

import json
import re

import pytest

from harness.cli import main
from harness.commands import run as run_command
from harness.core.paths import PROJECT_ROOT
from harness.run import seed_study
from harness.run.runner import run_method
from harness.stages.graph import seed_shared


def test_no_module_reads_the_seed_at_import_or_starts_itself_again():
    """`grep -rn "from harness import SEED\\|os.execv" harness/` finds nothing, nor any HARNESS_SEED read."""
    found = []
    for path in sorted((PROJECT_ROOT / "harness").rglob("*.py")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if re.search(r"from harness import SEED|os\.execv|HARNESS_SEED", line):
                found.append(f"{path.relative_to(PROJECT_ROOT)}:{number}: {line.strip()}")
    assert not found, "\n".join(found)


def _keys(stages: list[dict]) -> list[tuple[str, str | None, str | None]]:
    return [(e["stage"], e["dataset"], e.get("key")) for e in stages]


def test_the_seed_reaches_every_stage_key_from_the_command_line(tmp_path, capsys):
    """A dry-run under seed 43 plans the keys run_method(seed=43) plans, none of seed 42's; as one seed of
    a study, the stages before fine-tuning are seed 42's and the rest not."""
    summary = tmp_path / "plan.json"
    argv = ["run", "--method", "cotmae_qc", "--profile", "tiny", "--seed", "43", "--dry-run", "--json", str(summary)]
    assert main(argv) == 0
    assert "(spec hash " in (out := capsys.readouterr().out) and ", seed 43)" in out
    cli = _keys(json.loads(summary.read_text(encoding="utf-8"))["stages"])
    api = _keys(run_method("cotmae_qc", "tiny", dry_run=True, seed=43).stages)
    base = _keys(run_method("cotmae_qc", "tiny", dry_run=True).stages)
    study = _keys(run_method("cotmae_qc", "tiny", dry_run=True, seed=43, seed_study=True).stages)
    assert cli == api and len(cli) == len(base) > 5
    keyed = [(a, b) for a, b in zip(api, base) if a[2] is not None]
    assert keyed and all(a[2] != b[2] for a, b in keyed)  # another seed: every stage its own artifact
    kinds = set()
    for own, shared in zip(base, study):
        if own[2] is not None:
            kinds.add(seed_shared(own[0], True))
            assert (shared[2] == own[2]) == seed_shared(own[0], True), own
    assert kinds == {True, False}


def test_a_study_runs_its_seeds_in_this_process_42_first(monkeypatch, capsys):
    """`run --seeds 43,42` calls run_method once per seed, 42 first, each marked as a study's seed."""
    calls = []

    def fake_run_method(method, profile, datasets, **kw):
        calls.append((method, kw["seed"], kw["seed_study"]))
        return {"mlflow": None}

    monkeypatch.setattr(run_command, "run_method", fake_run_method)
    assert main(["run", "--method", "cotmae_qc", "--profile", "tiny", "--seeds", "43,42"]) == 0
    assert calls == [("cotmae_qc", 42, True), ("cotmae_qc", 43, True)]
    out = capsys.readouterr().out
    assert "seed study: seed 42 (1/2)" in out and "seed study: seed 43 (2/2)" in out


def test_a_study_stops_at_the_first_failing_seed(capsys):
    ran = []

    def fails_at_43(seed: int) -> int:
        ran.append(seed)
        return 3 if seed == 43 else 0

    assert seed_study.run([43, 44, 42], fails_at_43) == 3
    assert ran == [42, 43]  # 42 first, then the order given, up to the failing seed
    assert "seed 43 failed (exit 3)" in capsys.readouterr().err

    def raises(seed: int) -> int:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        seed_study.run([42, 43], raises)
    assert "seed 42 failed; the seeds after it did not run" in capsys.readouterr().err


def test_one_seeds_command_line_tells_its_launched_workers_the_seed():
    """A launched seed of a study starts workers that run `run` again: its command line carries the seed."""
    args = run_command.argparse.Namespace(seeds=[42, 43], seed=None, seed_study=False, argv=["run", "--seeds", "42,43"])
    one = run_command._one_seed(args, 43)
    assert (one.seed, one.seeds, one.seed_study) == (43, None, True)
    assert one.argv == ["run", "--seed", "43", "--seed-study"]
    assert args.seed is None and args.argv == ["run", "--seeds", "42,43"]  # the study's own args stay


# The whole tiny run under `--seed 43` (its record, its keys against the API's): tests/test_run_plan.py's slow
# test, which counts that run's plan builds too (one tiny run serves both).
