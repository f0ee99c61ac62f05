"""Checkpoints: atomic saves, pruning, and interrupted runs resuming to bit-identical results.

The reference is one uninterrupted run; interruptions are (1) an exception raised from the
logger, (2) ``stop_after``, (3) a subprocess SIGKILLed mid-run. Every resumed run starts
from a freshly initialised (differently seeded) objective, so only the checkpoint can
make it match. Dropout stays on, so the saved RNG states matter. 8 steps over 20 examples
cross epoch boundaries (2 steps per epoch).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_pretrain_toy import build, examples_fn_for, make_tokenizer, one_thread, params_of, worker_env  # noqa: F401 - after the sys.path line above; one_thread is an autouse fixture pytest finds by import
from train_config import tiny_train_config

from harness.core.errors import HarnessError
from harness.core.fsutil import is_temp, temp_name
from harness.pretrain.trainer import TrainConfig, train
from harness.training import checkpoint as ckpt

N_EXAMPLES = 20


def cfg(out: Path, **overrides) -> TrainConfig:
    return tiny_train_config(out, **{"steps": 8, "checkpoint_every": 2, **overrides})


class _Interrupt(Exception):
    pass


def _raise_at(step_to_fail: int):
    def logger(step, metrics):
        if step == step_to_fail:
            raise _Interrupt(step)

    return logger


def _one_thread(fn, *args, **kwargs):
    """Run with one intra-op thread, like the subprocess workers (thread count can change sums)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return fn(*args, **kwargs)
    finally:
        torch.set_num_threads(before)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """One uninterrupted 8-step run: (tokenizer folder, final params, result)."""
    root = tmp_path_factory.mktemp("reference")
    tok = make_tokenizer(root / "tok")
    obj = build("toy", tok.vocab_size, seed=0)
    res = _one_thread(train, obj, examples_fn_for(N_EXAMPLES), tok, cfg(root / "run"))
    return root / "tok", params_of(obj), res


def _assert_same_run(params, result, reference):
    _, ref_params, ref_result = reference
    assert result.step == ref_result.step == 8
    assert result.loss_history == ref_result.loss_history  # exact floats, not approx
    assert result.metrics_history == ref_result.metrics_history
    for key, value in ref_params.items():
        assert torch.equal(params[key], value), key


def test_resume_after_crash_in_logger_is_bit_identical(reference, tmp_path):
    tok = make_tokenizer(reference[0])
    out = tmp_path / "run"
    with pytest.raises(_Interrupt):
        _one_thread(
            train, build("toy", tok.vocab_size, seed=0), examples_fn_for(N_EXAMPLES), tok, cfg(out), logger=_raise_at(5)
        )
    assert [s for s, _ in ckpt.list_checkpoints(out)] == [2, 4]

    fresh = build("toy", tok.vocab_size, seed=123)  # different init: only the checkpoint can fix it
    res = _one_thread(train, fresh, examples_fn_for(N_EXAMPLES), tok, cfg(out))
    assert res.resumed_from == 4
    _assert_same_run(params_of(fresh), res, reference)


def test_stop_after_then_resume_is_bit_identical(reference, tmp_path):
    tok = make_tokenizer(reference[0])
    out = tmp_path / "run"
    first = _one_thread(train, build("toy", tok.vocab_size), examples_fn_for(N_EXAMPLES), tok, cfg(out, stop_after=3))
    assert first.stopped_early and first.step == 3 and first.checkpoint.name == "step-000000003"
    assert first.loss_history == reference[2].loss_history[:3]
    same = train(build("toy", tok.vocab_size), examples_fn_for(N_EXAMPLES), tok, cfg(out, stop_after=3))
    assert same.stopped_early and same.step == 3 and same.resumed_from == 3  # stop_after is absolute

    fresh = build("toy", tok.vocab_size, seed=5)
    res = _one_thread(train, fresh, examples_fn_for(N_EXAMPLES), tok, cfg(out))
    assert res.resumed_from == 3 and not res.stopped_early
    _assert_same_run(params_of(fresh), res, reference)


def test_finished_run_is_not_trained_again(reference, tmp_path):
    tok = make_tokenizer(reference[0])
    out = tmp_path / "run"
    first = train(build("toy", tok.vocab_size), examples_fn_for(N_EXAMPLES), tok, cfg(out, steps=2))
    calls = []
    again_obj = build("toy", tok.vocab_size, seed=9)
    again = train(again_obj, examples_fn_for(N_EXAMPLES), tok, cfg(out, steps=2), logger=lambda s, m: calls.append(s))
    assert again.resumed_from == 2 and again.loss_history == first.loss_history and calls == []
    assert again_obj.head.weight.sum() != build("toy", tok.vocab_size, seed=9).head.weight.sum()


