"""The run record as one typed class, both written (:func:`harness.run.record.build_record`,
:mod:`harness.records.writer`) and read (:mod:`harness.records.store`).

Each field is a top-level key of the record's JSON. A record is sealed with a hash over its JSON
(:mod:`harness.records.integrity`), so reading and writing it again must give the same bytes:
:meth:`RunRecord.from_json` keeps the keys' order (``keys``) and every key it does not know
(``extras``), and :meth:`RunRecord.to_json` writes exactly the keys it read, in that order. A key that
was absent stays absent (its field holds the default); one that was ``null`` stays ``null``.

Values are kept as read, never coerced or normalised (that would change the seal): a field's type is
what the writer writes and :func:`harness.records.store.validate_record` checks; a reader handles
``None`` where a field may be null or absent (a released checkpoint's ``spec``).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.core.errors import HarnessError
from harness.records.integrity import problems
from harness.spec.conditions import graded_method, run_conditions

Metrics = dict[str, dict[str, float]]  # dataset -> measure -> fraction
PerQuery = dict[str, dict[str, dict[str, float]]]  # dataset -> measure -> qid -> value

# Identity keys one kind of run adds after the spec (a released checkpoint's); written only when set.
IDENTITY_KEYS = ("checkpoint", "conditions", "depth")
# Keys written only when set (a record built without them has none of them).
WRITTEN_WHEN_SET = frozenset(
    {"schema_version", "integrity", "substitutions", "finetune_stage", "pretrain_seed", *IDENTITY_KEYS}
)


@dataclass(frozen=True)
class RunRecord:
    """One run's record. ``extras``: keys this class does not name (kept, written back in place);
    ``keys``: the JSON's keys in order (empty: a record built here, written in the class's field order);
    ``source``: the file it was read from or written to (None: neither yet; :attr:`path` refuses then)."""

    run_id: str
    method: str
    profile: str
    metrics: Metrics
    schema_version: int | None = None
    created: str = ""
    spec_hash: str | None = None
    spec: dict[str, Any] | None = None
    checkpoint: dict[str, Any] | None = None  # a released checkpoint's registry entry, folder, fingerprint
    conditions: dict[str, Any] | None = None  # a released checkpoint's run conditions
    depth: int | None = None  # a released checkpoint's ranking depth
    command: str = ""
    seed: int | None = None
    pretrain_seed: int | None = None  # its pre-training seed in a `run --pretrain-seeds` study (absent otherwise)
    git: dict[str, Any] = field(default_factory=dict)
    packages: dict[str, Any] = field(default_factory=dict)
    hardware: dict[str, Any] = field(default_factory=dict)  # {"declared", "detected", "processes"}
    substitutions: list[Any] | None = None
    models: list[dict[str, Any]] = field(default_factory=list)
    datasets: dict[str, Any] = field(default_factory=dict)  # dataset -> its files' checksums
    finetune_stage: str | None = None
    per_query: PerQuery = field(default_factory=dict)
    metrics_by_stage: dict[str, Metrics] = field(default_factory=dict)
    per_query_by_stage: dict[str, PerQuery] = field(default_factory=dict)
    efficiency: dict[str, dict[str, Any]] = field(default_factory=dict)
    efficiency_by_stage: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    comparison: list[dict[str, Any]] = field(default_factory=list)
    chance: dict[str, dict[str, Any]] = field(default_factory=dict)
    stages: list[dict[str, Any]] = field(default_factory=list)
    run_files: dict[str, dict[str, str]] = field(default_factory=dict)
    seconds: float | None = None
    mlflow: dict[str, Any] = field(default_factory=dict)
    integrity: dict[str, Any] | None = None  # the seal (harness.records.integrity); None until written
    extras: dict[str, Any] = field(default_factory=dict, repr=False)
    keys: tuple[str, ...] = field(default=(), repr=False)
    source: Path | None = field(default=None, compare=False)

    @classmethod
    def from_json(cls, data: Mapping[str, Any], path: Path | None = None) -> RunRecord:
        """The record of a parsed JSON object (validated by the caller: :func:`harness.records.store.load_record`)."""
        known = {k: v for k, v in data.items() if k in RECORD_FIELDS}
        extras = {k: v for k, v in data.items() if k not in RECORD_FIELDS}
        return cls(**known, extras=extras, keys=tuple(data), source=path)

    def to_json(self) -> dict[str, Any]:
        """The JSON object, keys in the order read (or built); nested values are shared, not copied."""
        return {key: self._value(key) for key in self.keys or self._built_keys()}

    def _value(self, key: str) -> Any:
        return getattr(self, key) if key in RECORD_FIELDS else self.extras[key]

    def _built_keys(self) -> list[str]:
        """A record constructed here: the fields in order, the unknown keys after the spec (where
        :func:`harness.run.record.build_record` puts what one kind of run adds)."""
        out: list[str] = []
        for name in BUILT_ORDER:
            if name not in WRITTEN_WHEN_SET or getattr(self, name) is not None:
                out.append(name)
            if name == "spec":
                out += list(self.extras)
        return out

    def replace(self, **changes: Any) -> RunRecord:
        """A copy with ``changes`` (field names, ``source`` too); the keys keep their order, a new one comes last."""
        added = tuple(k for k in changes if k in RECORD_FIELDS and k not in self.keys)
        return dataclasses.replace(self, **changes, keys=self.keys + added if self.keys else ())

    @property
    def path(self) -> Path:
        """The file the record was read from or written to."""
        if self.source is None:
            raise HarnessError(f"record {self.run_id} was neither read from nor written to a file")
        return self.source

    @functools.cached_property
    def integrity_problems(self) -> list[str]:
        """Seal, aggregate and identity problems (``harness.records.integrity``); empty for an untouched
        record read from its own ``<run_id>.json``."""
        return problems(self.to_json(), self.source.stem if self.source is not None else self.run_id)

    def run_conditions(self) -> dict[str, Any]:
        """Run conditions for comparisons with the papers, derived from the record's own spec
        (``harness.spec.conditions``), plus the fine-tuning stage its metrics come from."""
        cond: dict[str, Any] = run_conditions(self.spec or {}, self.method, self.profile)
        cond.update(self.conditions or {})  # a released checkpoint's record names it here
        if self.finetune_stage and "finetune_stage" not in cond:
            cond["finetune_stage"] = self.finetune_stage
        if self.finetune_stage:
            cond.setdefault("final_stage", self.finetune_stage)  # a record's metrics are its final stage's
        cond.update({"profile": self.profile, "method": graded_method(self.spec or {}, self.method)})
        return cond

    def label(self) -> str:
        return f"{self.method} [{self.profile}] {self.run_id}"


# The JSON keys that are fields, in the one order a record built here is written (the seal last).
BUILT_ORDER: tuple[str, ...] = (
    "schema_version",
    "run_id",
    "created",
    "method",
    "profile",
    "spec_hash",
    "spec",
    *IDENTITY_KEYS,
    "command",
    "seed",
    "pretrain_seed",
    "git",
    "packages",
    "hardware",
    "substitutions",
    "models",
    "datasets",
    "finetune_stage",
    "metrics",
    "per_query",
    "metrics_by_stage",
    "per_query_by_stage",
    "efficiency",
    "efficiency_by_stage",
    "comparison",
    "chance",
    "stages",
    "run_files",
    "seconds",
    "mlflow",
    "integrity",
)
RECORD_FIELDS = frozenset(f.name for f in dataclasses.fields(RunRecord)) - {"extras", "keys", "source"}
