"""Plot data (plain DataFrames) and Altair charts for the leaderboard.

* effectiveness vs efficiency (LexMAE Figure 3 / Table 4): MRR@10 against queries per second
  or index size, reported systems and reproduced runs (``efficiency`` in run records);
* retriever 1 vs retriever 2: the same model after the first and the second fine-tuning stage;
* per-dataset deltas: reproduced minus reported, coloured by status;
* per-query score distribution of one run.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import altair as alt
import pandas as pd

from harness.core import benchmarks as declared
from harness.core.statuses import STATUSES
from harness.evaluation.compare import PAPER_PROFILE
from harness.evaluation.conventions import primary_measure
from harness.evaluation.effects import (
    LEARNING_CHECK,
    claimed_text,
    latest_by_method,
    method_effects,
    stage_effects,
)
from harness.evaluation.verdict import NOT_COMPARABLE, VERDICTS
from harness.gate.labels import system_axes, system_label
from harness.papers.registry import paper_key
from harness.records.store import RunRecord
from leaderboard_app import display
from leaderboard_app.tables import source_of

STATUS_COLOURS = {v: STATUSES[v].colour for v in VERDICTS}  # a cell's verdict, as its badge is coloured
# An index's size in GB per printed unit ("27G", "350MB", or a bare number under a column in GB).
_SIZE_UNITS = {
    "tb": 1e3,
    "t": 1e3,
    "gb": 1.0,
    "g": 1.0,
    "mb": 1e-3,
    "m": 1e-3,
    "kb": 1e-6,
    "k": 1e-6,
    "bytes": 1e-9,
    "b": 1e-9,
}
# A printed number: thousands separated by commas ("3,072", "17,203") or not, then an optional unit
# ("27G", "4.3 GB", "45.83 QPS"); a qualifier before it ("Avg 17,203", "Upto 768") is read past.
# Tick labels of an axis in points: at most 2 decimals, trailing zeros dropped ("42.6", "20"). Vega's own
# choice for a one-point domain was "42.600000".
# Ticks never finer than the labels print (0.01 points): a finer step repeats a label ("-0.03 -0.03").
POINTS_AXIS = alt.Axis(format=",.2~f", tickMinStep=0.01)
# A category's label in full: Vega-Lite cuts one past 180 px with an ellipsis ("cocondenser - no...").
FULL_LABELS = alt.Axis(labelLimit=0)
_NUMBER = re.compile(r"^\s*(?:[A-Za-z]+\.?\s+)?(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d*\.?\d+)\s*([A-Za-z]*)\s*$")


def _parse(value: str) -> tuple[float, str] | None:
    """'3,072' -> (3072.0, ''), '27G' -> (27.0, 'G'), 'Avg 17,203' -> (17203.0, ''); None for '-'."""
    m = _NUMBER.match(value or "")
    return (float(m.group(1).replace(",", "")), m.group(2)) if m else None


def _size_gb(value: str, unit: str) -> float | None:
    """'4.3G', '27 GB' or ('4.3', 'GB') -> 4.3 GB; None when neither the value nor the column names a size unit."""
    parsed = _parse(value)
    if parsed is None:
        return None
    number, suffix = parsed
    factor = _SIZE_UNITS.get(suffix.lower()) if suffix else _SIZE_UNITS.get((unit or "").lower())
    return number * factor if factor else None


def _number(value: str) -> float | None:
    """'45.83' or '45.83 QPS' or '42,600' -> the number."""
    parsed = _parse(value)
    return parsed[0] if parsed else None


def _kind(cell: Mapping[str, Any]) -> str | None:
    """'qps' or 'index_gb' for an efficiency cell, else None. Only a column that sizes the whole
    index counts as one: LexMAE Table 4's "Repr Byte" (bytes per embedded passage) is a column in
    bytes too, and read as an index size it overwrote the row's "Index Size" (27 GB became 3e-9 GB)."""
    unit = str(cell.get("unit") or "").lower()
    column = str(cell.get("column") or "").lower()
    if cell.get("measure"):
        return None
    if unit == "qps" or "qps" in column:
        return "qps"
    if "repr" in column or "per passage" in column or unit in ("bytes", "b"):
        return None
    if "index" in column or unit in _SIZE_UNITS:
        return "index_gb"
    return None


