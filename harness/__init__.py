"""Reproducibility harness for retrieval pre-training methods.

Each method is a declarative pretrain -> finetune -> eval spec (``baselines/*.yaml``);
the harness runs it, evaluates with the papers' conventions, compares against the
papers' reported cells and records everything to MLflow and ``runs/``.
"""

__version__ = "0.1.0"
