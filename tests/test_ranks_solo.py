"""One answer to "who am I" (harness.core.ranks): a data stage rank 0 builds alone inside ``ranks.solo()``
sees a single-process run through every path that asks -- the rank helpers, the collectives of
harness.training.distributed, the shard a corpus encoder takes, and the cocondenser objective's gather --
while its launcher says two processes. Simulated with RANK / WORLD_SIZE and a process group that
claims to be joined (any collective fails the test), so no real group starts."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

from harness.core import ranks
from harness.pretrain.objectives import cocondenser
from harness.retrieval.shard_layout import rank_and_world
from harness.training import distributed as D


def _no_collective(*args, **kwargs):
    raise AssertionError("a collective ran inside a block rank 0 runs alone")


@pytest.fixture
def two_ranks(monkeypatch):
    """Rank 0 of a launched run of 2 whose process group is joined (as far as torch says)."""
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setattr(dist, "is_available", lambda: True)
    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "get_rank", lambda group=None: 0)
    monkeypatch.setattr(dist, "get_world_size", lambda group=None: 2)
    for name in ("all_gather", "all_reduce", "barrier", "broadcast", "broadcast_object_list"):
        monkeypatch.setattr(dist, name, _no_collective)


def test_a_data_stage_inside_solo_sees_one_process_through_every_path(two_ranks):
    assert (ranks.world_size(), ranks.rank(), ranks.is_main()) == (2, 0, True)
    assert D.active() and rank_and_world(None, None) == (0, 2)
    with ranks.solo():
        assert (ranks.world_size(), ranks.rank(), ranks.is_main()) == (1, 0, True)
        assert ranks.launched_world_size() == 2  # what the record states: the run's processes
        assert not D.active()
        assert rank_and_world(None, None) == (0, 1)
        info = D.init_distributed("cpu")
        assert (info.rank, info.world_size, info.backend, info.is_main) == (0, 1, None, True)
        assert D.all_reduce_mean(2.5) == 2.5 and D.all_reduce_max(3) == 3 and D.broadcast_object("x") == "x"
        D.barrier()
        D.control_barrier()
        reps = torch.randn(3, 4, requires_grad=True)
        assert cocondenser.gather_reps(reps) is reps
        assert cocondenser._gather_keep_local(reps) is reps
    assert ranks.world_size() == 2 and D.active()


def test_a_rank_above_0_is_not_main_and_a_solo_block_counts_as_rank_0(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    assert (ranks.world_size(), ranks.rank(), ranks.is_main()) == (2, 1, False)
    assert not D.active()  # no process group joined: every collective is the single-process answer
    assert rank_and_world(None, None) == (1, 2)
    with ranks.solo():  # only rank 0 enters one (RunContext.cached_stage); it runs as the run's main rank
        assert (ranks.world_size(), ranks.rank(), ranks.is_main()) == (1, 0, True)


def test_a_process_group_joined_without_the_launchers_environment_is_the_one_asked(monkeypatch):
    """A test's own gloo workers join a group without RANK / WORLD_SIZE: the collectives talk to it,
    so rank and world size are its, and a solo block still counts as one process."""
    for name in ("WORLD_SIZE", "RANK"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(dist, "is_available", lambda: True)
    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "get_backend", lambda group=None: "gloo")
    monkeypatch.setattr(dist, "get_rank", lambda group=None: 1)
    monkeypatch.setattr(dist, "get_world_size", lambda group=None: 2)
    assert (ranks.world_size(), ranks.rank(), ranks.is_main(), ranks.launched_world_size()) == (2, 1, False, 1)
    assert D.active()
    with ranks.solo():
        assert (ranks.world_size(), ranks.rank(), ranks.is_main()) == (1, 0, True) and not D.active()
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    info = D.init_distributed("cpu")  # already joined: the group's place, no second join
    assert (info.rank, info.world_size, info.backend, info.is_main) == (1, 2, "gloo", False)