def efficiency_frame(cells: Sequence[Mapping[str, Any]], records: Sequence[RunRecord]) -> pd.DataFrame:
    """Points (effectiveness in points, qps, index size in GB), reported and reproduced.

    A reported efficiency cell pairs with the MS MARCO MRR@10 of the same printed row; a
    number given only in the text pairs with the method's MRR@10 in the same paper.
    """
    rows: list[dict[str, Any]] = []
    headline, headline_measure = declared.headline()  # MS MARCO dev, RR@10
    rr10 = [
        c
        for c in cells
        if c.get("benchmark") == headline and c.get("measure") == headline_measure and c.get("score") is not None
    ]
    by_row = {(paper_key(c), c.get("table"), c.get("row")): c for c in rr10}
    axes = system_axes(cells)
    points: dict[tuple, dict[str, Any]] = {}
    for c in cells:
        kind = _kind(c)
        if kind is None or c.get("value") in (None, "", "-"):
            continue
        key = (paper_key(c), c.get("table"), c.get("row"))
        partner = by_row.get(key)
        if partner is None and c.get("method"):
            partner = next((x for x in rr10 if paper_key(x) == key[0] and x.get("method") == c.get("method")), None)
        if partner is None:
            continue
        value = _size_gb(str(c["value"]), str(c.get("unit") or "")) if kind == "index_gb" else _number(str(c["value"]))
        if value is None:
            continue
        pkey = (key[0], partner.get("table"), partner.get("row"))
        point = points.setdefault(
            pkey,
            {
                "label": f"{key[0]} · {system_label(partner, axes)}",
                "source": "reported",
                "benchmark": headline,
                "measure": headline_measure,
                "effectiveness": round(100.0 * float(partner["score"]), 2),
                "qps": None,
                "index_gb": None,
            },
        )
        point[kind] = value
    rows.extend(points.values())
    for rec in records:
        for bench, eff in rec.efficiency.items():
            measure = primary_measure(bench)
            value = rec.metrics.get(bench, {}).get(measure)
            if value is None:
                continue
            size = eff.get("index_bytes")
            rows.append(
                {
                    "label": rec.run_id,
                    "source": f"{source_of(rec)} [{rec.profile}]",
                    "benchmark": bench,
                    "measure": measure,
                    "effectiveness": round(100.0 * value, 2),
                    "qps": eff.get("qps"),
                    "index_gb": size / 1e9 if isinstance(size, (int, float)) else None,
                }
            )
    return pd.DataFrame(rows, columns=["label", "source", "benchmark", "measure", "effectiveness", "qps", "index_gb"])


def efficiency_view(frame: pd.DataFrame) -> pd.DataFrame:
    """An efficiency_frame as the page's table shows it: effectiveness at 2 decimals, queries per second
    at 2 with thousands separated (LexMAE prints 45.83), the index size with its unit ("27 GB",
    "1.86 MB"), "-" where missing."""
    out = display.text_frame(frame.drop(columns=["qps", "index_gb"]))
    out["qps"] = [display.MISSING if display.missing(q) else f"{float(q):,.2f}" for q in frame["qps"]]
    out["index size"] = [display.size_text(gb) for gb in frame["index_gb"]]
    return out


def log_domain(values: pd.Series) -> tuple[float, float] | None:
    """The span of a log axis: at least a decade around the points (one point, LexMAE's 45.83 QPS, the only
    rate a paper prints, gave Vega a zero-width domain and an axis with one odd tick); None without points."""
    finite = values[values > 0].astype(float)
    if finite.empty:
        return None
    lo, hi = float(finite.min()), float(finite.max())
    if hi / lo >= 10:
        return lo, hi
    middle = (lo * hi) ** 0.5
    return min(lo, middle / 10**0.5), max(hi, middle * 10**0.5)


def log_scale(values: pd.Series) -> alt.Scale:
    domain = log_domain(values)
    return alt.Scale(type="log") if domain is None else alt.Scale(type="log", domain=list(domain))


