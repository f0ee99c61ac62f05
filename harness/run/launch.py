"""Start a run's worker processes through PyTorch's elastic launcher, used as a library.

``harness run --nproc-per-node N`` (and, over several nodes, ``--nnodes M --node-rank R
--rdzv-endpoint HOST:PORT``, with torchrun's meanings) hands the same command line, without these
flags, to :func:`torch.distributed.launcher.api.elastic_launch`: it starts the N workers of this
node with ``RANK``/``LOCAL_RANK``/``WORLD_SIZE`` set, watches them, and stops them all when one
fails, so a dead rank never leaves the others waiting. ``torchrun -m harness run ...`` sets up the
same workers itself; either way the workers see a launched environment and never launch again.

Rendezvous is static, as torchrun's ``--node-rank``/``--master-addr`` is: node R's local rank L is
global rank ``R x N + L``, so global rank 0 (the one that prints the results, writes the record and
logs to MLflow) is local rank 0 of node 0, which also hosts the rendezvous store at the endpoint.
Local rank 0 of each node prints to the terminal; the other ranks write to their own log files
under the cache's ``logs/ranks/`` folder. On a CPU machine the workers use gloo, which is how all
of this is tested here.
"""

from __future__ import annotations

import os
import socket
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

from harness.core import ranks
from harness.core.errors import HarnessError

FLAGS = ("--nproc-per-node", "--nnodes", "--node-rank", "--rdzv-endpoint")
INTERRUPTED = 143  # the exit code of a run stopped by SIGTERM / SIGINT, as the single-process run uses


@dataclass(frozen=True)
class Layout:
    """Where a run's processes go: ``nproc_per_node`` on each of ``nnodes`` nodes, this one ``node_rank``.
    A plan of the processes to start, read before any of them runs; a started process asks
    :mod:`harness.core.ranks` who it is."""

    nproc_per_node: int
    nnodes: int = 1
    node_rank: int = 0
    rdzv_endpoint: str | None = None

    @property
    def processes(self) -> int:
        """How many processes the launch starts over all nodes (the workers' WORLD_SIZE)."""
        return self.nproc_per_node * self.nnodes

    def check(self) -> None:
        if self.nproc_per_node < 1 or self.nnodes < 1:
            raise HarnessError("--nproc-per-node and --nnodes take whole numbers >= 1")
        if not 0 <= self.node_rank < self.nnodes:
            raise HarnessError(f"--node-rank {self.node_rank} is outside 0..{self.nnodes - 1} (--nnodes {self.nnodes})")
        if self.nnodes > 1 and not self.rdzv_endpoint:
            raise HarnessError("a run over several nodes needs --rdzv-endpoint HOST:PORT (node 0's address and a "
                               "free port, the same on every node)")
        if self.rdzv_endpoint:
            _host_port(self.rdzv_endpoint)


def _host_port(endpoint: str) -> tuple[str, int]:
    host, _, port = endpoint.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise HarnessError(f"--rdzv-endpoint {endpoint!r} is not HOST:PORT (e.g. node0.cluster:29500)")
    return host, int(port)


def inside_worker() -> bool:
    """True in a process a launcher started (this module's or torchrun's): it must not launch again."""
    return "TORCHELASTIC_RUN_ID" in os.environ or ranks.launched_world_size() > 1


def worker_argv(argv: list[str]) -> list[str]:
    """The command line without the launch flags (``--flag value`` and ``--flag=value`` forms)."""
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
            continue
        name = arg.split("=", 1)[0]
        if name in FLAGS:
            skip = "=" not in arg
            continue
        out.append(arg)
    return out


def free_port() -> int:
    """A port nothing on 127.0.0.1 listens on now (the single-node rendezvous; tests)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(layout: Layout, argv: list[str], log_dir: Path) -> int:
    """Run ``python -m harness <argv>`` as this node's workers of `layout`; the run's exit code.

    A failed worker ends the run on every rank; the one line printed names the rank, its exit code
    and its log. SIGTERM/SIGINT/SIGHUP reach the workers (each saves what it can and stops) and the
    run exits with 143."""
    from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs, Std
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    layout.check()
    endpoint = layout.rdzv_endpoint or f"127.0.0.1:{free_port()}"
    first = layout.node_rank * layout.nproc_per_node
    log_dir.mkdir(parents=True, exist_ok=True)
    quiet = {r: Std.ALL for r in range(1, layout.nproc_per_node)}  # local rank 0 keeps the terminal
    config = LaunchConfig(
        min_nodes=layout.nnodes, max_nodes=layout.nnodes, nproc_per_node=layout.nproc_per_node,
        run_id=f"harness-{uuid.uuid4().hex[:8]}" if layout.nnodes == 1 else "harness",
        rdzv_backend="static", rdzv_endpoint=endpoint, rdzv_configs={"rank": layout.node_rank},
        max_restarts=0, monitor_interval=0.5, start_method="spawn",
        logs_specs=DefaultLogsSpecs(log_dir=str(log_dir), redirects=quiet),
    )
    print(f"run: {layout.processes} process(es) over {layout.nnodes} node(s); this node runs ranks "
          f"{first}-{first + layout.nproc_per_node - 1}" + (f", ranks other than {first} log under {log_dir}"
                                                          if layout.nproc_per_node > 1 else ""), flush=True)
    try:
        elastic_launch(config, sys.executable)("-m", "harness", *argv)
    except ChildFailedError as exc:
        rank, failure = exc.get_first_failure()
        code = failure.exitcode
        where = f"; its log: {failure.error_file}" if failure.error_file and Path(failure.error_file).exists() else ""
        if abs(code) == 15 or code == INTERRUPTED:
            print(f"run: interrupted (rank {rank} stopped by a signal); `run` again resumes", file=sys.stderr)
            return INTERRUPTED
        print(f"run: rank {rank} (pid {failure.pid}) failed with exit code {code}; the other ranks were stopped"
              f"{where}; rank logs under {log_dir}", file=sys.stderr)
        return code if 0 < code < 128 else 1
    except SignalException as exc:
        print(f"run: interrupted ({exc.sigval.name}); the workers were stopped; `run` again resumes",
              file=sys.stderr)
        return INTERRUPTED
    return 0
