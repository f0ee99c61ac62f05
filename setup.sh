#!/usr/bin/env bash
# One idempotent set-up for a fresh Debian machine with Python 3.11 (run as root, or with
# the system packages already present), then an optional command:
#   bash setup.sh              set up only
#   bash setup.sh run [ARGS]   set up, then `python -m harness run ARGS` (the main job)
#   bash setup.sh test [ARGS]  set up, then the test suite (what .ci/run calls; ARGS: pytest's, run as given)
#   bash setup.sh lint         set up, then ruff (lint and format check) and mypy (what .ci/run calls first)
#   bash setup.sh harness ARGS set up, then any `python -m harness` command
# Which Python set: a CUDA set with --cuda as the first argument or where `nvidia-smi` lists a GPU, chosen by
# cuda-set.sh from the oldest card's compute capability and the driver (requirements-cuda.txt: CUDA 13.0,
# sm_75+; requirements-cuda126.txt: CUDA 12.6, the V100's sm_70); else requirements.txt (the CPU set).
# HARNESS_TORCH=cpu forces the CPU set on a GPU machine.
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
# shellcheck source=cuda-set.sh
. ./cuda-set.sh  # cuda_set: the CUDA set for this machine's cards and driver
reqs=requirements.txt
why="no NVIDIA GPU found (nvidia-smi)"
cuda=""
if [ "${1:-}" = --cuda ]; then
  shift
  cuda="asked with --cuda"
elif [ "${HARNESS_TORCH:-}" = cpu ]; then
  why="HARNESS_TORCH=cpu"
elif gpu=$(nvidia-smi -L 2>/dev/null | head -n 1) && [ -n "$gpu" ]; then
  cuda="nvidia-smi lists ${gpu%% (UUID*}"
fi
if [ -n "$cuda" ]; then
  if ! cuda_set; then
    echo "setup: no CUDA requirement set fits ($cuda) -- $why" >&2
    exit 1
  fi
  echo "setup: Python set: GPU ($reqs) -- $why; $cuda"
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
  if [ "$reqs" != requirements.txt ] && ! .venv/bin/python -c 'import sys, torch; sys.exit(not torch.version.cuda)'; then
    index=https://pypi.org/simple pin=torch==2.13.0
    [ "$reqs" = requirements-cuda126.txt ] && index=https://download.pytorch.org/whl/cu126 pin=torch==2.13.0+cu126
    echo "setup: the GPU set got a CPU build of torch (a find-links folder or wheel cache holding torch 2.13.0+cpu" \
      "stood in for the CUDA wheel); fix: .venv/bin/python -m pip install --force-reinstall --no-deps" \
      "--index-url $index $pin" >&2
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
  test)
    [ $# -gt 0 ] && exec .venv/bin/python -m pytest "$@"
    # The whole suite in three passes, each run whatever the one before gave: the fast tests, then the slow
    # end-to-end runs that need no machine of their own, each pass over one pytest worker per core on one torch
    # thread each (torch defaults to a thread per core, so two workers would run twice as many threads as there
    # are cores); then, one at a time at the default threads, the slow tests marked `alone`: they spawn ranks of
    # their own, time signals into running stages, or gate a run against a committed reference.
    failed=0
    OMP_NUM_THREADS=1 .venv/bin/python -m pytest -m "not slow" -n auto || failed=$?
    OMP_NUM_THREADS=1 .venv/bin/python -m pytest -m "slow and not alone" -n auto || failed=$?
    .venv/bin/python -m pytest -m "slow and alone" || failed=$?
    exit "$failed" ;;
  lint) .venv/bin/ruff check --quiet . && .venv/bin/ruff format --check --quiet . && exec .venv/bin/mypy ;;
  harness) exec .venv/bin/python -m harness "$@" ;;
  *) echo "setup: unknown command '$cmd' (use run, test, lint or harness)" >&2; exit 2 ;;
esac
