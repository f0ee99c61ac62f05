"""The "At a glance" tab's pieces: the HTML of harness/present/glance_html.py (shared with ``report
--html``) and the rows as DataFrames for the CSV downloads. No streamlit import: app.py displays them.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from harness.gate.tables import TableCount
from harness.present.glance_html import (
    CLAIM_HEADERS,
    CSS,
    HEADLINE_HEADERS,
    LEARNED_CAPTION,
    MATRIX_CAPTION,
    TABLES_CAPTION,
    answer_html,
    badge,
    claims_html,
    counts_html,
    headline_html,
    learned_html,
    legend_html,
    matrix_html,
    profiles,
    tables_html,
)
from harness.present.glance_html import learned_matrix as _learned_matrix
from harness.present.overview import Glance, LearnedRow

__all__ = [
    "CLAIM_HEADERS",
    "CSS",
    "HEADLINE_HEADERS",
    "LEARNED_CAPTION",
    "MATRIX_CAPTION",
    "TABLES_CAPTION",
    "answer_html",
    "badge",
    "claims_html",
    "counts_html",
    "frames",
    "tables_frame",
    "headline_html",
    "learned_html",
    "learned_matrix",
    "legend_html",
    "matrix_html",
    "profiles",
    "tables_html",
]


def learned_matrix(rows: Sequence[LearnedRow], profile: str) -> pd.DataFrame:
    """Method x benchmark for one profile (harness.present.glance_html.learned_matrix) as a DataFrame."""
    columns, lines = _learned_matrix(rows, profile)
    return pd.DataFrame(lines, columns=columns).fillna("")


def frames(glance: Glance) -> dict[str, pd.DataFrame]:
    """Every glance list as a DataFrame, for the CSV downloads."""
    return {
        "headline": pd.DataFrame([r.to_dict() for r in glance.headline]),
        "claims": pd.DataFrame([r.to_dict() for r in glance.claims]),
        "learned": pd.DataFrame([r.to_dict() for r in glance.learned]),
    }


def tables_frame(counts: Sequence[TableCount]) -> pd.DataFrame:
    """The printed tables' counts (LeaderboardData.tables) for the CSV download: one row per table."""
    rows = [
        {
            "table": c.name,
            "cells": c.cells,
            "reachable": c.reachable,
            "states": c.states_text(),
            "why not": c.reasons_text(),
            "command": c.command,
        }
        for c in counts
    ]
    return pd.DataFrame(rows, columns=["table", "cells", "reachable", "states", "why not", "command"])
