"""The reported-scores registry: shapes, spot checks against the papers, schema errors."""

from __future__ import annotations

import re
import shutil
from collections import Counter
from pathlib import Path

import pytest

from harness.core.benchmarks import beir
from harness.core.errors import DataFormatError, UnknownNameError
from harness.core.paths import REPORTED_DIR
from harness.data import catalog
from harness.papers import registry, schema
from harness.spec.conditions import variant_of
from harness.spec.method import load_method

BEIR = beir()

# Tables per paper file and each table's printed grid (rows x value columns), counted by hand
# from /work/shared/papers (descriptor columns such as "Query Number" are not value columns).
EXPECTED_SHAPES = {
    "qc-v1": {"Table 1": (21, 5), "Table 2": (4, 5)},
    "qc-v2": {"Table 1": (25, 5), "Table 2": (15, 4), "Table 3": (8, 5), "Table 4": (4, 3), "Table 5": (1, 2)},
    "qc-emnlp2023-diff": {"Table 5": (1, 2)},
    "cpdae": {"Table 1": (9, 8), "Table 2": (4, 4), "Table 3": (3, 6), "Table 4": (1, 1)},
    "lexmae": {
        "Table 1": (22, 5),
        "Table 2": (7, 3),
        "Table 3": (15, 11),
        "Table 4": (16, 3),
        "Table 5": (6, 2),
        "Table 6": (5, 1),
        "Table 7": (3, 6),
        "Table 8": (1, 8),
    },
}
PAPER_FILES = {
    "qc-v1": ("qc-pretraining-v1.txt", "000_2cd8789b9e9ea8a2.txt"),
    "qc-v2": ("qc-pretraining-v2.txt", "003_83e021056142a553.txt"),
    "qc-emnlp2023-diff": ("qc-pretraining-emnlp2023-diff.txt", "004_23ac98ee310227fc.txt"),
    "cpdae": ("cpdae-cikm2022.txt", "001_c544d1b77c38c839.txt"),
    "lexmae": ("lexmae-iclr2023.txt", "002_306b0f7d79919b63.txt"),
}


def cell(paper: str, table: str, row: str, column: str) -> schema.ReportedCell:
    found = [
        c
        for c in registry.load_registry()
        if (c.paper, c.table, c.row_key, c.column_key) == (paper, table, row, column)
    ]
    assert len(found) == 1, (paper, table, row, column, len(found))
    return found[0]


def test_registry_is_schema_valid():
    assert registry.schema_problems() == []


def test_every_paper_file_has_its_tables():
    papers = {p.paper: p for p in registry.load_papers()}
    assert set(papers) == set(EXPECTED_SHAPES)
    for key, shapes in EXPECTED_SHAPES.items():
        assert len(papers[key].tables) >= 1
        assert [t.label for t in papers[key].tables] == list(shapes), key


def test_paper_metadata():
    for p in registry.load_papers():
        assert (p.paper_file, p.original_file) == PAPER_FILES[p.paper]
        assert p.title and p.authors and p.venue and p.version and p.year >= 2022
    versions = {p.paper: p.version for p in registry.load_papers()}
    assert versions["qc-v1"] != versions["qc-v2"]  # the two QC versions stay separate


def test_cell_counts_match_printed_grids():
    cells = registry.load_registry()
    counts = Counter((c.paper, c.table) for c in cells)
    for p in registry.load_papers():
        for t in p.tables:
            rows, cols = EXPECTED_SHAPES[p.paper][t.label]
            assert (len(t.row_keys), len(t.column_keys)) == (rows, cols), (p.paper, t.label)
            assert counts[(p.paper, t.label)] == rows * cols, (p.paper, t.label)
            pairs = {(c.row_key, c.column_key) for c in cells if (c.paper, c.table) == (p.paper, t.label)}
            assert len(pairs) == rows * cols


def test_cell_ids_are_unique_and_stable():
    cells = registry.load_registry()
    ids = [c.cell_id for c in cells]
    assert len(ids) == len(set(ids))
    c = cell("qc-v2", "Table 1", "w/ query-as-context (50K) - retriever 2", "MS-MARCO MRR@10")
    assert c.cell_id == "qc-v2/Table 1/w/ query-as-context (50K) - retriever 2/MS-MARCO MRR@10"


def test_spot_check_qc_v2_cotmae_qc_retriever2():
    c = cell("qc-v2", "Table 1", "w/ query-as-context (50K) - retriever 2", "MS-MARCO MRR@10")
    assert (c.value, c.bold, c.unit) == ("40.2", True, "points")
    assert c.score == pytest.approx(0.402)
    assert (c.method, c.benchmark, c.measure) == ("cotmae_qc", "msmarco-dev", "RR@10")
    assert c.conditions == {
        "pretrain_steps": "50K",
        "finetune_stage": "retriever2",
        "query_number": 5,
        "mixed": False,
        "msmarco_passages": "titled",
    }
    dagger = cell("qc-v2", "Table 1", "CoT-MAE (50K) - retriever 2 †", "MS-MARCO MRR@10")
    assert dagger.conditions["reproduction_by_authors"] is True and not dagger.bold and dagger.value == "38.8"


