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

Over several nodes the nodes first meet at a gate of this module's (:func:`_gate`), at the endpoint,
before PyTorch's rendezvous: torch's static rendezvous waits inside one C++ call (a TCPStore) for 900 s
by default, silent, deaf to SIGTERM/SIGINT until it returns, then prints a C++ stack trace and retries.
The gate waits in Python, at most ``--rdzv-timeout`` seconds (then one line and a non-zero exit), says on
stderr every minute what it waits for, and a signal ends it at once (the CLI's "interrupted" line, exit
143 or 130). Once every node is at the gate, torch's rendezvous has only to connect, under the same timeout.
"""

from __future__ import annotations

import contextlib
import os
import select
import socket
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from harness.core import ranks, threads
from harness.core.errors import HarnessError

FLAGS = ("--nproc-per-node", "--nnodes", "--node-rank", "--rdzv-endpoint", "--rdzv-timeout")
RDZV_TIMEOUT = 600  # seconds the nodes wait for each other by default (torch's static rendezvous: 900)
REPORT_EVERY = 60.0  # seconds between the gate's "waiting for ..." lines
_HELLO = b"harness-rdzv"
FORWARDED = ("SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT", "SIGUSR1")  # signals the launcher hands to every worker
# A signalled worker finishes its step and writes its checkpoint (harness.training.engine) before torch's
# launcher kills it: time for a paper-sized step and save (torch's default is 30 s).
SHUTDOWN_S = 180
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
    rdzv_timeout: float = RDZV_TIMEOUT

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
            raise HarnessError(
                "a run over several nodes needs --rdzv-endpoint HOST:PORT (node 0's address and a "
                "free port, the same on every node)"
            )
        if self.rdzv_endpoint:
            _host_port(self.rdzv_endpoint)
        if not self.rdzv_timeout > 0:
            raise HarnessError(f"--rdzv-timeout {self.rdzv_timeout:g} must be a number of seconds > 0")


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


class _Waiting:
    """The gate's clock and its "waiting for ..." lines on stderr (at the start, then every REPORT_EVERY s)."""

    def __init__(self, layout: Layout) -> None:
        self.layout, self.started, self.said = layout, time.monotonic(), -REPORT_EVERY

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def left(self, what: str) -> float:
        """Seconds left before the timeout; HarnessError naming ``what`` once it has passed."""
        left = self.layout.rdzv_timeout - self.elapsed()
        if left <= 0:
            raise HarnessError(
                f"the rendezvous at {self.layout.rdzv_endpoint} timed out after "
                f"{self.layout.rdzv_timeout:g} s, {what} (--rdzv-timeout; start every node with "
                f"--nnodes {self.layout.nnodes} and the same --rdzv-endpoint)"
            )
        return left

    def say(self, what: str) -> None:
        now = self.elapsed()
        if now - self.said >= REPORT_EVERY:
            self.said = now
            print(
                f"run: waiting for {what} at {self.layout.rdzv_endpoint} ({now:.0f} s of "
                f"{self.layout.rdzv_timeout:g} s)",
                file=sys.stderr,
                flush=True,
            )


def _gate(layout: Layout) -> None:
    """Every node at the endpoint before torch's rendezvous: node 0 listens there and lets the others
    on once all ``nnodes - 1`` have said hello; the others connect (again and again while nothing
    listens) and wait for its word. Bounded by ``rdzv_timeout``; a signal ends it (the CLI's handlers)."""
    host, port = _host_port(str(layout.rdzv_endpoint))
    clock = _Waiting(layout)
    hello = _HELLO + f" {layout.nnodes}\n".encode()
    if layout.node_rank == 0:
        _let_nodes_in(layout, port, clock, hello)
    else:
        _join_node_0(layout, host, port, clock, hello)


def _let_nodes_in(layout: Layout, port: int, clock: _Waiting, hello: bytes) -> None:
    """Node 0: listen at ``port`` until every other node has said ``hello``, then tell them all to go."""
    try:
        server = socket.create_server(("", port))
    except OSError as exc:
        raise HarnessError(
            f"node 0 cannot listen at {layout.rdzv_endpoint}: {exc.strerror} (fix: a port free "
            "on node 0, the same in every node's --rdzv-endpoint)"
        ) from None
    with server:
        server.settimeout(1.0)  # a signal is handled within a second at worst
        joined: list[socket.socket] = []
        try:
            while len(joined) < layout.nnodes - 1:
                missing = layout.nnodes - 1 - len(joined)
                clock.left(f"{missing} of {layout.nnodes} nodes did not join")
                clock.say(f"{missing} of {layout.nnodes} nodes")
                try:
                    conn, _ = server.accept()
                except TimeoutError:
                    continue
                conn.settimeout(5.0)
                try:
                    said = conn.recv(64)
                except OSError:
                    said = b""
                if said != hello:  # another program, or a node started with another --nnodes
                    conn.close()
                    print(
                        f"run: refused a connection at {layout.rdzv_endpoint} that is not a node of this "
                        f"run (--nnodes {layout.nnodes})",
                        file=sys.stderr,
                        flush=True,
                    )
                    continue
                joined.append(conn)
            for conn in joined:
                with contextlib.suppress(OSError):  # a node gone since: torch's rendezvous times out on it
                    conn.sendall(b"go\n")
            for conn in joined:  # the others close first: the port is free at once for torch's store
                conn.settimeout(5.0)
                with contextlib.suppress(OSError):
                    conn.recv(8)
        finally:
            for conn in joined:
                conn.close()


