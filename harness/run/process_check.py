"""The process count a run asks for, checked before any worker starts: bounded by the devices present
(the GPUs, or the cores on a CPU machine) unless forced, and the pre-training batch mappable onto it.

Unchecked, ``--nproc-per-node 1000 --dry-run`` exited 0 while printing "batch mapping problem", and a
real run with 3 processes started 3 workers, ran its cached stages, then failed "global batch 32
cannot be split evenly over 3 devices" under torch's own warnings.
"""

from __future__ import annotations

from harness.core.errors import HarnessError
from harness.core.hardware import Hardware
from harness.pretrain.objectives import objective_class
from harness.pretrain.trainer import plan_batches
from harness.spec.method import MethodSpec
from harness.spec.stage_settings import PretrainSettings

FORCE_FLAG = "--oversubscribe"


def devices_here(hw: Hardware) -> int:
    """What one process per device means on this machine: its GPUs, else its cores."""
    return hw.devices if hw.device_type == "cuda" else hw.cpus


def check_bound(nproc_per_node: int, hw: Hardware, forced: bool) -> None:
    """HarnessError when ``nproc_per_node`` exceeds :func:`devices_here` and the user did not force it."""
    here = devices_here(hw)
    if nproc_per_node > here and not forced:
        what = "GPU(s)" if hw.device_type == "cuda" else "CPU core(s)"
        raise HarnessError(
            f"--nproc-per-node {nproc_per_node}: this machine has {here} {what}; fix: give at most {here}, "
            f"or add {FORCE_FLAG} to start more processes than devices (HARNESS_SHARE_GPU=1 on one GPU)"
        )


def check_batch(spec: MethodSpec, processes: int) -> None:
    """HarnessError naming the spec when its pre-training batch cannot be mapped onto ``processes``."""
    if "pretrain" not in list(spec.config.get("stages") or []):
        return
    try:
        pre = PretrainSettings.from_spec(spec)
        cls = objective_class(pre.objective)
    except Exception:  # noqa: BLE001 - an invalid setting: the spec's validation names it, line and key
        return
    try:
        plan_batches(
            pre.global_batch,
            pre.per_device_batch,
            processes,
            cls.supports_accumulation,
            pre.grad_cache_chunk,
            cls.gathers_across_ranks,
        )
    except HarnessError as exc:
        raise HarnessError(
            f"{spec.path}: pretrain batch over {processes} process(es): {exc} (or change --nproc-per-node/--nnodes)"
        ) from None
