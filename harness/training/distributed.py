"""Multi-process training through PyTorch's own stack: torchrun environment + DDP.

A run is distributed when torchrun (``python -m torch.distributed.run``) set ``WORLD_SIZE``
> 1 in the environment (with ``RANK`` and ``LOCAL_RANK``). The backend is nccl on CUDA and
gloo on CPU, so the same code path is tested here on CPU; gloo on CUDA too when ranks share a GPU
(``HARNESS_SHARE_GPU=1``, the GPU check's two ranks on one card: NCCL refuses a device twice). Who a process is (world size, rank, main
rank) is :mod:`harness.core.ranks`'s to say; this module holds the collectives, and the process group
it joins is made from those values (which then read the group). Without torchrun
every collective degrades to the single-process answer, so callers never branch on it; so does a
block one rank runs alone (:func:`harness.core.ranks.solo`).

Two timeouts: the training collectives fail after ``HARNESS_PG_TIMEOUT`` seconds (default 1800),
so a hung rank cannot hold the others for ever; the stage hand-overs of
:meth:`harness.pipelines.context.RunContext.cached_stage` (ranks waiting while rank 0 builds a
data stage, which can take hours at MS MARCO scale) go through a gloo :func:`control_group`
whose timeout is ``HARNESS_STAGE_WAIT`` seconds (default 7 days). A rank that dies is noticed
by the launcher, which stops the others (:mod:`harness.run.launch`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from harness.core import ranks
from harness.core.errors import HarnessError

_CONTROL: list[Any] = []  # the gloo group for stage hand-overs, made once per process group
SHARE_GPU = "HARNESS_SHARE_GPU"  # "1": ranks may share a GPU, over gloo (:func:`sharing_gpus`)


@dataclass(frozen=True)
class DistInfo:
    """Where this process sits: its rank, the world size and its compute device."""

    rank: int
    world_size: int
    local_rank: int
    device: torch.device
    backend: str | None  # None when single-process

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1


def sharing_gpus() -> bool:
    """Whether ranks may share a GPU (``HARNESS_SHARE_GPU=1``): the GPU check's multi-rank rehearsal on one
    card. NCCL refuses two ranks on one device, so such a run's collectives go over gloo (slower; a check,
    never a paper run)."""
    return os.environ.get(SHARE_GPU) == "1"


def cuda_device(local_rank: int) -> torch.device:
    """This node's GPU for ``local_rank``: its own, or, when ranks share GPUs, ``local_rank`` modulo the count."""
    count = torch.cuda.device_count()
    if local_rank < count:
        return torch.device(f"cuda:{local_rank}")
    if sharing_gpus():
        return torch.device(f"cuda:{local_rank % count}")
    raise HarnessError(
        f"local rank {local_rank} has no GPU of its own: this node has {count}; start at most {count} "
        f"process(es) per node (--nproc-per-node {count}), or set {SHARE_GPU}=1 to let ranks share GPUs over "
        "gloo (a check of the multi-rank path, not a paper run)"
    )


def init_distributed(device: str | None = None) -> DistInfo:
    """Join the torchrun process group if there is one (idempotent) and pick the device.

    ``device`` overrides the automatic choice (``cuda:LOCAL_RANK`` when CUDA is present,
    else ``cpu``); the backend follows the device type.
    """
    world_size = ranks.world_size()
    rank = ranks.rank()
    local_rank = ranks.local_rank()
    if device is None:
        dev = cuda_device(local_rank) if torch.cuda.is_available() else torch.device("cpu")
    else:
        dev = torch.device(device)
        if dev.type == "cuda" and dev.index is None:
            dev = torch.device(f"cuda:{local_rank}")
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
    if world_size <= 1:
        return DistInfo(0, 1, 0, dev, None)
    backend = "nccl" if dev.type == "cuda" and not sharing_gpus() else "gloo"
    if not dist.is_initialized():
        if "MASTER_ADDR" not in os.environ or "MASTER_PORT" not in os.environ:
            raise HarnessError(
                "WORLD_SIZE > 1 but MASTER_ADDR/MASTER_PORT are not set: launch multi-process "
                "training with torchrun (python -m torch.distributed.run --nproc_per_node N ...)"
            )
        dist.init_process_group(
            backend=backend,
            rank=rank,
            world_size=world_size,
            timeout=timedelta(seconds=ranks.env_int("HARNESS_PG_TIMEOUT", 1800)),
        )
    else:
        backend = dist.get_backend()
    return DistInfo(ranks.rank(), ranks.world_size(), local_rank, dev, backend)  # the joined group's