def _join_node_0(layout: Layout, host: str, port: int, clock: _Waiting, hello: bytes) -> None:
    """Any other node: say ``hello`` to node 0 (again while nothing listens) and wait for its word to go."""
    while True:
        left = clock.left("node 0 was not reached")
        clock.say("node 0 (1 of 2 nodes)" if layout.nnodes == 2 else "node 0")
        try:
            conn = socket.create_connection((host, port), timeout=min(left, 5.0))
        except OSError:  # nothing listens yet (refused), or the name does not resolve yet
            time.sleep(min(1.0, max(left, 0.0)))
            continue
        with conn:
            try:
                conn.sendall(hello)
            except OSError:  # node 0 went away at once: try again while time is left
                time.sleep(1.0)
                continue
            while True:
                left = clock.left("node 0 did not hear from every node")
                clock.say(f"the other nodes (node 0 is up; {layout.nnodes} nodes in all)")
                ready, _, _ = select.select([conn], [], [], min(1.0, left))
                if ready:
                    break
            try:
                word = conn.recv(8)
            except OSError:
                word = b""
            if word.startswith(b"go"):
                return
        # node 0 closed without a word: it stopped, or refused us; try again while time is left
        time.sleep(1.0)


def launch(layout: Layout, argv: list[str], log_dir: Path) -> int:
    """Run ``python -m harness <argv>`` as this node's workers of `layout`; the run's exit code.

    A failed worker ends the run on every rank; the one line printed names the rank, its exit code
    and its log. SIGTERM/SIGINT/SIGHUP reach the workers (each saves what it can and stops) and the
    run exits with 143. SIGUSR1 too (:data:`FORWARDED`): every worker gets it, checkpoints and exits 143,
    and the launcher says so in one line."""
    from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs, Std
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    layout.check()
    if layout.nnodes > 1:
        _gate(layout)
    endpoint = layout.rdzv_endpoint or f"127.0.0.1:{free_port()}"
    first = layout.node_rank * layout.nproc_per_node
    log_dir.mkdir(parents=True, exist_ok=True)
    quiet = {r: Std.ALL for r in range(1, layout.nproc_per_node)}  # local rank 0 keeps the terminal
    config = LaunchConfig(
        min_nodes=layout.nnodes,
        max_nodes=layout.nnodes,
        nproc_per_node=layout.nproc_per_node,
        run_id=f"harness-{uuid.uuid4().hex[:8]}" if layout.nnodes == 1 else "harness",
        rdzv_backend="static",
        rdzv_endpoint=endpoint,
        rdzv_configs={"rank": layout.node_rank, "timeout": int(layout.rdzv_timeout)},
        max_restarts=0,
        monitor_interval=0.5,
        start_method="spawn",
        logs_specs=DefaultLogsSpecs(log_dir=str(log_dir), redirects=quiet),
        # torch's launcher passes these on to every worker (SIGUSR1: SLURM's `--signal=USR1@300`); without
        # SIGUSR1 here, the launcher died of it silently and left its workers running with no checkpoint
        signals_to_handle=",".join(FORWARDED),
        shutdown_timeout=SHUTDOWN_S,
    )
    print(
        f"run: {layout.processes} process(es) over {layout.nnodes} node(s); this node runs ranks "
        f"{first}-{first + layout.nproc_per_node - 1}"
        + (f", ranks other than {first} log under {log_dir}" if layout.nproc_per_node > 1 else ""),
        flush=True,
    )
    os.environ[threads.OWN_LAUNCHER] = "1"  # the workers keep the user's OMP_NUM_THREADS, even a 1
    try:
        elastic_launch(config, sys.executable)("-m", "harness", *argv)
    except ChildFailedError as exc:
        rank, failure = exc.get_first_failure()
        code = failure.exitcode
        where = f"; its log: {failure.error_file}" if failure.error_file and Path(failure.error_file).exists() else ""
        if abs(code) == 15 or code == INTERRUPTED:
            print(f"run: interrupted (rank {rank} stopped by a signal); `run` again resumes", file=sys.stderr)
            return INTERRUPTED
        print(
            f"run: rank {rank} (pid {failure.pid}) failed with exit code {code}; the other ranks were stopped"
            f"{where}; rank logs under {log_dir}",
            file=sys.stderr,
        )
        return code if 0 < code < 128 else 1
    except SignalException as exc:
        print(f"run: interrupted ({exc.sigval.name}); the workers were stopped; `run` again resumes", file=sys.stderr)
        return INTERRUPTED
    return 0
