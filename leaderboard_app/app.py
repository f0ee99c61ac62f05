"""The leaderboard page: layout only (loading in data.py, shaping in tables.py and plots.py).

Start it with ``python -m harness leaderboard`` (binds 127.0.0.1); ``--records DIR`` and
``--reported JSON`` reach this script through the environment (see data.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

# `streamlit run` puts this folder, not the project root, on sys.path.
_ROOT = str(Path(__file__).resolve().parent.parent)
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

import streamlit as st  # noqa: E402 - after the sys.path line above, which makes the checkout importable

from harness.core import benchmarks as declared  # noqa: E402 - after the sys.path line above, which makes the checkout importable
from harness.gate.run import YOUR_RUNS  # noqa: E402 - after the sys.path line above, which makes the checkout importable
from harness.present import overview  # noqa: E402 - after the sys.path line above, which makes the checkout importable
from leaderboard_app import data as lb_data  # noqa: E402 - after the sys.path line above, which makes the checkout importable
from leaderboard_app import display, glance, plots, selection, tables  # noqa: E402 - after the sys.path line above, which makes the checkout importable

st.set_page_config(page_title="Retrieval pre-training leaderboard", layout="wide")


@st.cache_data(show_spinner="Loading run records and reported cells ...", max_entries=8)
def _load(records: str, reported: str | None, signature: tuple) -> lb_data.LeaderboardData:
    del signature  # only part of the cache key: a new or changed record reloads
    return lb_data.load(records, reported)


@st.cache_data(show_spinner="Grading the papers' headline numbers and claims ...", max_entries=4)
def _glance(records: str, reported: str | None, signature: tuple) -> overview.Glance:
    loaded = _load(records, reported, signature)
    return overview.build(loaded.cells, loaded.records, loaded.comparisons)


@st.cache_data(show_spinner="Checking the papers' consistency ...", max_entries=4)
def _inconsistencies(signature: tuple) -> tuple[list[dict], str | None]:
    del signature
    return lb_data.inconsistency_report()


def _table(
    frame,
    name: str,
    key: str,
    caption: str | None = None,
    shown=None,
    digits: dict | None = None,
    signed: tuple[str, ...] = (),
) -> None:
    """A table with its CSV download (every table on the page can be downloaded). The page shows ``shown``
    (else ``frame`` as text: rounded, "-" where missing, never "None"); the CSV keeps ``frame``'s numbers."""
    shown = display.text_frame(frame if shown is None else shown, digits, signed=signed)
    # Tall enough to show up to 20 rows without scrolling: a reproduced row sits under the paper's row.
    st.dataframe(
        shown,
        hide_index=True,
        width="stretch",
        height=min(38 + 35 * max(1, len(shown)), 38 + 35 * 20),
        column_config={name: st.column_config.Column(width=px) for name, px in display.column_widths(shown).items()},
    )
    if caption:
        st.caption(caption)
    st.download_button(
        f"Download {name} (CSV)",
        tables.to_csv(frame),
        file_name=f"{key}.csv",
        mime="text/csv",
        key=f"csv_{key}",
        on_click="ignore",
    )


records_dir = lb_data.default_records_dir()
reported = lb_data.default_reported()
data = _load(str(records_dir), reported, lb_data.signature(records_dir, reported))

# ----------------------------------------------------------------------------- filters
st.sidebar.markdown(display.SIDEBAR_CSS, unsafe_allow_html=True)
st.sidebar.header("Filters")
profiles = st.sidebar.multiselect(
    "Profile",
    data.profiles,
    default=data.profiles,
    key="f_profiles",
    help="Run records of these profiles (empty: all). The tables comparing runs with "
    "the papers add the small profiles (tiny, mini, rehearsal) only with the "
    "switch below.",
)
benchmarks = st.sidebar.multiselect(
    "Benchmark",
    [*tables.MAIN_BENCHMARKS, *tables.BEIR_DATASETS],
    default=[],
    key="f_benchmarks",
    help="Columns / datasets shown (empty: all).",
)
papers = st.sidebar.multiselect(
    "Paper version",
    data.papers,
    default=data.papers,
    key="f_papers",
    format_func=data.paper_label,
    help="Reported cells of these registry files, e.g. qc-v1 vs qc-v2 (empty: all).",
)
main_only = st.sidebar.checkbox(
    "Only each paper's Table 1",
    value=True,
    key="f_main_only",
    help="Untick to add every other table with MS MARCO / TREC DL columns (ablations).",
)
small = st.sidebar.toggle(
    selection.SMALL_SWITCH,
    value=False,
    key="f_small",
    help="The tables comparing runs with the papers show paper-profile runs and released "
    "checkpoints only; this adds the small profiles, with what each one is.",
)
show_old = st.sidebar.toggle(
    selection.SUPERSEDED_SWITCH,
    value=False,
    key="f_superseded",
    help="Runs older than the accepted reference of their method and profile (SUPERSEDED "
    "in `check`): folded by default.",
)
st.sidebar.caption(f"Records: {display.md_code(data.records_dir)}")

