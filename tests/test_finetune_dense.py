"""Dense fine-tuning: the InfoNCE loss by hand, training a tiny BERT, resume, DDP equivalence."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from harness.core.errors import HarnessError
from harness.finetune.dense import DenseTrainConfig, info_nce_loss, train_dense
from harness.spec.stage_settings import StageSettings
from harness.stages import artifacts

WORDS = (
    "apple banana cherry grape lemon mango melon peach pear plum red yellow green sweet sour fruit tree juice pie seed"
).split()


def make_tiny_bert(
    folder: Path, dropout: float = 0.1, seed: int = 0, init_range: float = 0.02, dtype: torch.dtype = torch.float32
) -> Path:
    """A random 2-layer BERT (hidden 32) with a 25-word vocabulary, saved as a plain HF folder
    (in ``dtype``: a float64 folder loads, trains and saves as float64)."""
    from transformers import BertConfig, BertModel, BertTokenizerFast

    folder.mkdir(parents=True, exist_ok=True)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]
    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
        initializer_range=init_range,
        hidden_dropout_prob=dropout,
        attention_probs_dropout_prob=dropout,
    )
    BertModel(config).to(dtype).save_pretrained(folder)
    BertTokenizerFast(vocab={w: i for i, w in enumerate(vocab)}, do_lower_case=True).save_pretrained(folder)
    return folder


def fruit_data(per_fruit: int = 3, negatives: int = 10) -> tuple[list, dict]:
    """(examples with doc ids, passages): a query names a fruit; its positive is that fruit's passage."""
    rng = random.Random(0)
    fruits, attrs = WORDS[:10], WORDS[10:]
    passages = {f"{f}{j}": {"title": f, "text": " ".join(rng.sample(attrs, 4))} for f in fruits for j in range(4)}
    examples = []
    for f in fruits:
        others = sorted(d for d in passages if not d.startswith(f))
        for j in range(per_fruit):
            examples.append((f"{f} {rng.choice(attrs)}", [f"{f}{j}"], rng.sample(others, negatives)))
    return examples, passages


def weights(folder: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))


# --- the loss ------------------------------------------------------------------------------------


def test_info_nce_matches_hand_computation():
    q = torch.tensor([[1.0, 0.0, 2.0], [0.5, -1.0, 0.0]])
    p = torch.tensor([[1.0, 1.0, 0.0], [0.0, 1.0, 1.0], [2.0, 0.0, 0.0], [-1.0, 0.5, 1.0]])
    for temperature in (1.0, 0.5):
        expected = 0.0
        for i in range(2):
            scores = [sum(a * b for a, b in zip(q[i].tolist(), p[j].tolist())) / temperature for j in range(4)]
            # Positive at index 0 of each group (P = 2): column 2*i; all 4 passages are candidates.
            expected += -(scores[2 * i] - math.log(sum(math.exp(s) for s in scores)))
        got = info_nce_loss(q, p, passages_per_query=2, temperature=temperature)
        assert got.item() == pytest.approx(expected / 2, rel=1e-6)


def test_info_nce_uses_in_batch_negatives():
    q = torch.randn(2, 4, generator=torch.Generator().manual_seed(1))
    p = torch.randn(4, 4, generator=torch.Generator().manual_seed(2))
    base = info_nce_loss(q, p, 2)
    p2 = p.clone()
    p2[3] += 5 * q[0]  # query 1's hard negative becomes a strong in-batch negative for query 0
    assert info_nce_loss(q, p2, 2).item() > base.item()
    with pytest.raises(HarnessError):
        info_nce_loss(q, p[:3], 2)


# --- training ------------------------------------------------------------------------------------


def dense_config(**values) -> DenseTrainConfig:
    """A config as a fine-tuning stage builds it: ``values`` over the stage settings' declared defaults."""
    stage = StageSettings(lr=1e-3, global_queries=4, passages_per_query=3, epochs=1)
    return DenseTrainConfig(**{**stage.trainer_kwargs(1), "progress": False, **values})


