"""The papers' internal inconsistencies are found (and doctored cells change the findings)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from harness.papers import consistency, registry, text_claims


@pytest.fixture(scope="module")
def cells():
    return registry.load_registry()


@pytest.fixture(scope="module")
def findings(cells):
    return consistency.check_papers(cells)


def _find(findings, kind, *needles, paper=None):
    return [
        f
        for f in findings
        if f.kind == kind and (paper is None or f.paper == paper) and all(n in f.message for n in needles)
    ]


def _replace(cells, cell_id, **changes):
    out, hit = [], False
    for c in cells:
        if c.cell_id == cell_id:
            c, hit = dataclasses.replace(c, **changes), True
        out.append(c)
    assert hit, cell_id
    return out


def test_schema_check_is_clean():
    assert registry.schema_problems() == []


def test_readme_v1_v2_baseline_disagreements(findings):
    retro = _find(findings, "version_mismatch", "RetroMAE", "35.0", "39.3")
    assert retro and "qc-v1/Table 1/RetroMAE (Liu and Shao, 2022)/MS-MARCO MRR@10" in retro[0].cells
    costa = _find(findings, "version_mismatch", "COSTA", "67.8", "66.5")
    condenser = _find(findings, "version_mismatch", "Condenser (Gao and Callan, 2021a)", "TREC DL 20", "66.5")
    assert costa and condenser
    assert "is qc-v1's value for Condenser" in costa[0].message  # the swap is spelled out
    assert _find(findings, "version_rows", "NPRINC")


def test_readme_bold_examples(findings):
    t3 = _find(findings, "bold_not_best", "37.4", "coCondenser / 5", "37.7", paper="qc-v2")
    assert t3 and t3[0].table == "Table 3"
    fever = _find(findings, "bold_not_best", "fever", "0.688", "0.707", paper="qc-v2")
    assert fever and fever[0].table == "Table 2"
    assert _find(findings, "best_not_bold", "fiqa", "coCondenser w/", paper="qc-v2")
    assert _find(findings, "bold_not_best", "Climate-FEVER", "23.5", "23.7", paper="lexmae")
    assert _find(findings, "bold_tie", "98.3", "SimLM", paper="lexmae")


def test_readme_simlm_doubt(findings):
    doubt = _find(findings, "extraction_doubt", "SimLM", "R@50", paper="qc-v1")
    assert doubt and "qc-v1/Table 1/SimLM (Wang et al., 2022)/MS-MARCO R@50" in doubt[0].cells
    assert _find(findings, "version_mismatch", "SimLM", "R@50", "98.6")


def test_beir_averages_consistent_then_doctored(cells, findings):
    assert not _find(findings, "beir_average")
    avg = "qc-v2/Table 2/Average/coCondenser w/o"
    doctored = consistency.check_papers(_replace(cells, avg, value="0.451", score=0.451))
    found = _find(doctored, "beir_average", "0.451", "0.4406")
    assert found and avg in found[0].cells
    lex = "lexmae/Table 3/AVERAGE/ANCE"
    doctored = consistency.check_papers(_replace(cells, lex, value="38.9", score=0.389))
    assert _find(doctored, "beir_average", "AVERAGE / ANCE", "37.66")


def test_best_on_counts(findings):
    assert _find(findings, "derived_count", "SPLADE", "printed 1", "0 of the 12")
    assert _find(findings, "derived_count", "Contriever", "printed 1", "2 of the 12")
    assert not _find(findings, "derived_count", "LexMAE")


def test_improves_on_n_datasets_claims(cells):
    results = {(r.paper, r.claim_id): r for r in text_claims.evaluate_claims(cells)}
    assert results[("qc-v2", "beir-cocondenser-9")].status == "ok"
    assert results[("qc-v2", "beir-cocondenser-9")].found == 9
    assert results[("qc-v2", "beir-cotmae-13")].found == 13
    assert results[("qc-emnlp2023-diff", "beir-cotmae-13")].status == "ok"  # checked on v2's table
    assert results[("lexmae", "beir-best-on-7")].found == 7
    assert results[("qc-v2", "annotation-passage-query")].status == "mismatch"  # 56.6% in text, 56.5% in table
    assert results[("qc-v2", "qn-cocondenser-1-to-5-r1")].status == "mismatch"
    assert results[("cpdae", "seed-best-baseline")].found == 7
    # flipping one dataset changes the recount
    doctored = _replace(cells, "qc-v2/Table 2/fiqa/coCondenser w/", value="0.300", score=0.3)
    found = _find(consistency.check_papers(doctored), "claim_mismatch", "beir-cocondenser-9", "found 8")
    assert found and "fiqa" in found[0].message


def test_within_paper_duplicates_agree_until_doctored(cells, findings):
    assert not [f for f in findings if f.kind == "within_paper_mismatch"]
    doctored = _replace(
        cells, "qc-v2/Table 4/coCondenser / mixed ✗/MS-MARCO Retriever-1 MRR@10", value="37.5", score=0.375
    )
    found = _find(consistency.check_papers(doctored), "within_paper_mismatch", "cocondenser_qc")
    assert found and any("Table 1" in f.message and "Table 4" in f.message for f in found)


def test_cross_paper_bm25(findings):
    bm25 = _find(findings, "cross_paper_mismatch", "bm25", "RR@10")
    assert bm25 and "18.5" in bm25[0].message and "18.7" in bm25[0].message
    # a sentence in points (what validate and the leaderboard's Registry tab print), no raw tuple or dict
    message = next(f.message for f in bm25 if "cpdae" in f.message)
    assert message.startswith("bm25 on msmarco-dev RR@10 differs between papers (in points)")
    assert "18.7 (printed 0.187)" in message and "{}" not in message and "('" not in message


def test_emnlp_diff_differences_and_doubts(findings):
    assert _find(findings, "version_text_difference", "As shown in the table", paper="qc-emnlp2023-diff")
    assert _find(findings, "extraction_doubt", "[ILLEGIBLE]", paper="qc-emnlp2023-diff")


def test_underline_and_ties_in_v1(findings):
    ties = _find(findings, "underline_tie", paper="qc-v1")
    assert any("39.4" in f.message for f in ties)


def test_findings_serialise(findings):
    json.dumps([f.to_dict() for f in findings])
    assert all(f.paper in {"qc-v1", "qc-v2", "qc-emnlp2023-diff", "cpdae", "lexmae"} for f in findings)
