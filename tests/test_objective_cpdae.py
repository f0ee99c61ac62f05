"""CPDAE: Eq. (1)-(7) of Ma et al. (CIKM 2022), recomputed by hand."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from gloo import run_forked
from objective_fixtures import single_thread, toy_config, toy_pairs, toy_tokenizer

from harness.core.errors import HarnessError
from harness.pretrain.objectives import build_objective
from harness.pretrain.objectives.cpdae import (
    js_divergence,
    log_word_distribution,
    pairwise_js,
    reconstruction_loss,
    view_contrastive_loss,
)


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    with single_thread():
        yield


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    return toy_tokenizer(tmp_path_factory.mktemp("vocab"))


def make(tokenizer, n=5, dtype=torch.float32, **params):
    torch.manual_seed(0)
    obj = build_objective("cpdae", toy_config(), **params).to(dtype)
    batch = obj.collate(toy_pairs(n), tokenizer, 32, torch.Generator().manual_seed(42))
    return obj, batch


def word_distribution(z: torch.Tensor) -> list[float]:
    """Eq. (3) then 'normalized': z~ = sigmoid(z) / sum(sigmoid(z))."""
    s = [1.0 / (1.0 + math.exp(-float(v))) for v in z]
    return [v / sum(s) for v in s]


def js_by_hand(p: list[float], q: list[float]) -> float:
    m = [(a + b) / 2 for a, b in zip(p, q)]

    def kl(x):
        return sum(a * math.log(a / c) for a, c in zip(x, m))

    return 0.5 * kl(p) + 0.5 * kl(q)


def eq5_by_hand(dists: list[list[float]], anchors: range) -> float:
    """Eq. (5): views laid out [d'_1..d'_m, d''_1..d''_m]; mean over anchors."""
    two_m = len(dists)
    total = 0.0
    for i in anchors:
        pos = (i + two_m // 2) % two_m
        numerator = math.exp(-js_by_hand(dists[i], dists[pos]))
        denominator = sum(math.exp(-js_by_hand(dists[i], dists[k])) for k in range(two_m) if k != i)
        total += -math.log(numerator / denominator)
    return total / len(anchors)


def test_reconstruction_is_multilabel_bce_eq4():
    z = torch.tensor([[2.0, -1.0, 0.5, -3.0], [0.0, 1.5, -0.5, 4.0]])
    y = torch.tensor([[1.0, 0.0, 1.0, 0.0], [0.0, 0.0, 1.0, 1.0]])
    per_view = []
    for zr, yr in zip(z.tolist(), y.tolist()):
        s = [1 / (1 + math.exp(-v)) for v in zr]
        per_view.append(-sum(t * math.log(p) + (1 - t) * math.log(1 - p) for t, p in zip(yr, s)))
    assert reconstruction_loss(z, y, "sum").item() == pytest.approx(sum(per_view) / 2, rel=1e-6)
    assert reconstruction_loss(z, y, "mean").item() == pytest.approx(sum(per_view) / 8, rel=1e-6)


def test_js_divergence_and_the_papers_eq7():
    torch.manual_seed(1)
    z = torch.randn(2, 6) * 3
    log_p, log_q = log_word_distribution(z)
    p, q = word_distribution(z[0]), word_distribution(z[1])
    assert torch.allclose(log_p.exp(), torch.tensor(p), atol=1e-7)
    js = js_divergence(log_p, log_q).item()
    assert js == pytest.approx(js_by_hand(p, q), rel=1e-5)
    assert 0.0 < js < math.log(2)
    # Eq. (7) of the paper is -JS without the 1/2 and the constant: E = 2(-JS) + 2 log 2.
    e7 = (
        -sum(a * math.log(a) for a in p)
        - sum(b * math.log(b) for b in q)
        + sum((a + b) * math.log(a + b) for a, b in zip(p, q))
    )
    assert -js == pytest.approx(e7 / 2 - math.log(2), abs=1e-6)
    assert js_divergence(log_p, log_p).item() == pytest.approx(0.0, abs=1e-7)


def test_blocked_pairwise_js_matches_dense_values_and_gradients():
    torch.manual_seed(2)
    z = torch.randn(6, 10, requires_grad=True)
    dense = js_divergence(log_word_distribution(z).unsqueeze(1), log_word_distribution(z).unsqueeze(0))
    (g_dense,) = torch.autograd.grad(dense[:3].sum(), z)
    blocked = pairwise_js(log_word_distribution(z)[:3], log_word_distribution(z), block=2)
    (g_blocked,) = torch.autograd.grad(blocked.sum(), z)
    assert torch.allclose(blocked, dense[:3], atol=1e-7)
    assert torch.allclose(g_blocked, g_dense, atol=1e-7)


def test_eq5_on_hand_built_word_distributions():
    torch.manual_seed(3)
    z = torch.randn(6, 8) * 4  # 2m = 6 views, m = 3 passages
    log_dist = log_word_distribution(z)
    dists = [word_distribution(row) for row in z]
    anchors = torch.arange(3)
    got = view_contrastive_loss(-pairwise_js(log_dist[anchors], log_dist), anchors)
    assert got.item() == pytest.approx(eq5_by_hand(dists, range(3)), rel=1e-5)
    both = torch.arange(6)
    got_sym = view_contrastive_loss(-pairwise_js(log_dist, log_dist), both)
    assert got_sym.item() == pytest.approx(eq5_by_hand(dists, range(6)), rel=1e-5)


def test_collate_two_views_and_bag_of_words(tokenizer):
    obj, batch = make(tokenizer, n=3)
    assert batch["input_ids"].shape[0] == 6 and batch["bow_ids"].shape[0] == 3
    assert not torch.equal(batch["labels"][:3], batch["labels"][3:])  # two different maskings
    for i, (text, _) in enumerate(toy_pairs(3)):
        words = set(tokenizer(text, add_special_tokens=False)["input_ids"])
        bow = batch["bow_ids"][i]
        assert set(bow[bow != -100].tolist()) == words
        for view in (i, i + 3):  # both views are masked copies of the same passage
            ids, labels = batch["input_ids"][view], batch["labels"][view]
            original = ids.where(labels == -100, labels)[batch["attention_mask"][view].bool()]
            assert original.tolist() == tokenizer(text)["input_ids"]


@pytest.mark.parametrize("symmetric", [False, True])
def test_total_loss_recomputed_from_eq6(tokenizer, symmetric):
    obj, batch = make(tokenizer, symmetric=symmetric)
    losses, extras = obj.compute(batch)
    m = batch["bow_ids"].shape[0]
    with torch.no_grad():
        h = obj.encoder()(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden_state
        l_mlm = F.cross_entropy(obj.lm.cls(h).flatten(0, 1), batch["labels"].flatten(), ignore_index=-100)
        z = obj.decoder(h[:, 0])  # Eq. (1)-(2)
    assert torch.allclose(extras["z"], z, atol=1e-6)
    # y: the passage's token set, the same for both views.
    y = torch.zeros(m, obj.config.vocab_size)
    for i in range(m):
        ids = batch["bow_ids"][i]
        y[i, ids[ids != -100]] = 1.0
    y = torch.cat([y, y])
    per_view = -(y * F.logsigmoid(z) + (1 - y) * F.logsigmoid(-z)).sum(1)  # Eq. (4)
    l_rec = per_view.mean().item()
    dists = [word_distribution(row) for row in z]
    l_cl = eq5_by_hand(dists, range(2 * m) if symmetric else range(m))
    assert losses["mlm"].item() == pytest.approx(l_mlm.item(), rel=1e-5)
    assert losses["rec"].item() == pytest.approx(l_rec, rel=1e-5)
    assert losses["contrastive"].item() == pytest.approx(l_cl, rel=1e-4)
    assert losses["loss"].item() == pytest.approx(l_rec + l_mlm.item() + 0.1 * l_cl, rel=1e-5)  # Eq. (6)


def test_cpdae_r_contrasts_cls_vectors(tokenizer):
    obj, batch = make(tokenizer, contrast_on="cls", cl_lambda=0.5)
    losses, extras = obj.compute(batch)
    h = extras["h"].detach().double()
    m = h.shape[0] // 2
    total = 0.0
    for i in range(m):
        denominator = sum(math.exp(float(h[i] @ h[k])) for k in range(2 * m) if k != i)
        total += -math.log(math.exp(float(h[i] @ h[i + m])) / denominator)
    assert losses["contrastive"].item() == pytest.approx(total / m, rel=1e-4)
    assert losses["loss"].item() == pytest.approx(
        losses["rec"].item() + losses["mlm"].item() + 0.5 * total / m, rel=1e-5
    )


def test_bad_parameters_are_user_errors(tokenizer):
    with pytest.raises(HarnessError):
        build_objective("cpdae", toy_config(), contrast_on="tokens")
    obj, batch = make(tokenizer, n=1)
    with pytest.raises(HarnessError, match="2 passages"):
        obj(batch)


def test_optimisation_reduces_the_loss(tokenizer):
    obj, batch = make(tokenizer, n=6)
    opt = torch.optim.Adam(obj.parameters(), lr=3e-3)
    first = obj(batch)
    for _ in range(8):
        opt.zero_grad()
        obj(batch)["loss"].backward()
        opt.step()
    last = obj(batch)
    assert last["loss"].item() < first["loss"].item() - 1.0
    assert last["rec"].item() < first["rec"].item()


@pytest.mark.parametrize("contrast_on", ["words", "cls"])
def test_grad_cache_equals_full_batch_backward(tokenizer, contrast_on):
    obj, batch = make(tokenizer, n=4, contrast_on=contrast_on, dtype=torch.float64)  # float64: see cocondenser's
    obj.zero_grad()
    full = obj(batch)
    full["loss"].backward()
    reference = {k: p.grad.clone() for k, p in obj.named_parameters() if p.grad is not None}
    obj.zero_grad()
    cached = obj.grad_cache_step(batch, chunk_size=3)
    got = {k: p.grad.clone() for k, p in obj.named_parameters() if p.grad is not None}
    assert set(got) == set(reference)
    for name, grad in reference.items():
        assert torch.allclose(got[name], grad, rtol=1e-9, atol=1e-11), name
    for key in ("loss", "mlm", "rec", "contrastive"):
        assert cached[key].item() == pytest.approx(full[key].item(), rel=1e-12)


def test_prior_bias_init_starts_the_decoder_at_the_word_prior(tokenizer):
    """rec_bias_init (mini profile): the decoder's output bias starts at the prior log-odds, so the
    first L_REC is about the passage's own words, not |V| x log 2 of 'every word is absent'."""
    plain, batch = make(tokenizer)
    prior, _ = make(tokenizer, rec_bias_init=-6.0)
    assert torch.all(prior.decoder.out.bias == -6.0) and not torch.all(plain.decoder.out.bias == -6.0)
    vocab = plain.config.vocab_size
    rec_plain, rec_prior = plain.compute(batch)[0]["rec"].item(), prior.compute(batch)[0]["rec"].item()
    assert rec_plain == pytest.approx(vocab * math.log(2), rel=0.05)  # sigmoid(~0) = 1/2 for every word
    # with z ~ -6 for every word: n_i present words cost softplus(6) each, the other |V| - n_i softplus(-6)
    words = [(ids[ids != -100]).unique().numel() for ids in batch["bow_ids"]]
    expected = sum(
        n * F.softplus(torch.tensor(6.0)).item() + (vocab - n) * F.softplus(torch.tensor(-6.0)).item() for n in words
    ) / len(words)
    assert rec_prior == pytest.approx(expected, rel=0.1)
    # everything but the output bias is initialised identically (same seed)
    same = [
        n
        for n, p in prior.named_parameters()
        if n != "decoder.out.bias" and torch.equal(p, dict(plain.named_parameters())[n])
    ]
    assert len(same) == len(list(prior.parameters())) - 1


