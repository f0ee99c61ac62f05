"""The sbert MS MARCO hard-negatives reader (harness/data/hard_negatives.py) on a fixture in both published forms."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from harness.core.errors import DataFormatError
from harness.data.hard_negatives import (
    Scored,
    iter_hard_negatives,
    read_negative_pools,
    select_negatives,
)

FIXTURE = Path(__file__).parent / "fixtures" / "hard_negatives" / "msmarco-hard-negatives.jsonl.gz"


def _write(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "msmarco-hard-negatives.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        fh.write("".join(line + "\n" for line in lines))
    return path


def test_reads_both_forms_in_file_order():
    lines = list(iter_hard_negatives(FIXTURE))
    assert [line.qid for line in lines] == ["1", "2", "3", "4"]
    first = lines[0]
    assert first.positives == (Scored("10", 9.0),)
    assert [system for system, _ in first.negatives] == ["bm25", "msmarco-distilbert-base-tas-b"]
    assert first.negatives[0][1][0] == Scored("11", 8.5)
    # the Hub's form: bare pids, no cross-encoder score
    assert lines[2].positives == (Scored("30"),) and lines[2].negatives[1] == (
        "msmarco-MiniLM-L-6-v3",
        (Scored("32"), Scored("33")),
    )


def test_selection_drops_likely_false_negatives_and_caps_each_system():
    first = next(iter_hard_negatives(FIXTURE))
    # threshold 9.0 - 3 = 6.0: 11 (8.5) and 16 (6.1) are dropped, 10 is the positive, 12 is taken once
    assert select_negatives(first) == ["12", "13", "14", "15"]
    assert select_negatives(first, per_system=2) == ["12", "13", "15"]
    assert select_negatives(first, judged=["13"], per_system=2) == ["12", "14", "15"]
    assert select_negatives(first, margin=100.0) == []  # everything scored above 9 - 100


def test_pools_keep_judged_queries_with_a_negative():
    qrels = {"1": {"10": 1}, "2": {"20": 1, "21": 1}, "3": {"30": 1}, "4": {"40": 1}}
    read = read_negative_pools(FIXTURE, qrels)
    # query 2: threshold min(4, 7) - 3 = 1.0 keeps 22 (0.9), not 23 (1.1); query 4 keeps none
    assert read.pools == {"1": ["12", "13", "14", "15"], "2": ["22"], "3": ["31", "32", "33"]}
    assert (read.lines, read.unjudged, read.denoised) == (4, 0, True)
    only = read_negative_pools(FIXTURE, {"3": {"30": 1}})
    assert only.pools == {"3": ["31", "32", "33"]} and only.unjudged == 3


@pytest.mark.parametrize(
    "bad, says",
    [
        ('{"qid": 5, "pos": [50]}', "missing neg"),
        ('{"qid": 5, "pos": 50, "neg": {}}', "pos must be a list"),
        ('{"qid": 5, "pos": [50], "neg": {"bm25": [{"ce-score": 1.0}]}}', "neither a pid"),
        ('{"qid": 5, "pos": [{"pid": 50, "ce-score": "high"}], "neg": {}}', "no number"),
        ("qid 5 pos 50", "Expecting value"),
    ],
)
def test_a_malformed_line_names_the_file_and_the_line(tmp_path, bad, says):
    path = _write(tmp_path, '{"qid": 1, "pos": [10], "neg": {"bm25": [11]}}', bad)
    with pytest.raises(DataFormatError) as err:
        list(iter_hard_negatives(path))
    assert err.value.path == str(path) and err.value.line == 2
    assert says in str(err.value) and f"{path}:2" in str(err.value)
