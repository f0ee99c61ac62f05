"""Paper-shape smoke: every paper-profile pre-training objective at bert-base shape, a few steps.

Random init (no checkpoint needed), the objective parameters of each spec's paper profile, full
144-token inputs, AdamW. On CUDA each objective runs in bf16 and fp16 (autocast; fp16 with a
GradScaler, as the trainer does) and one DDP step (NCCL, one rank); on CPU in fp32 (and a gloo DDP
step). Prints one row per (objective, precision): median step time, achieved TFLOP/s and peak
memory, where the FLOPs of one step (forward + backward) are counted by ``torch.utils.flop_counter``
on the step itself, not estimated. ``--batch paper`` takes each spec's paper per-device batch.

Two more rows per precision: one dense fine-tuning step (the harness's BiEncoder + InfoNCE at the
paper's queries x passages per step, 32/144 tokens) and corpus encoding (forward only, 144
tokens). ``--json PATH`` writes the rows (the dry-run's projection reads such a file).

The test suite runs the same function on CPU for 2 steps at batch 2
(``tests/test_paper_shape_smoke.py``), so the paper-shape path cannot rot on machines without a GPU.

    python bench/paper_shape_smoke.py [--batch 32] [--steps 5] [--objectives cotmae lexmae ...]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # objective_fixtures: the toy tokenizer

from objective_fixtures import WORDS, toy_tokenizer

from harness.pretrain.models import bert_config_from_dict
from harness.pretrain.objectives import build_objective
from harness.spec.method import load_method, objective_specs
from harness.training.precision import autocast

BERT_BASE = {
    "vocab_size": 30522,
    "hidden_size": 768,
    "num_hidden_layers": 12,
    "num_attention_heads": 12,
    "intermediate_size": 3072,
    "max_position_embeddings": 512,
}
# One spec per objective the paper profiles pre-train with (cotmae_qc and cocondenser_qc share their
# family's objective, so cotmae and cocondenser stand for them).
SPECS = tuple(objective_specs("paper").values())


@dataclass
class Row:
    objective: str
    precision: str
    device: str
    batch: int
    max_length: int
    step_seconds: float
    tflop_per_step: float
    loss: float
    peak_gib: float = 0.0

    @property
    def tflops(self) -> float:
        return self.tflop_per_step / self.step_seconds


def _paper_batch(spec_name: str) -> int:
    return int(load_method(spec_name, "paper").get("pretrain.per_device_batch"))


def _reset_peak(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)


def _peak_gib(device: torch.device) -> float:
    return torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else 0.0


def _timed(fn, steps: int, device: torch.device) -> float:
    times = []
    for _ in range(steps):
        _sync(device)
        t0 = time.perf_counter()
        fn()
        _sync(device)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _bert_base(device: torch.device) -> torch.nn.Module:
    from transformers import BertModel

    torch.manual_seed(42)
    return BertModel(bert_config_from_dict(BERT_BASE), add_pooling_layer=False).to(device)


def _ids(n: int, length: int, device: torch.device) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(n + length)
    ids = torch.randint(1000, BERT_BASE["vocab_size"], (n, length), generator=g)
    return {"input_ids": ids.to(device), "attention_mask": torch.ones_like(ids).to(device)}


def run_finetune(
    device: str = "cuda",
    queries: int = 64,
    passages_per_query: int = 16,
    q_len: int = 32,
    p_len: int = 144,
    steps: int = 5,
    precisions: tuple[str, ...] | None = None,
) -> list[Row]:
    """One dense fine-tuning step (the harness's BiEncoder and InfoNCE) at ``queries`` x ``passages_per_query``."""
    from torch.utils.flop_counter import FlopCounterMode

    from harness.finetune.dense import BiEncoder, info_nce_loss

    dev = torch.device(device)
    precisions = precisions or (("bf16", "fp16") if dev.type == "cuda" else ("fp32",))
    rows = []
    q, p = _ids(queries, q_len, dev), _ids(queries * passages_per_query, p_len, dev)
    for precision in precisions:
        _reset_peak(dev)
        model = BiEncoder(_bert_base(dev))
        optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5)
        scaler = torch.amp.GradScaler("cuda") if precision == "fp16" else None
        loss_box = [0.0]

        def step(
            model: Any = model,
            optimizer: Any = optimizer,
            scaler: Any = scaler,
            precision: str = precision,
            loss_box: list[float] = loss_box,
        ) -> None:
            optimizer.zero_grad(set_to_none=True)
            with autocast(precision, dev):
                q_reps, p_reps = model(q, p)
            loss = info_nce_loss(q_reps, p_reps, passages_per_query)
            (scaler.scale(loss) if scaler is not None else loss).backward()
            (scaler.step(optimizer), scaler.update()) if scaler is not None else optimizer.step()
            loss_box[0] = float(loss.detach())

        with FlopCounterMode(display=False) as counter:
            step()
        seconds = _timed(step, steps, dev)
        rows.append(
            Row(
                f"finetune {queries}x{passages_per_query}",
                precision,
                str(dev),
                queries,
                p_len,
                seconds,
                counter.get_total_flops() / 1e12,
                loss_box[0],
                _peak_gib(dev),
            )
        )
        del model, optimizer, step
    return rows


