"""Dense text encoder over a local checkpoint: a plain Hugging Face folder or a sentence-transformers one.

``load_encoder(path)`` reads how the checkpoint wants to be used from its own files, in this
order (an explicit argument always wins):

1. ``harness_encoder.json``: written by :func:`harness.finetune.dense.train_dense` next to the
   weights (pooling, normalisation, query/passage lengths, title separator);
2. sentence-transformers files: ``modules.json`` names the Transformer folder, the Pooling
   module's ``config.json`` gives the pooling mode and a ``Normalize`` module means L2-normalised
   outputs; ``sentence_bert_config.json`` gives lower-casing and the model's maximum length;
3. otherwise the Tevatron convention used by every paper reproduced here: CLS pooling (last
   hidden state of [CLS], no pooler), no normalisation, dot product. Published retrievers such as
   Luyu/co-condenser-marco-retriever and caskcsg/cotmae_base_msmarco_retriever are plain folders
   trained that way.

Passages are "title<sep>text" with ``title_separator=" "`` by default: Tevatron v1's
preprocessors join title and text with a single space (``separator=' '``); an empty title gives
the text alone. Pass ``title_separator="[SEP]"`` (the tokenizer's separator token, surrounded by
spaces) or any string to change it; the choice is recorded in ``Encoder.settings()``.

Encoding (:meth:`Encoder.encode`) runs under ``torch.inference_mode`` in batches sorted by text
length, longest first (as sentence-transformers and BEIR do: less padding, and an out-of-memory
batch shows up at once), and returns float32 rows in the caller's order. On a CPU the sort is by
characters, each batch tokenised and padded by the tokenizer, 64 texts a batch. On CUDA a window of
texts is tokenised once, sorted by token count and cut into batches of :data:`CUDA_BATCH_SIZE`
padded to their own longest row, as the official CoT-MAE scripts encode (per-device batch 2048):
:meth:`Encoder.batching` says which, for the record. Queries are cut at 32
tokens and passages at 144 by default (the papers' lengths; [CLS]/[SEP] included). With
``world_size > 1`` a rank encodes only its contiguous slice (:func:`shard_bounds`) and
:func:`gather_embeddings` concatenates the slices in rank order.

:func:`load_zero_shot_encoder` is ``load_encoder`` with the length rules of zero-shot evaluation
(a sentence-transformers folder's own maximum length, capped at the model's position limit), and
:func:`vector_settings` the settings that decide passage vectors (what embedding caches key on).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from harness.core import ranks
from harness.core.errors import DataFormatError, HarnessError
from harness.stages.checkpoints import load_pretrained
from harness.training.precision import encode_autocast, for_inference

POOLINGS = ("cls", "mean")
KINDS = ("query", "passage")
# The progress bar names what it counts in the plural ("encode queries", never "encode querys").
PLURALS = {"query": "queries", "passage": "passages"}
CONFIG_FILE = "harness_encoder.json"
DEFAULT_QUERY_MAX_LENGTH = 32
DEFAULT_PASSAGE_MAX_LENGTH = 144
DEFAULT_TITLE_SEPARATOR = " "
DEFAULT_BATCH_SIZE = 64
# On CUDA: the official CoT-MAE encoding's per-device batch (caskcsg/ir cotmae-qc/msmarco/test_retriever.sh).
CUDA_BATCH_SIZE = 2048
SORT_WINDOW = 16_384  # texts tokenised and length-sorted together on CUDA (bounds the token lists held)
PRECISIONS = ("fp32", "fp16", "bf16")

_ST_TRANSFORMER = "sentence_transformers.models.Transformer"
_ST_POOLING = "sentence_transformers.models.Pooling"
_ST_NORMALIZE = "sentence_transformers.models.Normalize"


# --- reading a checkpoint's own description ---------------------------------------------------


@dataclass
class EncoderSpec:
    """How a checkpoint is encoded with; ``sources`` says where each value came from."""

    model_dir: Path
    kind: str  # "huggingface" | "sentence-transformers" | "harness"
    pooling: str = "cls"
    normalize: bool = False
    lowercase: bool = False
    query_max_length: int = DEFAULT_QUERY_MAX_LENGTH
    passage_max_length: int = DEFAULT_PASSAGE_MAX_LENGTH
    model_max_length: int | None = None
    title_separator: str = DEFAULT_TITLE_SEPARATOR
    query_prefix: str = ""
    passage_prefix: str = ""
    sources: dict[str, str] = field(default_factory=dict)


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DataFormatError(
            path, exc.lineno, f"not valid JSON ({exc.msg})", "repair or re-download the model folder"
        ) from exc
    except OSError as exc:
        raise HarnessError(f"cannot read {path}: {exc}") from exc


def _st_pooling_mode(config: Mapping[str, Any], path: Path) -> str:
    """The pooling of a sentence-transformers Pooling config, if it is one this encoder supports."""
    mode = config.get("pooling_mode")  # newer sentence-transformers may write the mode directly
    if isinstance(mode, str):
        mode = {"cls": "cls", "cls_token": "cls", "mean": "mean", "mean_tokens": "mean"}.get(mode, mode)
        on = [mode]
    else:
        flags = {
            "pooling_mode_cls_token": "cls",
            "pooling_mode_mean_tokens": "mean",
            "pooling_mode_max_tokens": "max",
            "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len",
            "pooling_mode_weightedmean_tokens": "weightedmean",
            "pooling_mode_lasttoken": "lasttoken",
        }
        on = [name for key, name in flags.items() if config.get(key)]
    if len(on) != 1 or on[0] not in POOLINGS:
        raise HarnessError(
            f"{path}: pooling {'+'.join(on) or 'none'} is not supported (supported: {', '.join(POOLINGS)}); "
            "pass pooling='cls' or 'mean' (--pooling) to override"
        )
    return on[0]


def describe_checkpoint(path: str | Path, pooling: str | None = None) -> EncoderSpec:
    """Read ``path``'s own description (see the module docstring); raises HarnessError if unusable.

    ``pooling`` (an explicit choice) replaces the folder's, so an unsupported pooling mode in a
    sentence-transformers config is no error when the caller overrides it.
    """
    root = Path(path).expanduser()
    if not root.is_dir():
        raise HarnessError(
            f"no model folder at {root}: give a local Hugging Face or sentence-transformers folder "
            "(the Hub is not contacted; download e.g. Luyu/co-condenser-marco-retriever first)"
        )
    spec = EncoderSpec(model_dir=root, kind="huggingface")
    spec.sources = {"pooling": "default (Tevatron: CLS)", "normalize": "default (Tevatron: none)"}
    modules_file = root / "modules.json"
    if modules_file.is_file():
        _read_sentence_transformers(spec, root, modules_file, pooling)
    own = root / CONFIG_FILE
    if own.is_file():
        spec.kind = "harness" if spec.kind == "huggingface" else spec.kind
        cfg = _read_json(own)
        for key in (
            "pooling",
            "normalize",
            "query_max_length",
            "passage_max_length",
            "title_separator",
            "query_prefix",
            "passage_prefix",
            "lowercase",
        ):
            if key in cfg:
                setattr(spec, key, cfg[key])
                spec.sources[key] = CONFIG_FILE
    if not (spec.model_dir / "config.json").is_file():
        raise HarnessError(
            f"{spec.model_dir} has no config.json: not a Hugging Face model folder "
            "(expected config.json, weights and tokenizer files)"
        )
    if pooling is not None:
        spec.pooling, spec.sources["pooling"] = pooling, "argument"
    if spec.pooling not in POOLINGS:
        raise HarnessError(f"{root}: pooling {spec.pooling!r} is not one of {', '.join(POOLINGS)}")
    return spec


def _read_sentence_transformers(spec: EncoderSpec, root: Path, modules_file: Path, pooling: str | None) -> None:
    """Fill ``spec`` from a sentence-transformers folder: its module pipeline (Transformer -> Pooling
    [-> Normalize]; the pooling's mode unless ``pooling`` is chosen), its config and its prompts."""
    spec.kind = "sentence-transformers"
    modules = _read_json(modules_file)
    if not isinstance(modules, list):
        raise HarnessError(f"{modules_file}: expected a JSON list of modules")
    types = [str(m.get("type", "")) for m in modules if isinstance(m, dict)]
    unsupported = [t for t in types if t not in (_ST_TRANSFORMER, _ST_POOLING, _ST_NORMALIZE)]
    if _ST_TRANSFORMER not in types or unsupported:
        raise HarnessError(
            f"{modules_file}: only Transformer -> Pooling [-> Normalize] pipelines are supported, "
            f"found {', '.join(types) or 'no modules'}"
        )
    for module in modules:
        mtype, sub = module.get("type"), str(module.get("path", "") or "")
        if mtype == _ST_TRANSFORMER:
            spec.model_dir = root / sub if sub else root
        elif mtype == _ST_POOLING:
            cfg_path = root / sub / "config.json"
            if cfg_path.is_file() and pooling is None:
                spec.pooling = _st_pooling_mode(_read_json(cfg_path), cfg_path)
                spec.sources["pooling"] = str(Path(sub) / "config.json")
        elif mtype == _ST_NORMALIZE:
            spec.normalize = True
    spec.sources["normalize"] = "modules.json"
    st_cfg = spec.model_dir / "sentence_bert_config.json"
    if not st_cfg.is_file():
        st_cfg = root / "sentence_bert_config.json"
    if st_cfg.is_file():
        cfg = _read_json(st_cfg)
        spec.lowercase = bool(cfg.get("do_lower_case", False))
        if isinstance(cfg.get("max_seq_length"), int):
            spec.model_max_length = cfg["max_seq_length"]
    prompts_file = root / "config_sentence_transformers.json"
    if prompts_file.is_file():
        st_meta = _read_json(prompts_file)
        prompts = st_meta.get("prompts") if isinstance(st_meta, dict) else None
        if isinstance(prompts, dict):
            spec.query_prefix = str(prompts.get("query", "") or "")
            spec.passage_prefix = str(prompts.get("passage", prompts.get("document", "")) or "")


def write_encoder_config(folder: str | Path, **settings: Any) -> Path:
    """Write ``harness_encoder.json`` so :func:`load_encoder` reads pooling etc. back from the folder."""
    unknown = sorted(
        set(settings)
        - {
            "pooling",
            "normalize",
            "query_max_length",
            "passage_max_length",
            "title_separator",
            "query_prefix",
            "passage_prefix",
            "lowercase",
            "similarity",
            "trained_by",
        }
    )
    if unknown:
        raise HarnessError(f"unknown encoder setting(s): {', '.join(unknown)}")
    path = Path(folder) / CONFIG_FILE
    path.write_text(json.dumps(settings, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return path


# --- sharding helpers ---------------------------------------------------------------------------


def shard_bounds(n: int, rank: int, world_size: int) -> tuple[int, int]:
    """Rank ``rank``'s contiguous slice [start, end) of ``n`` items (sizes differ by at most one)."""
    if world_size < 1 or not 0 <= rank < world_size:
        raise HarnessError(f"invalid shard: rank {rank} of world size {world_size}")
    return n * rank // world_size, n * (rank + 1) // world_size


def gather_embeddings(local: np.ndarray, n_total: int | None = None) -> np.ndarray:
    """All ranks' slices concatenated in rank order, on every rank (the array itself if not distributed).

    Uses ``torch.distributed.all_gather`` on zero-padded equal-size tensors (works on gloo and nccl).
    """
    import torch
    import torch.distributed as dist

    from harness.training import distributed as D

    if not D.active():  # one process, or a block rank 0 runs alone (harness.core.ranks.solo)
        return local
    world = ranks.world_size()
    device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu")
    sizes = [torch.zeros(1, dtype=torch.int64, device=device) for _ in range(world)]
    dist.all_gather(sizes, torch.tensor([local.shape[0]], dtype=torch.int64, device=device))
    counts = [int(s.item()) for s in sizes]
    width = local.shape[1] if local.ndim == 2 else 0
    padded = torch.zeros((max(counts), width), dtype=torch.float32, device=device)
    padded[: local.shape[0]] = torch.from_numpy(np.ascontiguousarray(local, dtype=np.float32)).to(device)
    parts = [torch.empty_like(padded) for _ in range(world)]
    dist.all_gather(parts, padded)
    full = np.concatenate([p[:c].cpu().numpy() for p, c in zip(parts, counts)], axis=0)
    if n_total is not None and full.shape[0] != n_total:
        raise HarnessError(f"gathered {full.shape[0]} embeddings, expected {n_total}")
    return full


def is_cuda(device: Any) -> bool:
    """Whether ``device`` (a torch.device or its name) is a CUDA device."""
    return str(getattr(device, "type", device)).startswith("cuda")


def default_batch_size(device: Any) -> int:
    """The batch an encoder uses when none is given: :data:`CUDA_BATCH_SIZE` on CUDA, else 64 (as before)."""
    return CUDA_BATCH_SIZE if is_cuda(device) else DEFAULT_BATCH_SIZE


def length_batches(lengths: Sequence[int] | np.ndarray, batch_size: int) -> list[np.ndarray]:
    """Row indices in batches of ``batch_size``, longest first; a stable sort keeps equal lengths in input
    order (deterministic batches). Together the batches are a permutation of ``range(len(lengths))``."""
    lens = np.asarray(lengths, dtype=np.int64).reshape(-1)
    order = np.argsort(-lens, kind="stable")
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


def passage_text(doc: Mapping[str, str] | str, separator: str = DEFAULT_TITLE_SEPARATOR) -> str:
    """BEIR-style {"title", "text"} -> "title<separator>text" (the text alone when there is no title)."""
    if isinstance(doc, str):
        return doc
    title = (doc.get("title") or "").strip()
    text = doc.get("text") or ""
    return f"{title}{separator}{text}" if title else text


# --- the encoder --------------------------------------------------------------------------------


class Encoder:
    """A loaded checkpoint that turns texts into float32 vectors (see the module docstring)."""

    def __init__(self, spec: EncoderSpec, model: Any, tokenizer: Any, device: Any, precision: str = "fp32"):
        self.spec, self.model, self.tokenizer, self.device, self.precision = spec, model, tokenizer, device, precision
        # "tokens" (CUDA): tokenised once per window, sorted by token count; "characters": as on a CPU
        self.sort_by = "tokens" if is_cuda(device) else "characters"
        sep = spec.title_separator
        if sep.strip() == "[SEP]":  # the tokenizer's own separator token, as a separate word
            sep = f" {tokenizer.sep_token} "
        self._separator = sep

    @property
    def dim(self) -> int:
        return int(self.model.config.hidden_size)

    @property
    def pooling(self) -> str:
        return self.spec.pooling

    @property
    def normalize(self) -> bool:
        return self.spec.normalize

    @property
    def similarity(self) -> str:
        """Dot product over normalised vectors is cosine; the name says which the scores mean."""
        return "cosine" if self.spec.normalize else "dot"

    def settings(self) -> dict[str, Any]:
        """Everything that decides the vectors, for run records."""
        s = self.spec
        return {
            "model_dir": str(s.model_dir),
            "format": s.kind,
            "pooling": s.pooling,
            "normalize": s.normalize,
            "similarity": self.similarity,
            "lowercase": s.lowercase,
            "query_max_length": s.query_max_length,
            "passage_max_length": s.passage_max_length,
            "title_separator": s.title_separator,
            "query_prefix": s.query_prefix,
            "passage_prefix": s.passage_prefix,
            "precision": self.precision,
            "dim": self.dim,
            "sources": dict(s.sources),
        }

    def batching(self, batch_size: int | None = None) -> dict[str, Any]:
        """How :meth:`encode` batches with ``batch_size`` (None: this device's default), for records."""
        return {
            "sorted_by": self.sort_by,
            "order": "longest first",
            "batch_size": batch_size or default_batch_size(self.device),
        }

    def passage_texts(self, docs: Sequence[Mapping[str, str] | str]) -> list[str]:
        return [passage_text(d, self._separator) for d in docs]

    def encode(
        self,
        texts: Sequence[str],
        batch_size: int | None = None,
        max_length: int | None = None,
        kind: str = "query",
        rank: int = 0,
        world_size: int = 1,
        show_progress: bool = True,
    ) -> np.ndarray:
        """Vectors for ``texts`` (or for this rank's slice of them), float32, shape (n, dim).

        ``kind`` picks the default length (32 for queries, 144 for passages) and any prompt prefix;
        ``batch_size`` None is this device's default (:func:`default_batch_size`).
        """
        import torch

        if kind not in KINDS:
            raise HarnessError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
        batch_size = default_batch_size(self.device) if batch_size is None else batch_size
        if batch_size < 1:
            raise HarnessError(f"batch_size must be positive, got {batch_size}")
        if max_length is None:
            max_length = self.spec.query_max_length if kind == "query" else self.spec.passage_max_length
        limit = self.spec.model_max_length or getattr(self.model.config, "max_position_embeddings", None)
        if limit:
            max_length = min(max_length, int(limit))
        start, end = shard_bounds(len(texts), rank, world_size)
        prefix = self.spec.query_prefix if kind == "query" else self.spec.passage_prefix
        local = [prefix + (t or "") for t in texts[start:end]]
        if self.spec.lowercase:
            local = [t.lower() for t in local]
        out = np.zeros((len(local), self.dim), dtype=np.float32)
        bar = tqdm(
            total=len(local),
            desc=f"encode {PLURALS[kind]}",
            unit=kind[0],
            disable=not show_progress,
            dynamic_ncols=True,
        )
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.inference_mode():
                if self.sort_by == "tokens":
                    self._encode_by_tokens(local, out, batch_size, max_length, bar.update)
                else:
                    chars = np.fromiter((len(t) for t in local), dtype=np.int64, count=len(local))
                    for idx in length_batches(chars, batch_size):
                        out[idx] = self._embed([local[j] for j in idx], max_length).float().cpu().numpy()
                        bar.update(len(idx))
        finally:
            bar.close()
            self.model.train(was_training)
        return out

    def _encode_by_tokens(self, texts: list[str], out: np.ndarray, batch_size: int, max_length: int, done: Any) -> None:
        """Rows of ``out`` for ``texts``: each window tokenised once (no padding), sorted by token count,
        longest first, encoded in batches padded to their own longest row, and put back in input order."""
        for w in range(0, len(texts), SORT_WINDOW):
            enc = self.tokenizer(texts[w : w + SORT_WINDOW], truncation=True, max_length=max_length, padding=False)
            rows = {k: enc[k] for k in ("input_ids", "token_type_ids") if k in enc}
            lengths = [len(ids) for ids in rows["input_ids"]]
            for idx in length_batches(lengths, batch_size):
                out[w + idx] = self._forward(self._pad(rows, idx)).float().cpu().numpy()
                done(len(idx))

    def _pad(self, rows: Mapping[str, list[list[int]]], idx: np.ndarray) -> dict[str, Any]:
        """Rows ``idx`` of tokenised ``rows`` as padded tensors with their attention mask (the tokenizer's
        padding side and pad ids)."""
        import torch

        ids = [rows["input_ids"][j] for j in idx]
        width = max(len(r) for r in ids)
        left = getattr(self.tokenizer, "padding_side", "right") == "left"
        fill = {"input_ids": self.tokenizer.pad_token_id or 0, "token_type_ids": self.tokenizer.pad_token_type_id}
        batch: dict[str, Any] = {}
        for key, pad in fill.items():
            if key not in rows:
                continue
            arr = np.full((len(idx), width), pad, dtype=np.int64)
            for i, j in enumerate(idx):
                row = rows[key][j]
                if left:
                    arr[i, width - len(row) :] = row
                else:
                    arr[i, : len(row)] = row
            batch[key] = torch.from_numpy(arr)
        positions = np.arange(width)
        lengths = np.array([len(r) for r in ids])[:, None]
        mask = positions >= width - lengths if left else positions < lengths
        batch["attention_mask"] = torch.from_numpy(mask.astype(np.int64))
        return batch

    def _embed(self, batch: list[str], max_length: int) -> Any:
        enc = self.tokenizer(batch, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
        return self._forward(enc)

    def _forward(self, enc: Mapping[str, Any]) -> Any:
        enc = {k: v.to(self.device) for k, v in enc.items()}
        with encode_autocast(self.precision, self.device):
            hidden = self.model(**enc).last_hidden_state
        return pool(hidden.float(), enc["attention_mask"], self.spec.pooling, self.spec.normalize)

    def encode_queries(self, queries: Mapping[str, str], **kwargs: Any) -> tuple[list[str], np.ndarray]:
        ids = list(queries)
        return ids, self.encode([queries[q] for q in ids], kind="query", **kwargs)

    def encode_corpus(
        self, corpus: Mapping[str, Mapping[str, str] | str], **kwargs: Any
    ) -> tuple[list[str], np.ndarray]:
        """(doc ids, vectors) for a BEIR-style corpus; with rank/world_size, this rank's ids and vectors."""
        ids = list(corpus)
        rank, world = kwargs.get("rank", 0), kwargs.get("world_size", 1)
        start, end = shard_bounds(len(ids), rank, world)
        texts = self.passage_texts([corpus[d] for d in ids])
        return ids[start:end], self.encode(texts, kind="passage", **kwargs)


def pool(hidden: Any, attention_mask: Any, pooling: str, normalize: bool) -> Any:
    """CLS (first position) or mean over non-padding tokens, then optional L2 normalisation."""
    import torch.nn.functional as F

    if pooling == "cls":
        vecs = hidden[:, 0]
    elif pooling == "mean":
        mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
        vecs = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
    else:
        raise HarnessError(f"pooling must be one of {', '.join(POOLINGS)}, got {pooling!r}")
    if normalize:
        vecs = F.normalize(vecs.float(), p=2, dim=-1)
    return vecs


def pick_device(device: str | None = None) -> Any:
    """`device`, else this process's current CUDA device, else the CPU."""
    import torch

    if device is None:
        return torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else torch.device("cpu")
    return torch.device(device)


def load_backbone(model_dir: str | Path, tokenizer_dir: str | Path | None = None) -> tuple[Any, Any]:
    """(AutoModel, AutoTokenizer) from a local folder, refusing a checkpoint whose encoder weights are missing.

    A missing pooler is fine (CLS/mean pooling never uses it; masked-LM checkpoints have none);
    any other missing weight would mean evaluating or fine-tuning a randomly initialised
    encoder, which is refused with the names of the missing weights.
    """
    from transformers import AutoModel, AutoTokenizer

    model_dir = Path(model_dir)
    tok_dir = Path(tokenizer_dir) if tokenizer_dir is not None else model_dir
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(tok_dir), local_files_only=True)
    except (OSError, ValueError) as exc:
        raise HarnessError(f"cannot load a tokenizer from {tok_dir}: {exc}") from exc
    model, info = load_pretrained(AutoModel, model_dir, "an encoder", output_loading_info=True)
    missing = sorted(k for k in info.get("missing_keys", ()) if not k.startswith("pooler."))
    if missing:
        raise HarnessError(
            f"{model_dir}: {len(missing)} encoder weight(s) missing from the checkpoint "
            f"(e.g. {', '.join(missing[:3])}); the folder does not hold a trained encoder of this architecture"
        )
    return model, tokenizer


def load_encoder(
    path: str | Path,
    pooling: str | None = None,
    normalize: bool | None = None,
    *,
    query_max_length: int | None = None,
    passage_max_length: int | None = None,
    title_separator: str | None = None,
    device: str | None = None,
    precision: str = "fp32",
) -> Encoder:
    """Load a local encoder; arguments that are not None override what the folder says.

    ``precision``: "fp16"/"bf16" cast the weights on CUDA; on a CPU with native bf16, "bf16" runs
    the fp32 weights under bf16 autocast (fp16 and CPUs without bf16 stay fp32 and say so on
    stderr). Pooling, normalisation and the vectors are fp32 either way.
    """
    if pooling is not None and pooling not in POOLINGS:
        raise HarnessError(f"pooling must be one of {', '.join(POOLINGS)}, got {pooling!r}")
    if precision not in PRECISIONS:
        raise HarnessError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    spec = describe_checkpoint(path, pooling)
    for name, value in (
        ("normalize", normalize),
        ("query_max_length", query_max_length),
        ("passage_max_length", passage_max_length),
        ("title_separator", title_separator),
    ):
        if value is not None:
            setattr(spec, name, value)
            spec.sources[name] = "argument"

    dev = pick_device(device)
    model, tokenizer = load_backbone(spec.model_dir)
    model, precision = for_inference(model, precision, dev, lambda line: print(f"encoder: {line}", file=sys.stderr))
    model.to(dev).eval()
    return Encoder(spec, model, tokenizer, dev, precision)


def load_zero_shot_encoder(
    path: Path,
    pooling: str | None = None,
    normalize: bool | None = None,
    query_max_length: int | None = None,
    passage_max_length: int | None = None,
    device: str | None = None,
    precision: str = "fp32",
) -> Any:
    """``load_encoder`` plus the zero-shot length rules; ``encoder.spec.sources`` says who chose what.

    Maximum lengths: an explicit value, else the folder's own (``harness_encoder.json``; a
    sentence-transformers folder's ``max_seq_length`` for queries and passages alike, as
    sentence-transformers and BEIR encode), else the papers' 32 / 144; never more than the
    model's position limit.
    """
    if pooling is not None and pooling not in ("cls", "mean"):
        raise HarnessError(f"pooling must be cls or mean, got {pooling!r}")
    for name, value in (("query_max_length", query_max_length), ("passage_max_length", passage_max_length)):
        if value is not None and value < 2:
            raise HarnessError(f"{name} must be at least 2 ([CLS] and [SEP]), got {value}")
    spec = describe_checkpoint(path, pooling)
    lengths: dict[str, tuple[int, str]] = {}
    for name, value in (("query_max_length", query_max_length), ("passage_max_length", passage_max_length)):
        if value is not None:
            lengths[name] = (value, "argument")
        elif name in spec.sources:  # harness_encoder.json
            lengths[name] = (getattr(spec, name), spec.sources[name])
        elif spec.kind == "sentence-transformers" and spec.model_max_length:
            lengths[name] = (spec.model_max_length, "sentence_bert_config.json (max_seq_length)")
        else:
            lengths[name] = (getattr(spec, name), "default (papers: query 32, passage 144)")
    encoder = load_encoder(
        path,
        pooling,
        normalize,
        query_max_length=lengths["query_max_length"][0],
        passage_max_length=lengths["passage_max_length"][0],
        device=device,
        precision=precision,
    )
    limit = encoder.spec.model_max_length or getattr(encoder.model.config, "max_position_embeddings", None)
    for name, (value, source) in lengths.items():
        if limit and value > int(limit):
            value, source = int(limit), f"{source}, capped at the model's limit {int(limit)}"
        setattr(encoder.spec, name, value)
        encoder.spec.sources[name] = source
    for name in ("pooling", "normalize"):
        encoder.spec.sources.setdefault(name, "default")
    return encoder


def vector_settings(encoder: Any) -> dict[str, Any]:
    """Settings that decide the passage vectors (the embedding cache key)."""
    s = encoder.settings()
    return {
        k: s[k]
        for k in (
            "pooling",
            "normalize",
            "lowercase",
            "passage_max_length",
            "title_separator",
            "passage_prefix",
            "precision",
            "dim",
        )
    }
