#!/usr/bin/env bash
# One idempotent set-up for a fresh Debian machine with Python 3.11 (run as root, or with
# the system packages already present), then an optional command:
#   bash setup.sh              set up only
#   bash setup.sh run [ARGS]   set up, then `python -m harness run ARGS` (the main job)
#   bash setup.sh test [ARGS]  set up, then the test suite (what .ci/run calls)
#   bash setup.sh lint         set up, then ruff (lint and format check) and mypy (what .ci/run calls first)
#   bash setup.sh harness ARGS set up, then any `python -m harness` command
# Which Python set: requirements-cuda.txt (the CUDA build of the pinned torch) with --cuda as the first
# argument or where `nvidia-smi` lists a GPU; else requirements.txt (the CPU set). HARNESS_TORCH=cpu forces
# the CPU set on a GPU machine.
set -euo pipefail
cd "$(dirname "$0")"
export PIP_DISABLE_PIP_VERSION_CHECK=1 MLFLOW_DISABLE_TELEMETRY=true HF_HUB_OFFLINE=1

# --- system packages: Java 17 for pyserini (Lucene), Chromium for the leaderboard's browser test
missing=()
command -v java >/dev/null 2>&1 || missing+=(openjdk-17-jdk-headless)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v chromedriver >/dev/null 2>&1 || missing+=(chromium-driver)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "setup: installing system packages: ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    echo "setup: please install with apt (needs root): ${missing[*]}" >&2
    exit 1
  fi
fi

# --- Python environment: pinned packages in .venv, re-installed only when requirements change
reqs=requirements.txt
why="no NVIDIA GPU found (nvidia-smi)"
if [ "${1:-}" = --cuda ]; then
  shift
  reqs=requirements-cuda.txt why="asked with --cuda"
elif [ "${HARNESS_TORCH:-}" = cpu ]; then
  why="HARNESS_TORCH=cpu"
elif gpu=$(nvidia-smi -L 2>/dev/null | head -n 1) && [ -n "$gpu" ]; then
  reqs=requirements-cuda.txt why="nvidia-smi lists ${gpu%% (UUID*}"
fi
if [ "$reqs" = requirements-cuda.txt ]; then
  echo "setup: Python set: GPU ($reqs: torch 2.13.0 built for CUDA 13.0, needs an NVIDIA driver >= 580) -- $why"
else
  echo "setup: Python set: CPU ($reqs) -- $why"
fi
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null 2>&1 || PY=python3
[ -x .venv/bin/python ] || "$PY" -m venv .venv
want=$(sha256sum "$reqs" pyproject.toml | sha256sum | cut -c1-16)
if [ "$(cat .venv/.installed 2>/dev/null)" != "$want" ]; then
  echo "setup: installing pinned Python packages into .venv (first time: a few minutes)"
  .venv/bin/python -m pip install -q -r "$reqs"
  if [ "$reqs" = requirements-cuda.txt ] && ! .venv/bin/python -c 'import sys, torch; sys.exit(not torch.version.cuda)'; then
    echo "setup: the GPU set got a CPU build of torch (a find-links folder or wheel cache holding torch 2.13.0+cpu" \
      "stood in for PyPI's CUDA wheel); fix: .venv/bin/python -m pip install --force-reinstall --no-deps" \
      "--index-url https://pypi.org/simple torch==2.13.0" >&2
    exit 1
  fi
  .venv/bin/python -m pip install -q --no-deps -e .
  echo "$want" > .venv/.installed
fi

cmd=${1:-}
[ $# -gt 0 ] && shift
case "$cmd" in
  "") echo "setup: done. Try: .venv/bin/python -m harness --help" ;;
  run) exec .venv/bin/python -m harness run "$@" ;;
  test) exec .venv/bin/python -m pytest "$@" ;;
  lint) .venv/bin/ruff check --quiet . && .venv/bin/ruff format --check --quiet . && exec .venv/bin/mypy ;;
  harness) exec .venv/bin/python -m harness "$@" ;;
  *) echo "setup: unknown command '$cmd' (use run, test, lint or harness)" >&2; exit 2 ;;
esac
