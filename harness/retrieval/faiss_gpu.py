"""faiss on the GPUs for a run on CUDA, as the official CoT-MAE scripts search; the CPU otherwise.

An exact flat index moves to every GPU faiss sees (``index_cpu_to_all_gpus``, sharded across them, so a
corpus larger than one card fits) when both hold: the run computes on CUDA, and the installed faiss is a
GPU build (``faiss.StandardGpuResources`` exists and ``faiss.get_num_gpus() > 0``). The project installs
faiss-cpu (requirements.txt, requirements-cuda.txt), where this is never true and every search stays on
the CPU as before; a GPU faiss (e.g. faiss-gpu-cu12, see requirements-cuda.txt) is the user's option.
:func:`placement` is the words a search's ``index_device`` (and, on GPUs, its ``index`` label) states.

GPU search ranks the same documents up to float rounding: its inner products are computed by cuBLAS, so
exact ties and the last digits of scores may differ from the CPU's. faiss's GPU k-selection stops at
:data:`GPU_MAX_K`; a deeper search stays on the CPU and says why.
"""

from __future__ import annotations

from typing import Any

from harness.retrieval.encoder import is_cuda

GPU_MAX_K = 2048  # faiss GPU's largest k (its k-selection kernels' limit)


def faiss_gpus(device: Any, k: int | None = None) -> int:
    """How many GPUs faiss searches on for a run on ``device``: 0 on a CPU run, with a CPU-only faiss,
    or for a ``k`` deeper than faiss's GPU k-selection allows."""
    if device is None or not is_cuda(device) or (k is not None and k > GPU_MAX_K):
        return 0
    import faiss

    if not hasattr(faiss, "StandardGpuResources") or not hasattr(faiss, "get_num_gpus"):
        return 0
    return max(0, int(faiss.get_num_gpus()))


def placement(gpus: int, device: Any = None, k: int | None = None, fp16: bool = False) -> str:
    """Where a search ran, in words: ``cpu``, with the reason on a CUDA run, or ``N GPU(s) (faiss GPU)``.
    ``fp16``: an fp16-storage index (``IndexScalarQuantizer``), which stays on the CPU."""
    if gpus > 0:
        return f"{gpus} GPU{'s' if gpus > 1 else ''} (faiss GPU)"
    if device is not None and is_cuda(device):
        if fp16:
            return "cpu (fp16 storage)"
        return f"cpu (k {k} > faiss GPU's {GPU_MAX_K})" if k is not None and k > GPU_MAX_K else "cpu (faiss-cpu)"
    return "cpu"


def to_gpus(index: Any) -> Any:
    """``index`` (a CPU ``IndexFlatIP``) on every GPU faiss sees, its rows sharded across them."""
    import faiss

    options = faiss.GpuMultipleClonerOptions()
    options.shard = True  # each GPU holds a slice of the rows; results are merged exactly
    return faiss.index_cpu_to_all_gpus(index, co=options)
