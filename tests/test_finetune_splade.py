"""Lexical (SPLADE-max) fine-tuning: representation, FLOPS and Eq. (13) by hand; training, resume, init."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest
import torch

from harness.core.errors import HarnessError
from harness.finetune.splade import (
    SpladeTrainConfig,
    flops,
    flops_weight,
    sparse_start_shift,
    splade_loss,
    train_splade,
)
from harness.retrieval.splade_model import SETTINGS_FILE, load_masked_lm, splade_max
from harness.spec.stage_settings import StageSettings

FRUITS = "apple banana cherry grape lemon mango melon peach".split()
ATTRS = "red yellow green sweet sour fruit tree juice pie seed".split()
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *FRUITS, *ATTRS, ".", ",", "##s", "a", "the"]


def make_tiny_mlm(folder: Path, encoder_only: bool = False, seed: int = 0, dtype: torch.dtype = torch.float32) -> Path:
    """A random 2-layer BERT masked LM (hidden 32) over ``VOCAB``, saved as a plain HF folder in ``dtype``."""
    from transformers import BertConfig, BertForMaskedLM, BertTokenizerFast

    folder.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=len(VOCAB),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    model = BertForMaskedLM(config).to(dtype)
    (model.bert if encoder_only else model).save_pretrained(folder)
    BertTokenizerFast(vocab={w: i for i, w in enumerate(VOCAB)}, do_lower_case=True).save_pretrained(folder)
    return folder


def fruit_data(per_fruit: int = 2, negatives: int = 6, with_ids: bool = False) -> tuple[list, dict]:
    """Queries name a fruit; the positive is a passage about that fruit (doc ids + passages)."""
    rng = random.Random(0)
    passages = {f"{f}{j}": {"title": f, "text": " ".join(rng.sample(ATTRS, 3))} for f in FRUITS for j in range(3)}
    examples = []
    for f in FRUITS:
        others = sorted(d for d in passages if not d.startswith(f))
        for j in range(per_fruit):
            query = f"{f} {rng.choice(ATTRS)}"
            row = (query, [f"{f}{j}"], rng.sample(others, negatives))
            examples.append((f"q-{f}-{j}", *row) if with_ids else row)
    return examples, passages


# --- representation and losses by hand ----------------------------------------------------------


def test_splade_max_matches_hand_computation_with_padding():
    torch.manual_seed(1)
    logits = torch.randn(2, 4, 5) * 3
    logits[1, 3] = 100.0  # a padding position with huge logits must not count
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]])
    got = splade_max(logits, mask)
    assert got.shape == (2, 5) and got.dtype == torch.float32
    for b in range(2):
        for v in range(5):
            values = [math.log(1 + max(0.0, logits[b, t, v].item())) for t in range(4) if mask[b, t]]
            assert got[b, v].item() == pytest.approx(max(values), abs=1e-6)
    assert (got >= 0).all()
    assert got[1].max().item() < math.log(101)  # the padded row never saw the 100s


def test_splade_max_encoding_path_equals_the_masked_max():
    """Without gradients, right-padded rows are pooled in place: the very same values as the masked
    max (also for an all-padding row and a left-padded batch, which takes the masked path)."""
    torch.manual_seed(2)
    logits = torch.randn(4, 6, 7) * 3
    for mask in (
        torch.tensor([[1] * 6, [1, 1, 1, 0, 0, 0], [1, 0, 0, 0, 0, 0], [0] * 6]),
        torch.tensor([[0, 0, 1, 1, 1, 1]] * 4),
    ):
        with_grad = splade_max(logits.clone().requires_grad_(), mask).detach()
        with torch.inference_mode():
            assert torch.equal(splade_max(logits, mask), with_grad)


def test_splade_max_gradient_reaches_the_winning_token_only():
    logits = torch.tensor([[[1.0, -2.0], [3.0, -1.0]]], requires_grad=True)
    splade_max(logits, torch.tensor([[1, 1]])).sum().backward()
    # Token 1 wins column 0 (d/dx log(1+x) = 1/4 at x=3); column 1 is negative everywhere: no gradient.
    assert logits.grad.tolist() == [[[0.0, 0.0], [0.25, 0.0]]]


def test_flops_equals_the_formula():
    reps = torch.tensor([[1.0, 0.0, 2.0], [3.0, 0.5, 0.0]])
    expected = sum((sum(abs(reps[i, j].item()) for i in range(2)) / 2) ** 2 for j in range(3))
    assert flops(reps).item() == pytest.approx(expected)  # (2^2 + 0.25^2 + 1^2) = 5.0625
    assert expected == pytest.approx(5.0625)


def test_flops_weight_quadratic_warmup():
    assert flops_weight(0.008, 0) == 0.008
    assert flops_weight(0.008, 0, warmup_steps=10) == 0.0
    assert flops_weight(0.008, 5, warmup_steps=10) == pytest.approx(0.002)
    assert flops_weight(0.008, 50, warmup_steps=10) == 0.008


def _hand_info_nce(q: torch.Tensor, p: torch.Tensor, per: int) -> float:
    total = 0.0
    for i in range(q.shape[0]):
        scores = [float(q[i] @ p[j]) for j in range(p.shape[0])]
        total += -(scores[i * per] - math.log(sum(math.exp(s) for s in scores)))
    return total / q.shape[0]


def test_stage3_loss_is_kl_plus_gamma_contrastive_plus_flops():
    torch.manual_seed(3)
    q, p = torch.rand(2, 6), torch.rand(6, 6)  # 2 queries x 3 passages, |V| = 6
    teacher = torch.tensor([[2.0, 0.5, -1.0], [0.0, 1.5, 0.3]])
    parts = splade_loss(q, p, 3, lambda_q=0.006, lambda_d=0.008, teacher=teacher, contrastive_weight=0.2)
    kl = 0.0
    for i in range(2):
        s = [float(q[i] @ p[i * 3 + j]) for j in range(3)]
        t = teacher[i].tolist()
        ps = [math.exp(x) / sum(math.exp(y) for y in s) for x in s]
        pt = [math.exp(x) / sum(math.exp(y) for y in t) for x in t]
        kl += sum(a * (math.log(a) - math.log(b)) for a, b in zip(pt, ps))  # KL(teacher || student)
    kl /= 2
    ce = _hand_info_nce(q, p, 3)
    fq = sum((q[:, j].mean().item()) ** 2 for j in range(6))
    fd = sum((p[:, j].mean().item()) ** 2 for j in range(6))
    assert parts["kl"].item() == pytest.approx(kl, rel=1e-5)
    assert parts["contrastive"].item() == pytest.approx(ce, rel=1e-5)
    assert parts["loss"].item() == pytest.approx(kl + 0.2 * ce + 0.006 * fq + 0.008 * fd, rel=1e-5)
    plain = splade_loss(q, p, 3, lambda_q=0.006, lambda_d=0.008)
    assert "kl" not in plain and plain["loss"].item() == pytest.approx(ce + 0.006 * fq + 0.008 * fd, rel=1e-5)


# --- training -----------------------------------------------------------------------------------


def _config(**overrides) -> SpladeTrainConfig:
    """A config as a stage builds it (the stage settings' declared defaults under these values)."""
    stage = StageSettings(
        lr=2e-3,
        global_queries=4,
        passages_per_query=3,
        epochs=4,
        warmup_ratio=0.0,
        flops_lambda=0.002,
        max_p_len=16,
        max_q_len=8,
    )
    return SpladeTrainConfig(**{**stage.splade_kwargs(1), "progress": False, **overrides})


def test_training_lowers_loss_and_saves_a_loadable_masked_lm(tmp_path, one_thread):
    from transformers import BertForMaskedLM

    init = make_tiny_mlm(tmp_path / "init")
    examples, passages = fruit_data()
    logged = []
    stats = train_splade(
        init,
        examples,
        _config(log_every=2),
        tmp_path / "out",
        logger=lambda s, m: logged.append((s, m)),
        passages=passages,
    )
    assert stats["steps"] == 16 and stats["effective_batch"] == 12 and stats["mlm_head"] == "loaded"
    assert stats["epoch_losses"][-1] < stats["epoch_losses"][0]
    assert stats["avg_doc_nonzeros"] > 0 and stats["avg_query_nonzeros"] > 0
    assert set(stats["history"]) >= {"contrastive", "flops_q", "flops_d", "query_nonzeros", "doc_nonzeros"}
    assert logged and {"loss", "contrastive", "flops_q", "doc_nonzeros", "lr"} <= set(logged[0][1])
    out = tmp_path / "out"
    model = BertForMaskedLM.from_pretrained(out)
    assert model.config.vocab_size == len(VOCAB)
    settings = json.loads((out / SETTINGS_FILE).read_text())
    assert settings["representation"] == "splade_max" and settings["passage_max_length"] == 16
    assert not (out / "checkpoints").exists()
    assert train_splade(init, examples, _config(log_every=2), out, passages=passages)["cached"] is True
    with pytest.raises(HarnessError, match="other data or settings"):
        train_splade(init, examples, _config(flops_lambda=0.5), out, passages=passages)


def test_resume_after_interruption_gives_the_same_weights(tmp_path, one_thread):
    from safetensors.torch import load_file

    init = make_tiny_mlm(tmp_path / "init", dtype=torch.float64)  # float64: see the DDP test below
    examples, passages = fruit_data()
    full = train_splade(init, examples, _config(epochs=2), tmp_path / "full", passages=passages)
    part = train_splade(init, examples, _config(epochs=2, stop_after=3), tmp_path / "part", passages=passages)
    assert part["stopped_early"] and part["steps"] == 3
    resumed = train_splade(init, examples, _config(epochs=2), tmp_path / "part", passages=passages)
    assert resumed["resumed_from"] == 3 and resumed["steps"] == 8
    assert resumed["loss_history"] == pytest.approx(full["loss_history"], rel=1e-12)
    a, b = (
        load_file(str(tmp_path / "full" / "model.safetensors")),
        load_file(str(tmp_path / "part" / "model.safetensors")),
    )
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=1e-9, atol=1e-11, msg=k)


