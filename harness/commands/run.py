"""`python -m harness run`: run a method's spec end to end and compare with the papers."""

from __future__ import annotations

import argparse
import os
import sys

from harness import SEED
from harness.commands._output import name_list, write_json
from harness.run.runner import run_method
from harness.stages.graph import STOPPABLE


# Fresh-cache wall times of cotmae_qc, from its committed records (the README says the same).
MINI_TIME = "about 13 minutes on 2 CPU cores (755 s measured on a 2-core Intel Xeon (6/207/2), 2026-11-25)"
TINY_TIME = "4 to 7 minutes on 2 CPU cores (251 to 433 s measured, 2026-11-22/23)"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run",
        help="run a method end to end (stages are cached; re-running resumes)",
        description=(
            "Run a method spec (baselines/<method>.yaml): its stages, evaluation with the "
            "papers' conventions, comparison with the papers' reported cells, MLflow logging "
            "and a run record under runs/local/ (your runs: git-ignored, never gated; `check --add RUN_ID` "
            "moves one into runs/records/). Finished stages are cached under cache/, so "
            "an interrupted run resumes where it stopped. Each stage prints one '[k/N] stage ...' line."
        ),
    )
    p.add_argument("--method", default="bm25", help="method name (see `python -m harness ls`; default: bm25)")
    p.add_argument("--profile", choices=["paper", "rehearsal", "mini", "tiny"], default=None,
                   help="settings profile: paper (the papers' settings), mini (CPU, MiniLM init: learns in "
                        f"{MINI_TIME}), tiny (CPU, 2-layer random init: the fast code-path check, {TINY_TIME}); "
                        "default: "
                        "paper if the declared hardware is present, else mini where the method has it, else tiny")
    p.add_argument("--dataset", action="append", default=None, metavar="NAME",
                   help="benchmark to evaluate (repeatable or comma-separated); default: the spec's datasets")
    p.add_argument("--stage", choices=STOPPABLE, default=None, metavar="STAGE",
                   help="run the stages up to and including the first one of this name, then stop (e.g. pretrain: "
                        "export the pre-trained encoder; retriever1: fine-tune retriever 1). Names: "
                        + ", ".join(STOPPABLE) + "; --dry-run shows which a method runs")
    p.add_argument("--dry-run", action="store_true",
                   help="print the stage plan and the hardware mapping (declared vs detected) without running")
    p.add_argument("--force", action="store_true", help="ignore cached stage outputs and recompute them")
    p.add_argument("--seed", type=_seed, default=None, metavar="N",
                   help="run under another seed than 42 (measuring seed-to-seed spread): its stages are cached "
                        "apart and its record goes to runs/seeds/, never among the gated records")
    p.add_argument("--json", metavar="PATH", help="write a machine-readable summary (metrics + comparison cells)")
    p.set_defaults(func=_run)


def _seed(text: str) -> int:
    if not text.strip().isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a non-negative integer")
    return int(text)


def _run(args: argparse.Namespace) -> int:
    if args.seed is not None and args.seed != SEED:
        # Every module reads the seed when it is imported: start again with it in the environment.
        os.environ["HARNESS_SEED"] = str(args.seed)
        os.execv(sys.executable, [sys.executable, "-m", "harness", *args.argv])

    # A run prints one line per stage; the libraries' own bars (transformers' "Writing model shards",
    # the hub's downloads) are noise there. Read when transformers / huggingface_hub are imported.
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    datasets = name_list(args.dataset, "--dataset")
    result = run_method(args.method, args.profile, datasets, force=args.force, stage=args.stage,
                        dry_run=args.dry_run)
    if args.json:
        write_json(args.json, {
            "method": result["method"], "profile": result["profile"], "run_id": result["run_id"],
            "spec_hash": result["spec_hash"], "metrics": result["metrics"],
            **({"metrics_by_stage": result["metrics_by_stage"]} if result.get("metrics_by_stage") else {}),
            "comparison": result["comparison"],
            "run_record": result["run_record"], "mlflow": result["mlflow"],
            **({"encoder": result["encoder"]} if "encoder" in result else {}),
            # each stage with its cache key (a dry-run's: planned, with `plan`: cached / to run / reused)
            "stages": result["stages"], **({"dry_run": True} if result.get("dry_run") else {}),
        })
    return 0
