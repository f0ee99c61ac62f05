"""cqadupstack in the pipelines: retrieved forum by forum, merged, scored as the mean of the forums."""

from __future__ import annotations

from pathlib import Path

from harness.data.catalog import get_benchmark
from harness.data.formats import write_trec_run
from harness.pipelines.context import RunContext, StageLog
from harness.pipelines.forums import retrieve_parts
from harness.records.tracker import Tracker
from harness.run.runner import plan_method, score_run_file
from harness.spec.method import load_method


def _ctx(method: str, plan_only: bool = False) -> RunContext:
    spec = load_method(method, "tiny")
    return RunContext(
        spec, Tracker(experiment=method, run_name="t", tags={}, enabled=False), StageLog(), False, plan_only=plan_only
    )


def test_parts_are_retrieved_one_by_one_and_merged(tmp_path: Path) -> None:
    ctx = _ctx("nopretrain")
    asked = []

    def retrieve(part: str) -> Path:  # a perfect run of each forum: every judged document at the top
        asked.append(part)
        qrels = get_benchmark(part).qrels()
        path = tmp_path / part / "run.trec"
        path.parent.mkdir()
        write_trec_run({q: {d: float(g) for d, g in docs.items()} for q, docs in qrels.items()}, path)
        return path

    merged = retrieve_parts(ctx, "retriever1", "cqadupstack", retrieve)
    assert asked == [
        f"cqadupstack-{f}"
        for f in (
            "android",
            "english",
            "gaming",
            "gis",
            "mathematica",
            "physics",
            "programmers",
            "stats",
            "tex",
            "unix",
            "webmasters",
            "wordpress",
        )
    ]
    result = score_run_file(merged, get_benchmark("cqadupstack"))
    assert result.aggregate[result.primary] == 1.0 and len(result.subsets) == 12
    assert retrieve_parts(ctx, "retriever1", "scifact", lambda name: tmp_path / name) == tmp_path / "scifact"


def test_dense_and_learned_sparse_plans_score_cqadupstack_per_forum() -> None:
    for method, search in (("nopretrain", "dense_retrieve"), ("lexmae", "impact_search")):
        spec = load_method(method, "tiny")
        entries = plan_method(spec, ["cqadupstack"]).stages.entries
        forums = [e for e in entries if e["stage"] == search and e["dataset"].startswith("cqadupstack-")]
        assert len({e["dataset"].split("/")[0] for e in forums}) == 12, method
        assert any(e["stage"] == "merge_parts" for e in entries)
        assert any(e["stage"] == "evaluate" and e["dataset"].endswith("/cqadupstack") for e in entries)
        if search == "impact_search":  # one index per forum: the archive is shared, the corpora are not
            keys = {e["key"] for e in entries if e["stage"] == "impact_index" and "cqadupstack-" in e["dataset"]}
            assert len(keys) == 12 * len(
                [k for k in ("retriever1", "retriever2", "retriever3") if k in str([e["dataset"] for e in entries])]
            ), len(keys)