def test_sparse_start_shift_leaves_the_asked_number_of_terms_and_the_mlm_unchanged(tmp_path):
    model, _ = load_masked_lm(make_tiny_mlm(tmp_path / "init"))
    torch.manual_seed(1)
    batch = {"input_ids": torch.randint(5, len(VOCAB), (6, 10)), "attention_mask": torch.ones(6, 10, dtype=torch.long)}
    batch["attention_mask"][0, 7:] = 0  # padding never counts
    before = model(**batch).logits
    assert (splade_max(before, batch["attention_mask"]) > 0).sum() > 6 * 5
    shift = sparse_start_shift(model, batch, terms=5)
    with torch.no_grad():
        model.cls.predictions.bias.sub_(shift)
    after = model(**batch).logits
    assert (splade_max(after, batch["attention_mask"]) > 0).sum().item() == 6 * 5
    torch.testing.assert_close(after.log_softmax(-1), before.log_softmax(-1))  # MLM predictions unchanged
    with pytest.raises(HarnessError, match="start_terms"):
        sparse_start_shift(model, batch, terms=len(VOCAB))


def test_start_terms_starts_training_sparse(tmp_path, one_thread):
    init = make_tiny_mlm(tmp_path / "init")
    examples, passages = fruit_data()
    plain = train_splade(init, examples, _config(epochs=1), tmp_path / "plain", passages=passages)
    sparse = train_splade(init, examples, _config(epochs=1, start_terms=3), tmp_path / "sparse", passages=passages)
    assert plain["start_bias_shift"] is None and isinstance(sparse["start_bias_shift"], float)
    assert sparse["history"]["doc_nonzeros"][0] <= 6 < plain["history"]["doc_nonzeros"][0]
    assert any("so a training passage starts with ~3 terms" in n for n in sparse["notes"])
    with pytest.raises(HarnessError, match="start_terms"):
        _config(start_terms=0)