def test_training_lowers_loss_and_saves_a_loadable_model(tmp_path, one_thread):
    from harness.retrieval.dense import dense_retrieve
    from harness.retrieval.encoder import load_encoder

    init = make_tiny_bert(tmp_path / "init", dropout=0.0)
    examples, passages = fruit_data()
    config = dense_config(queries_per_device=4, passages_per_query=4, lr=2e-3, epochs=8)
    logged = []
    stats = train_dense(
        init, examples, config, tmp_path / "out", passages=passages, logger=lambda step, m: logged.append((step, m))
    )
    assert stats["effective_batch"] == 1 * 4 * 4
    assert stats["steps"] == stats["total_steps"] == 8 * (30 // 4)
    # A random encoder scores all 16 candidates alike (loss ln 16); a trained one finds the positive.
    assert stats["epoch_losses"][0] > math.log(16) - 0.1
    assert stats["epoch_losses"][-1] < math.log(16) - 1.0
    assert logged and logged[-1][0] == stats["steps"]
    assert not (tmp_path / "out" / "checkpoints").exists()

    enc = load_encoder(tmp_path / "out")
    assert (enc.pooling, enc.normalize, enc.spec.sources["pooling"]) == ("cls", False, "harness_encoder.json")
    doc_ids = list(passages)
    docs = enc.encode(enc.passage_texts([passages[d] for d in doc_ids]), kind="passage", show_progress=False)
    queries = enc.encode([q for q, _, _ in examples], show_progress=False)
    run, _ = dense_retrieve([str(i) for i in range(len(examples))], queries, doc_ids, docs, k=1)
    hits = sum(next(iter(run[str(i)])).startswith(q.split()[0]) for i, (q, _, _) in enumerate(examples))
    assert hits >= 0.8 * len(examples)  # the top passage is about the query's fruit

    saved = json.loads((tmp_path / "out" / "train_stats.json").read_text())
    assert saved["effective_batch"] == 16
    assert artifacts.is_finished(tmp_path / "out", saved["fingerprint"])  # the one marker, written last
    # The finished folder is reused; other data in the same folder is refused.
    again = train_dense(init, examples, config, tmp_path / "out", passages=passages)
    assert again["cached"] and again["final_loss"] == stats["final_loss"]
    with pytest.raises(HarnessError, match="already holds"):
        train_dense(init, examples[:-4], config, tmp_path / "out", passages=passages)


def test_bf16_fine_tuning_keeps_fp32_weights_vectors_loss_and_scores(tmp_path, one_thread, monkeypatch):
    """bf16 on a CPU (``precision: auto`` where bf16 measures faster): the encoder's matmuls run under
    bf16 autocast, while the master weights, the pooled vectors, the InfoNCE scores and the loss stay
    float32, and the saved model is float32 (what mini's bf16 accuracy check relies on)."""
    from harness.finetune import dense
    from harness.training import precision

    monkeypatch.setattr(precision, "cpu_bf16", lambda: True)  # autocast runs bf16 on any CPU torch
    init = make_tiny_bert(tmp_path / "init", dropout=0.0)
    examples, passages = fruit_data(per_fruit=1)  # 10 queries: 2 steps of 4
    seen: dict[str, list] = {"params": [], "autocast": [], "pooled": [], "scores": [], "loss": []}
    real_embed, real_loss = dense.BiEncoder.embed, dense.info_nce_loss

    def embed(self, batch):
        seen["params"] += [p.dtype for p in self.parameters()]
        seen["autocast"].append((torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu")))
        out = real_embed(self, batch)
        seen["pooled"].append(out.dtype)
        return out

    def loss(q_reps, p_reps, *args, **kwargs):
        out = real_loss(q_reps, p_reps, *args, **kwargs)
        seen["scores"].append((dense.upcast(q_reps) @ dense.upcast(p_reps).T).dtype)
        seen["loss"].append(out.dtype)
        return out

    monkeypatch.setattr(dense.BiEncoder, "embed", embed)
    monkeypatch.setattr(dense, "info_nce_loss", loss)
    config = dense_config(queries_per_device=4, passages_per_query=4, lr=2e-3, epochs=1)
    bf16 = train_dense(
        init, examples, dataclasses.replace(config, precision="bf16"), tmp_path / "bf16", passages=passages
    )
    assert bf16["precision"] == "bf16"
    assert set(seen["autocast"]) == {(True, torch.bfloat16)}  # the encoder ran under bf16 autocast
    assert set(seen["params"]) == {torch.float32}  # fp32 master weights, stepped by the optimiser
    assert set(seen["pooled"]) == set(seen["scores"]) == set(seen["loss"]) == {torch.float32}
    assert {t.dtype for t in weights(tmp_path / "bf16").values()} == {torch.float32}

    fp32 = train_dense(init, examples, config, tmp_path / "fp32", passages=passages)
    assert fp32["precision"] == "fp32"
    # bf16 matmuls really ran (the losses differ), and the first loss agrees to bf16's resolution.
    assert bf16["loss_history"] != fp32["loss_history"]
    assert bf16["loss_history"][0] == pytest.approx(fp32["loss_history"][0], rel=2e-2)


def test_resume_after_interrupted_epoch_gives_the_same_weights(tmp_path, one_thread):
    init = make_tiny_bert(tmp_path / "init")
    examples, passages = fruit_data(per_fruit=2)  # 20 examples -> 5 steps/epoch with 4 queries
    config = dense_config(queries_per_device=4, passages_per_query=3, lr=1e-3, epochs=2)
    full = train_dense(init, examples, config, tmp_path / "full", passages=passages)

    part_cfg = DenseTrainConfig(**{**config.to_dict(), "stop_after": 7})  # in the middle of epoch 2
    part = train_dense(init, examples, part_cfg, tmp_path / "resumed", passages=passages)
    assert part["stopped_early"] and part["steps"] == 7
    assert not (tmp_path / "resumed" / "model.safetensors").exists()
    with pytest.raises(HarnessError, match="cannot resume"):
        train_dense(
            init,
            examples,
            DenseTrainConfig(**{**config.to_dict(), "lr": 5e-4}),
            tmp_path / "resumed",
            passages=passages,
        )
    done = train_dense(init, examples, config, tmp_path / "resumed", passages=passages)
    assert done["resumed_from"] == 7 and not done["stopped_early"]
    assert done["loss_history"] == full["loss_history"]
    a, b = weights(tmp_path / "full"), weights(tmp_path / "resumed")
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_sigterm_mid_fine_tuning_leaves_a_checkpoint_the_next_run_resumes(tmp_path, one_thread):
    """A preemption notice in the middle of fine-tuning (no epoch end or periodic checkpoint due):
    the step in flight finishes, a checkpoint is saved, Terminated is raised (the CLI's exit 143), and
    the next run resumes from it and ends with the weights of an uninterrupted run."""
    import os
    import signal

    from harness.core.procs import Terminated

    init = make_tiny_bert(tmp_path / "init")
    examples, passages = fruit_data(per_fruit=2)  # 5 steps per epoch
    config = dense_config(queries_per_device=4, passages_per_query=3, lr=1e-3, epochs=2, log_every=1)
    full = train_dense(init, examples, config, tmp_path / "full", passages=passages)

    def preempt(step, metrics):
        if step == 3:
            os.kill(os.getpid(), signal.SIGTERM)

    with pytest.raises(Terminated):
        train_dense(init, examples, config, tmp_path / "run", passages=passages, logger=preempt)
    assert [p.name for p in (tmp_path / "run" / "checkpoints").glob("step-*")] == ["step-000000004"]
    done = train_dense(init, examples, config, tmp_path / "run", passages=passages)
    assert done["resumed_from"] == 4 and done["loss_history"] == full["loss_history"]
    a, b = weights(tmp_path / "full"), weights(tmp_path / "run")
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_examples_are_checked(tmp_path):
    init = make_tiny_bert(tmp_path / "init")
    examples, passages = fruit_data(per_fruit=1)
    config = dense_config(queries_per_device=16, passages_per_query=2, epochs=1)
    with pytest.raises(HarnessError, match="fewer than one global batch"):
        train_dense(init, examples, config, tmp_path / "a", passages=passages)
    with pytest.raises(HarnessError, match="leaves its only step at lr 0"):  # one step under warm-up
        train_dense(init, [("q", ["nope"], ["apple0"])] * 16, config, tmp_path / "b", passages=passages)
    with pytest.raises(HarnessError, match="not in the passages"):
        train_dense(
            init,
            [("q", ["nope"], ["apple0"])] * 16,
            dense_config(queries_per_device=16, passages_per_query=2, epochs=1, warmup_ratio=0.0),
            tmp_path / "b",
            passages=passages,
        )
    with pytest.raises(HarnessError, match="must be lists"):
        train_dense(init, [("q", "apple0", ["pear0"])], config, tmp_path / "c", passages=passages)
    with pytest.raises(HarnessError, match="invalid fine-tuning config"):
        dense_config(passages_per_query=0)
    with pytest.raises(HarnessError, match="no model folder"):
        train_dense(
            tmp_path / "missing", examples, dense_config(queries_per_device=2), tmp_path / "d", passages=passages
        )


_DDP_SCRIPT = """
import json, sys
import torch
sys.path.insert(0, {tests!r})
from test_finetune_dense import dense_config, fruit_data
from harness.finetune.dense import train_dense
from harness.core import ranks
from harness.training import distributed as D
torch.set_num_threads(1)
examples, passages = fruit_data(per_fruit=2)
config = dense_config(queries_per_device=2, passages_per_query=3, lr=1e-3, epochs=1, negatives_across_devices=True)
stats = train_dense({init!r}, examples, config, {out!r}, passages=passages)
if ranks.is_main():
    json.dump(stats, open({out!r} + ".json", "w"))
D.cleanup()
"""


@pytest.mark.slow
@pytest.mark.alone  # two ranks
def test_ddp_with_negatives_across_devices_equals_one_big_batch(tmp_path, one_thread):
    """2 gloo ranks x 2 queries with gathered negatives == 1 process x 4 queries (dropout off).

    In float64, so the two ways of summing the same gradient agree to ~1e-12 on any CPU; every
    weight is compared, the attention key bias too (its true gradient is zero, and only float32
    rounding noise, which Adam normalises into lr-sized steps, ever made it differ)."""
    init = make_tiny_bert(tmp_path / "init", dropout=0.0, init_range=0.2, dtype=torch.float64)
    examples, passages = fruit_data(per_fruit=2)
    single = train_dense(
        init,
        examples,
        dense_config(queries_per_device=4, passages_per_query=3, lr=1e-3, epochs=1),
        tmp_path / "single",
        passages=passages,
    )
    script = tmp_path / "ddp_train.py"
    out = str(tmp_path / "ddp")
    script.write_text(_DDP_SCRIPT.format(tests=str(Path(__file__).parent), init=str(init), out=out))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nnodes",
            "1",
            "--nproc_per_node",
            "2",
            str(script),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=str(Path(__file__).parents[1]),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    ddp = json.loads(Path(out + ".json").read_text())
    assert ddp["world_size"] == 2 and ddp["effective_batch"] == 2 * 2 * 3 and ddp["in_batch_candidates"] == 12
    assert ddp["steps"] == single["steps"] == 5
    assert ddp["loss_history"] == pytest.approx(single["loss_history"], rel=1e-12)
    a, b = weights(tmp_path / "single"), weights(Path(out))
    assert len(a) > 30 and all(v.dtype == torch.float64 for v in a.values())
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=1e-9, atol=1e-11, msg=k)
    start = weights(init)
    assert max((a[k] - start[k]).abs().max() for k in start if k in a) > 1e-4  # training moved the weights
