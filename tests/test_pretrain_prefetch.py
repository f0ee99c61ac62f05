"""Background collate (harness.pretrain.prefetch): the same training bit for bit with it on or off,
resumable, and stopped when a step raises."""

from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_pretrain_toy import examples_fn_for, make_tokenizer, one_thread, params_of, tiny_config  # noqa: F401 - after the sys.path line above; one_thread is an autouse fixture pytest finds by import
from train_config import tiny_train_config

from harness.core import procs
from harness.core.errors import HarnessError
from harness.pretrain.objectives import build_objective
from harness.pretrain.prefetch import PREFETCH_ENV, Prefetcher, prefetch_enabled
from harness.pretrain.trainer import TrainConfig, train

NAME = "collate-prefetch"


def cfg(out: Path, **overrides) -> TrainConfig:
    return tiny_train_config(out, **overrides)


def _objective(name: str, vocab_size: int, seed: int = 0):
    torch.manual_seed(seed)
    return build_objective(name, tiny_config(vocab_size))  # dropout on: the global RNG must be untouched


@pytest.fixture
def tok(tmp_path):
    return make_tokenizer(tmp_path / "tok")


def _prefetch_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == NAME and t.is_alive()]


# cotmae: accumulation (2 micro-batches a step); cocondenser and cpdae at per-device 2: the grad-cache path.
@pytest.mark.parametrize("name, per_device", [("cotmae", 4), ("cocondenser", 2), ("cpdae", 2)])
def test_prefetch_trains_bit_identically_and_resumes(name, per_device, tok, tmp_path, monkeypatch):
    monkeypatch.setenv(PREFETCH_ENV, "0")
    ref_obj = _objective(name, tok.vocab_size)
    ref = train(ref_obj, examples_fn_for(16), tok, cfg(tmp_path / "ref", per_device_batch=per_device))
    assert not any("prefetched" in line for line in ref.notes)

    monkeypatch.setenv(PREFETCH_ENV, "1")
    obj = _objective(name, tok.vocab_size)
    res = train(obj, examples_fn_for(16), tok, cfg(tmp_path / "on", per_device_batch=per_device))
    assert any("collate prefetched in the background" in line for line in res.notes)
    assert res.loss_history == ref.loss_history and res.metrics_history == ref.metrics_history
    assert all(torch.equal(v, params_of(ref_obj)[k]) for k, v in params_of(obj).items())

    out = tmp_path / "resumed"  # stop after step 1 (mid-epoch), resume with prefetch: the same run
    train(
        _objective(name, tok.vocab_size), examples_fn_for(16), tok, cfg(out, per_device_batch=per_device, stop_after=1)
    )
    resumed = _objective(name, tok.vocab_size, seed=3)
    again = train(resumed, examples_fn_for(16), tok, cfg(out, per_device_batch=per_device))
    assert again.resumed_from == 1 and again.loss_history == ref.loss_history
    assert all(torch.equal(v, params_of(ref_obj)[k]) for k, v in params_of(resumed).items())
    assert not _prefetch_threads()


@pytest.mark.parametrize("how", ["exception", "signal"])
def test_a_step_that_raises_stops_the_prefetch_thread(how, tok, tmp_path, monkeypatch):
    monkeypatch.setenv(PREFETCH_ENV, "1")
    obj = _objective("cotmae", tok.vocab_size)
    forward, calls = obj.forward, []

    def failing(batch):
        calls.append(1)
        if len(calls) == 2:  # the second micro-batch of step 0: step 1's collate is already queued
            if how == "exception":
                raise RuntimeError("boom in the step")
            os.kill(os.getpid(), signal.SIGTERM)  # the engine finishes the step, checkpoints and raises
        return forward(batch)

    obj.forward = failing
    expected = (RuntimeError, "boom in the step") if how == "exception" else (procs.Terminated, None)
    with pytest.raises(expected[0], match=expected[1]):
        train(obj, examples_fn_for(16), tok, cfg(tmp_path / "run"))
    assert not _prefetch_threads()


def test_prefetcher_close_cancels_waiting_calls_and_bounds_the_join():
    started, release = threading.Event(), threading.Event()
    prefetcher = Prefetcher()
    running = prefetcher.submit(lambda: started.set() or (release.wait(30) and "done"))
    waiting = prefetcher.submit(lambda: "never")
    assert started.wait(30)  # on a loaded machine the worker may not have picked the call up yet
    failing = Prefetcher()
    with pytest.raises(ZeroDivisionError):
        failing.submit(lambda: 1 / 0).result(5)  # a collate's error reaches the step
    assert failing.close(5)
    assert prefetcher.close(timeout=0.2) is False  # the running call holds it: the join gives up
    assert waiting.cancelled()
    release.set()
    assert running.result(5) == "done" and prefetcher.close(5) is True
    with pytest.raises(HarnessError, match="closed"):
        prefetcher.submit(lambda: None)


def test_prefetch_default_follows_the_device(monkeypatch):
    monkeypatch.delenv(PREFETCH_ENV, raising=False)
    assert prefetch_enabled(torch.device("cuda")) and not prefetch_enabled(torch.device("cpu"))
    monkeypatch.setenv(PREFETCH_ENV, "1")
    assert prefetch_enabled(torch.device("cpu"))
    monkeypatch.setenv(PREFETCH_ENV, "0")
    assert not prefetch_enabled(torch.device("cuda"))
    monkeypatch.setenv(PREFETCH_ENV, "yes")
    with pytest.raises(HarnessError, match=PREFETCH_ENV):
        prefetch_enabled(torch.device("cpu"))


def test_the_worker_runs_torch_on_one_thread_and_leaves_the_steps_count(monkeypatch):
    torch.set_num_threads(2)  # the autouse one_thread fixture restores its value afterwards
    prefetcher = Prefetcher()
    try:
        worker_threads = prefetcher.submit(torch.get_num_threads).result(5)
    finally:
        prefetcher.close(5)
    assert torch.get_num_threads() == 2
    if "parallel backend: OpenMP" in torch.__config__.parallel_info():
        assert worker_threads == 1