# ----------------------------------------------------------------------------- header
st.title("Retrieval pre-training leaderboard")
if data.answer is not None:  # the answer first (issue 63): the same text as `check`, the README and the report
    st.markdown(glance.answer_html(data.answer), unsafe_allow_html=True)
st.caption(
    f"{data.n_records} run record(s) ({len(data.records)} shown as results, {len(data.apart)} set apart) · "
    f"{len(data.cells)} reported cells from {len(data.papers)} paper file(s) · {len(data.skipped)} record(s) "
    "skipped. Numbers in points (100 × fraction); delta = "
    "reproduced − reported. States, one rule for every cell (harness/evaluation/verdict.py), shown as "
    "these badges on every page:"
)
st.markdown(glance.CSS + glance.legend_html(), unsafe_allow_html=True)
if data.cells_error:
    st.warning(f"Reported cells unavailable: {display.md_text(data.cells_error)}")
if data.skipped:
    st.warning(
        f"{len(data.skipped)} run record(s) skipped (corrupt, partial or from a newer harness): "
        "see the 'Skipped records' tab."
    )
if not data.records:
    st.info(f"No run records in {display.md_code(data.records_dir)} yet: run `python -m harness run --method bm25`.")
if data.yours is not None:
    st.info(
        f"{YOUR_RUNS.capitalize()}: {len(data.your_records)} record(s) in "
        f"{display.md_code(data.yours.records_dir)}, which "
        f"{'would pass' if data.yours.passed else 'would fail'} the gate once added; listed on the "
        "'CI gate' tab, never counted in the gate."
    )

# The runs every paper-comparison grid shows (selection.py): paper / checkpoint profiles unless the switch
# says otherwise, superseded runs folded; what is hidden and, when shown, each small profile's caveat.
selected = tables.filter_records(data.records, profiles)
superseded = selection.superseded_ids(data.records, data.references)
switches = dict(small=small, superseded=superseded, show_superseded=show_old)
grid = selection.grid_records(selected, **switches)
hidden = selection.hidden_note(selected, **switches)
caveats = selection.shown_caveats(grid)


def _grid_notes() -> None:
    """Under a paper-comparison grid's title: what the switches hide, and the caveat of every small
    profile shown (on the same screen as its numbers)."""
    if hidden:
        st.caption(hidden)
    if caveats:
        st.warning(
            "Small-profile runs are shown: NOT comparable with the papers, whatever their numbers.\n\n"
            + "\n\n".join(f"- {c}" for c in caveats)
        )


comparisons = tables.comparison_frame(grid, data.comparisons, papers=papers, benchmarks=benchmarks)
tab_glance, tab_main, tab_beir, tab_method, tab_plots, tab_gate, tab_checks, tab_skipped = st.tabs(
    ["At a glance", "MS MARCO & TREC DL", "BEIR", "Method", "Plots", "CI gate", "Registry checks", "Skipped records"]
)

