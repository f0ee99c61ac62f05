"""DDP through torchrun: 2 CPU processes (gloo, 127.0.0.1) against one process.

One torchrun launch runs, on both ranks: (a) the accumulating toy objective for 6 steps,
(b) the same run stopped after step 3 and resumed from its checkpoint, (c) the contrastive
toy through the grad-cache path. Dropout is off so 2 ranks x 2 micro-batches can match
1 process x 4 micro-batches of the same global batch (masks are keyed by the micro-batch's
place in the global batch, so they match too).
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_pretrain_toy import TIGHT, build, examples_fn_for, make_tokenizer, one_thread, params_of, worker_env  # noqa: F401 - after the sys.path line above; one_thread is an autouse fixture pytest finds by import
from train_config import tiny_train_config

from harness.pretrain.trainer import TrainConfig, train

N_EXAMPLES = 24  # 3 steps per epoch: the run crosses an epoch boundary
F64 = torch.float64


def cfg(out: Path, **overrides) -> TrainConfig:
    return tiny_train_config(
        out, **{"steps": 6, "per_device_batch": 2, "warmup_ratio": 0.2, "checkpoint_every": 2, **overrides}
    )


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(out_dir: str, tok_dir: str) -> None:
    torch.set_num_threads(1)
    from transformers import BertTokenizer

    from harness.training import distributed as D

    out = Path(out_dir)
    tok = BertTokenizer.from_pretrained(tok_dir)
    info = D.init_distributed()
    assert info.world_size == 2 and info.backend == "gloo"

    def dump(name: str, obj, result) -> None:
        torch.save(params_of(obj), out / f"{name}-rank{info.rank}.pt")
        (out / f"{name}-rank{info.rank}.json").write_text(
            json.dumps({"loss": result.loss_history, "plan": result.plan, "resumed_from": result.resumed_from})
        )

    # float64: 2 ranks x 2 micro-batches and 1 process x 4 sum the same terms in another order
    obj = build("toy", tok.vocab_size, dropout=0.0, seed=info.rank, dtype=F64)  # DDP broadcasts rank 0's init
    dump("acc", obj, train(obj, examples_fn_for(N_EXAMPLES), tok, cfg(out / "acc")))

    train(
        build("toy", tok.vocab_size, dropout=0.0, dtype=F64),
        examples_fn_for(N_EXAMPLES),
        tok,
        cfg(out / "res", stop_after=3),
    )
    obj = build("toy", tok.vocab_size, dropout=0.0, seed=11, dtype=F64)
    dump("res", obj, train(obj, examples_fn_for(N_EXAMPLES), tok, cfg(out / "res")))

    obj = build("contrastive", tok.vocab_size, dropout=0.0, seed=info.rank)
    dump("gc", obj, train(obj, examples_fn_for(N_EXAMPLES), tok, cfg(out / "gc", steps=3)))
    assert obj.calls == [(4, 2)] * 3  # each rank: its half of the global batch, chunks of 2
    D.cleanup()


@pytest.fixture(scope="module")
def ddp_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("ddp")
    make_tokenizer(root / "tok")
    cmd = [
        sys.executable, "-m", "torch.distributed.run",
        "--nnodes", "1", "--nproc_per_node", "2",
        "--master_addr", "127.0.0.1", "--master_port", str(_free_port()),
        __file__, str(root), str(root / "tok"),
    ]  # fmt: skip
    start = time.monotonic()
    proc = subprocess.run(cmd, env=worker_env(), capture_output=True, text=True, timeout=150)
    elapsed = time.monotonic() - start
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    return root, elapsed


def _load(root: Path, name: str, rank: int):
    return torch.load(root / f"{name}-rank{rank}.pt"), json.loads((root / f"{name}-rank{rank}.json").read_text())


@pytest.mark.slow
@pytest.mark.alone  # two ranks
def test_two_ranks_match_one_process_with_the_same_global_batch(ddp_run, tmp_path):
    root, elapsed = ddp_run
    assert elapsed < 90, f"torchrun run took {elapsed:.0f} s"
    ddp_params, ddp_meta = _load(root, "acc", 0)
    assert ddp_meta["plan"]["world_size"] == 2 and ddp_meta["plan"]["accumulation_steps"] == 2
    rank1_params, rank1_meta = _load(root, "acc", 1)
    assert all(torch.equal(ddp_params[k], rank1_params[k]) for k in ddp_params)
    assert ddp_meta["loss"] == rank1_meta["loss"]  # the logged loss is the all-reduced one

    tok = make_tokenizer(root / "tok")
    single = build("toy", tok.vocab_size, dropout=0.0, seed=0, dtype=F64)
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        res = train(single, examples_fn_for(N_EXAMPLES), tok, cfg(tmp_path / "single"))
    finally:
        torch.set_num_threads(before)
    assert res.plan["accumulation_steps"] == 4
    assert res.loss_history == pytest.approx(ddp_meta["loss"], rel=1e-12)
    for key, value in params_of(single).items():
        torch.testing.assert_close(ddp_params[key], value, **TIGHT, msg=key)
    moved = max((params_of(single)[k] - v).abs().max() for k, v in params_of(build("toy", tok.vocab_size, 0.0)).items())
    assert moved > 1e-3  # training really changed the weights


@pytest.mark.slow
@pytest.mark.alone  # two ranks
def test_ddp_resume_is_bit_identical(ddp_run):
    root, _ = ddp_run
    full, full_meta = _load(root, "acc", 0)
    for rank in (0, 1):
        resumed, meta = _load(root, "res", rank)
        assert meta["resumed_from"] == 3 and meta["loss"] == full_meta["loss"]
        assert all(torch.equal(resumed[k], full[k]) for k in full)
    assert sorted(p.name for p in (root / "res" / "checkpoints" / "step-000000006").glob("rng-*")) == [
        "rng-rank0.pt",
        "rng-rank1.pt",
    ]


@pytest.mark.slow
@pytest.mark.alone  # two ranks
def test_grad_cache_path_keeps_ranks_in_sync(ddp_run):
    root, _ = ddp_run
    p0, meta = _load(root, "gc", 0)
    p1, _ = _load(root, "gc", 1)
    assert meta["plan"]["mode"] == "grad_cache" and meta["plan"]["contrastive_batch"] == 4
    assert all(torch.equal(p0[k], p1[k]) for k in p0)
    init = params_of(build("contrastive", len(p0["bert.embeddings.word_embeddings.weight"]), 0.0, seed=0))
    assert max((p0[k] - v).abs().max() for k, v in init.items()) > 1e-3


if __name__ == "__main__":
    _worker(sys.argv[1], sys.argv[2])
