"""Typed spec blocks: a setting declared once (meaning, default, kind, null allowed) and the class that
checks a block's values against its settings and fills in the defaults.

The blocks are declared in harness.spec.stage_settings (pre-training, a fine-tuning stage, the
stage-3 teacher) and harness.spec.block_settings (tokenizer, corpus, query generation, retrieval);
:mod:`harness.spec.keys` derives the keys a spec may state, and the kinds ``validate`` checks, from
their fields, and the trainer configs are built from them, so no default is written twice. A stage's
cache key is derived from the block (:meth:`Settings.key`): every setting, resolved with its default,
except those declared not to change what a stage produces (``keyed=False``: run controls such as threads
or logging, and settings that are not read), so no stage can reuse an output made with other settings.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import field
from typing import Any, ClassVar, Self

from harness.core.errors import HarnessError
from harness.spec.kinds import NUMBER, Kind, example_text


def setting(
    meaning: str,
    default: Any = dataclasses.MISSING,
    kind: Kind = NUMBER,
    nullable: bool = False,
    example: Any = None,
    keys: Any = None,
    keyed: bool = True,
    stages: tuple[str, ...] = (),
    later: bool = False,
) -> Any:
    """A typed setting: ``kind`` is its type (and its range where no trainer config checks that);
    ``example`` is shown with a problem when the default cannot serve as one; ``keys`` are the keys of
    the closed block it holds (key -> meaning, or that block's Settings class). A mapping default is
    copied for each instance.

    Cache keys (:meth:`Settings.key`): ``keyed=False`` declares that the setting never changes what a
    stage produces (a run control, or a setting that is not read); ``stages`` names the stages that
    read it when its block serves several stages that read different parts of it (empty: every stage
    that reads the block). ``later``: a setting added after stages were cached, keyed only where it
    differs from its default, so the keys of every spec that leaves it unstated stay what they were."""
    metadata = {
        "meaning": meaning,
        "kind": kind,
        "nullable": nullable,
        "example": example,
        "keys": keys,
        "keyed": keyed,
        "stages": stages,
        "later": later,
    }
    if isinstance(default, dict):
        return field(default_factory=lambda: dict(default), metadata=metadata)
    return field(default=default, metadata=metadata)


def spec_key(f: dataclasses.Field) -> str:
    """The key a field is written as: a field named after a python keyword ends in ``_`` (``from_``)."""
    return f.name.removesuffix("_")


def default_of(f: dataclasses.Field) -> Any:
    """A field's default, ``dataclasses.MISSING`` for a required one."""
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return f.default


class Settings:
    """A typed spec block: each field is a :func:`setting`; ``reads`` names the stages whose cache keys
    hold the block (tests/test_stage_keys.py changes each setting and checks that they move)."""

    reads: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def _fields(cls) -> tuple[dataclasses.Field, ...]:
        return dataclasses.fields(cls)  # type: ignore[arg-type]  # every subclass is a dataclass

    @classmethod
    def keyed(cls, stage: str | None = None) -> tuple[str, ...]:
        """The spec keys of the settings that are part of `stage`'s cache key (every stage's when None)."""
        return tuple(
            spec_key(f)
            for f in cls._fields()
            if f.metadata["keyed"] and (stage is None or not f.metadata["stages"] or stage in f.metadata["stages"])
        )

    def key(self, stage: str | None = None) -> dict[str, Any]:
        """What `stage`'s cache key holds of this block: each :meth:`keyed` setting's value, defaults
        included (a changed default moves the key too), but a ``later`` setting at its default."""
        names = set(self.keyed(stage))
        return {
            spec_key(f): getattr(self, f.name)
            for f in self._fields()
            if spec_key(f) in names and not (f.metadata["later"] and getattr(self, f.name) == default_of(f))
        }

    @classmethod
    def meanings(cls) -> dict[str, str]:
        return {spec_key(f): f.metadata["meaning"] for f in cls._fields()}

    @classmethod
    def kinds(cls) -> dict[str, Kind]:
        return {spec_key(f): f.metadata["kind"] for f in cls._fields()}

    @classmethod
    def sub_blocks(cls) -> dict[str, Any]:
        """Key -> the keys of the closed block it holds (key -> meaning, or a Settings class)."""
        return {spec_key(f): f.metadata["keys"] for f in cls._fields() if f.metadata["keys"] is not None}

    @classmethod
    def problems(cls, values: Mapping[str, Any]) -> list[tuple[str, str]]:
        """(key, problem) for each missing required key and each value not of its declared kind:
        ``('steps', "'four hundred' is not a whole number (e.g. steps: 400)")``."""
        found = []
        for f in cls._fields():
            key = spec_key(f)
            value = values.get(key)
            if value is None:
                if default_of(f) is dataclasses.MISSING and not (key in values and f.metadata["nullable"]):
                    found.append(
                        (key, f"is required ({f.metadata['meaning']}; e.g. {key}: {example_text(cls.example(key))})")
                    )
                continue
            problem = f.metadata["kind"].problem(value)
            if problem:
                found.append((key, f"{problem} (e.g. {key}: {example_text(cls.example(key))})"))
        return found

    @classmethod
    def example(cls, key: str) -> Any:
        """A right value for setting ``key``: its declared example, else its default, else its kind's."""
        f = next(f for f in cls._fields() if spec_key(f) == key)
        if f.metadata["example"] is not None:
            return f.metadata["example"]
        default = default_of(f)
        return default if default not in (None, dataclasses.MISSING) else f.metadata["kind"].example

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any], where: str) -> Self:
        """The block's settings; a missing required key or a value of the wrong kind names ``where``.key
        (all of them: spec validation has reported them before a run starts, so this is the last guard)."""
        problems = cls.problems(values)
        if problems:
            raise HarnessError("; ".join(f"{where}.{key}: {problem}" for key, problem in problems))
        kwargs: dict[str, Any] = {}
        for f in cls._fields():
            key = spec_key(f)
            value = values.get(key)
            if value is not None or (key in values and f.metadata["nullable"]):
                kwargs[f.name] = value  # an explicit null on a nullable key: off; elsewhere null is the default
        return cls(**kwargs)


class BlockSettings(Settings):
    """A block at one key path of a spec (``block``), read from the resolved spec."""

    block: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def values(cls, spec: Any) -> Mapping[str, Any]:
        """The block as the spec states it."""
        return spec.get(".".join(cls.block)) or {}

    @classmethod
    def from_spec(cls, spec: Any) -> Self:
        """The block's settings; a missing required key or a value of the wrong type names file and key path."""
        return cls.from_mapping(cls.values(spec), f"{getattr(spec, 'path', 'spec')}: {'.'.join(cls.block)}")