def log_ticks(values: pd.Series) -> list[float]:
    """Tick values 1, 2, 5 x 10^k inside the log axis' domain: Vega's own log ticks over less than two
    decades label every minor step, which rounding at ',~g' printed twice (0.4 GB to 3.7 GB read '1 1')."""
    domain = log_domain(values)
    if domain is None:
        return []
    lo, hi = domain
    ticks = [
        m * 10.0**k for k in range(math.floor(math.log10(lo)) - 1, math.ceil(math.log10(hi)) + 1) for m in (1, 2, 5)
    ]
    return [float(f"{t:.6g}") for t in ticks if lo <= t <= hi]


EFFICIENCY_AXES = ("qps", "index_gb")


def default_axis(frame: pd.DataFrame) -> str:
    """The efficiency axis the plot opens on: the one with the most points in ``frame`` (the shown
    benchmark's rows), qps on a tie; a default of one point (qps) beside many index sizes misled."""
    counts = {x: int(frame[x].notna().sum()) if x in frame else 0 for x in EFFICIENCY_AXES}
    return max(EFFICIENCY_AXES, key=lambda x: (counts[x], x == "qps"))


def efficiency_chart(frame: pd.DataFrame, x: str = "qps") -> alt.Chart:
    title = {"qps": "queries per second (log)", "index_gb": "index size, GB (log)"}[x]
    data = frame.dropna(subset=[x])
    pairs = sorted({(b, m) for b, m in zip(data["benchmark"], data["measure"])})
    what = f"{pairs[0][1]} on {pairs[0][0]}" if len(pairs) == 1 else "primary measure"
    return (
        alt.Chart(data)
        .mark_point(filled=True, size=90)
        .encode(
            x=alt.X(
                f"{x}:Q", scale=log_scale(data[x]), title=title, axis=alt.Axis(format=",~g", values=log_ticks(data[x]))
            ),
            y=alt.Y(
                "effectiveness:Q",
                title=f"effectiveness ({what}, points)",
                scale=alt.Scale(zero=False),
                axis=POINTS_AXIS,
            ),
            color=alt.Color("source:N"),
            shape=alt.Shape("benchmark:N"),
            tooltip=["label", "source", "benchmark", "measure", "effectiveness", "qps", "index_gb"],
        )
        .properties(height=380)
    )


def retriever_frame(cells: Sequence[Mapping[str, Any]], records: Sequence[RunRecord]) -> pd.DataFrame:
    """Pairs (retriever 1, retriever 2) of one model: same paper, table, method, column and
    conditions apart from ``finetune_stage``; reproduced pairs from records that state it."""
    stages = {"retriever1": "retriever1", "retriever2": "retriever2"}
    pairs: dict[tuple, dict[str, Any]] = {}
    for c in cells:
        cond = dict(c.get("conditions") or {})
        stage = stages.get(str(cond.pop("finetune_stage", "")))
        if stage is None or c.get("score") is None:
            continue
        key = (
            paper_key(c),
            c.get("table"),
            c.get("method") or c.get("row"),
            c.get("benchmark"),
            c.get("measure"),
            tuple(sorted((k, str(v)) for k, v in cond.items())),
        )
        steps = cond.get("pretrain_steps")
        label = f"{key[0]} · {c.get('method') or c.get('row')}" + (f" ({steps})" if steps else "")
        pair = pairs.setdefault(
            key,
            {
                "label": label,
                "source": "reported",
                "method": c.get("method") or str(c.get("row") or "") or "unnamed row",  # a legend entry has a name
                "benchmark": c.get("benchmark"),
                "measure": c.get("measure"),
                "retriever1": None,
                "retriever2": None,
            },
        )
        pair[stage] = round(100.0 * float(c["score"]), 2)
    newest: dict[tuple[str, str, str], RunRecord] = {}
    for rec in records:  # oldest first, so the newest per stage wins
        if rec.finetune_stage in stages:
            newest[(rec.method, rec.profile, rec.finetune_stage)] = rec
    for (method, profile, stage), rec in newest.items():
        if stage != "retriever1" or (method, profile, "retriever2") not in newest:
            continue
        other = newest[(method, profile, "retriever2")]
        for bench, values in rec.metrics.items():
            for measure, v1 in values.items():
                v2 = other.metrics.get(bench, {}).get(measure)
                if v2 is not None:
                    pairs[("run", method, profile, bench, measure)] = {
                        "label": f"{method} [{profile}]",
                        "source": f"reproduced [{profile}]",
                        "method": method,
                        "benchmark": bench,
                        "measure": measure,
                        "retriever1": round(100 * v1, 2),
                        "retriever2": round(100 * v2, 2),
                    }
    rows = [p for p in pairs.values() if p["retriever1"] is not None and p["retriever2"] is not None]
    frame = pd.DataFrame(
        rows, columns=["label", "source", "method", "benchmark", "measure", "retriever1", "retriever2"]
    )
    frame["gain"] = frame["retriever2"] - frame["retriever1"]
    return frame


