"""Settings are read through their typed blocks only (issue 60, item 4).

A spec's settings are declared once, with their kinds and defaults, in the ``*Settings`` classes of
harness/spec/ (stage_settings.py, block_settings.py, run_settings.py). A raw dotted read such as
``spec.get("finetune.precision")`` outside harness/spec/ bypasses them: it writes its own default
beside the block's and reads a value no check vouched for. This test finds every call
``X.get("a.b")`` whose first argument is a dotted string literal in harness/ and leaderboard_app/
outside harness/spec/; the few that read something other than a spec are listed with why.
"""

from __future__ import annotations

import ast
from pathlib import Path

from harness.run.model_shape import MEASURED_LENGTH, MEASURED_QUERY_LENGTH
from harness.spec.method import MethodSpec
from harness.spec.run_settings import DataSettings, FinetuneSettings, HardwareSettings, ModelSettings

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("harness", "leaderboard_app")
SPEC_PACKAGE = Path("harness/spec")  # where the typed blocks read the resolved spec

# (file, key) -> why a dotted `.get` there is not a spec read.
NOT_SPEC_READS = {
    ("harness/core/procs.py", "harness.host"): "an MLflow run's tag (the host that started it)",
    ("harness/core/procs.py", "harness.pid"): "an MLflow run's tag (the process that started it)",
    ("harness/core/procs.py", "harness.pid_start"): "an MLflow run's tag (that process's start time)",
    ("harness/core/ranks.py", "torch.distributed"): "a module name in sys.modules",
}


def dotted_gets(source: str) -> list[tuple[int, str]]:
    """(line, key) of each call ``X.get("a.b", ...)`` in ``source`` whose first argument is a string
    literal holding a dot between two names."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"):
            continue
        first = node.args[0] if node.args else None
        if isinstance(first, ast.Constant) and isinstance(first.value, str) and _dotted(first.value):
            found.append((node.lineno, first.value))
    return found


def _dotted(key: str) -> bool:
    parts = key.split(".")
    return len(parts) > 1 and all(part.isidentifier() for part in parts)


def _sources() -> list[Path]:
    files = [p for folder in FOLDERS for p in sorted((ROOT / folder).rglob("*.py"))]
    return [p for p in files if not p.relative_to(ROOT).is_relative_to(SPEC_PACKAGE)]


def test_the_rule_finds_dotted_reads_only() -> None:
    source = (
        "a = spec.get('finetune.precision')\n"
        'b = spec.get("pretrain.objective_params", {})\n'
        "c = spec.get(\n    'data.mirror'\n)\n"
        'd = spec.get("hardware")\n'
        "e = spec.get(key)\n"
        'f = os.environ.get("HARNESS_SEED")\n'
        'g = config.get("1.5")\n'
        'h = spec["finetune.x"]\n'
    )
    assert dotted_gets(source) == [(1, "finetune.precision"), (2, "pretrain.objective_params"), (3, "data.mirror")]


def test_no_raw_dotted_spec_read_outside_the_spec_package() -> None:
    raw = []
    allowed_seen = set()
    for path in _sources():
        rel = path.relative_to(ROOT).as_posix()
        for line, key in dotted_gets(path.read_text()):
            if (rel, key) in NOT_SPEC_READS:
                allowed_seen.add((rel, key))
            else:
                raw.append(f"{rel}:{line}: .get({key!r})")
    assert not raw, (
        "read these settings through their typed block (harness/spec/*_settings.py: "
        "`PretrainSettings.from_spec(spec).steps`), adding the setting there if it is missing:\n" + "\n".join(raw)
    )
    # an allowance whose read is gone would hide the next dotted read written there
    assert allowed_seen == set(NOT_SPEC_READS), f"stale allowances: {sorted(set(NOT_SPEC_READS) - allowed_seen)}"


def test_the_blocks_keep_the_defaults_the_raw_reads_wrote() -> None:
    """An unstated key reads as the raw reads' `or` default did: BM25 negatives "own", one device, the
    measured lengths (144-token passages, 32-token queries), no cap on the training queries."""
    bare = MethodSpec("x", "tiny", Path("x.yaml"), {"finetune": {"retriever1": {"max_p_len": 64}}})
    data, ft = DataSettings.from_spec(bare), FinetuneSettings.from_spec(bare)
    assert (data.bm25_negatives, data.mirror, data.msmarco_passages) == ("own", None, None)
    assert HardwareSettings.from_spec(bare).devices == 1
    assert ModelSettings.from_spec(bare).init == "scratch"
    # the finetune block's own lengths, not a stage's override
    assert (ft.max_p_len, ft.max_q_len) == (MEASURED_LENGTH, MEASURED_QUERY_LENGTH)
    assert (ft.train_queries, ft.max_train_queries, ft.evaluate_start) == (None, None, False)
    stated = MethodSpec("x", "tiny", Path("x.yaml"), {"finetune": {"max_train_queries": 4}, "hardware": {"devices": 8}})
    assert FinetuneSettings.from_spec(stated).max_train_queries == 4
    assert HardwareSettings.from_spec(stated).devices == 8
