"""`python -m harness reported` and `python -m harness validate`."""

from __future__ import annotations

import json
import shutil

from harness.cli import main
from harness.core.paths import REPORTED_DIR


def test_reported_prints_a_methods_cells(capsys):
    assert main(["reported", "--method", "cotmae_qc", "--paper", "qc-v2"]) == 0
    out = capsys.readouterr().out
    assert "w/ query-as-context (50K) - retriever 2" in out and "40.2" in out
    assert "finetune_stage=retriever2" in out
    assert "reported cell(s) for method=cotmae_qc, paper=qc-v2" in out


def test_reported_json_is_a_list(tmp_path, capsys):
    path = tmp_path / "cells.json"
    assert main(["reported", "--method", "bm25", "--benchmark", "scifact", "--json", str(path)]) == 0
    data = json.loads(path.read_text(encoding="utf-8"))
    assert isinstance(data, list) and len(data) == 1
    item = data[0]
    assert {"paper_file", "table", "row", "column", "value"} <= set(item)
    assert (item["paper_file"], item["table"], item["row"], item["column"], item["value"]) == (
        "lexmae-iclr2023.txt",
        "Table 3",
        "SciFact",
        "BM25",
        "66.5",
    )


def test_reported_unknown_method_did_you_mean(capsys):
    assert main(["reported", "--method", "cotmae-qc"]) == 2
    err = capsys.readouterr().err
    assert "unknown method 'cotmae-qc'" in err and "Did you mean: cotmae_qc" in err
    assert "Traceback" not in err


def test_validate_reports_findings_and_exits_zero(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("harness.commands.validate._spec_problems", lambda: [])
    path = tmp_path / "validate.json"
    assert main(["validate", "--json", str(path)]) == 0
    out = capsys.readouterr().out
    assert "== qc-v2:" in out and "[bold_not_best] Table 3 [" in out
    assert out.strip().splitlines()[-2].startswith("registry: OK")  # summary line, then 'wrote'
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["ok"] is True and data["schema_problems"] == []
    assert any(f["kind"] == "version_mismatch" for f in data["inconsistencies"])


def test_validate_exits_one_on_schema_or_spec_errors(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("harness.commands.validate._spec_problems", lambda: [])
    root = tmp_path / "reported"
    shutil.copytree(REPORTED_DIR, root)
    path = root / "lexmae.yaml"
    path.write_text(path.read_text(encoding="utf-8").replace("unit: points", "unit: fraction", 1), encoding="utf-8")
    assert main(["validate", "--registry", str(root)]) == 1
    out = capsys.readouterr().out
    assert "registry schema" in out and "lexmae.yaml" in out and "outside [0, 1]" in out
    monkeypatch.setattr("harness.commands.validate._spec_problems", lambda: ["baselines/x.yaml: broken"])
    assert main(["validate"]) == 1
    assert "method specs: 1 problem(s)" in capsys.readouterr().out


def test_validate_without_spec_module(monkeypatch, capsys):
    import builtins

    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name == "harness.spec.method":
            raise ImportError("not written yet")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    assert main(["validate"]) == 0
    assert "specs: OK" in capsys.readouterr().out


def test_validate_lists_each_paper_profiles_declared_deviations(capsys, tmp_path):
    assert main(["validate", "--json", str(tmp_path / "v.json")]) == 0
    out = capsys.readouterr().out
    assert (
        "== lexmae [paper]: 1 deviation(s) from the paper" in out and "touches pretrain_corpus: BEIR (Table 3)" in out
    )
    assert (
        "== lexmae [paper]: 7 assumption(s) where the papers say nothing" in out and "0.75 x the document weight" in out
    )
    assert "== cpdae [paper]" in out and "pairwise loss with 7 static hard negatives" in out
    assert "nopretrain [paper]: " not in out.split("assumption(s)")[0]  # the control departs from no paper
    import json

    listed = json.loads((tmp_path / "v.json").read_text())
    assert listed["deviations"]["cotmae_qc"]
    # a variant lists what its method declares (merged across extends), and its own on top
    assumed = {m: {line.split(":")[0] for line in items} for m, items in listed["assumptions"].items()}
    assert assumed["cocondenser"] < assumed["cocondenser_qc"] and "qgen.max_new_tokens" in assumed["cocondenser_qc"]
    assert not any("30%" in line for line in listed["assumptions"]["cocondenser_qc"])  # it masks 15%, as coCondenser
    # the control keeps the fine-tuning assumptions of the recipe it shares and drops the pre-training ones
    assert assumed["nopretrain"] == {a for a in assumed["cotmae"] if a.startswith("finetune.")}
