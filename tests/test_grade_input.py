"""`grade` refuses what it cannot read (issue 54, item 6): fractions where points belong, a benchmark
or measure the papers do not print (with did-you-mean), a seed listed twice, an unknown key, a value
that is not a finite number; each is one line naming the file and the entry, exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import main
from harness.core.errors import DataFormatError
from harness.gate.own_numbers import load_own_numbers


def grade_file(tmp_path: Path, text: str | dict) -> Path:
    path = tmp_path / "mine.json"
    path.write_text(text if isinstance(text, str) else json.dumps(text), encoding="utf-8")
    return path


def entry(metrics: dict | None = None, **extra) -> dict:
    return {
        "runs": [
            {
                "method": "cotmae_qc",
                "profile": "paper",
                "stage": "retriever2",
                "metrics": metrics or {"msmarco-dev": {"MRR@10": 38.2, "R@1000": 98.5}},
                **extra,
            }
        ]
    }


def refused(tmp_path: Path, capsys, text: str | dict) -> str:
    """The CLI's one error line for the file (exit 2, nothing graded)."""
    path = grade_file(tmp_path, text)
    assert main(["grade", "--metrics", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1 and captured.err.startswith(f"error: {path}: "), captured.err
    assert "cells" not in captured.out
    return captured.err


def test_points_are_graded(tmp_path, capsys):
    assert main(["grade", "--metrics", str(grade_file(tmp_path, entry()))]) == 0
    assert "cells" in capsys.readouterr().out


@pytest.mark.parametrize(
    "metrics",
    [
        {"msmarco-dev": {"MRR@10": 0.382, "R@1000": 0.985}},
        {"msmarco-dev": {"MRR@10": [0.38, 0.386]}},
        {"dl19": {"nDCG@10": 0.7}},
    ],
)
def test_fractions_where_points_belong_are_refused_with_the_fix(tmp_path, capsys, metrics):
    err = refused(tmp_path, capsys, entry(metrics))
    assert "runs[0]: every value is at most 1" in err and "fractions, not points" in err
    assert "multiply each value by 100" in err


def test_one_small_value_among_points_is_not_taken_for_fractions(tmp_path):
    (run,) = load_own_numbers(grade_file(tmp_path, entry({"msmarco-dev": {"MRR@10": 0.5, "R@1000": 98.5}})))
    assert run.metrics["msmarco-dev"]["RR@10"] == 0.5


def test_a_misspelt_benchmark_gets_did_you_mean(tmp_path, capsys):
    err = refused(tmp_path, capsys, entry({"msmarco-dv": {"MRR@10": 38.2}}))
    assert "unknown benchmark 'msmarco-dv'" in err and "Did you mean: msmarco-dev" in err


@pytest.mark.parametrize(
    "bench, measure, suggestion",
    [
        ("msmarco-dev", "MRR@1O", "RR@10"),
        ("msmarco-dev", "mrr@10", "RR@10"),
        ("dl19", "R@1000", "R(rel=2)@1000"),  # the papers print DL's recall at grade >= 2
    ],
)
def test_a_measure_the_papers_do_not_print_there_gets_did_you_mean(tmp_path, capsys, bench, measure, suggestion):
    err = refused(tmp_path, capsys, entry({bench: {measure: 40.0}}))
    assert f"unknown measure on {bench} '{measure}'" in err and f"Did you mean: {suggestion}" in err


def test_a_measure_spelt_as_its_alias_is_read(tmp_path):
    (run,) = load_own_numbers(grade_file(tmp_path, entry({"msmarco-dev": {"MRR@10": 38.2}})))
    assert run.metrics == {"msmarco-dev": {"RR@10": 38.2}}


@pytest.mark.parametrize("seeds", [[42, 42], [42, 43, 42]])
def test_a_seed_listed_twice_is_refused(tmp_path, capsys, seeds):
    values = [38.0 + i / 10 for i in range(len(seeds))]
    err = refused(tmp_path, capsys, entry({"msmarco-dev": {"MRR@10": values}}, seeds=seeds))
    assert "runs[0].seeds: 42 given more than once" in err


def test_seeds_are_integers(tmp_path, capsys):
    assert "seeds must be a list of integers" in refused(tmp_path, capsys, entry(seeds=["42"]))


def test_an_extra_key_is_named_as_such(tmp_path, capsys):
    err = refused(tmp_path, capsys, entry(seed=[42]))
    assert "runs[0]: unknown key 'seed'" in err and "Did you mean: seeds" in err
    assert "needs method and metrics" not in err


def test_an_extra_key_at_the_top_is_named_too(tmp_path, capsys):
    assert "unknown key 'note'" in refused(tmp_path, capsys, {**entry(), "note": "from the official code"})


@pytest.mark.parametrize("value", ["Infinity", "-Infinity", "NaN", '"inf"', '"nan"'])
def test_inf_and_nan_are_not_finite_numbers(tmp_path, capsys, value):
    text = json.dumps(entry({"msmarco-dev": {"MRR@10": "VALUE"}})).replace('"VALUE"', value)
    err = refused(tmp_path, capsys, text)
    assert "runs[0].metrics.msmarco-dev.MRR@10" in err and "not a finite number" in err
    assert "non-numeric" not in err and "not a number or" not in err


def test_a_number_written_as_text_says_so(tmp_path, capsys):
    err = refused(tmp_path, capsys, entry({"msmarco-dev": {"MRR@10": "38.2"}}))
    assert "'38.2' is text, not a number" in err


def test_the_problem_is_a_data_format_error_naming_the_file(tmp_path):
    path = grade_file(tmp_path, entry({"msmarco-dev": {"MRR@10": 0.382}}))
    with pytest.raises(DataFormatError) as exc:
        load_own_numbers(path)
    assert exc.value.path == str(path) and exc.value.fix and "100" in exc.value.fix