def retriever_chart(frame: pd.DataFrame) -> alt.LayerChart:
    lo = float(min(frame["retriever1"].min(), frame["retriever2"].min())) if len(frame) else 0.0
    hi = float(max(frame["retriever1"].max(), frame["retriever2"].max())) if len(frame) else 100.0
    diagonal = (
        alt.Chart(pd.DataFrame({"x": [lo, hi], "y": [lo, hi]}))
        .mark_line(strokeDash=[4, 4], color="#9e9e9e")
        .encode(x="x:Q", y="y:Q")
    )
    points = (
        alt.Chart(frame)
        .mark_point(filled=True, size=80)
        .encode(
            x=alt.X(
                "retriever1:Q",
                title="retriever 1 (BM25 negatives), points",
                scale=alt.Scale(zero=False),
                axis=POINTS_AXIS,
            ),
            y=alt.Y(
                "retriever2:Q",
                title="retriever 2 (mined negatives), points",
                scale=alt.Scale(zero=False),
                axis=POINTS_AXIS,
            ),
            color="method:N",
            shape="measure:N",
            tooltip=["label", "source", "benchmark", "measure", "retriever1", "retriever2", "gain"],
        )
    )
    return (diagonal + points).properties(height=380)


def delta_frame(comparisons: pd.DataFrame) -> pd.DataFrame:
    """Comparable rows of a comparison_frame, labelled for a per-dataset bar chart."""
    frame = comparisons[comparisons["status"] != NOT_COMPARABLE].copy()
    frame["against"] = frame["paper"].astype(str) + " " + frame["table"].astype(str) + " · " + frame["row"].astype(str)
    return frame[
        [
            "run_id",
            "stage",
            "benchmark",
            "measure",
            "against",
            "printed",
            "reported",
            "reproduced",
            "delta",
            "tolerance",
            "status",
        ]
    ].reset_index(drop=True)


def delta_view(frame: pd.DataFrame) -> pd.DataFrame:
    """A delta_frame as text at the precision each cell was printed at (tables.comparison_view's rule)."""
    out = display.text_frame(frame.astype(object))
    for i, (_, row) in enumerate(frame.iterrows()):
        d = display.cell_decimals({"value": row.get("printed"), "reported": row["reported"]})
        for column in ("reported", "reproduced", "tolerance"):
            out.at[i, column] = display.number(row[column], d)
        out.at[i, "delta"] = display.number(row["delta"], d, True)
    return out


def delta_domain(frame: pd.DataFrame) -> list[float]:
    """The delta axis in points, fixed and symmetric: at least +-1 point, wide enough for the widest
    margin and delta with a quarter to spare (rounded up to half a point), so +0.04 never fills the plot as if it were large."""
    widest = [1.0]
    for column in ("delta", "tolerance"):
        if column in frame:
            widest += [abs(float(v)) for v in frame[column].dropna()]
    half = math.ceil(max(widest) * 1.25 * 2) / 2  # a quarter beyond the widest, so a margin is not the frame
    return [-half, half]


def delta_chart(frame: pd.DataFrame) -> alt.LayerChart:
    """Each comparison's delta as a bar on a fixed scale in points, with the margin (+-tolerance) drawn
    as dashed ticks on its row."""
    statuses = list(STATUS_COLOURS)
    x_scale = alt.Scale(domain=delta_domain(frame))
    bars = (
        alt.Chart(frame)
        .mark_bar()
        .encode(
            x=alt.X("delta:Q", title="reproduced - reported (points)", axis=POINTS_AXIS, scale=x_scale),
            y=alt.Y("benchmark:N", title=None, axis=FULL_LABELS),
            yOffset="against:N",
            color=alt.Color("status:N", scale=alt.Scale(domain=statuses, range=[STATUS_COLOURS[s] for s in statuses])),
            tooltip=[
                "run_id",
                "benchmark",
                "measure",
                "against",
                "reported",
                "reproduced",
                "delta",
                "tolerance",
                "status",
            ],
        )
    )
    margins = frame.assign(low=-frame["tolerance"], high=frame["tolerance"]) if "tolerance" in frame else frame
    margin = (
        alt.Chart(margins)
        .transform_fold(["low", "high"], as_=["side", "edge"])
        .mark_tick(color="#555", thickness=2, strokeDash=[3, 2])
        .encode(
            x=alt.X("edge:Q", scale=x_scale),
            y=alt.Y("benchmark:N", title=None, axis=FULL_LABELS),
            yOffset="against:N",
            tooltip=["benchmark", "against", "tolerance"],
        )
    )
    return alt.layer(bars, margin).properties(height=max(160, 28 * len(frame)))