def test_encoder_only_init_gets_a_head_tied_to_the_word_embeddings(tmp_path, one_thread):
    init = make_tiny_mlm(tmp_path / "init", encoder_only=True)
    torch.manual_seed(0)
    model, status = load_masked_lm(init)
    assert status == "initialised"
    assert torch.equal(model.cls.predictions.decoder.weight, model.bert.embeddings.word_embeddings.weight)
    assert torch.all(model.cls.predictions.bias == 0)
    with pytest.raises(HarnessError, match="no MLM head"):
        load_masked_lm(init, allow_new_head=False)
    examples, passages = fruit_data()
    stats = train_splade(init, examples, _config(epochs=1), tmp_path / "out", passages=passages)
    assert stats["mlm_head"] == "initialised" and any("no MLM head" in n for n in stats["notes"])
    assert load_masked_lm(tmp_path / "out", allow_new_head=False)[1] == "loaded"


def test_distillation_stage_uses_teacher_scores(tmp_path, one_thread):
    init = make_tiny_mlm(tmp_path / "init")
    examples, passages = fruit_data(with_ids=True)
    # A teacher that likes the fruit named by the query; one query's negatives are partly unscored.
    teacher = {
        qid: {d: (3.0 if d.startswith(q.split()[0]) else -float(i % 3)) for i, d in enumerate(pos + negs)}
        for qid, q, pos, negs in examples
    }
    first_qid, _, _, negs = examples[0]
    del teacher[first_qid][negs[0]], teacher[first_qid][negs[1]]
    cfg = _config(distill=True, flops_lambda=0.008, epochs=2)
    stats = train_splade(init, examples, cfg, tmp_path / "out", passages=passages, teacher_scores=teacher)
    assert stats["distill"] is True and stats["unscored_items_dropped"] == 2
    assert len(stats["history"]["kl"]) == stats["steps"] > 0
    assert stats["flops_lambda_query"] == pytest.approx(0.008 * 0.75)
    with pytest.raises(HarnessError, match="teacher_scores"):
        train_splade(init, examples, cfg, tmp_path / "x", passages=passages)
    with pytest.raises(HarnessError, match="qid, query"):
        train_splade(init, [ex[1:] for ex in examples], cfg, tmp_path / "y", passages=passages, teacher_scores=teacher)


