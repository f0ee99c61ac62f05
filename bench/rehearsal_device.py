"""The rehearsal (each trained method's paper plan at the papers' shapes, a step per stage) on
whatever device is here, with a per-stage table: seconds, peak GPU memory, and the final numbers
beside the committed CPU reference's.

Each method runs as its own ``python -m harness run --method M --profile rehearsal`` from an
empty cache (``HARNESS_CACHE_DIR`` in a temporary folder unless ``--cache`` is given), so every
stage is built and timed. On CUDA the rehearsal trains in the paper's precision (bf16/fp16
autocast) where the CPU reference ran fp32, so its numbers are not expected to equal the
reference's to the digit: the table prints both, and the point of the run is that every stage of
the paper plan executes on the GPU, with its time and memory.

    python bench/rehearsal_device.py [--methods cotmae cotmae_qc ...] [--json PATH] [--records DIR]

``--records DIR`` copies each new run record there (they are written to the runs folder the
harness uses, ``<HARNESS_RUNS_DIR or runs/>/local/``, and are not gated: ``check --add RUN_ID``
moves one into ``runs/records/``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.core.paths import local_runs_dir  # noqa: E402 - after the sys.path line above, which makes the checkout importable
from harness.records.store import load_references  # noqa: E402 - after the sys.path line above, which makes the checkout importable

DENSE = ["cotmae", "cotmae_qc", "cocondenser", "cocondenser_qc"]


def reference_record(method: str) -> dict | None:
    """The committed CPU reference of ``method``'s rehearsal, read through the gate's manifest reader."""
    committed = ROOT / "runs" / "records"
    entry = load_references(committed).get((method, "rehearsal"))
    path = committed / f"{entry['run_id']}.json" if entry else None
    return json.loads(path.read_text()) if path and path.exists() else None


def run_one(method: str, cache: Path, log: Path) -> tuple[dict | None, float, int]:
    out = cache / f"{method}.summary.json"
    env = {**os.environ, "HARNESS_CACHE_DIR": str(cache / method), "PYTHONUNBUFFERED": "1"}
    started = time.time()
    with log.open("w") as fh:
        rc = subprocess.call(
            [sys.executable, "-m", "harness", "run", "--method", method, "--profile", "rehearsal", "--json", str(out)],
            cwd=ROOT,
            env=env,
            stdout=fh,
            stderr=subprocess.STDOUT,
        )
    seconds = time.time() - started
    if rc != 0 or not out.exists():
        return None, seconds, rc
    summary = json.loads(out.read_text())
    record = json.loads(Path(summary["run_record"]).read_text())
    return record, seconds, rc


def headline(record: dict) -> dict[str, float]:
    """nDCG@10 / RR@10 of the final stage, per benchmark, in points."""
    out = {}
    for bench, measures in (record.get("metrics") or {}).items():
        for name in ("nDCG@10", "RR@10"):
            if name in measures:
                out[f"{bench} {name}"] = round(100 * measures[name], 2)
    return out


def tied_top10(run_file: str) -> float:
    """Share of queries whose top 10 holds two equal scores (low-precision encodings of barely
    trained encoders tie, and ties are then ordered by document id, not by the model)."""
    by_query: dict[str, list[float]] = {}
    for line in Path(run_file).read_text().splitlines():
        qid, _, _, rank, score, _ = line.split()
        if int(rank) <= 10:
            by_query.setdefault(qid, []).append(float(score))
    tied = sum(len(set(scores)) < len(scores) for scores in by_query.values())
    return round(tied / max(1, len(by_query)), 3)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--methods",
        nargs="+",
        default=DENSE,
        help="trained methods to rehearse (default: the four dense ones, which need no Java: "
        "CPDAE builds its own BM25 index and LexMAE its impact indexes with Lucene)",
    )
    ap.add_argument("--cache", type=Path, help="stage cache root (default: an empty temporary folder)")
    ap.add_argument("--json", type=Path, help="write the rows here")
    ap.add_argument("--records", type=Path, help="copy each new run record into this folder")
    ap.add_argument("--logs", type=Path, help="keep each run's output here (default: beside the cache)")
    args = ap.parse_args(argv)

    import torch

    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else f"CPU x {os.cpu_count()}"
    print(f"device: {device}; torch {torch.__version__}; python {sys.version.split()[0]}", flush=True)
    cache = args.cache or Path(tempfile.mkdtemp(prefix="rehearsal-device-"))
    logs = args.logs or cache
    logs.mkdir(parents=True, exist_ok=True)
    rows, results = [], []
    for method in args.methods:
        record, seconds, rc = run_one(method, cache, logs / f"{method}.log")
        if record is None:
            print(f"{method}: FAILED (exit {rc}); last lines of {logs / (method + '.log')}:", flush=True)
            print("\n".join((logs / f"{method}.log").read_text().splitlines()[-15:]), flush=True)
            results.append({"method": method, "failed": rc, "seconds": round(seconds, 1)})
            continue
        if args.records:
            args.records.mkdir(parents=True, exist_ok=True)
            shutil.copy(local_runs_dir() / f"{record['run_id']}.json", args.records)
        ref = reference_record(method)
        stages = [s for s in record["stages"] if not s.get("cached")]
        for s in stages:
            rows.append((method, s["stage"], s.get("dataset") or "", s["seconds"], s.get("cuda_peak_gib")))
        results.append(
            {
                "method": method,
                "run_id": record["run_id"],
                "seconds": round(seconds, 1),
                "precision": (record.get("spec", {}).get("pretrain") or {}).get("precision"),
                "stages": stages,
                "headline": headline(record),
                "tied_top10": {
                    bench: tied_top10(path)
                    for bench, path in (record.get("run_files") or {}).get(record.get("finetune_stage"), {}).items()
                },
                "cpu_reference": (
                    {"run_id": ref["run_id"], "headline": headline(ref), "seconds": ref.get("seconds")} if ref else None
                ),
            }
        )
        print(f"{method}: {seconds:.0f} s, {len(stages)} stages built", flush=True)

    print(f"\n{'method':<15} {'stage':<15} {'dataset':<36} {'seconds':>8} {'peak GiB':>9}")
    for method, stage, dataset, seconds, peak in rows:
        print(
            f"{method:<15} {stage:<15} {dataset[:36]:<36} {seconds:>8.2f} {'-' if peak is None else f'{peak:.2f}':>9}"
        )
    print(f"\n{'method':<15} {'total s':>8} {'CPU ref s':>9}  final numbers (this run | CPU reference, points)")
    for r in results:
        if "failed" in r:
            print(f"{r['method']:<15} FAILED (exit {r['failed']})")
            continue
        ref = r["cpu_reference"] or {}
        pairs = ", ".join(
            f"{k} {v:.2f} | {(ref.get('headline') or {}).get(k, float('nan')):.2f}" for k, v in r["headline"].items()
        )
        print(f"{r['method']:<15} {r['seconds']:>8.0f} {ref.get('seconds') or float('nan'):>9.0f}  {pairs}")
        print(
            f"{'':<15} {'':>8} {'':>9}  queries with tied scores in their top 10: "
            + ", ".join(f"{b} {v:.0%}" for b, v in r["tied_top10"].items())
        )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"device": device, "torch": torch.__version__, "runs": results}, indent=1))
    failed = [r["method"] for r in results if "failed" in r]
    print(
        f"\nrehearsal on {device}: {len(results) - len(failed)} of {len(results)} methods ran every stage"
        + (f"; failed: {', '.join(failed)}" if failed else "")
    )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
