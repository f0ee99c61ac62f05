#!/usr/bin/env bash
# Which CUDA requirement set fits this machine's cards and driver (what `bash setup.sh --cuda` installs).
# Sourced by setup.sh (it calls cuda_set); run alone it prints the choice in one line and exits 0, or the
# reason no set fits and exits 1:  bash cuda-set.sh
#   requirements-cuda.txt     PyPI's torch 2.13.0, CUDA 13.0: compute capability >= 7.5, driver >= 580
#   requirements-cuda126.txt  torch 2.13.0+cu126 (PyTorch's own index): sm_50 .. sm_90 (the V100, sm_70),
#                             driver >= 525 (CUDA 12's minor-version compatibility)
# The oldest card decides (every rank runs the same torch). Reads nvidia-smi only; installs nothing.

# cuda_set: sets reqs (the file, empty when none fits) and why (one line); returns 1 when none fits.
cuda_set() {
  local caps driver cap major minor drv
  caps=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null) || caps=""
  driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n 1) || driver=""
  reqs=""
  if [ -z "$caps" ] || [ -z "$driver" ]; then
    why="nvidia-smi reports no card or driver (install the NVIDIA driver, or use the CPU set: bash setup.sh)"
    return 1
  fi
  cap=$(printf '%s\n' "$caps" | tr -d ' ' | sort -t. -k1,1n -k2,2n | head -n 1)  # the oldest card
  major=${cap%%.*} minor=${cap#*.} drv=${driver%%.*}
  local card="compute capability $cap, driver $driver"
  case "$major$minor$drv" in
    '' | *[!0-9]*) why="nvidia-smi answered '$cap' / '$driver', not numbers (check the driver: nvidia-smi -q)"; return 1 ;;
  esac
  if [ "$major$minor" -ge 75 ] && [ "$drv" -ge 580 ]; then
    reqs=requirements-cuda.txt why="$card: torch 2.13.0 for CUDA 13.0 (sm_75 or newer, driver >= 580)"
  elif [ "$major$minor" -ge 50 ] && [ "$major$minor" -le 90 ] && [ "$drv" -ge 525 ]; then
    local because="CUDA 13.0 needs sm_75 or newer"
    [ "$major$minor" -ge 75 ] && because="CUDA 13.0 needs driver >= 580"
    reqs=requirements-cuda126.txt why="$card: torch 2.13.0+cu126 ($because; CUDA 12.6 covers sm_50..sm_90, driver >= 525)"
  elif [ "$major$minor" -lt 50 ]; then
    why="$card: no torch 2.13.0 build supports a card older than sm_50"
    return 1
  else
    why="$card: the driver is too old for this card's torch (update it: >= 580 for CUDA 13.0, >= 525 for 12.6 up to sm_90)"
    return 1
  fi
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  if cuda_set; then echo "$reqs -- $why"; else echo "no CUDA set fits -- $why" >&2; exit 1; fi
fi