def test_keeps_last_two_and_ignores_partial_saves(reference, tmp_path):
    tok = make_tokenizer(reference[0])
    out = tmp_path / "run"
    root = ckpt.checkpoint_root(out)
    # Leftovers of a save killed half-way: a tmp folder and a step folder without its state file.
    half = temp_name(root / ckpt.step_dirname(2), "partial")
    half.mkdir(parents=True)
    (half / "model.pt").write_bytes(b"garbage")
    (root / "step-000000099").mkdir()
    res = train(build("toy", tok.vocab_size), examples_fn_for(N_EXAMPLES), tok, cfg(out, steps=6))
    assert res.resumed_from is None  # the incomplete step-99 was not taken as a checkpoint
    assert [s for s, _ in ckpt.list_checkpoints(out)] == [4, 6]
    assert not half.exists() and not [p for p in root.iterdir() if is_temp(p)]
    saved = sorted(p.name for p in (root / "step-000000006").iterdir())
    assert saved == ["model.pt", "optimizer.pt", "rng-rank0.pt", "scheduler.pt", "trainer_state.json"]
    state = json.loads((root / "step-000000006" / "trainer_state.json").read_text())
    assert state["step"] == 6 and len(state["metrics"]) == 6 and state["config"]["global_batch"] == 8


def test_resume_with_changed_settings_is_refused(reference, tmp_path):
    tok = make_tokenizer(reference[0])
    out = tmp_path / "run"
    train(build("toy", tok.vocab_size), examples_fn_for(N_EXAMPLES), tok, cfg(out, steps=8, stop_after=2))
    with pytest.raises(HarnessError, match=r"settings changed \(lr: 0.005 -> 0.001\)"):
        train(build("toy", tok.vocab_size), examples_fn_for(N_EXAMPLES), tok, cfg(out, lr=1e-3))


def test_rng_capture_round_trip():
    import random

    import numpy as np

    state = ckpt.capture_rng()
    a = (random.random(), float(np.random.rand()), torch.rand(3))
    ckpt.restore_rng(state)
    b = (random.random(), float(np.random.rand()), torch.rand(3))
    assert a[0] == b[0] and a[1] == b[1] and torch.equal(a[2], b[2])


# --- a real kill: SIGKILL a training subprocess, then resume ------------------------------


def _worker(out: str, tok_dir: str, hang_at: int, marker: str) -> None:
    """Train the reference run; at step ``hang_at`` announce it and wait to be killed."""
    torch.set_num_threads(1)
    from transformers import BertTokenizer

    tok = BertTokenizer.from_pretrained(tok_dir)

    def logger(step, metrics):
        if step == hang_at:
            Path(marker).write_text(str(step))
            time.sleep(600)

    train(build("toy", tok.vocab_size, seed=0), examples_fn_for(N_EXAMPLES), tok, cfg(Path(out)), logger=logger)


@pytest.mark.slow
@pytest.mark.alone  # a SIGKILL timed into training
def test_sigkilled_subprocess_resumes_bit_identical(reference, tmp_path):
    out, marker = tmp_path / "run", tmp_path / "at-step"
    cmd = [sys.executable, __file__, str(out), str(reference[0]), "5", str(marker)]
    proc = subprocess.Popen(cmd, env=worker_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while not marker.exists():
            if proc.poll() is not None:
                pytest.fail(f"worker exited early ({proc.returncode}): {proc.stdout.read().decode()[-2000:]}")
            if time.monotonic() > deadline:
                pytest.fail("worker did not reach step 5 within 120 s")
            time.sleep(0.1)
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert [s for s, _ in ckpt.list_checkpoints(out)] == [2, 4]

    tok = make_tokenizer(reference[0])
    fresh = build("toy", tok.vocab_size, seed=77)
    res = _one_thread(train, fresh, examples_fn_for(N_EXAMPLES), tok, cfg(out))
    assert res.resumed_from == 4
    _assert_same_run(params_of(fresh), res, reference)


if __name__ == "__main__":
    _worker(*sys.argv[1:3], int(sys.argv[3]), sys.argv[4])
