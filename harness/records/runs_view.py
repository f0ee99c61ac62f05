"""How MLflow's UI shows an experiment: as model training (runs, not GenAI traces), its runs table with
the parents' ``<benchmark>/<measure>`` metrics as columns (a shared view stored as an experiment tag),
and the link that opens that table."""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Iterable
from typing import Any

# The kind of experiment MLflow 3 shows as model training (runs), not GenAI (traces); mlflow.demo sets
# "genai_development". MLflow 3.17's UI no longer reads it: its GenAI | Model training switch decides
# (see RUNS_VIEW), but other clients and older UIs do.
EXPERIMENT_KIND = {"mlflow.experimentKind": "custom_model_development"}
# MLflow 3.17's UI opens an experiment on its GenAI traces view unless the link says
# ``workflowType=machine_learning`` (or the browser remembers its switch), and its runs table shows no
# metric column until one is picked. A shared view is what it reads for its columns: an experiment tag
# ``mlflow.sharedViewState.<key>`` holding the view as JSON, applied by a link with
# ``viewStateShareKey=<key>`` (:func:`runs_table_link`). Every experiment keeps one, its parents'
# ``<benchmark>/<measure>`` metrics as columns (the JS: makeCanonicalSortKey, ``metrics.`<key>```).
RUNS_VIEW = "harness-runs"
RUNS_VIEW_TAG = f"mlflow.sharedViewState.{RUNS_VIEW}"
RUN_NAME_COLUMN = "attributes.`Run Name`"
# Pixels: a run name (<method>/<profile>/<seed>/<stamp>, ~40 characters), a metric column, a character.
RUN_NAME_WIDTH, COLUMN_WIDTH, CHARACTER_WIDTH = 360, 120, 7


def runs_view_value(current: str | None, metric_keys: Iterable[str]) -> str | None:
    """The runs-table view's tag value showing ``metric_keys`` besides the columns it shows already
    (``current``: the tag's value, None when unset); None when it shows them all already."""
    try:
        view = json.loads(current) if current else {}
    except ValueError:  # a view someone else wrote: started again
        view = {}
    columns = list(view.get("selectedColumns") or [])
    wanted = [f"metrics.`{key}`" for key in sorted(metric_keys)]
    if current and all(c in columns for c in wanted):
        return None
    columns += [c for c in wanted if c not in columns]
    # Wide enough for a whole run name and a whole metric key (MLflow cuts both to ~12 characters); it
    # sizes only the columns its columnOrder names.
    widths = {RUN_NAME_COLUMN: RUN_NAME_WIDTH, **(view.get("columnWidths") or {})}
    widths.update({c: max(COLUMN_WIDTH, CHARACTER_WIDTH * len(c)) for c in columns if c not in widths})
    return json.dumps(
        {**view, "selectedColumns": columns, "columnOrder": [RUN_NAME_COLUMN, *columns], "columnWidths": widths}
    )


def show_in_runs_view(client: Any, experiment_id: str, metric_keys: Iterable[str]) -> None:
    """The experiment's runs-table view (:data:`RUNS_VIEW_TAG`) shows ``metric_keys`` too; written only
    when it did not already."""
    value = runs_view_value(client.get_experiment(experiment_id).tags.get(RUNS_VIEW_TAG), metric_keys)
    if value is not None:
        client.set_experiment_tag(experiment_id, RUNS_VIEW_TAG, value)


def runs_table_link(base: str, experiment_id: str) -> str:
    """Where an experiment's runs table opens with its metric columns (``base``: the server's URL)."""
    query = urllib.parse.urlencode({"workflowType": "machine_learning", "viewStateShareKey": RUNS_VIEW})
    return f"{base.rstrip('/')}/#/experiments/{experiment_id}/runs?{query}"
