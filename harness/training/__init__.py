"""The one training engine behind every trained model of the harness.

Pre-training (every objective), dense and SPLADE fine-tuning, the cross-encoder teacher and the
tiny T5 query generator all run through :func:`harness.training.engine.run`. Each supplies only a
:class:`~harness.training.engine.Task`: its model and the forward/backward of one optimizer step.
The engine owns the rest, once:

- ``config.py``: :class:`LoopConfig`, the hyper-parameters every loop shares (lr, schedule,
  clipping, precision, checkpoints, logging), with their defaults and checks declared once;
- ``optim.py``: AdamW without decay on biases and norms, the linear warm-up/decay schedule;
- ``precision.py``: the one place precision is decided: what a run's ``auto`` resolves to (flag, GPU
  profile, measurement), each stage's training and encoding precision, and what this device computes
  (fp32 / bf16 / fp16 with loss scaling on CUDA, bf16 autocast or fp32 on CPU), said in one line;
- ``autoprecision.py``: the measurement behind ``auto`` on a CPU: bf16 vs fp32 timed here at the profile's shapes, cached;
- ``engine.py``: the loop: seeding, resume from the newest checkpoint with an identity check,
  DDP, clipping, metrics reduced over ranks, progress bar, logging, ``stop_after``;
- ``checkpoint.py``: atomic checkpoints with per-rank RNG state (exact resume);
- ``distributed.py``: torchrun/DDP collectives that degrade to one process (who a process is: harness.core.ranks);
- ``finished.py``: the run fingerprint, ``train_stats.json`` and the finished marker (``done.json``).
"""