with tab_glance:
    # Every record and cell, whatever the sidebar filters: the page's answer to "which published claims
    # hold, which differ, which have not been tried, and what would trying one cost?"
    at_glance = _glance(str(records_dir), reported, lb_data.signature(records_dir, reported))
    st.subheader("Each method against the papers")
    st.caption(glance.MATRIX_CAPTION)
    st.markdown(glance.matrix_html(overview.method_lines(at_glance.headline)), unsafe_allow_html=True)
    st.subheader("Every printed table: what a run can grade, and its command")
    st.caption(glance.TABLES_CAPTION)
    if data.tables:
        st.markdown(glance.tables_html(data.tables), unsafe_allow_html=True)
        st.download_button(
            "Download the glance's printed-table counts (CSV)",
            tables.to_csv(glance.tables_frame(data.tables)),
            file_name="glance_tables.csv",
            mime="text/csv",
            key="csv_glance_tables",
            on_click="ignore",
        )
    else:
        st.info("The tables' counts need the gate's cell states, which could not be computed here.")
    st.subheader("The papers' headline numbers")
    st.caption(
        "Each paper's Table 1 (MS MARCO dev MRR@10, TREC DL nDCG@10) and BEIR table (nDCG@10), in points "
        "(100 x fraction; hover a number for it as printed). The state is what `python -m harness check` "
        "gives the paper-profile and released-checkpoint records on that cell (several records: the "
        "worst); rows never run give the command and its projected cost on the spec's declared hardware "
        "(`run --dry-run`)."
    )
    st.markdown(glance.counts_html(at_glance.counts(at_glance.headline)), unsafe_allow_html=True)
    st.markdown(glance.headline_html(at_glance.headline), unsafe_allow_html=True)
    st.subheader("The papers' printed effects (A minus B)")
    st.caption(
        "Each difference a paper printed between two of its rows, graded against the paper-profile runs' "
        "paired effect by the same rule (`check`'s effect rows)."
    )
    st.markdown(glance.counts_html(at_glance.counts(at_glance.claims)), unsafe_allow_html=True)
    st.markdown(glance.claims_html(at_glance.claims), unsafe_allow_html=True)
    st.subheader("Learned runs at small scale: not comparable with the papers")
    st.caption(glance.LEARNED_CAPTION)
    for profile in glance.profiles(at_glance.learned):
        command = display.md_code(f"python -m harness run --method M --profile {profile}")
        st.markdown(f"**Profile {display.md_text(profile)}** ({command})")
        st.caption(f"What this profile is: {selection.caveat_md(profile)}.")
        st.markdown(glance.learned_html(at_glance.learned, profile), unsafe_allow_html=True)
    for name, frame in glance.frames(at_glance).items():
        st.download_button(
            f"Download the glance's {name} rows (CSV)",
            tables.to_csv(frame),
            file_name=f"glance_{name}.csv",
            mime="text/csv",
            key=f"csv_glance_{name}",
            on_click="ignore",
        )

with tab_main:
    st.subheader("Table 1: MS MARCO dev and TREC DL")
    _grid_notes()
    main = tables.main_table(
        data.cells, grid, data.comparisons, papers=papers, benchmarks=benchmarks, main_only=main_only
    )
    _table(
        main,
        "Table 1",
        "table1",
        "Reported rows as printed (papers that print fractions shown × 100); each "
        f"'{tables.UNDER}reproduced' row compares a run with the row above it: value (delta status). Runs on "
        "their own are listed at the bottom.",
    )
    released = [r for r in grid if r.profile == "checkpoint"]
    if released:
        st.subheader("Released checkpoints (scored as published, `python -m harness reproduce`)")
        for line in tables.checkpoint_summaries(released, data.comparisons):
            st.markdown(f"- {line}")
        _table(
            tables.checkpoint_frame(released, data.comparisons),
            "released checkpoints",
            "checkpoints",
            "A checkpoint is graded only against the rows that are that checkpoint (baselines/released/"
            "checkpoints.yaml); every other cell of its method is listed with the reason it is not graded.",
        )
    st.subheader("Every comparison with a reported cell")
    _table(
        comparisons,
        "comparisons",
        "comparisons",
        "Points at the precision the paper printed each cell; ci_low / ci_high: the 90% CI of the delta that "
        "the rule reads (TOST at alpha 0.05, from the seed spread; harness/evaluation/verdict.py). "
        "A NOT-COMPARABLE row has no delta: the run does not share the cell's setting (the reason column says how).",
        shown=tables.comparison_view(comparisons),
    )
    # Contributed runs (docs/contributing-runs.md): every run says where and when it ran; a record of an
    # unknown or changed spec is listed on its own, never among the rows compared above.
    st.subheader("Runs: hardware and date")
    _table(
        tables.runs_frame(grid, data.references, superseded=superseded),
        "runs",
        "runs",
        "Hardware as each run's record detected it (GPUs, CPU model), its date and commit; role 'run' is "
        "any run that is not an accepted reference, contributed ones included (docs/contributing-runs.md).",
    )
    if data.apart:  # folded: never rows beside the papers', open on request
        with st.expander(
            f"Runs apart ({len(data.apart)}): unknown or changed spec, or superseded on an older "
            "spec (not compared with the papers or a reference)"
        ):
            _table(
                tables.apart_frame(data.apart),
                "runs apart",
                "apart",
                "Their spec settings are not the method's current ones nor its reference's (SPEC-CHANGED), or "
                "the method has no spec here (UNKNOWN-METHOD), or they are older than their reference and of an "
                "older spec (SUPERSEDED, as `check` calls them): what they ran is not what the rows above ran.",
            )

