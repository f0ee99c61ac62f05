"""A run is checked against the committed reference of its own precision (issue 63, item 3): the
manifest's "<method>/<profile>/<precision>" entry, chosen by the gate (References.for_record), filed by
``check --accept``, and named in the run's closing lines; every surface labels a run's precision.

Records here are copies of the committed cotmae_qc tiny reference, their stages re-labelled bf16 where
a test needs a bf16 run and re-sealed: the numbers are the reference's, so a compared run passes and a
refused one is refused for its precision alone."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from harness.core.errors import HarnessError
from harness.core.paths import PROJECT_ROOT
from harness.core.statuses import NOT_COMPARABLE, PASS, REFERENCE, WRONG_REFERENCE
from harness.gate.closing_check import check_run, closing_line
from harness.gate.grading import POINTS
from harness.gate.references import accept_reference
from harness.gate.run import run_gate
from harness.records.integrity import seal
from harness.records.parent_run import parent_tags
from harness.records.run_precision import TRAINING_STAGES, precision_label
from harness.records.run_record import RunRecord
from harness.records.store import REFERENCES_FILE, load_record, load_references, read_references
from harness.run.runner import summary_line

RECORDS = PROJECT_ROOT / "runs" / "records"
FP32_REF = load_references(RECORDS)[("cotmae_qc", "tiny")]["run_id"]


def _copy(folder: Path, run_id: str, precision: str, created: str) -> dict[str, Any]:
    """A sealed copy of the fp32 tiny reference as run ``run_id``, trained (by its stages' word) in ``precision``."""
    data = json.loads((RECORDS / f"{FP32_REF}.json").read_text())
    data.update(run_id=run_id, created=created)
    for entry in data["stages"]:
        if isinstance(entry.get("output"), dict) and entry["output"].get("precision"):
            entry["output"].update(precision=precision, precision_source="flag")
    sealed = seal(data)
    (folder / f"{run_id}.json").write_text(json.dumps(sealed))
    return sealed


def _manifest(folder: Path, **keys: str) -> None:
    """references.json naming each key's run (its sealed sha256 read from the copy)."""
    refs = {}
    for key, run_id in keys.items():
        sha = json.loads((folder / f"{run_id}.json").read_text())["integrity"]["sha256"]
        refs[key.replace("__", "/")] = {"run_id": run_id, "sha256": sha, "accepted": "2026-12-02T00:00:00Z"}
    (folder / REFERENCES_FILE).write_text(json.dumps({"references": refs}))


BF16_REF = "cotmae_qc__tiny__20261201T000000-bf16aa"
BF16_RUN = "cotmae_qc__tiny__20261202T000000-bf16bb"
FP32_RUN = "cotmae_qc__tiny__20261202T000001-fp32cc"


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """The fp32 reference, a bf16 reference and a newer run in each precision."""
    shutil.copy(RECORDS / f"{FP32_REF}.json", tmp_path / f"{FP32_REF}.json")
    _copy(tmp_path, BF16_REF, "bf16", "2026-12-01T00:00:00Z")
    _copy(tmp_path, BF16_RUN, "bf16", "2026-12-02T00:00:00Z")
    _copy(tmp_path, FP32_RUN, "fp32", "2026-12-02T00:00:01Z")
    return tmp_path


def _record(folder: Path, run_id: str) -> RunRecord:
    rec = load_record(folder / f"{run_id}.json")
    assert isinstance(rec, RunRecord), rec
    return rec


def _rows(folder: Path, run_id: str) -> list[Any]:
    return [r for r in run_gate(folder, cross_machine=None).rows if r.run_id == run_id and r.method == "cotmae_qc"]


def test_each_run_is_gated_against_the_reference_of_its_precision(folder: Path) -> None:
    _manifest(folder, cotmae_qc__tiny=FP32_REF, cotmae_qc__tiny__bf16=BF16_REF)
    bf16, fp32 = _rows(folder, BF16_RUN), _rows(folder, FP32_RUN)
    assert bf16 and {r.status for r in bf16} == {PASS} and {r.against for r in bf16} == {f"reference {BF16_REF} (bf16)"}
    assert fp32 and {r.status for r in fp32} == {PASS} and {r.against for r in fp32} == {f"reference {FP32_REF} (fp32)"}
    assert [r.status for r in _rows(folder, BF16_REF)] == [REFERENCE]


def test_without_a_reference_of_its_precision_a_run_is_not_compared(folder: Path) -> None:
    _manifest(folder, cotmae_qc__tiny=FP32_REF)
    rows = [r for r in _rows(folder, BF16_RUN) if r.unit == POINTS]  # its losses are still compared
    assert [r.status for r in rows] == [NOT_COMPARABLE] and "another precision" in rows[0].note


def test_a_precision_key_naming_a_record_of_another_precision_is_wrong(folder: Path) -> None:
    _manifest(folder, cotmae_qc__tiny=FP32_REF, cotmae_qc__tiny__bf16=FP32_RUN)
    wrong = [r for r in run_gate(folder).rows if r.status == WRONG_REFERENCE]
    assert len(wrong) == 1 and "'cotmae_qc/tiny/bf16'" in wrong[0].note and "fp32" in wrong[0].note


def test_accept_files_a_run_under_its_precision(folder: Path) -> None:
    _manifest(folder, cotmae_qc__tiny=FP32_REF)
    accept_reference(BF16_REF, folder)
    refs = read_references(folder)["references"]
    assert refs["cotmae_qc/tiny"]["run_id"] == FP32_REF and refs["cotmae_qc/tiny/bf16"]["run_id"] == BF16_REF
    accept_reference(FP32_RUN, folder)  # the same precision as the reference: it replaces it
    refs = read_references(folder)["references"]
    assert refs["cotmae_qc/tiny"]["run_id"] == FP32_RUN and refs["cotmae_qc/tiny/bf16"]["run_id"] == BF16_REF


def test_a_precision_key_must_name_a_precision(folder: Path) -> None:
    _manifest(folder, cotmae_qc__tiny__fp64=FP32_REF)
    with pytest.raises(HarnessError, match="<method>/<profile>/<fp32|bf16>"):
        read_references(folder)


@pytest.mark.parametrize("forced", ["bf16", "fp32"])
def test_the_closing_line_names_the_reference_of_the_runs_precision(folder: Path, forced: str) -> None:
    """`run --precision bf16` and `--precision fp32`: each run's last line names the reference it was checked
    against, of its own precision, and its verdict."""
    _manifest(folder, cotmae_qc__tiny=FP32_REF, cotmae_qc__tiny__bf16=BF16_REF)
    run = load_record(folder / f"{BF16_RUN if forced == 'bf16' else FP32_RUN}.json")
    assert isinstance(run, RunRecord)
    ref = BF16_REF if forced == "bf16" else FP32_REF
    line = closing_line(check_run(run, folder))
    assert line.startswith(f"checked against the committed {forced} tiny reference ") and f"{ref}.json: PASS" in line


def test_the_closing_line_says_when_no_reference_of_its_precision_exists(folder: Path) -> None:
    _manifest(folder, cotmae_qc__tiny=FP32_REF)
    run = load_record(folder / f"{BF16_RUN}.json")
    assert isinstance(run, RunRecord)
    line = closing_line(check_run(run, folder))
    assert line.startswith("not checked: no committed cotmae_qc [tiny] reference in bf16")
    assert "the committed fp32 one, " in line and f"{FP32_REF}.json" in line


def test_a_run_of_another_seed_is_not_checked_against_seed_42(folder: Path) -> None:
    _manifest(folder, cotmae_qc__tiny=FP32_REF, cotmae_qc__tiny__bf16=BF16_REF)
    run = load_record(folder / f"{BF16_RUN}.json")
    assert isinstance(run, RunRecord)
    assert "seed 43" in closing_line(check_run(run.replace(seed=43), folder))


def test_the_run_summary_and_mlflow_parent_label_the_precision(folder: Path) -> None:
    run = load_record(folder / f"{BF16_RUN}.json")
    assert isinstance(run, RunRecord)
    assert f"cotmae_qc [tiny, bf16] {run.finetune_stage}: " in summary_line(run, Path("x.json"))
    assert parent_tags(run)["precision"] == "bf16" == precision_label(run.stages)
    assert precision_label([]) == "-" and "cotmae_qc [tiny] " in summary_line(run.replace(stages=[]), Path("x.json"))


def test_the_leaderboard_and_the_report_label_each_run_with_its_precision(folder: Path) -> None:
    """The runs table (data layer), a run's own row in the papers' table, the report's records table and
    check's rows ("against ... (bf16)") all carry the precision."""
    from harness.present.report_html import records_html
    from leaderboard_app import tables

    _manifest(folder, cotmae_qc__tiny=FP32_REF, cotmae_qc__tiny__bf16=BF16_REF)
    fp32, bf16 = _record(folder, FP32_REF), _record(folder, BF16_RUN)
    frame = tables.runs_frame([fp32, bf16], {FP32_REF, BF16_REF}).set_index("run_id")
    assert frame.loc[BF16_RUN, "precision"] == "bf16" and frame.loc[FP32_REF, "precision"] == "fp32"
    assert tables.profile_status(bf16) == "profile tiny, bf16" and tables.profile_status(bf16.replace(stages=[])) == (
        "profile tiny"
    )
    html = records_html([fp32, bf16])
    assert "<th>profile</th><th>precision</th>" in html
    assert "<td>bf16</td>" in html and "<td>fp32</td>" in html
    assert f"reference {BF16_REF} (bf16)" in {r.against for r in _rows(folder, BF16_RUN)}


def test_the_leaderboard_counts_a_second_reference_as_a_reference(folder: Path) -> None:
    from leaderboard_app.data import load

    _manifest(folder, cotmae_qc__tiny=FP32_REF, cotmae_qc__tiny__bf16=BF16_REF)
    assert {FP32_REF, BF16_REF} <= load(folder, with_gate=False).references


def test_effects_and_learned_rows_compare_runs_of_one_precision(folder: Path) -> None:
    """A newer bf16 run beside fp32 runs is not what an effect pairs with the fp32 control (latest_by_method)."""
    from harness.evaluation.effects import latest_by_method

    fp32, bf16, newer = (_record(folder, r) for r in (FP32_REF, BF16_REF, FP32_RUN))
    assert latest_by_method([fp32, bf16], "tiny")["cotmae_qc"] is fp32
    assert latest_by_method([fp32, bf16, newer], "tiny")["cotmae_qc"] is newer
    assert latest_by_method([bf16], "tiny")["cotmae_qc"] is bf16


def test_the_main_job_in_bf16_on_a_fresh_clone_says_what_it_was_checked_against(tmp_path: Path, monkeypatch) -> None:
    """The committed records: a bf16 mini run of cotmae_qc (its fp32 reference re-labelled) is checked against
    the committed bf16 mini reference where references.json names one, else its last line says none exists;
    an fp32 one is checked against the fp32 reference. Each line fits 120 columns (wrapped)."""
    from harness.core.text_table import wrap_text
    from harness.run.runner import LINE_WIDTH, reference_line

    monkeypatch.chdir(PROJECT_ROOT)  # paths printed relative to the checkout
    refs = read_references(RECORDS)["references"]
    fp32_id = refs["cotmae_qc/mini"]["run_id"]
    data = json.loads((RECORDS / f"{fp32_id}.json").read_text())
    for entry in data["stages"]:  # a record made before stages stated their precision trained in fp32
        if entry.get("stage") in TRAINING_STAGES and isinstance(entry.get("output"), dict):
            entry["output"].update(precision="bf16", precision_source="measured")
    data.update(run_id="cotmae_qc__mini__20261202T000000-bf16dd", created="2026-12-02T00:00:00Z")
    bf16 = RunRecord.from_json(seal(data), tmp_path / "x.json")
    line = reference_line(bf16, RECORDS)
    if "cotmae_qc/mini/bf16" in refs:
        assert line.startswith("checked against the committed bf16 mini reference runs/records/"), line
    else:
        assert line.startswith("not checked: no committed cotmae_qc [mini] reference in bf16"), line
        assert f"runs/records/{fp32_id}.json" in line
    fp32 = _record(RECORDS, fp32_id).replace(run_id="cotmae_qc__mini__20261202T000001-fp32ee")
    assert reference_line(fp32, RECORDS).startswith(
        f"checked against the committed fp32 mini reference runs/records/{fp32_id}"
    )
    assert all(len(x) <= LINE_WIDTH for x in wrap_text(line, LINE_WIDTH, "  ").splitlines())


def _respec(folder: Path, run_id: str, steps: int) -> None:
    """Give the copy ``run_id`` other pretrain steps than the current spec's (a spec change), re-sealed."""
    data = json.loads((folder / f"{run_id}.json").read_text())
    data["spec"]["pretrain"]["steps"] = steps
    data.pop("integrity", None)
    (folder / f"{run_id}.json").write_text(json.dumps(seal(data)))


def test_the_glance_sets_a_run_apart_by_the_reference_of_its_precision(folder: Path) -> None:
    """Issue 63 item 4: a bf16 run of the spec its bf16 reference ran is not SPEC-CHANGED, though the
    (method, profile)'s fp32 reference ran the current spec (set_apart reads what the gate grades against)."""
    from harness.core.statuses import SPEC_CHANGED
    from harness.gate.admission import set_apart
    from harness.gate.references import committed_references
    from harness.present import overview
    from leaderboard_app.data import load

    for run_id in (BF16_REF, BF16_RUN):
        _respec(folder, run_id, 401)
    _manifest(folder, cotmae_qc__tiny=FP32_REF, cotmae_qc__tiny__bf16=BF16_REF)
    refs = committed_references("cotmae_qc", "tiny", folder)
    run = _record(folder, BF16_RUN)
    assert set_apart(run, refs.for_record) is None
    assert set_apart(run, lambda r: refs.of(r.method, r.profile))[0] == SPEC_CHANGED  # the old rule's answer
    (folder / f"{FP32_RUN}.json").unlink()  # the glance's learned rows: the newest run of the shared precision
    (folder / f"{FP32_REF}.json").unlink()  # (fp32 on a tie), so only bf16 runs are left to be shown
    assert {r.run_id for r in overview.from_folder(folder).learned} == {BF16_RUN}
    assert not load(folder, with_gate=False).apart  # the leaderboard sets apart by the same rule


def test_a_rerun_measures_its_precision_where_both_have_a_reference(folder: Path) -> None:
    """Issue 63 item 4: ``check --rerun`` asks for the reference's precision only where a run of the other
    one would have no reference of its own; with both, ``auto`` picks and the gate uses the matching one."""
    from harness.gate import rerun

    item = rerun.Rerun("cotmae_qc", "tiny")
    _manifest(folder, cotmae_qc__tiny=FP32_REF)
    assert rerun.rerun_command(item, folder)[-2:] == ["--precision", "fp32"]
    _manifest(folder, cotmae_qc__tiny=FP32_REF, cotmae_qc__tiny__bf16=BF16_REF)
    assert "--precision" not in rerun.rerun_command(item, folder)


def _relabel(source: Path, target: Path, precision: str) -> str:
    """A sealed copy of record ``source`` under ``target`` whose training stages say ``precision``."""
    data = json.loads(source.read_text())
    for entry in data["stages"]:
        if entry.get("stage") in TRAINING_STAGES:  # an older record's stages state no output
            entry["output"] = dict(entry.get("output") or {}, precision=precision, precision_source="flag")
    data.pop("integrity", None)
    (target / source.name).write_text(json.dumps(seal(data)))
    return str(data["run_id"])


def test_noise_measures_the_seeds_against_the_reference_of_their_precision(tmp_path: Path) -> None:
    """Issue 63 item 4: bf16 seed runs of the control are spread around its bf16 reference, not the fp32
    one (a spread over both would mix the precision's effect into the seeds'); fp32 seeds are left out."""
    from harness.evaluation import noise

    records, seeds = tmp_path / "records", tmp_path / "seeds"
    records.mkdir(), seeds.mkdir()
    control = load_references(RECORDS)[(noise.CONTROL, noise.PROFILE)]["run_id"]
    shutil.copy(RECORDS / f"{control}.json", records)
    bf16_ref = _relabel(RECORDS / f"{control}.json", seeds, "bf16")  # the reference's numbers, in bf16
    (seeds / f"{bf16_ref}.json").rename(records / f"{bf16_ref}-b.json")
    data = json.loads((records / f"{bf16_ref}-b.json").read_text())
    data["run_id"] += "-b"
    data.pop("integrity", None)
    (records / f"{bf16_ref}-b.json").write_text(json.dumps(seal(data)))
    key = f"{noise.CONTROL}__{noise.PROFILE}__bf16"
    _manifest(records, **{f"{noise.CONTROL}__{noise.PROFILE}": control, key: data["run_id"]})
    older = sorted((PROJECT_ROOT / "runs" / "seeds").glob(f"{noise.CONTROL}__{noise.PROFILE}__*20261125*.json"))
    for path in older:  # seeds of two other commits: no commit ran two, so the reference stands for seed 42
        _relabel(path, seeds, "bf16")
    used = noise._records_for_spread(records, seeds)
    assert used[0].run_id == data["run_id"] and len(used) > 1
    assert {precision_label(r.stages) for r in used} == {"bf16"}
