"""coCondenser: Eq. (4)-(7) of the query-as-context paper, recomputed; gradient caching."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from objective_fixtures import single_thread, toy_config, toy_pairs, toy_tokenizer

from harness.core.errors import HarnessError
from harness.pretrain.models import run_layers
from harness.pretrain.objectives import build_objective
from harness.pretrain.objectives.cocondenser import span_contrastive_loss


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    with single_thread():
        yield


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    return toy_tokenizer(tmp_path_factory.mktemp("vocab"))


def make(tokenizer, n=6, seed=42, dtype=torch.float32, **params):
    torch.manual_seed(0)
    obj = build_objective("cocondenser", toy_config(**params.pop("config", {})), **params).to(dtype)
    batch = obj.collate(toy_pairs(n), tokenizer, 32, torch.Generator().manual_seed(seed))
    return obj, batch


def eq5_by_hand(reps: torch.Tensor, tau: float) -> float:
    """Eq. (5) for every anchor x with its pair mate y, B = all other spans; mean."""
    n = reps.shape[0]
    total = 0.0
    for x in range(n):
        y = x + 1 if x % 2 == 0 else x - 1

        def sim(a, b):
            return float(reps[a] @ reps[b]) / tau

        denominator = sum(math.exp(sim(x, k)) for k in range(n) if k != x)
        total += -math.log(math.exp(sim(x, y)) / denominator)
    return total / n


@pytest.mark.parametrize("tau", [1.0, 0.5])
def test_eq5_on_hand_built_representations(tau):
    reps = torch.tensor([[1.0, 0.0, 0.5], [0.8, 0.1, 0.4], [-0.3, 1.0, 0.0], [0.0, 0.9, 0.2]])
    assert span_contrastive_loss(reps, tau).item() == pytest.approx(eq5_by_hand(reps, tau), rel=1e-6)
    # A single pair has no negative: the positive is the whole denominator.
    assert span_contrastive_loss(reps[:2]).item() == pytest.approx(0.0, abs=1e-7)
    with pytest.raises(HarnessError):
        span_contrastive_loss(reps[:3])


def test_collate_interleaves_pairs(tokenizer):
    obj, batch = make(tokenizer, n=3)
    assert batch["input_ids"].shape[0] == 6
    pairs = toy_pairs(3)
    first_query = tokenizer(pairs[0][1])["input_ids"]
    length = len(first_query)
    kept = batch["labels"][1, :length].where(batch["labels"][1, :length] != -100, batch["input_ids"][1, :length])
    assert kept.tolist() == first_query  # row 1 is the context of pair 0


def test_total_loss_recomputed_from_eq4_to_eq7(tokenizer):
    obj, batch = make(tokenizer, skip_from=1)
    obj.eval()
    losses, extras = obj.compute(batch)
    with torch.no_grad():
        out = obj.encoder()(
            input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], output_hidden_states=True
        )
        hs = out.hidden_states
        labels = batch["labels"]
        # Eq. (4): full-vocabulary logits at every position, CE over the masked ones.
        full = obj.lm.cls(hs[-1])
        l_mlm = F.cross_entropy(full.flatten(0, 1), labels.flatten(), ignore_index=-100)
        # Eq. (6): head over [h_0^L ; h_1..n^M], M = skip_from = 1.
        head_in = torch.cat([hs[-1][:, :1], hs[1][:, 1:]], dim=1)
        head_out = run_layers(obj.c_head, obj.config, head_in, batch["attention_mask"])
        l_aux = F.cross_entropy(obj.lm.cls(head_out).flatten(0, 1), labels.flatten(), ignore_index=-100)
        # Eq. (5) on the last-layer [CLS] vectors.
        reps = out.last_hidden_state[:, 0]
        l_co = eq5_by_hand(reps.double(), 1.0)
    assert torch.allclose(extras["cls"], reps, atol=1e-6)
    assert losses["mlm"].item() == pytest.approx(l_mlm.item(), rel=1e-5)
    assert losses["aux_mlm"].item() == pytest.approx(l_aux.item(), rel=1e-5)
    assert losses["contrastive"].item() == pytest.approx(l_co, rel=1e-5)
    assert losses["loss"].item() == pytest.approx(l_mlm.item() + l_aux.item() + l_co, rel=1e-5)  # Eq. (7)


def test_skip_from_is_clamped_and_changes_only_the_head(tokenizer):
    obj6, batch = make(tokenizer)  # paper default 6 on a 2-layer model
    assert obj6.skip_layer == 2 and obj6.params["skip_from"] == 6
    obj1, _ = make(tokenizer, skip_from=1)
    l6, l1 = obj6(batch), obj1(batch)  # same init (seeded), same batch
    assert l6["mlm"].item() == pytest.approx(l1["mlm"].item())
    assert l6["aux_mlm"].item() != pytest.approx(l1["aux_mlm"].item())
    assert not type(obj6).supports_accumulation


def _grads(obj):
    return {k: p.grad.clone() for k, p in obj.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("chunk_size", [1, 5, 12])
def test_grad_cache_equals_full_batch_backward(tokenizer, chunk_size):
    # float64: both paths sum the same terms in another order (float32 rounding differs by CPU)
    obj, batch = make(tokenizer, skip_from=1, dtype=torch.float64)
    obj.zero_grad()
    full = obj(batch)
    full["loss"].backward()
    reference = _grads(obj)
    obj.zero_grad()
    cached = obj.grad_cache_step(batch, chunk_size=chunk_size)
    got = _grads(obj)
    assert set(got) == set(reference)
    for name in reference:
        assert torch.allclose(got[name], reference[name], rtol=1e-9, atol=1e-11), name
    for key in ("loss", "mlm", "aux_mlm", "contrastive"):
        assert not cached[key].requires_grad
        assert cached[key].item() == pytest.approx(full[key].item(), rel=1e-12)


class _FakeScaler:
    """GradScaler's contract as used by grad_cache_step: ``scale(loss) = loss * S``."""

    def __init__(self, factor: float):
        self.factor = factor

    def scale(self, loss):
        return loss * self.factor