with tab_beir:
    st.subheader("BEIR zero-shot: nDCG@10 (points)")
    _grid_notes()
    _table(
        tables.beir_table(data.cells, grid, papers=papers, benchmarks=benchmarks, comparisons=data.comparisons),
        "BEIR table",
        "beir",
        "Computed averages appear only for columns with every dataset they average: all 14, or LexMAE's 12 "
        "(without cqadupstack and quora). Printed averages are the papers' own. The last row is each printed "
        "column's state (its cells' states, as on every page) and each run's profile.",
    )
    st.subheader("Reproduced vs reported on BEIR")
    beir_cmp = comparisons[comparisons["benchmark"].isin(tables.BEIR_DATASETS)].reset_index(drop=True)
    _table(beir_cmp, "BEIR comparisons", "beir_comparisons", shown=tables.comparison_view(beir_cmp))

with tab_method:
    if not data.records:
        st.info("No run records to show.")
    else:
        method = st.selectbox("Method", data.methods, key="m_method")
        runs = [r for r in reversed(data.records) if r.method == method]
        run_id = st.selectbox("Run", [r.run_id for r in runs], key="m_run")
        rec = next(r for r in runs if r.run_id == run_id)
        st.subheader(display.run_heading(rec))  # record strings as text, never markdown (display.md_text)
        if rec.profile not in selection.PAPER_COMPARABLE:
            st.warning(f"Not comparable with the papers: {selection.caveat_md(rec.profile)}.")
        st.caption(display.run_caption(rec, rec.run_id in data.references))
        for title, items in (
            ("Substituted in this profile (recorded with the run)", rec.substitutions or []),
            (
                "Where the paper profile departs from the paper (spec `deviations`; the cells they "
                "touch are NOT-COMPARABLE)",
                tables.paper_deviations(rec.method),
            ),
            (
                "Values the papers leave unstated (spec `assumptions`)",
                tables.paper_deviations(rec.method, "assumptions"),
            ),
        ):
            if items:
                st.markdown(display.md_list(title, items))
        left, right = st.columns(2)
        with left:
            st.markdown("**Stages**")
            _table(tables.stages_frame(rec), "stages", f"stages_{rec.run_id}")
            st.markdown("**Hardware: declared vs actual**")
            _table(tables.hardware_frame(rec), "hardware", f"hardware_{rec.run_id}")
        with right:
            st.markdown("**Hyper-parameters (resolved spec)**")
            _table(tables.hyperparameters_frame(rec), "hyper-parameters", f"spec_{rec.run_id}")
        st.markdown("**Metrics with bootstrap 95% confidence intervals**")
        _table(tables.metric_ci_frame(rec), "metrics", f"metrics_{rec.run_id}", digits={"queries": 0})
        st.markdown("**Reported cells: delta and its bootstrap confidence interval**")
        _table(
            tables.cell_ci_frame(data.comparisons.get(rec.run_id, []), data.cells),
            "cells",
            f"cells_{rec.run_id}",
            signed=("delta", "ci_low", "ci_high"),
        )
        with_pq = [d for d in rec.per_query if rec.per_query[d]]
        if with_pq:
            st.markdown("**Per-query score distribution**")
            c1, c2 = st.columns(2)
            dataset = c1.selectbox("Dataset", with_pq, key="m_dataset")
            measure = c2.selectbox("Measure", list(rec.per_query[dataset]), key="m_measure")
            pq = tables.per_query_frame(rec, dataset, measure)
            st.altair_chart(plots.per_query_chart(pq, measure), width="stretch")
            st.caption(
                f"{len(pq)} queries; mean {100 * pq['score'].mean():.2f} points; "
                f"{(pq['score'] == 0).sum()} queries score 0."
            )