def control_group() -> Any:
    """The gloo group with the long timeout for stage hand-overs (made on first use, by every rank in
    the same order, as :func:`torch.distributed.new_group` requires); ``None`` when not distributed."""
    if not active():
        return None
    if not _CONTROL:
        _CONTROL.append(
            dist.new_group(backend="gloo", timeout=timedelta(seconds=ranks.env_int("HARNESS_STAGE_WAIT", 7 * 86400)))
        )
    return _CONTROL[0]


def cleanup() -> None:
    """Leave the process group (call once at the end of a torchrun script)."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
    _CONTROL.clear()


def active() -> bool:
    """Whether a collective has other ranks to talk to: a joined process group of more than one
    process, outside :func:`harness.core.ranks.solo`."""
    return ranks.world_size() > 1 and dist.is_available() and dist.is_initialized()


def barrier() -> None:
    if active():
        dist.barrier()


def control_barrier() -> None:
    """Wait for every rank on the control group (the long timeout: a rank may be building a data stage)."""
    if active():
        dist.barrier(group=control_group())


def control_broadcast(obj: Any, src: int = 0) -> Any:
    """Rank ``src``'s (picklable) object on every rank, through the control group."""
    if not active():
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=src, group=control_group())
    return box[0]


def all_reduce_mean(value: torch.Tensor | float) -> torch.Tensor | float:
    """Mean over ranks; returns the same kind it was given (floats stay floats)."""
    if not active():
        return value
    as_float = not isinstance(value, torch.Tensor)
    tensor = torch.tensor(float(value), dtype=torch.float64) if as_float else value.detach().clone()
    if dist.get_backend() == "nccl" and tensor.device.type != "cuda":
        tensor = tensor.cuda()
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    tensor = tensor / ranks.world_size()
    return float(tensor.item()) if as_float else tensor.to(value.device)


def all_reduce_max(value: int) -> int:
    """Largest integer over ranks (used to check that every rank sees the same data)."""
    if not active():
        return value
    device = torch.device("cuda") if dist.get_backend() == "nccl" else torch.device("cpu")
    tensor = torch.tensor([value, -value], dtype=torch.int64, device=device)
    dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
    return int(tensor[0].item())


def all_reduce_min(value: int) -> int:
    return -all_reduce_max(-value) if active() else value


def broadcast_object(obj: Any, src: int = 0) -> Any:
    """Rank ``src``'s (picklable) object on every rank."""
    if not active():
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=src)
    return box[0]


def broadcast_module(module: nn.Module, src: int = 0) -> None:
    """Copy rank ``src``'s parameters and buffers to every rank (what DDP does at wrap time)."""
    if not active():
        return
    with torch.no_grad():
        for tensor in list(module.parameters()) + list(module.buffers()):
            dist.broadcast(tensor.data, src=src)


def all_reduce_gradients(params: Iterable[nn.Parameter]) -> None:
    """Average ``.grad`` over ranks in one flat buffer (for paths that bypass DDP's hooks).

    A parameter that has a gradient on some rank but not on another counts as zeros there;
    one that has no gradient on any rank (e.g. an unused pooler) keeps ``grad=None`` so the
    optimizer skips it exactly as in a single-process run.
    """
    if not active():
        return
    params = [p for p in params if p.requires_grad]
    if not params:
        return
    device = params[0].device
    has_grad = torch.tensor([p.grad is not None for p in params], dtype=torch.int32, device=device)
    dist.all_reduce(has_grad, op=dist.ReduceOp.MAX)
    params = [p for p, used in zip(params, has_grad.tolist()) if used]
    if not params:
        return
    for p in params:
        if p.grad is None:
            p.grad = torch.zeros_like(p)
    flat = torch.cat([p.grad.reshape(-1) for p in params])
    dist.all_reduce(flat, op=dist.ReduceOp.SUM)
    flat /= ranks.world_size()
    offset = 0
    for p in params:
        n = p.numel()
        p.grad.copy_(flat[offset : offset + n].view_as(p.grad))
        offset += n


def wrap_ddp(module: nn.Module, info: DistInfo, find_unused_parameters: bool = True) -> nn.Module:
    """DistributedDataParallel around ``module`` when distributed, else ``module`` itself.

    ``find_unused_parameters`` defaults to True because objectives compute losses from
    parts of BertModel only (e.g. the pooler is never used), which DDP otherwise rejects.
    """
    if not info.distributed:
        return module
    from torch.nn.parallel import DistributedDataParallel

    device_ids = [info.device.index] if info.device.type == "cuda" else None
    return DistributedDataParallel(module, device_ids=device_ids, find_unused_parameters=find_unused_parameters)


def unwrap(module: nn.Module) -> nn.Module:
    """The plain module inside a DDP wrapper (or the module itself)."""
    from torch.nn.parallel import DistributedDataParallel

    return module.module if isinstance(module, DistributedDataParallel) else module