def test_examples_and_config_are_checked(tmp_path):
    with pytest.raises(HarnessError, match="positive integer"):
        _config(queries_per_device=0)
    with pytest.raises(HarnessError, match="flops_lambda"):
        _config(flops_lambda=-1.0)
    init = make_tiny_mlm(tmp_path / "init")
    with pytest.raises(HarnessError, match="not \\(query, positives, negatives\\)"):
        train_splade(init, [("q", ["p"])], _config(), tmp_path / "out")
    with pytest.raises(HarnessError, match="fewer than one global batch"):
        train_splade(init, [("q", ["p"], ["n"])], _config(), tmp_path / "out")


_DDP_SCRIPT = """
import json, sys
import torch
sys.path.insert(0, {tests!r})
from test_finetune_splade import ddp_case
from harness.finetune.splade import train_splade
from harness.core import ranks
from harness.training import distributed as D
torch.set_num_threads(1)
examples, passages, teacher, config = ddp_case(queries_per_device=2)
stats = train_splade({init!r}, examples, config, {out!r}, passages=passages, teacher_scores=teacher)
if ranks.is_main():
    json.dump(stats, open({out!r} + ".json", "w"))
D.cleanup()
"""


def ddp_case(queries_per_device: int) -> tuple[list, dict, dict, SpladeTrainConfig]:
    """Stage 3 with FLOPS off: KL (per rank) + gamma x InfoNCE over the gathered batch."""
    examples, passages = fruit_data(with_ids=True)
    teacher = {
        qid: {d: float(len(d) % 4) - (2.0 if d in negs else 0.0) for d in pos + negs} for qid, _, pos, negs in examples
    }
    config = _config(
        queries_per_device=queries_per_device, epochs=1, distill=True, flops_lambda=0.0, negatives_across_devices=True
    )
    return examples, passages, teacher, config


@pytest.mark.slow
@pytest.mark.alone  # two ranks
def test_ddp_distillation_with_gathered_negatives_equals_one_big_batch(tmp_path, one_thread):
    """2 gloo ranks x 2 queries == 1 process x 4 queries: the InfoNCE scaling and the per-rank KL are right.

    FLOPS is off here: per-rank FLOPS (SPLADE's choice) is by design not the FLOPS of the whole batch.
    """
    import os
    import subprocess
    import sys

    from safetensors.torch import load_file

    # float64: the gathered and the single-process batch sum the same terms in another order;
    # float32 rounding of a zero true gradient (attention key bias) became lr-sized Adam steps.
    init = make_tiny_mlm(tmp_path / "init", seed=1, dtype=torch.float64)
    examples, passages, teacher, config = ddp_case(queries_per_device=4)
    single = train_splade(init, examples, config, tmp_path / "single", passages=passages, teacher_scores=teacher)
    script = tmp_path / "ddp_train.py"
    out = str(tmp_path / "ddp")
    script.write_text(_DDP_SCRIPT.format(tests=str(Path(__file__).parent), init=str(init), out=out))
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
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        timeout=300,
        cwd=str(Path(__file__).parents[1]),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    ddp = json.loads(Path(out + ".json").read_text())
    assert ddp["world_size"] == 2 and ddp["in_batch_candidates"] == 12 and ddp["steps"] == single["steps"] == 4
    assert ddp["loss_history"] == pytest.approx(single["loss_history"], rel=1e-12)
    assert ddp["history"]["kl"] == pytest.approx(single["history"]["kl"], rel=1e-9, abs=1e-12)
    a, b = load_file(str(tmp_path / "single" / "model.safetensors")), load_file(str(Path(out) / "model.safetensors"))
    assert all(v.dtype == torch.float64 for v in a.values())
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=1e-9, atol=1e-11, msg=k)
