"""`python -m harness run`: run a method's spec end to end and compare with the papers."""

from __future__ import annotations

import argparse
import os

from harness.commands._output import add_wide, json_target, name_list, write_json
from harness.core import ranks
from harness.core.errors import HarnessError
from harness.core.hardware import PLANNED_WORLD, default_processes, detect, planned_world_size
from harness.core.paths import cache_dir
from harness.core.seeds import DEFAULT_SEED
from harness.core.text_table import reflow
from harness.run import launch, process_check, seed_study
from harness.run.device_check import ALLOW_CPU_FLAG
from harness.run.launch import Layout
from harness.run.run_plan import ProfileChoice
from harness.run.runner import choose_profile, run_method
from harness.spec.kinds import SEED_MAX
from harness.spec.method import load_method
from harness.stages.graph import STOPPABLE
from harness.training.precision import FLAG_CHOICES

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
    p.add_argument(
        "--profile",
        choices=["paper", "rehearsal", "mini", "tiny"],
        default=None,
        help="settings profile: paper (the papers' settings), mini (CPU, MiniLM init: learns in "
        f"{MINI_TIME}), tiny (CPU, 2-layer random init: the fast code-path check, {TINY_TIME}); "
        "default: paper on a GPU machine holding the paper run's data and checkpoints, else mini "
        "where the method has it, else tiny",
    )
    p.add_argument(
        ALLOW_CPU_FLAG,
        action="store_true",
        help="run a CUDA-declared paper profile on the CPU when torch sees no usable GPU (without it such a run "
        "refuses before its first stage: at paper scale the CPU takes weeks)",
    )
    p.add_argument(
        "--dataset",
        action="append",
        default=None,
        metavar="NAME",
        help="benchmark to evaluate (repeatable or comma-separated); default: the spec's datasets",
    )
    p.add_argument(
        "--stage",
        choices=STOPPABLE,
        default=None,
        metavar="STAGE",
        help="run the stages up to and including the first one of this name, then stop (e.g. pretrain: "
        "export the pre-trained encoder; retriever1: fine-tune retriever 1). Names: "
        + ", ".join(STOPPABLE)
        + "; --dry-run shows which a method runs",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="print the stage plan and the hardware mapping (declared vs detected) without running",
    )
    p.add_argument("--force", action="store_true", help="ignore cached stage outputs and recompute them")
    p.add_argument(
        "--seed",
        type=_seed,
        default=None,
        metavar="N",
        help="run under another seed than 42 (measuring seed-to-seed spread): its stages are cached "
        "apart and its record goes to runs/seeds/, never among the gated records",
    )
    # One seed of a study: what `--seeds` passes its seeds' launched workers (they run `run` again).
    p.add_argument("--seed-study", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--pretrain-seed", type=_seed, default=None, help=argparse.SUPPRESS)
    p.add_argument(
        "--seeds",
        type=_seeds,
        default=None,
        metavar="LIST",
        help="a seed study (e.g. 42-46 or 42,43,44): the stages before fine-tuning run once under seed 42 "
        "and are shared, fine-tuning and evaluation run under each seed, 42 first; every record goes to "
        "runs/seeds/, where sigma_rep reads it (docs/comparing-with-papers.md, 'A seed study'); with "
        "--dry-run: one seed's plan and the study's GPU-hours",
    )
    p.add_argument(
        "--pretrain-seeds",
        type=_seeds,
        default=None,
        metavar="LIST",
        help="with --seeds: the pre-training seeds of the study (e.g. 42,43): the stages that draw from a "
        "pre-training seed (query generation, pre-training, a random init) run once per pre-training seed and "
        "are shared by its fine-tuning seeds, every pre-training seed x fine-tuning seed runs, 42 first; the "
        "records carry pretrain_seed, which measures the pre-training part of the spread (sigma_pt)",
    )
    p.add_argument(
        "--precision",
        choices=FLAG_CHOICES,
        default=None,
        help="what the profile's `precision: auto` resolves to, instead of measuring bf16 autocast "
        "against fp32 on this CPU (re-running a reference: its recorded precision)",
    )
    p.add_argument("--json", metavar="PATH", help="write a machine-readable summary (metrics + comparison cells)")
    p.add_argument(
        "--track",
        choices=["best-effort", "required"],
        default="best-effort",
        help="MLflow tracking: best-effort (default: a slow or failing server is one warning and the "
        "run goes on untracked) or required (a server failing its check stops the run before its "
        "first stage; a later failure fails the command once the record and --json are written)",
    )
    dist = p.add_argument_group(
        "several devices and nodes (torchrun's meanings; workers start through PyTorch's elastic launcher)"
    )
    dist.add_argument(
        "--nproc-per-node",
        type=_count,
        default=None,
        metavar="N",
        help="worker processes on this node, one per device (default: every GPU present up to the "
        "spec's declared count; 1 on a CPU machine, where N > 1 runs gloo workers)",
    )
    dist.add_argument(
        process_check.FORCE_FLAG,
        action="store_true",
        help="allow --nproc-per-node above the devices present (the GPUs, or the cores on a CPU machine)",
    )
    dist.add_argument("--nnodes", type=_count, default=1, metavar="N", help="nodes in the run (default 1)")
    dist.add_argument("--node-rank", type=int, default=0, metavar="R", help="this node's rank, 0..nnodes-1")
    dist.add_argument(
        "--rdzv-endpoint",
        default=None,
        metavar="HOST:PORT",
        help="node 0's address and a free port, the same on every node (several nodes); see "
        "docs/profiles-and-hardware.md for a SLURM example",
    )
    dist.add_argument(
        "--rdzv-timeout",
        type=_seconds,
        default=launch.RDZV_TIMEOUT,
        metavar="SECONDS",
        help=f"how long the nodes wait for each other before the run fails with one line "
        f"(default {launch.RDZV_TIMEOUT} s); the wait says every minute on stderr what it "
        "waits for, and SIGTERM / Ctrl-C end it at once",
    )
    add_wide(p)
    p.set_defaults(func=_run)


def _seed(text: str) -> int:
    if not text.strip().isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a non-negative integer")
    if int(text) > SEED_MAX:  # numpy's seeding refused it only when fine-tuning started
        raise argparse.ArgumentTypeError(f"{text.strip()} is out of range: a seed must be in [0, {SEED_MAX}]")
    return int(text)


def _seeds(text: str) -> list[int]:
    try:
        return seed_study.parse_seeds(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _count(text: str) -> int:
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number >= 1")
    return int(text)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds > 0")
    return value


def _layout(args: argparse.Namespace, choice: ProfileChoice) -> Layout:
    """The processes the run asks for; without --nproc-per-node, every GPU present up to the count the chosen
    profile declares."""
    nproc = args.nproc_per_node
    if nproc is None:
        if args.dry_run or launch.inside_worker():
            nproc = 1
        else:
            hw = detect()
            declared = dict(load_method(args.method, choice.profile).get("hardware") or {})
            nproc = 1 if hw.device_type != "cuda" else default_processes(hw, declared)
    return Layout(nproc, args.nnodes, args.node_rank, args.rdzv_endpoint, args.rdzv_timeout)


def _check_processes(args: argparse.Namespace, layout: Layout, choice: ProfileChoice) -> None:
    """--nproc-per-node bounded by the devices present (a real run; a dry-run may plan another machine),
    and the pre-training batch mappable onto the processes the run (or the plan) shares it over."""
    hw = detect()
    if args.nproc_per_node is not None and not args.dry_run:
        forced = args.oversubscribe or os.environ.get("HARNESS_SHARE_GPU") == "1"
        process_check.check_bound(args.nproc_per_node, hw, forced)
    spec = load_method(args.method, choice.profile)
    processes = (
        layout.processes
        if args.nproc_per_node is not None or not args.dry_run
        else planned_world_size(hw, spec.get("hardware"))
    )
    process_check.check_batch(spec, processes)


def _study(args: argparse.Namespace) -> int:
    """``--seeds``: one run per seed, one after the other in this process (a launched seed starts its
    own workers), or with --dry-run one seed's plan and the study's GPU-hours."""
    if args.seed is not None:
        raise HarnessError("--seed and --seeds: give one (--seeds 42-46 runs seed 42 among them)")
    pretrain = args.pretrain_seeds
    if not args.dry_run:
        if pretrain is None:
            return seed_study.run(args.seeds, lambda seed: _run(_one_seed(args, seed)))
        return seed_study.run_design(pretrain, args.seeds, lambda p, seed: _run(_one_seed(args, seed, p)))
    # a pre-training seed's plan: the study's refusal (a method drawing nothing from it) comes here too
    first = None if pretrain is None else seed_study.ordered(pretrain)[0]
    datasets = name_list(args.dataset, "--dataset")
    seeds = {} if first is None else {"seed_study": True, "pretrain_seed": first}
    result = run_method(args.method, args.profile, datasets, stage=args.stage, dry_run=True, **seeds)
    spec = load_method(result.method, result.profile)
    print(reflow("\n".join(seed_study.describe(spec, result.stages, args.seeds, pretrain))))
    return 0


def _one_seed(args: argparse.Namespace, seed: int, pretrain: int | None = None) -> argparse.Namespace:
    """The study's command line as one seed's run: ``--seed N`` in place of ``--seeds`` (and ``--pretrain-seed
    P`` in place of ``--pretrain-seeds``), marked as a study's seed (its workers, if it launches any, are told
    so by their command line)."""
    argv = [*seed_study.without_seeds(args.argv), "--seed", str(seed), "--seed-study"]
    argv += [] if pretrain is None else ["--pretrain-seed", str(pretrain)]
    one = {"seeds": None, "pretrain_seeds": None, "seed": seed, "seed_study": True, "pretrain_seed": pretrain}
    return argparse.Namespace(**{**vars(args), **one, "argv": argv})


def _run(args: argparse.Namespace) -> int:
    if args.seeds is not None:
        return _study(args)
    if getattr(args, "pretrain_seeds", None) is not None:
        raise HarnessError("--pretrain-seeds needs --seeds: a study of pre-training seeds x fine-tuning seeds")
    seed = DEFAULT_SEED if args.seed is None else args.seed

    # A run prints one line per stage; the libraries' own bars (transformers' "Writing model shards",
    # the hub's downloads) are noise there. Read when transformers / huggingface_hub are imported.
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    # The profile is chosen once: the layout, the process checks and the run's plan read this choice.
    choice = choose_profile(args.method, args.profile)
    layout = _layout(args, choice)
    layout.check()
    if not launch.inside_worker():  # before any worker starts: a worker inherits what its launcher checked
        _check_processes(args, layout, choice)
    if args.dry_run and args.nproc_per_node is not None:
        os.environ[PLANNED_WORLD] = str(layout.processes)  # the plan shares the global batch over these
    elif layout.processes > 1 and not launch.inside_worker():
        return launch.launch(layout, launch.worker_argv(args.argv), cache_dir() / "logs" / "ranks")

    datasets = name_list(args.dataset, "--dataset")
    json_target(args.json)  # a run refused its summary only after its last stage
    required = args.track == "required"
    result = run_method(
        args.method,
        choice,
        datasets,
        force=args.force,
        stage=args.stage,
        dry_run=args.dry_run,
        track_required=required,
        precision=args.precision,
        allow_cpu=args.allow_cpu,
        seed=seed,
        seed_study=args.seed_study,
        pretrain_seed=getattr(args, "pretrain_seed", None),
    )
    if not ranks.is_main():
        return 0  # rank 0 prints, records and writes --json
    if args.json:
        write_json(args.json, result.summary())
    if required and result.warning:  # the record and the summary are written: only the tracking is missing
        raise HarnessError(
            f"--track required: {result.warning.removesuffix('; the run record is still written.')} "
            f"(record {result.run_record or result.output})"
        )
    return 0
