"""The declared stage graph (harness/stages/graph.py) is the one the pipelines run: its rules derive from it,
and a stage that reads another stage's output it does not declare is refused."""

from __future__ import annotations

import ast
import re
import subprocess
import sys

import pytest

from harness.core.errors import HarnessError
from harness.core.paths import PROJECT_ROOT
from harness.pipelines.context import declared_stage
from harness.stages import registry
from harness.stages.graph import (
    FAMILY_STEPS,
    FINETUNE_STAGES,
    GRAPH,
    PRETRAINING,
    PROJECTED,
    STAGES,
    Stage,
    outline,
)


def test_every_need_is_a_declared_stage_met_earlier_or_a_retriever_of_the_chain():
    seen: set[str] = set()
    for stage in GRAPH:
        assert set(stage.needs) <= set(STAGES), stage.name
        seen.add(stage.name)
    assert FINETUNE_STAGES == ("retriever1", "retriever2", "retriever3")
    assert "pretrain" in PRETRAINING and "retriever1" not in PRETRAINING


def test_family_steps_derive_from_the_graph():
    assert FAMILY_STEPS["lexical"] == ("index", "retrieve", "evaluate")
    assert "finetune_r3" not in FAMILY_STEPS["dense"] and "finetune_r3" in FAMILY_STEPS["learned-sparse"]
    assert "mine" in FAMILY_STEPS["dense"]


def test_an_input_from_an_undeclared_stage_is_refused():
    assert declared_stage("passages", {"tokenizer": "tokenizer/0123456789abcdef/tokenizer"}).name == "passages"
    assert declared_stage("passages", {"tokenizer": "sha256:0123456789abcdef"}).name == "passages"  # a checkpoint
    with pytest.raises(HarnessError, match="stage 'passages' reads tokenizer from stage 'pretrain'.*declare it"):
        declared_stage("passages", {"tokenizer": "pretrain/0123456789abcdef/encoder"})
    with pytest.raises(HarnessError, match="not declared in harness/stages/graph.py"):
        declared_stage("pretraining", {})


def test_resumable_stages_are_the_trainers_and_the_passages_builder():
    # passages: its shards (harness/corpus/passage_shards.py); teacher_scores: each rank's scored chunks
    # (harness/finetune/teacher_shards.py); the others: their checkpoints or partial files
    assert {s.name for s in GRAPH if s.resumable} == {
        "passages",
        "qgen",
        "pretrain",
        "retriever1",
        "retriever2",
        "reranker",
        "teacher_scores",
        "retriever3",
    }
    assert "retriever2" in outline() and "(resumable)" in outline()


# A "module:function" reference (``"harness.run.plan:bm25_details"``), the way the graph once named the
# functions of the modules above it.
FUNCTION_REFERENCE = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


def function_references(source: str) -> list[str]:
    """The string constants of ``source`` shaped like a "module:function" reference; an f-string is read
    with each of its fields as a name (``f"{PLAN}:bm25_details"`` reads ``PLAN:bm25_details``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.JoinedStr):
            text = "".join(v.value if isinstance(v, ast.Constant) else "PLAN" for v in node.values)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
        else:
            continue
        found += [text] if FUNCTION_REFERENCE.match(text) else []
    return found


def test_the_graph_names_no_function_by_a_string():
    """The stage graph's package holds no "module:function" reference: what the modules above add to a
    stage is registered by import (harness/stages/registry.py), an edge the import-layer test sees."""
    sample = 'A = f"{PLAN}:bm25_details"\nB = "harness.pipelines.bm25:run_bm25"\nC = "rank 0: every rank"'
    assert function_references(sample) == ["PLAN:bm25_details", "harness.pipelines.bm25:run_bm25"]
    for path in sorted((PROJECT_ROOT / "harness" / "stages").rglob("*.py")):
        assert function_references(path.read_text(encoding="utf-8")) == [], path
    with pytest.raises(ValueError, match="stage 'x': cost is PROJECTED"):
        Stage("x", "does", "corpus", cost="harness.run.projection:qgen_cost")


def test_each_declared_function_is_registered_once_by_the_modules_that_look_it_up():
    """In a fresh interpreter (no import order by luck): importing the module that looks a function up
    registers every one the graph declares, exactly one per stage or family, and none undeclared."""
    check = (
        "import sys\n"
        "from harness.stages import registry\n"
        "for module, reg in (('harness.run.plan', registry.DETAILS), ('harness.run.projection', registry.COSTS),"
        " ('harness.run.runner', registry.PIPELINES)):\n"
        "    __import__(module)\n"
        "    assert not reg.missing() and not reg.undeclared(), (module, reg.missing(), reg.undeclared())\n"
        "print(repr(tuple(sorted(reg.functions) for reg in registry.REGISTRIES)))\n"
    )
    done = subprocess.run([sys.executable, "-c", check], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    details, costs, pipelines = ast.literal_eval(done.stdout)
    assert set(details) == {s.name for s in GRAPH if s.details} | {"mine"}
    assert set(costs) == {s.name for s in GRAPH if s.cost == PROJECTED}
    assert set(pipelines) == set(FAMILY_STEPS) == {"dense", "learned-sparse", "lexical"}
    assert {s.group for s in GRAPH if s.details} >= {"bm25", "impact", "teacher", "pretrain", "retriever1"}


def test_a_registration_that_does_not_match_the_graph_fails_with_the_name():
    import harness.run.runner  # noqa: F401 - registers the built-in functions

    assert registry.PIPELINES.function("dense").__name__ == "run_dense"
    assert registry.COSTS.function("retriever2") is registry.COSTS.function("retriever3")
    reg = registry.Registry("cost", "stage", lambda: ["pretrain", "qgen"])

    @reg.register("pretrain")
    def first(*args: object) -> None: ...

    def second(*args: object) -> None: ...

    with pytest.raises(registry.RegistryError, match="stage 'pretrain' has two cost functions"):
        reg.register("pretrain")(second)
    assert reg.function("pretrain") is first
    with pytest.raises(registry.RegistryError, match="stage 'qgen' declares cost .* no function is registered"):
        reg.function("qgen")
    with pytest.raises(registry.RegistryError, match="registers the cost of stage 'index', which"):
        reg.register("index")(second)
    assert reg.missing() == ["qgen"] and reg.undeclared() == []
