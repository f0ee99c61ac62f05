"""The published checkpoints a run reads: pinned in model_pins.yaml, fetched, checked before a run, named in its record.

A checkpoint lives in ``models/<name>`` (or ``$HARNESS_MODELS_DIR/<name>``), where
:func:`harness.stages.checkpoints.resolve_checkpoint` finds it. :func:`fetch_model` downloads each of its
files at the pinned revision through :func:`harness.data.download.fetch` (resumable, verified against the
pinned sha256, else the first download's sha256 recorded: trust on first use), from the Hugging Face Hub or
from ``HARNESS_MODEL_MIRROR`` (a folder or URL holding ``<name>/<file>``). :func:`problem` is the preflight's
check of one checkpoint; :func:`provenance` what a run record says of it.
"""

from __future__ import annotations

import json
import os
import urllib.request
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from harness.core import yamlsafe
from harness.core.errors import HarnessError
from harness.data import download
from harness.stages.artifacts import hash_file
from harness.stages.checkpoints import PACKAGED, candidates, weights_sha256

MODEL_MIRROR_ENV = "HARNESS_MODEL_MIRROR"
HUB = "https://huggingface.co"
TOFU = "sha256 not pinned: recorded at first download (trust on first use)"
# What a checkpoint folder needs to load with transformers: configs, tokenizers, one weights format.
_KEEP_SUFFIXES = (".json", ".txt", ".model", ".safetensors", ".bin")
_SKIP = ("training_args.bin", "optimizer.bin", "scheduler.bin")


@dataclass(frozen=True)
class ModelPin:
    """One checkpoint's declared source: repository, commit, and file -> sha256 (None where not pinned)."""

    name: str
    repo: str | None
    revision: str | None
    files: dict[str, str | None] | None
    evidence: str = ""
    substitute: str = ""

    def verified_by(self) -> str:
        """How `fetch --list` describes the checks of this checkpoint."""
        if self.repo is None:
            return "no published source known" + (f"; substitute: {self.substitute}" if self.substitute else "")
        files = self.files or {}
        pinned = sum(1 for sha in files.values() if sha)
        rev = f"revision {self.revision[:12]}" if self.revision else "revision not pinned (main at first download)"
        if files and pinned == len(files):
            return f"{rev}; sha256 of {pinned} files pinned"
        return f"{rev}; {TOFU}"


@cache
def registry() -> dict[str, ModelPin]:
    """model_pins.yaml, read once."""
    raw = yamlsafe.load((Path(__file__).with_name("model_pins.yaml")).read_text(encoding="utf-8")) or {}
    return {
        name: ModelPin(
            name,
            entry.get("repo"),
            entry.get("revision"),
            dict(entry["files"]) if entry.get("files") else None,
            str(entry.get("evidence") or "").strip(),
            str(entry.get("substitute") or "").strip(),
        )
        for name, entry in raw.items()
    }


def fetch_command(name: str) -> str:
    return f"python -m harness fetch --model {name}"


def folder(name: str) -> Path | None:
    """The local folder holding checkpoint ``name`` (None when there is none)."""
    for path in candidates(name):
        if (path / "config.json").is_file():
            return path
    return None


def _files_here(root: Path) -> list[Path]:
    return sorted(
        p for p in root.rglob("*") if p.is_file() and not p.name.endswith((".verified.json", ".part", ".lock"))
    )


def problem(name: str) -> str | None:
    """One line on what is wrong with checkpoint ``name`` here (missing, or a file unlike its pin); None when
    it can be read as declared. A folder with no pin (a user's own checkpoint) counts as present."""
    if name in PACKAGED:
        return None  # installed by pip from a pinned package (requirements.txt)
    root = folder(name)
    pin = registry().get(name)
    if root is None:
        where = f"models/{name} (or $HARNESS_MODELS_DIR/{name})"
        if pin is not None and pin.repo is None:
            how = f"no published source known: put a copy at {where}" + (
                f", or {pin.substitute}" if pin.substitute else ""
            )
            return f"missing model {name} ({pin.evidence or 'no source'}); fetch: {how}"
        if pin is None and Path(name).expanduser().is_absolute():
            return f"missing model {name}; fetch: put the checkpoint folder there"
        return f"missing model {name} (looked in {where}); fetch: {fetch_command(name)}"
    for rel, sha in ((pin.files or {}) if pin else {}).items():
        path = root / rel
        if not path.is_file():
            return f"model {name}: {rel} missing from {root}; fetch: {fetch_command(name)}"
        found = download.recorded_sha256(path) or hash_file(path)
        if sha and found != sha:
            return (
                f"model {name}: {rel} has sha256 {found[:12]}..., the pinned revision's is {sha[:12]}...; "
                f"fetch: remove {root} and run {fetch_command(name)}"
            )
    for path in _files_here(root):  # trust on first use: what the first download recorded must still hold
        first = download.first_sha256(path)
        if first and (download.recorded_sha256(path) or hash_file(path)) != first:
            return (
                f"model {name}: {path.relative_to(root)} changed since it was fetched (sha256 {first[:12]}... then); "
                f"fetch: remove {root} and run {fetch_command(name)}"
            )
    return None