def _rank_rows(batch, rank: int, world: int) -> dict:
    """Rank ``rank``'s passages of ``batch``: its rows of each view half, and of the bag of words."""
    m = batch["bow_ids"].shape[0] // world
    mine = slice(rank * m, (rank + 1) * m)
    out = {k: torch.cat([v[: len(v) // 2][mine], v[len(v) // 2 :][mine]]) for k, v in batch.items() if k != "bow_ids"}
    return {**out, "bow_ids": batch["bow_ids"][mine]}


def _ddp_worker(rank: int, world: int, folder: str) -> None:
    """One gloo rank: its half of the passages; gradients averaged as DDP averages them."""
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{folder}/rendezvous", rank=rank, world_size=world)
    obj, batch = make(toy_tokenizer(f"{folder}/vocab{rank}"), n=6, dtype=torch.float64, symmetric=True)
    local = _rank_rows(batch, rank, world)

    def averaged() -> dict:
        grads = {}
        for name, p in obj.named_parameters():
            if p.grad is not None:
                dist.all_reduce(p.grad)
                grads[name] = p.grad / world
        return grads

    def mean(value: torch.Tensor) -> float:
        value = value.detach().clone()
        dist.all_reduce(value)
        return value.item() / world

    out = {}
    obj.zero_grad(set_to_none=True)
    losses = obj(local)
    (losses["rec"] + losses["contrastive"]).backward()
    out["grads"] = averaged()
    out["contrastive"], out["rec"] = mean(losses["contrastive"]), mean(losses["rec"])
    obj.zero_grad(set_to_none=True)
    obj(local)["loss"].backward()
    out["plain"] = averaged()
    obj.zero_grad(set_to_none=True)
    obj.grad_cache_step(local, chunk_size=4)
    out["cached"] = averaged()
    if rank == 0:
        torch.save(out, f"{folder}/result.pt")
    dist.destroy_process_group()


def test_two_ranks_contrast_over_the_global_pool_as_one_process_does(tokenizer, tmp_path):
    """2 gloo ranks x 3 passages: L_CL and its gradient equal 1 process x 6 passages (the paper's pool is
    the global batch), and the grad-cache path equals the plain one across ranks."""
    run_forked(_ddp_worker, (2, str(tmp_path)), nprocs=2)
    result = torch.load(tmp_path / "result.pt")
    obj, batch = make(tokenizer, n=6, dtype=torch.float64, symmetric=True)
    losses = obj(batch)
    (losses["rec"] + losses["contrastive"]).backward()
    assert result["contrastive"] == pytest.approx(losses["contrastive"].item(), rel=1e-12)
    assert result["rec"] == pytest.approx(losses["rec"].item(), rel=1e-12)
    reference = {k: p.grad for k, p in obj.named_parameters() if p.grad is not None}
    assert set(result["grads"]) == set(reference)
    for name, grad in reference.items():
        assert torch.allclose(result["grads"][name], grad, rtol=1e-9, atol=1e-11), name
    for name, grad in result["plain"].items():
        assert torch.allclose(result["cached"][name], grad, rtol=1e-9, atol=1e-11), name
