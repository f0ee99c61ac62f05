"""Thread counts from the cores a process may use (harness/core/threads.py)."""

from __future__ import annotations

import os

import pytest

from harness.core import threads
from harness.core.errors import HarnessError


def _cgroup(tmp_path, text):
    (tmp_path / "cpu.max").write_text(text)
    return tmp_path


def test_cgroup_v2_quota_rounds_up_and_unlimited_is_none(tmp_path):
    assert threads.cgroup_quota(_cgroup(tmp_path, "150000 100000\n")) == 2
    assert threads.cgroup_quota(_cgroup(tmp_path, "max 100000\n")) is None
    assert threads.cgroup_quota(tmp_path / "absent") is None


def test_cgroup_v1_quota(tmp_path):
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("300000\n")
    (tmp_path / "cpu" / "cpu.cfs_period_us").write_text("100000\n")
    assert threads.cgroup_quota(tmp_path) == 3
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("-1\n")
    assert threads.cgroup_quota(tmp_path) is None


def test_a_quota_below_the_affinity_mask_wins(tmp_path):
    cores = len(os.sched_getaffinity(0))
    assert threads.available_cores({}, _cgroup(tmp_path, "100000 100000"))[0] == 1
    assert threads.available_cores({}, tmp_path / "absent") == (cores, "CPU affinity")


def test_the_override_wins_and_is_checked(tmp_path):
    assert threads.available_cores({"HARNESS_THREADS": "3"}, tmp_path) == (3, "HARNESS_THREADS")
    with pytest.raises(HarnessError, match="HARNESS_THREADS='two'"):
        threads.available_cores({"HARNESS_THREADS": "two"}, tmp_path)


def test_configure_sets_the_library_variables_only_when_restricted():
    env = {"HARNESS_THREADS": "1", "MKL_NUM_THREADS": "4"}
    assert threads.configure(env) == 1
    assert env["OMP_NUM_THREADS"] == "1" and env["MKL_NUM_THREADS"] == "4"  # the user's own setting stays
    assert env["GOMP_SPINCOUNT"] == threads.SPIN_COUNT
    if len(os.sched_getaffinity(0)) >= (os.cpu_count() or 1) and threads.cgroup_quota() is None:
        env = {}
        assert threads.configure(env) is None and env == {"GOMP_SPINCOUNT": threads.SPIN_COUNT}  # torch's default


def test_torchrun_s_one_thread_default_is_dropped_in_a_launched_worker():
    """torchrun sets OMP_NUM_THREADS=1 in every worker; rank 0's CPU stages get the node's cores as under
    `run --nproc-per-node` (which sets nothing), unless HARNESS_THREADS asks for one."""
    env = {"TORCHELASTIC_RUN_ID": "abc", "OMP_NUM_THREADS": "1", "HARNESS_THREADS": "3"}
    assert not threads.drop_torchrun_default(env) and env["OMP_NUM_THREADS"] == "1"  # asked: kept
    env = {"TORCHELASTIC_RUN_ID": "abc", "OMP_NUM_THREADS": "1"}
    set_to = threads.configure(env)  # the node's cores (None: unrestricted, torch's own default, all of them)
    assert env.get("OMP_NUM_THREADS") == (None if set_to is None else str(threads.available_cores({})[0]))
    env = {"OMP_NUM_THREADS": "1"}  # not launched: the user's own setting
    assert not threads.drop_torchrun_default(env) and env["OMP_NUM_THREADS"] == "1"
    env = {"TORCHELASTIC_RUN_ID": "abc", "OMP_NUM_THREADS": "1", threads.OWN_LAUNCHER: "1"}  # `run --nproc...`
    assert not threads.drop_torchrun_default(env) and env["OMP_NUM_THREADS"] == "1"  # sets none: the user's 1
    env = {"TORCHELASTIC_RUN_ID": "abc", "OMP_NUM_THREADS": "4"}  # the user's own count under torchrun
    assert not threads.drop_torchrun_default(env) and env["OMP_NUM_THREADS"] == "4"
