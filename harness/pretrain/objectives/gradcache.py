"""Gradient caching (Gao, Zhang, Han & Callan 2021, "Scaling deep contrastive learning batch
size under memory limited setup"): a loss over the whole batch, the encoder run in chunks.

The loss splits into a *global* part, a function of per-row representations only (the
contrastive loss, plus anything cheap computed from them), and a *local* part, a sum over
rows (MLM), already divided by its whole-batch denominator. Then

1. representation pass over all chunks without grad (the RNG state is saved per chunk);
2. global part on the representations as a leaf: backward gives the cached gradient
   d(global)/d(reps) (and the gradients of any parameter used only there);
3. per chunk, re-run with grad under the saved RNG state (same dropout masks) and
   backpropagate <reps_chunk, cached gradient> + local part.

The parameter gradients equal those of one full-batch backward (tested). With a
``GradScaler`` (fp16) every backward is scaled by the same factor.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from harness.core.errors import HarnessError
from harness.core.numerics import upcast

# global_part(reps_leaf) -> (total to backpropagate, {component: value})
GlobalPart = Callable[[Tensor], tuple[Tensor, dict[str, Tensor]]]
# local_part(rows) -> (total to backpropagate, {component: value}, reps of those rows)
LocalPart = Callable[[slice], tuple[Tensor, dict[str, Tensor], Tensor]]


class RngState:
    """CPU (and CUDA) RNG state, so a chunk's re-run draws the same dropout masks."""

    def __init__(self, device: torch.device):
        self.device = device
        self.cpu = torch.get_rng_state()
        self.cuda = torch.cuda.get_rng_state(device) if device.type == "cuda" else None

    def restore(self) -> None:
        torch.set_rng_state(self.cpu)
        if self.cuda is not None:
            torch.cuda.set_rng_state(self.cuda, self.device)


def chunk_rows(n: int, chunk_size: int) -> list[slice]:
    if int(chunk_size) < 1:
        raise HarnessError(f"grad-cache chunk_size must be >= 1, got {chunk_size}")
    return [slice(s, min(s + int(chunk_size), n)) for s in range(0, n, int(chunk_size))]


def _scaled(loss: Tensor, scaler) -> Tensor:
    return scaler.scale(loss) if scaler is not None else loss


def grad_cache_backward(
    n_rows: int,
    chunk_size: int,
    device: torch.device,
    represent: Callable[[slice], Tensor],
    global_part: GlobalPart,
    local_part: LocalPart,
    scaler=None,
    rep_grad_scale: float = 1.0,
) -> dict[str, Tensor]:
    """Run the three steps above; return each component's detached value (local ones summed
    over chunks). ``rep_grad_scale`` multiplies the cached gradient (the world size when the
    global part all-gathers representations and the caller averages gradients over ranks)."""
    chunks = chunk_rows(n_rows, chunk_size)
    states, reps = [], []
    with torch.no_grad():
        for rows in chunks:
            states.append(RngState(device))
            reps.append(represent(rows))
    leaf = torch.cat(reps).detach().requires_grad_(True)
    total, values = global_part(leaf)
    _scaled(total, scaler).backward()
    if leaf.grad is None:
        raise HarnessError("grad cache: the global loss does not depend on the representations")
    rep_grad = leaf.grad * rep_grad_scale
    out = {key: value.detach() for key, value in values.items()}
    for rows, state in zip(chunks, states):
        state.restore()
        total, values, chunk_reps = local_part(rows)
        surrogate = (upcast(chunk_reps) * upcast(rep_grad[rows])).sum() + _scaled(total, scaler)
        surrogate.backward()
        for key, value in values.items():
            out[key] = out[key] + value.detach() if key in out else value.detach()
    return out
