"""A benchmark is described once: harness/core/benchmarks.yaml, read through harness/core/benchmarks.py.

No module of harness/ or leaderboard_app/ names a benchmark (a string constant equal to a declared name,
docstrings aside) outside the allowed ones; every decision by benchmark comes from a declared attribute;
and the numbers read from the declarations are the ones the modules held before (pinned here).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from harness.core import benchmarks as declared
from harness.core.errors import UnknownNameError
from harness.core.paths import PROJECT_ROOT

# The modules that may name a benchmark: the loader of the declarations (and nothing else today).
ALLOWED = {"harness/core/benchmarks.py"}
MOST_ALLOWED = 3


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                out.add(id(first.value))
    return out


def benchmark_literals() -> dict[str, list[tuple[int, str]]]:
    """``{module: [(line, name)]}``: string constants equal to a declared benchmark or forum name."""
    names = set(declared.declarations(include_user=False))
    names |= {f for d in declared.declarations(include_user=False).values() for f in d.forum_names}
    found: dict[str, list[tuple[int, str]]] = {}
    for root in ("harness", "leaderboard_app"):
        for path in sorted((PROJECT_ROOT / root).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            skip = _docstrings(tree)
            hits = [
                (node.lineno, node.value)
                for node in ast.walk(tree)
                if isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and node.value in names
                and id(node) not in skip
            ]
            if hits:
                found[path.relative_to(PROJECT_ROOT).as_posix()] = sorted(hits)
    return found


def test_benchmark_names_are_written_only_in_the_declarations():
    assert len(ALLOWED) <= MOST_ALLOWED
    outside = {module: hits for module, hits in benchmark_literals().items() if module not in ALLOWED}
    assert not outside, (
        "benchmark names written outside harness/core/benchmarks.yaml; ask harness.core.benchmarks "
        f"(by kind, family, corpus, ...) instead: {outside}"
    )


def test_the_scan_finds_a_name_but_not_a_docstring():
    tree = ast.parse('"""dl19 in a docstring"""\nX = "dl19"\nY = "dl19-passage"\n')
    hits = [
        n.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and n.value in {"dl19"} and id(n) not in _docstrings(tree)
    ]
    assert hits == ["dl19"]


def test_the_declarations_keep_the_numbers_the_modules_held():
    from harness.evaluation import noise, power
    from harness.run import projection

    assert declared.beir() == (
        "trec-covid",
        "nfcorpus",
        "nq",
        "hotpotqa",
        "fiqa",
        "arguana",
        "webis-touche2020",
        "cqadupstack",
        "quora",
        "dbpedia-entity",
        "scidocs",
        "fever",
        "climate-fever",
        "scifact",
    )
    assert noise.QUERIES == {
        "msmarco-dev": 6980,
        "dl19": 43,
        "dl20": 54,
        "trec-covid": 50,
        "nfcorpus": 323,
        "nq": 3452,
        "hotpotqa": 7405,
        "fiqa": 648,
        "arguana": 1406,
        "webis-touche2020": 49,
        "cqadupstack": 13145,
        "quora": 10000,
        "dbpedia-entity": 400,
        "scidocs": 1000,
        "fever": 6666,
        "climate-fever": 1535,
        "scifact": 300,
    }
    assert projection.BEIR_CORPUS == {
        "trec-covid": 171_332,
        "nfcorpus": 3_633,
        "nq": 2_681_468,
        "hotpotqa": 5_233_329,
        "fiqa": 57_638,
        "arguana": 8_674,
        "webis-touche2020": 382_545,
        "cqadupstack": 457_199,
        "quora": 522_931,
        "dbpedia-entity": 4_635_922,
        "scidocs": 25_657,
        "fever": 5_416_568,
        "climate-fever": 5_416_593,
        "scifact": 5_183,
    }
    assert projection.MSMARCO_PASSAGES == 8_841_823
    assert [
        projection.corpus_size(n)
        for n in (
            "msmarco-dev",
            "dl20",
            "msmarco-passage-train",
            "msmarco-dl19-subset",
            "cqadupstack-gis",
            "scifact@sample",
        )
    ] == [8_841_823, 8_841_823, 8_841_823, None, None, 5_183]
    assert power.PRINTED == (
        ("msmarco-dev", "RR@10"),
        ("msmarco-dev", "R@50"),
        ("msmarco-dev", "R@1000"),
        ("dl19", "nDCG@10"),
        ("dl20", "nDCG@10"),
        *((b, "nDCG@10") for b in declared.beir()),
    )


def test_margin_families_come_from_the_declarations():
    from harness.evaluation import margins

    expected = {
        "msmarco-dev": "msmarco",
        "msmarco-passage-train": "msmarco",
        "msmarco-dl19-subset": "msmarco",
        "dl19": "trec-dl",
        "dl20": "trec-dl",
        "dl19@sample": "trec-dl",
        "cqadupstack-android": "beir",
        "scifact@sample": "beir",
        "beir-avg14": "beir",
        "beir-avg12": "beir",
        **{b: "beir" for b in declared.beir()},
    }
    assert {b: margins.family(b) for b in expected} == expected
    with pytest.raises(UnknownNameError, match="dl21-unknown"):
        margins.family("dl21-unknown")  # never BEIR's margin by default


def test_margins_are_those_the_families_declared():
    from harness.evaluation import margins

    assert margins.practical_margin("dl19", "nDCG@10") == margins.practical_margin("dl20", "nDCG@10")
    assert margins.practical_margin("dl19", "nDCG@10").points == 2.0
    assert margins.practical_margin("msmarco-dev", "RR@10").points == 1.0
    assert margins.practical_margin("scifact", "nDCG@10").points == 2.0


def test_conventions_and_kinds_agree_with_the_declarations():
    from harness.data.catalog import get_benchmark
    from harness.evaluation.conventions import CONVENTIONS, get_convention

    for name, decl in declared.declarations(include_user=False).items():
        if name in CONVENTIONS:
            conv = get_convention(name)
            assert conv.kind == decl.kind == get_benchmark(name).kind
            assert (conv.measures, conv.primary) == (
                declared.family(decl.kind).measures,
                declared.family(decl.kind).primary,
            )
    assert get_convention("msmarco-dev").measures[0] == "RR@10"
    assert get_convention("cqadupstack").subsets == declared.get("cqadupstack").forums


def test_a_user_declaration_may_not_reuse_a_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from harness.core.errors import DataFormatError

    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "mine.yaml").write_text(
        "benchmarks:\n  - {name: dl19, kind: trec-dl, reader: local, topics: t.tsv, qrels: q.txt}\n"
    )
    monkeypatch.setenv("HARNESS_SPECS_DIR", str(tmp_path))
    assert declared.declarations()["dl19"].folder is None  # the file is skipped, the built-in kept
    (problem,) = declared.user_problems()
    assert "mine.yaml" in str(problem) and "declared already" in str(problem)
    with pytest.raises(DataFormatError, match="declared already"):
        declared.get("mine")  # a name nothing declares may be the bad file's: its error, not "unknown"


def test_the_declared_papers_are_those_whose_tables_print_the_benchmark():
    from harness.papers.registry import load_reported_cells, paper_key

    cells, error = load_reported_cells()
    assert cells is not None, error
    printed: dict[str, set[str]] = {}
    for cell in cells:
        if cell.get("benchmark"):
            printed.setdefault(str(cell["benchmark"]), set()).add(paper_key(cell))
    assert {name: set(papers) for name, papers in declared.papers_printing().items()} == printed
    assert all(declared.get(name).in_tables for name in printed if declared.find(name))