def test_grad_cache_scales_every_backward_with_the_scaler(tokenizer):
    obj, batch = make(tokenizer, skip_from=1, dtype=torch.float64)
    obj.zero_grad()
    obj.grad_cache_step(batch, chunk_size=5)
    reference = _grads(obj)
    obj.zero_grad()
    obj.grad_cache_step(batch, chunk_size=5, scaler=_FakeScaler(8.0))
    for name, grad in _grads(obj).items():
        assert torch.allclose(grad, 8.0 * reference[name], rtol=1e-9, atol=1e-11), name


def test_grad_cache_replays_dropout(tokenizer):
    """With dropout on, a re-run chunk must see the same dropout masks as the cached pass."""
    obj, batch = make(
        tokenizer, config={"hidden_dropout_prob": 0.3, "attention_probs_dropout_prob": 0.2}, dtype=torch.float64
    )
    obj.train()
    torch.manual_seed(7)
    obj.zero_grad()
    obj(batch)["loss"].backward()
    reference = _grads(obj)
    torch.manual_seed(7)
    obj.zero_grad()
    obj.grad_cache_step(batch, chunk_size=batch["input_ids"].shape[0])
    for name, grad in _grads(obj).items():
        assert torch.allclose(grad, reference[name], rtol=1e-9, atol=1e-11), name


def test_optimisation_reduces_the_loss(tokenizer):
    obj, batch = make(tokenizer, skip_from=1)
    opt = torch.optim.Adam(obj.parameters(), lr=3e-3)
    first = None
    for _ in range(8):
        opt.zero_grad()
        losses = obj.grad_cache_step(batch, chunk_size=4)
        first = first if first is not None else losses["loss"].item()
        opt.step()
    assert obj(batch)["loss"].item() < first - 0.5


def _ddp_worker(rank: int, world: int, folder: str) -> None:
    """One gloo rank: half of the batch; gradients averaged like DDP would."""
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{folder}/rendezvous", rank=rank, world_size=world)
    tokenizer = toy_tokenizer(f"{folder}/vocab{rank}")
    obj, batch = make(tokenizer, skip_from=1, dtype=torch.float64)
    n = batch["input_ids"].shape[0] // world
    local = {k: v[rank * n : (rank + 1) * n] for k, v in batch.items()}

    def averaged():
        grads = {}
        for name, p in obj.named_parameters():
            if p.grad is not None:
                dist.all_reduce(p.grad)
                grads[name] = p.grad / world
        return grads

    out = {}
    obj.zero_grad(set_to_none=True)
    losses = obj(local)
    losses["contrastive"].backward()
    out["contrastive"], out["co_value"] = averaged(), losses["contrastive"].item()
    obj.zero_grad(set_to_none=True)
    obj(local)["loss"].backward()
    out["plain"] = averaged()
    obj.zero_grad(set_to_none=True)
    obj.grad_cache_step(local, chunk_size=2)
    out["cached"] = averaged()
    if rank == 0:
        torch.save(out, f"{folder}/result.pt")
    dist.destroy_process_group()


def test_distributed_negatives_span_the_global_batch(tokenizer, tmp_path):
    """2 gloo ranks x 6 spans == 1 process x 12 spans for L_co; grad cache == plain under DDP."""
    import time

    import torch.multiprocessing as mp

    # fork: the children reuse the imported torch/transformers (spawn re-imports them: ~50x
    # slower here). A deadline guards against a hung rendezvous.
    workers = mp.start_processes(_ddp_worker, args=(2, str(tmp_path)), nprocs=2, join=False, start_method="fork")
    deadline = time.monotonic() + 120
    while not workers.join(timeout=2):
        if time.monotonic() > deadline:
            for process in workers.processes:
                process.kill()
            pytest.fail("gloo workers did not finish in 120 s")
    result = torch.load(tmp_path / "result.pt")
    obj, batch = make(tokenizer, skip_from=1, dtype=torch.float64)
    losses = obj(batch)
    losses["contrastive"].backward()
    assert result["co_value"] == pytest.approx(losses["contrastive"].item(), rel=1e-12)
    reference = _grads(obj)
    assert set(result["contrastive"]) == set(reference)
    for name, grad in reference.items():
        assert torch.allclose(result["contrastive"][name], grad, rtol=1e-9, atol=1e-11), name
    for name, grad in result["plain"].items():
        assert torch.allclose(result["cached"][name], grad, rtol=1e-9, atol=1e-11), name