with tab_plots:
    st.subheader("Effectiveness vs efficiency (LexMAE Figure 3 / Table 4)")
    _grid_notes()
    eff = plots.efficiency_frame(tables.filter_cells(data.cells, papers), grid)
    c1, c2 = st.columns(2)
    benches = sorted(eff["benchmark"].dropna().unique())
    HEADLINE = declared.headline()[0]  # the benchmark the papers' efficiency numbers pair with: shown first
    bench = (
        c2.selectbox("Benchmark", benches, key="p_bench", index=benches.index(HEADLINE) if HEADLINE in benches else 0)
        if benches
        else None
    )
    shown = eff[eff["benchmark"] == bench]
    axis = c1.radio(
        "x axis",
        list(plots.EFFICIENCY_AXES),
        index=plots.EFFICIENCY_AXES.index(plots.default_axis(shown)),  # the axis with the most points
        horizontal=True,
        key="p_x",
        format_func={"qps": "queries per second", "index_gb": "index size (GB)"}.get,
    )
    if shown[axis].notna().any():
        st.altair_chart(plots.efficiency_chart(shown, axis), width="stretch")
    else:
        st.info("No efficiency numbers for this axis yet (run records gain an 'efficiency' block when measured).")
    _table(eff, "efficiency points", "efficiency", shown=plots.efficiency_view(eff))

    st.subheader("Retriever 1 vs retriever 2")
    r12 = plots.retriever_frame(tables.filter_cells(data.cells, papers), grid)
    if len(r12):
        st.altair_chart(plots.retriever_chart(r12), width="stretch")
    else:
        st.info("No retriever 1 / retriever 2 pairs in the selection.")
    _table(r12, "retriever pairs", "retrievers", signed=("gain",))

    st.subheader("Per-dataset deltas (reproduced − reported)")
    deltas = plots.delta_frame(comparisons)
    if len(deltas):
        st.altair_chart(plots.delta_chart(deltas), width="stretch")
    else:
        st.info("No comparable reported cells for the selected runs.")
    _table(deltas, "deltas", "deltas", shown=plots.delta_view(deltas))

    st.subheader("Effects: each method vs the control, QC vs non-QC, fine-tuning vs its start")
    effects = plots.effects_frame(data.records, profiles)
    if len(effects):
        st.altair_chart(plots.effects_chart(effects), width="stretch")
    else:
        st.info("No two records of one profile to compare (e.g. a method and nopretrain).")
    _table(
        effects,
        "effects",
        "effects",
        digits={"p_value": display.P_DIGITS, "queries": 0},
        signed=("delta", "ci_low", "ci_high"),
        caption="Paired bootstrap over the shared queries (seed 42), "
        "points; runs of one profile only, so like is compared with like. A paper-profile effect is shown "
        "beside the difference a paper printed, with its source, and graded by the same rule as a cell (REPRODUCED, "
        "DIFFERENT-BELOW/-ABOVE, INCONCLUSIVE). A mini or tiny effect is a learning check (does the method "
        "learn at that scale?): it is never set beside, nor graded against, the papers' effects. "
        "`python -m harness effects` prints the same table.",
    )

with tab_gate:
    st.subheader("CI regression gate (`python -m harness check`)")
    gate = data.gate
    if gate is not None:
        (st.success if gate.passed else st.error)(
            f"gate {gate.verdict}: " + (", ".join(f"{k} {v}" for k, v in gate.counts().items()) or "nothing gated")
        )
    _table(
        tables.gate_frame(gate),
        "gate",
        "gate",
        "paper runs vs the papers; tiny runs vs the committed reference of the same method and profile.",
    )
    if data.yours is not None:
        st.subheader(f"{YOUR_RUNS.capitalize()} ({display.md_code(data.yours.records_dir)}: not gated)")
        st.caption(
            "Your own runs, graded as `check` grades a committed record but never counted in the gate: "
            "`python -m harness check --add RUN_ID` moves one into runs/records/ to contribute it "
            "(docs/contributing-runs.md)."
        )
        _table(tables.runs_frame(data.your_records, role=tables.YOURS), "your runs", "your_runs")
        _table(tables.gate_frame(data.yours), "your runs graded", "your_gate")

with tab_checks:
    st.subheader("Reported-scores registry: consistency report (`python -m harness validate`)")
    found, error = _inconsistencies(lb_data.signature(records_dir, reported))
    if error:
        st.info(error)
    incons = tables.inconsistency_frame(found, papers)
    if len(incons):
        st.caption(f"{len(incons)} inconsistencies found in the papers (recorded, never fixed).")
    _table(incons, "inconsistencies", "inconsistencies")

with tab_skipped:
    st.subheader("Skipped run records")
    if data.skipped:
        st.caption("These files were not read; each line says why. Fix or delete them.")
        _table(tables.skipped_frame(data.skipped), "skipped records", "skipped")
    else:
        st.success("Every run record was read.")