def test_spot_check_lexmae_bm25_beir():
    scifact = cell("lexmae", "Table 3", "SciFact", "BM25")
    assert (scifact.value, scifact.method, scifact.benchmark, scifact.measure, scifact.unit) == (
        "66.5",
        "bm25",
        "scifact",
        "nDCG@10",
        "points",
    )
    assert scifact.score == pytest.approx(0.665)
    nfcorpus = cell("lexmae", "Table 3", "NFCorpus", "BM25")
    assert (nfcorpus.value, nfcorpus.benchmark, nfcorpus.score) == ("32.5", "nfcorpus", pytest.approx(0.325))
    assert [c.value for c in registry.cells_for(method="bm25", benchmark="scifact")] == ["66.5"]
    avg = cell("lexmae", "Table 3", "AVERAGE", "LexMAE")
    assert (avg.benchmark, avg.value, avg.bold) == ("beir-avg12", "48.7", True)


def test_spot_checks_across_papers():
    fever = cell("qc-v2", "Table 2", "fever", "CoT-MAE w/")
    assert (fever.value, fever.bold, fever.unit, fever.method) == ("0.688", True, "fraction", "cotmae_qc")
    assert fever.score == pytest.approx(0.688)
    cqa = cell("qc-v2", "Table 2", "cquadupstack", "coCondenser w/")
    assert (cqa.row, cqa.benchmark) == ("cquadupstack", "cqadupstack")
    assert cell("qc-v2", "Table 2", "Average", "coCondenser w/o").benchmark == "beir-avg14"
    simlm = cell("qc-v1", "Table 1", "SimLM (Wang et al., 2022)", "MS-MARCO R@50")
    assert simlm.value == "98.6" and "R@50" in simlm.doubt
    assert cell("qc-v1", "Table 1", "RetroMAE (Liu and Shao, 2022)", "MS-MARCO MRR@10").value == "35.0"
    assert cell("qc-v2", "Table 1", "RetroMAE [Liu and Shao2022]", "MS-MARCO MRR@10").value == "39.3"
    assert cell("qc-v1", "Table 1", "w/ query-as-context (120K)", "MS-MARCO MRR@10").underline
    ance = cell("qc-v2", "Table 1", "ANCE [Xiong et al.2020]", "MS-MARCO R@50")
    assert (ance.value, ance.score, ance.method) == ("-", None, None)
    cpdae = cell("cpdae", "Table 1", "CPDAE", "MARCO Dev Passage MRR@10")
    assert (cpdae.value, cpdae.marks, cpdae.bold, cpdae.score) == ("0.355", "*†‡", True, pytest.approx(0.355))
    doc = cell("cpdae", "Table 1", "CPDAE", "MARCO Dev Doc MRR@100")
    assert (doc.benchmark, doc.measure, doc.value) == (None, "RR@100", "0.408")
    low = cell("cpdae", "Table 3", "CPDAE", "MARCO Dev Passage 0.1k")
    assert (low.value, low.benchmark, low.measure, low.conditions["finetune_queries"]) == (
        "0.708",
        "msmarco-dev",
        "R@1000",
        "0.1k",
    )
    success = cell("lexmae", "Table 2", "LexMAE", "R@50")
    assert (success.measure, success.value) == ("Success@50", "89.6")
    index = cell("lexmae", "Table 4", "BM25", "Index Size")
    assert (index.value, index.unit, index.score) == ("4.3G", "GB", None)
    assert cell("lexmae", "Table 4", "- top-32 sparsify", "MRR@10").conditions["sparsify_top_k"] == 32
    human = cell("qc-v2", "Table 5", "Correlation rate", "passage-query")
    assert (human.value, human.unit, human.score, human.number) == ("56.5%", "%", None, 56.5)
    lost = cell("qc-v2", "Table 3", "CoT-MAE / 1", "MS-MARCO Retriever-2 MRR@10")
    assert lost.value is None and lost.doubt
    qps = [c for c in registry.cells_for(method="lexmae") if c.unit == "QPS"]
    assert [c.value for c in qps] == ["45.83"]


def test_scores_are_normalised_once():
    for c in registry.load_registry():
        if c.score is None:
            assert c.measure is None or c.value in (None, "", "-"), c.cell_id
            continue
        assert 0.0 <= c.score <= 1.0, c.cell_id
        factor = {"points": 100.0, "fraction": 1.0}[c.unit]
        assert c.score * factor == pytest.approx(float(c.value)), c.cell_id


def test_names_are_harness_names():
    cells = registry.load_registry()
    methods = {c.method for c in cells} - {None}
    variants = {m for m in schema.KNOWN_METHODS if variant_of(load_method(m, "paper").config)}  # grade their parents'
    assert (
        methods == set(schema.KNOWN_METHODS) - {"nopretrain"} - variants
    )  # every other method but the control has cells
    assert {c.benchmark for c in cells} - {None} <= set(schema.BENCHMARKS)
    assert {c.benchmark for c in cells if c.benchmark} >= set(BEIR)


