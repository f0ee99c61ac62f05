"""Points everywhere a person reads a number: the paper's cell in points at its printed precision with
the printed fraction beside it, the run's closing table and last line, `check`'s rows (a stage
column, no delta where not comparable, "-" for missing, losses apart) and MLflow's metrics."""

from __future__ import annotations

from pathlib import Path

from harness.core.points import fmt, points_decimals, printed_as_fraction, reported_text
from harness.core.statuses import FAIL, NOT_COMPARABLE, PASS
from harness.core.text_table import output_width
from harness.evaluation.compare import compare, format_comparison_table
from harness.gate.grading import LOSS, GateRow
from harness.gate.run import GateResult, format_gate
from harness.records.parent_run import parent_metrics
from harness.records.run_record import RunRecord
from harness.run.runner import summary_line


def test_a_printed_fraction_reads_in_points_with_the_printed_value() -> None:
    assert printed_as_fraction("0.340", 34.0) and not printed_as_fraction("31.9", 31.9)
    assert reported_text(34.0, "0.340") == "34.0 (printed 0.340)"
    assert reported_text(31.9, "31.9") == "31.9" and reported_text(66.47, "66.47") == "66.47"
    assert points_decimals("0.3865", 38.65) == 2 and points_decimals("38", 38.0) == 0
    assert reported_text(None, "n/a") == "n/a" and reported_text(None, None) == "-"
    assert fmt(None) == "-" and fmt(float("nan")) == "-" and fmt(1.234, 1, True) == "+1.2"
    assert fmt(-0.03, 1, True) == "+0.0"


def _cell(value: str, score: float, stage: str | None = None) -> dict:
    conditions = {"finetune_stage": stage} if stage else {}
    return {
        "cell_id": f"c-{value}",
        "paper_file": "p.txt",
        "version": "v2",
        "table": "Table 2",
        "row": "QC",
        "column": "NFCorpus",
        "method": "cotmae_qc",
        "benchmark": "nfcorpus",
        "measure": "nDCG@10",
        "value": value,
        "score": score,
        "conditions": conditions,
    }


def test_closing_table_prints_points_a_stage_and_no_delta_when_not_comparable() -> None:
    comps = compare(
        {"nfcorpus": {"nDCG@10": 0.0080}}, None, [_cell("0.340", 0.34)], {"profile": "tiny", "method": "cotmae_qc"}
    )
    comps[0].finetune_stage = "retriever2"
    with output_width(None):  # one line per row (by default a table wider than the screen wraps)
        text = format_comparison_table(comps)
    header, row = text.splitlines()[0], text.splitlines()[2]
    assert "stage" in header.split() and "delta" in header.split()
    assert NOT_COMPARABLE in row and "retriever2" in row
    assert "34.0 (printed 0.340)" in row and " 0.8 " in row  # the run at the paper's precision, in points
    assert "-33" not in row and "0.340 " not in row.replace("(printed 0.340)", "")


def test_last_line_says_points_and_the_final_stage() -> None:
    record = {
        "run_id": "x",
        "method": "cotmae_qc",
        "profile": "tiny",
        "finetune_stage": "retriever2",
        "seconds": 1.0,
        "metrics": {"nfcorpus": {"nDCG@10": 0.0098}},
        "comparison": [
            {"benchmark": "nfcorpus", "measure": "nDCG@10", "status": "PASS", "finetune_stage": "retriever1"},
            {"benchmark": "nfcorpus", "measure": "nDCG@10", "status": NOT_COMPARABLE, "finetune_stage": "retriever2"},
        ],
        "mlflow": {},
    }
    line = summary_line(RunRecord.from_json(record), Path("runs/local/x.json"))
    assert "retriever2: nfcorpus nDCG@10 1.0 points (NOT-COMPARABLE)" in line and "runs/local/x.json" in line


def test_check_rows_in_points_with_stage_and_losses_apart(tmp_path: Path) -> None:
    rows = [
        GateRow(
            NOT_COMPARABLE,
            "r",
            "cotmae_qc",
            "tiny",
            "nfcorpus",
            "nDCG@10",
            expected=34.0,
            reproduced=0.8,
            delta=-33.2,
            printed="0.340",
            stage="retriever2",
            note="run profile is 'tiny'",
        ),
        GateRow(
            PASS,
            "r",
            "cotmae_qc",
            "tiny",
            "scifact",
            "R@100",
            expected=4.73,
            reproduced=4.70,
            delta=-0.03,
            tolerance=0.5,
            stage="retriever2",
        ),
        GateRow(
            FAIL,
            "r",
            "cotmae_qc",
            "tiny",
            "pretrain (loss)",
            "loss_last10",
            expected=7.1234,
            reproduced=7.5,
            delta=5.29,
            tolerance=2.0,
            unit=LOSS,
        ),
        GateRow(PASS, "r", "cotmae_qc", "tiny", "scifact", "R@1000", expected=None, reproduced=None),
    ]
    with output_width(None):  # one line per row, as `check --wide` prints it
        lines = format_gate(GateResult(tmp_path, rows, [])).splitlines()
    assert lines[0].split()[:5] == ["status", "run", "benchmark", "stage", "measure"]
    assert "34.0 (printed 0.340)" in lines[2] and "-33.2" not in lines[2] and "retriever2" in lines[2]
    assert "4.73" in lines[3] and "-0.03" in lines[3]
    assert "7.123" in lines[4] and "+5.29%" in lines[4] and " 2%" in lines[4]
    assert "None" not in "\n".join(lines) and " - " in lines[5]


def test_mlflow_metrics_are_points() -> None:
    # at 2 decimals, the finest a paper prints (MLflow shows a metric as stored: 100 * 0.319 = 31.900000000000002)
    assert parent_metrics({"nfcorpus": {"nDCG@10": 0.009834886865859713, "R@100": 0.319}}) == {
        "NFCorpus/nDCG at 10": 0.98,
        "NFCorpus/R at 100": 31.9,
    }


def test_progress_lines_count_every_stage(capsys) -> None:
    from harness.corpus.qgen import sample_text
    from harness.pipelines.context import StageLog

    log = StageLog(total=3)
    log.announce("tokenizer", "cached (/c)")
    log.announce("pretrain", "running")
    log.announce("evaluate/retriever1/scifact", "scoring")
    assert capsys.readouterr().out.splitlines() == [
        "[1/3] stage tokenizer: cached (/c)",
        "[2/3] stage pretrain: running",
        "[3/3] stage evaluate/retriever1/scifact: scoring",
    ]
    text = sample_text({"pid": "7", "passage": "Cells  divide\nfast", "queries": ["cell division", "mitosis"]})
    assert text == 'passage 7 "Cells divide fast" -> cell division | mitosis'
    assert sample_text({"pid": "8", "queries": []}) == "passage 8 -> (none)"