def run_encode(
    device: str = "cuda", batch: int = 512, p_len: int = 144, steps: int = 5, precisions: tuple[str, ...] | None = None
) -> list[Row]:
    """Corpus encoding (forward only, no gradient) at ``batch`` passages of ``p_len`` tokens;
    ``loss`` holds passages/s."""
    from torch.utils.flop_counter import FlopCounterMode

    dev = torch.device(device)
    precisions = precisions or (("bf16", "fp16") if dev.type == "cuda" else ("fp32",))
    rows = []
    data = _ids(batch, p_len, dev)
    for precision in precisions:
        _reset_peak(dev)
        model = _bert_base(dev).eval()
        if precision != "fp32":
            model = model.to(torch.bfloat16 if precision == "bf16" else torch.float16)

        def step(model: Any = model) -> None:
            with torch.inference_mode():
                model(**data).last_hidden_state[:, 0].float()

        with FlopCounterMode(display=False) as counter:
            step()
        seconds = _timed(step, steps, dev)
        rows.append(
            Row(
                "encode",
                precision,
                str(dev),
                batch,
                p_len,
                seconds,
                counter.get_total_flops() / 1e12,
                batch / seconds,
                _peak_gib(dev),
            )
        )
        del model, step
    return rows


def _examples(n: int, words: int, seed: int) -> list[tuple[str, str]]:
    """(anchor, context) pairs of ``words`` vocabulary words each: every text fills max_length."""
    g = torch.Generator().manual_seed(seed)

    def pick() -> str:
        return " ".join(WORDS[int(i)] for i in torch.randint(len(WORDS), (words,), generator=g))

    return [(pick(), pick()) for _ in range(n)]


def _objective(spec_name: str, device: torch.device) -> tuple[str, torch.nn.Module]:
    spec = load_method(spec_name, "paper")
    name = spec.get("pretrain.objective")
    params = dict(spec.get("pretrain.objective_params") or {})
    torch.manual_seed(42)
    return name, build_objective(name, bert_config_from_dict(BERT_BASE), **params).to(device)


def _step(model, engine, optimizer, scaler, batch, precision, device) -> float:
    optimizer.zero_grad(set_to_none=True)
    with autocast(precision, device):
        out = engine(batch)
    loss = out["loss"].float()
    (scaler.scale(loss) if scaler is not None else loss).backward()
    if scaler is not None:
        scaler.step(optimizer)
        scaler.update()
    else:
        optimizer.step()
    return float(loss.detach())


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def run_smoke(
    device: str = "cuda",
    batch: int | str = 32,
    steps: int = 5,
    max_length: int = 144,
    objectives: tuple[str, ...] = SPECS,
    precisions: tuple[str, ...] | None = None,
) -> list[Row]:
    """Time ``steps`` optimiser steps (after one warm-up step) of each objective in each precision."""
    from torch.utils.flop_counter import FlopCounterMode

    dev = torch.device(device)
    precisions = precisions or (("bf16", "fp16") if dev.type == "cuda" else ("fp32",))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tokenizer = toy_tokenizer(tmp)
        for spec_name in objectives:
            n = _paper_batch(spec_name) if batch == "paper" else int(batch)
            for precision in precisions:
                _reset_peak(dev)
                name, model = _objective(spec_name, dev)
                optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
                scaler = torch.amp.GradScaler("cuda") if precision == "fp16" else None
                g = torch.Generator().manual_seed(0)
                batch_cpu = model.collate(_examples(n, max_length, 0), tokenizer, max_length, g)
                data = {k: v.to(dev) for k, v in batch_cpu.items()}
                with FlopCounterMode(display=False) as counter:  # the warm-up step, counted
                    _step(model, model, optimizer, scaler, data, precision, dev)
                times, loss = [], 0.0
                for _ in range(steps):
                    _sync(dev)
                    t0 = time.perf_counter()
                    loss = _step(model, model, optimizer, scaler, data, precision, dev)
                    _sync(dev)
                    times.append(time.perf_counter() - t0)
                if not torch.isfinite(torch.tensor(loss)):
                    raise RuntimeError(f"{name} {precision}: non-finite loss {loss}")
                rows.append(
                    Row(
                        name,
                        precision,
                        str(dev),
                        n,
                        max_length,
                        statistics.median(times),
                        counter.get_total_flops() / 1e12,
                        loss,
                        _peak_gib(dev),
                    )
                )
                del model, optimizer
                if dev.type == "cuda":
                    torch.cuda.empty_cache()
    return rows