def test_the_benchmarks_a_cell_may_name_come_from_the_catalog():
    """The catalog's benchmarks as the papers' tables print them, then the averages, each declared once."""
    assert schema.BENCHMARKS == ("msmarco-dev", "dl19", "dl20", *BEIR, "beir-avg14", "beir-avg12")
    assert catalog.AGGREGATES["beir-avg14"].members == BEIR
    assert set(BEIR) - set(catalog.AGGREGATES["beir-avg12"].members) == {"cqadupstack", "quora"}
    assert all(catalog.get_benchmark(name).kind in ("msmarco", "trec-dl", "beir") for name in catalog.REPORTED)


def test_cells_for_filters_and_did_you_mean():
    cells = registry.cells_for(method="cocondenser_qc", benchmark="msmarco-dev", measure="RR@10", paper="qc-v1")
    assert {c.value for c in cells} == {"39.4", "39.3"}
    with pytest.raises(UnknownNameError) as err:
        registry.cells_for(method="cotmae-qc")
    assert "cotmae_qc" in err.value.suggestions
    with pytest.raises(UnknownNameError):
        registry.cells_for(paper="qc-v3")
    with pytest.raises(UnknownNameError):
        registry.cells_for(benchmark="scifacts")


def test_to_dict_round_trips_provenance():
    d = cell("lexmae", "Table 3", "SciFact", "BM25").to_dict()
    for key in (
        "cell_id",
        "paper_file",
        "paper",
        "version",
        "table",
        "row",
        "column",
        "value",
        "score",
        "unit",
        "method",
        "benchmark",
        "measure",
        "conditions",
        "bold",
        "doubt",
    ):
        assert key in d
    assert d["paper_file"] == "lexmae-iclr2023.txt"


def _doctored(tmp_path: Path, name: str, old: str, new: str) -> Path:
    root = tmp_path / "reported"
    shutil.copytree(REPORTED_DIR, root)
    path = root / name
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    return root


def test_doctored_value_count_names_file_and_key(tmp_path):
    root = _doctored(
        tmp_path,
        "qc-v2.yaml",
        'values: ["18.7", "59.2", "85.7", "51.2", "47.7"]',
        'values: ["18.7", "59.2", "85.7", "51.2"]',
    )
    with pytest.raises(DataFormatError) as err:
        registry.load_registry(root)
    msg = str(err.value)
    assert "qc-v2.yaml" in msg and "tables[0].rows[0].values" in msg and "expected 5 values" in msg
    assert err.value.line is not None
    problems = registry.schema_problems(root)
    assert len(problems) == 1 and "qc-v2.yaml" in problems[0]


def test_doctored_unquoted_number_and_unknown_condition(tmp_path):
    root = _doctored(tmp_path, "lexmae.yaml", '"66.5", "67.5"', '66.5, "67.5"')
    with pytest.raises(DataFormatError, match=r"lexmae\.yaml.*tables\[2\]\.rows\[12\]\.values\[0\].*quoted string"):
        registry.load_registry(root)
    root2 = _doctored(
        tmp_path / "b",
        "qc-v1.yaml",
        "query_number: 5, mixed: false, msmarco_passages: titled}",
        "query_numbr: 5, mixed: false, msmarco_passages: titled}",
    )
    problems = registry.schema_problems(root2)
    assert any("qc-v1.yaml" in p and "query_numbr" in p and "did you mean 'query_number'" in p for p in problems)


def test_doctored_unit_is_caught_both_ways(tmp_path):
    root = _doctored(
        tmp_path, "lexmae.yaml", "unit: points\n    systems: columns", "unit: fraction\n    systems: columns"
    )
    problems = registry.schema_problems(root)
    assert problems and all("lexmae.yaml" in p for p in problems)
    assert any(
        "tables[2].rows[0].values[0]" in p and "outside [0, 1]" in p and "check the table's unit" in p for p in problems
    )
    root2 = _doctored(
        tmp_path / "c", "qc-v2.yaml", "unit: fraction\n    systems: columns", "unit: points\n    systems: columns"
    )
    assert any("looks like a fraction" in p for p in registry.schema_problems(root2))


def test_doctored_bad_measure_and_method(tmp_path):
    root = _doctored(tmp_path, "cpdae.yaml", "measure: RR@100}", "measure: MRR@100}")
    assert any("MRR@100" in p and "ir-measures" in p for p in registry.schema_problems(root))
    root2 = _doctored(tmp_path / "d", "cpdae.yaml", "method: cpdae\n        values:", "method: cpdea\n        values:")
    assert any(
        "unknown harness method 'cpdea'" in p and "did you mean 'cpdae'" in p for p in registry.schema_problems(root2)
    )


def test_runtime_never_reads_shared_papers():
    harness_dir = Path(registry.__file__).parent.parent
    for path in [
        *sorted((harness_dir / "papers").glob("*.py")),
        harness_dir / "commands/reported.py",
        harness_dir / "commands/validate.py",
    ]:
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"/work/shared|shared/papers", text), path