def _mirror_base(name: str) -> str | None:
    mirror = os.environ.get(MODEL_MIRROR_ENV, "").strip()
    if not mirror:
        return None
    return f"{mirror.rstrip('/')}/{name}" if "://" in mirror else Path(mirror).expanduser().joinpath(name).as_uri()


def _wanted(paths: list[str]) -> list[str]:
    """The files of a repository listing a transformers load needs: safetensors weights over .bin ones."""
    keep = [p for p in paths if p.endswith(_KEEP_SUFFIXES) and Path(p).name not in _SKIP and "/" not in p]
    if any(p.endswith(".safetensors") for p in keep):
        keep = [p for p in keep if not p.endswith(".bin")]
    return keep


def _listing(pin: ModelPin) -> tuple[str, list[str]]:
    """(revision, files) of an unpinned checkpoint: the mirror folder's files, or the Hub's listing of main."""
    base = _mirror_base(pin.name)
    if base and base.startswith("file://"):
        root = Path(urllib.request.url2pathname(base[len("file://") :]))
        return pin.revision or "mirror", _wanted([p.relative_to(root).as_posix() for p in _files_here(root)])
    rev = pin.revision or "main"
    try:
        with urllib.request.urlopen(f"{HUB}/api/models/{pin.repo}/revision/{rev}", timeout=60) as resp:
            info = json.load(resp)
    except (OSError, ValueError) as exc:
        raise HarnessError(
            f"could not list {pin.repo} on the Hugging Face Hub ({exc}); set {MODEL_MIRROR_ENV} to a folder "
            f"holding {pin.name}/<files>, or copy the checkpoint to models/{pin.name}"
        ) from None
    return str(info.get("sha") or rev), _wanted([s["rfilename"] for s in info.get("siblings", [])])


def fetch_model(name: str) -> Path:
    """Download checkpoint ``name`` into models/NAME at its pinned revision, each file verified (resumable)."""
    pin = registry().get(name)
    if pin is None:
        pin = ModelPin(name, name, None, None)  # an unregistered Hub name: main, trust on first use
    if pin.repo is None:
        raise HarnessError(
            f"{name}: no published source known ({pin.evidence}); " + (pin.substitute or f"put a copy at models/{name}")
        )
    target = candidates(name)[-1]
    if pin.files:
        revision, files = str(pin.revision or "main"), list(pin.files)
    else:
        revision, files = _listing(pin)
    base = _mirror_base(name) or f"{HUB}/{pin.repo}/resolve/{revision}"
    for rel in files:
        sha = (pin.files or {}).get(rel)
        download.fetch(f"{base}/{rel}", target / Path(rel).parent, sha256=sha, filename=Path(rel).name)
    (target / ".harness-source.json").write_text(
        json.dumps({"repo": pin.repo, "revision": revision, "pinned": bool(pin.files)}, indent=1)
    )
    return target


def provenance(name: str) -> dict[str, Any]:
    """What a run record says of checkpoint ``name``: source, revision, and the sha256 of its weights and files."""
    if name in PACKAGED:
        module, _, requirement = PACKAGED[name]
        return {"name": name, "source": f"pip package {requirement}", "revision": requirement.split("==")[-1]}
    pin = registry().get(name)
    root = folder(name)
    out: dict[str, Any] = {"name": name, "source": pin.repo if pin else None, "revision": pin.revision if pin else None}
    if root is None:
        return out
    meta = root / ".harness-source.json"
    if meta.is_file():
        out["revision"] = json.loads(meta.read_text()).get("revision") or out["revision"]
    out["weights_sha256"] = weights_sha256(root)
    out["files"] = {
        p.relative_to(root).as_posix(): download.recorded_sha256(p) or hash_file(p)
        for p in _files_here(root)
        if p.name != meta.name
    }
    return out