def ddp_step(device: str = "cuda", batch: int = 8, max_length: int = 144, spec_name: str = "cotmae") -> float:
    """One DDP step (one rank: NCCL on CUDA, gloo on CPU) through the harness's wrapper; the loss."""
    import torch.distributed as dist

    from harness.training.distributed import DistInfo, wrap_ddp

    dev = torch.device(device)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29517")
    dist.init_process_group("nccl" if dev.type == "cuda" else "gloo", rank=0, world_size=1)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            tokenizer = toy_tokenizer(tmp)
            _, model = _objective(spec_name, dev)
            info = DistInfo(rank=0, world_size=1, local_rank=0, device=dev, backend=dist.get_backend())
            engine = wrap_ddp(model, info)
            if engine is model:
                from torch.nn.parallel import DistributedDataParallel

                engine = DistributedDataParallel(
                    model, device_ids=[0] if dev.type == "cuda" else None, find_unused_parameters=True
                )
            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
            g = torch.Generator().manual_seed(0)
            data = {
                k: v.to(dev)
                for k, v in model.collate(_examples(batch, max_length, 1), tokenizer, max_length, g).items()
            }
            precision = "bf16" if dev.type == "cuda" else "fp32"
            return _step(model, engine, optimizer, None, data, precision, dev)
    finally:
        dist.destroy_process_group()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument(
        "--batch",
        default="32",
        help="examples per step (pairs: 2 texts each where the objective "
        "reads two), or 'paper': each spec's paper per-device batch",
    )
    p.add_argument(
        "--finetune",
        default="64x16",
        help="queries x passages per fine-tuning step (the papers' effective batch, on one device); 'none' skips it",
    )
    p.add_argument("--encode-batch", type=int, default=512, help="passages per encoding batch (0 skips it)")
    p.add_argument("--json", type=Path, help="write the rows and the device here")
    p.add_argument("--steps", type=int, default=5, help="timed steps after one warm-up step")
    p.add_argument("--max-length", type=int, default=144)
    p.add_argument("--objectives", nargs="+", default=list(SPECS), help="specs whose paper objective to run")
    args = p.parse_args(argv)
    dev = torch.device(args.device)
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else f"CPU ({os.cpu_count()} cores)"
    print(
        f"device: {name}; torch {torch.__version__}; bert-base shape (12 x 768), random init; batch "
        f"{args.batch} x {args.max_length} tokens; median of {args.steps} steps after a warm-up"
    )
    batch = args.batch if args.batch == "paper" else int(args.batch)
    rows = run_smoke(args.device, batch, args.steps, args.max_length, tuple(args.objectives))
    if args.finetune != "none":
        nq, npp = (int(x) for x in args.finetune.split("x"))
        rows += run_finetune(args.device, nq, npp, p_len=args.max_length, steps=args.steps)
    if args.encode_batch:
        rows += run_encode(args.device, args.encode_batch, args.max_length, steps=args.steps)
    print(
        f"{'step':<18} {'precision':<9} {'batch':>6} {'step s':>8} {'TFLOP/step':>10} {'TFLOP/s':>8} "
        f"{'peak GiB':>8} {'loss':>9}"
    )
    for r in rows:
        last = f"{r.loss:>7.0f}/s" if r.objective == "encode" else f"{r.loss:>9.3f}"
        print(
            f"{r.objective:<18} {r.precision:<9} {r.batch:>6} {r.step_seconds:>8.3f} {r.tflop_per_step:>10.2f} "
            f"{r.tflops:>8.1f} {r.peak_gib:>8.1f} {last}"
        )
    if args.json:
        import json
        from dataclasses import asdict

        args.json.write_text(
            json.dumps(
                {
                    "device": name,
                    "torch": torch.__version__,
                    "steps": args.steps,
                    "rows": [{**asdict(r), "tflops": r.tflops} for r in rows],
                },
                indent=1,
            )
        )
    loss = ddp_step(args.device)
    print(f"DDP step ({'NCCL' if dev.type == 'cuda' else 'gloo'}, 1 rank, cotmae): loss {loss:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
