"""Keys and values as MLflow accepts them: safe keys (``nDCG@10`` -> ``nDCG at 10``), values cut to
MLflow's length limits, nested params flattened to dotted keys."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

# MLflow's limits (mlflow.utils.validation, 3.x): keys of letters, digits, ``_ - . /`` and space (':' too,
# but not on Windows) up to 250 characters; param values up to 6000 characters, tag values 8000; at
# most 100 params or tags per logging request.
KEY_LIMIT, PARAM_VALUE_LIMIT, TAG_VALUE_LIMIT, PARAMS_PER_BATCH = 250, 6000, 8000, 100
_UNSAFE_KEY_CHARS = re.compile(r"[^/\w.\- ]")
TRUNCATED = " ...[truncated; the run record holds the whole value]"


def mlflow_key(name: str) -> str:
    """A metric / param / tag key MLflow accepts: ``@`` (which it refuses) reads `` at `` (``nDCG@10``
    -> ``nDCG at 10``, ``R@1k`` -> ``R at 1k``) and any other character it refuses becomes ``_``
    (``AP(rel=2)`` -> ``AP_rel_2_``)."""
    return _UNSAFE_KEY_CHARS.sub("_", str(name).replace("@", " at "))[:KEY_LIMIT]


def clip(value: Any, limit: int) -> str:
    """``value`` as text, cut with :data:`TRUNCATED` to ``limit`` characters."""
    text = str(value)
    return text if len(text) <= limit else text[: limit - len(TRUNCATED)] + TRUNCATED


def param_value(value: Any) -> Any:
    """A param value as MLflow shows it: lists and tuples as JSON, anything else as it is."""
    # Lists as JSON, which the compare view lays out as arrays (str() would give Python's quotes).
    return json.dumps(value, default=str) if isinstance(value, (list, tuple)) else value


def param_entries(params: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Params as MLflow takes them: nested dicts flattened to dotted keys (``spec.retrieval.k1``), keys
    made safe (:func:`mlflow_key`), lists as JSON, values over MLflow's limit cut with :data:`TRUNCATED`.
    A setting left unset (None) is no param: the compare view would show the word "None"."""
    return [
        (mlflow_key(k), clip(param_value(v), PARAM_VALUE_LIMIT))
        for k, v in flatten(dict(params)).items()
        if v is not None
    ]


def flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested dicts as one level of dotted keys (``{"a": {"b": 1}}`` -> ``{"a.b": 1}``)."""
    out: dict[str, Any] = {}
    for key, value in d.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, dict):
            out.update(flatten(value, name))
        else:
            out[name] = value
    return out