def per_query_chart(frame: pd.DataFrame, measure: str) -> alt.Chart:
    """The per-query scores' histogram, in points like every other number on the page."""
    return (
        alt.Chart(frame.assign(points=100 * frame["score"]))
        .mark_bar()
        .encode(
            x=alt.X("points:Q", bin=alt.Bin(maxbins=20), title=f"per-query {measure} (points)"),
            y=alt.Y("count():Q", title="queries"),
        )
        .properties(height=260)
    )


def effects_frame(records: Sequence[RunRecord], profiles: Sequence[str]) -> pd.DataFrame:
    """Paired effects (harness/evaluation/effects.py) of every profile shown: each method minus the
    control, QC minus non-QC, and the control's fine-tuning stages minus its zero-shot start. Only a
    paper-profile effect is set beside the difference a paper printed; another profile's (a MiniLM on 640
    queries, a tiny BERT) says whether the method learns at that scale, so it is labelled a learning
    check and shows no paper's number beside it."""

    rows = []
    for profile in profiles:
        effects = method_effects(records, profile)
        for rec in latest_by_method(records, profile).values():
            effects.extend(stage_effects(rec))
        paper = profile == PAPER_PROFILE
        rows += [
            {
                **e.to_dict(),
                "effect": e.label,
                "paper_claims": claimed_text(e) if paper else "",
                "vs_claim": (e.claim_status or "-") if paper else LEARNING_CHECK,
            }
            for e in effects
        ]
    columns = [
        "profile",
        "effect",
        "dataset",
        "measure",
        "a_value",
        "b_value",
        "delta",
        "ci_low",
        "ci_high",
        "p_value",
        "queries",
        "paper_claims",
        "vs_claim",
    ]
    return pd.DataFrame(rows, columns=columns)


def effects_chart(frame: pd.DataFrame) -> alt.FacetChart:
    """Each effect's paired delta (points) with its 95% CI, one row per effect, one panel per dataset."""
    # each profile its colour, named in the legend, and its own line within an effect's row: mini, tiny
    # and rehearsal effects of one name overlaid unlabelled read as one
    base = alt.Chart().encode(
        y=alt.Y("effect:N", title=None, axis=FULL_LABELS),
        yOffset="profile:N",
        color=alt.Color("profile:N", title="profile", legend=alt.Legend(orient="top")),
    )
    bars = base.mark_rule(strokeWidth=2).encode(
        x=alt.X("ci_low:Q", title="A - B (points), 95% CI", axis=POINTS_AXIS), x2="ci_high:Q"
    )
    points = base.mark_point(filled=True, size=60).encode(
        x="delta:Q",
        tooltip=[
            "profile",
            "effect",
            "dataset",
            "measure",
            "a_value",
            "b_value",
            "delta",
            "ci_low",
            "ci_high",
            "p_value",
            "queries",
            "paper_claims",
            "vs_claim",
        ],
    )
    zero = alt.Chart().mark_rule(strokeDash=[4, 4], color="grey").encode(x=alt.datum(0))
    height = max(120, 24 * frame["effect"].nunique() * max(1, frame["profile"].nunique()))
    # One panel per dataset stacked, each under its name: side by side, five panels ran past the page
    # and the last was cut.
    return (
        alt.layer(bars, points, zero, data=frame)
        .properties(height=height, width=420)
        .facet(
            row=alt.Row(
                "dataset:N", title=None, header=alt.Header(labelAngle=0, labelOrient="top", labelAnchor="start")
            )
        )
    )
