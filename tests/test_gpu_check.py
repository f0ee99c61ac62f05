"""bench/gpu_check.py and bench/gpu_multirank.py, the checks a GPU machine runs when one is lent: on this
CPU build they stop before running anything (exit 3, one line); the multi-rank checks select tests that exist."""

from __future__ import annotations

import importlib.util
import re
import sys

from harness.core.paths import PROJECT_ROOT

BENCH = PROJECT_ROOT / "bench"


def _load(name: str):
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(BENCH))


def test_without_cuda_both_checks_stop_at_once_and_say_why(capsys, tmp_path):
    for name in ("gpu_check", "gpu_multirank"):
        module = _load(name)
        assert module.main(["--json", str(tmp_path / f"{name}.json")]) == module.NO_CUDA == 3
        err = capsys.readouterr().err
        assert f"{name}: not run:" in err and "bash setup.sh --cuda" in err
        assert not (tmp_path / f"{name}.json").exists()


def test_every_multirank_test_check_selects_a_test_of_the_launch_module():
    checks = _load("gpu_multirank").CHECKS
    source = (PROJECT_ROOT / "tests" / "test_launch.py").read_text()
    names = re.findall(r"^def (test_\w+)", source, flags=re.M)
    for name, command in checks.items():
        if "pytest" in command:
            pattern = command[command.index("-k") + 1]
            assert len([n for n in names if pattern in n]) == 1, name
