"""A BERT cross-encoder reranker: the teacher that LexMAE's stage 3 distils (Eq. 13).

Paper profile
    LexMAE adopts an off-the-shelf reranker (§4.2): a configured local checkpoint loaded with
    ``AutoModelForSequenceClassification``. One output logit is the score; a two-logit
    (monoBERT-style relevant / not relevant) head gives ``log softmax(logits)[1]``, the
    relevance log-probability pygaggle ranks by. Anything else is refused.
Tiny profile
    :func:`train_cross_encoder` trains a small ``BertForSequenceClassification`` (one logit) from
    random initialisation (a ``BertConfig``) with the harness tokenizer, or from a local
    checkpoint, on ``(query, positives, negatives)`` groups: the input is
    ``[CLS] query [SEP] passage [SEP]`` (passage truncated first) and the loss is the softmax
    cross entropy of each group's positive against its negatives (the listwise loss of SimLM's and
    Tevatron's rerankers). Groups, their per-epoch sampling and the data order are
    :mod:`harness.finetune.groups`'s and the loop is the engine's (:mod:`harness.training.engine`,
    checkpoints at epoch ends with exact resume). The folder gets ``harness_reranker.json`` (max length,
    title separator), ``train_stats.json`` and the ``done.json`` marker (a finished folder with the same
    data and settings is returned as is).
Mini profile
    :func:`score_candidates_bi_encoder` scores with an off-the-shelf *bi-encoder* instead
    (all-MiniLM-L6-v2, the one trained retriever reachable here): ``scale x sim(q, p)`` with the
    checkpoint's own pooling and similarity. A cross-encoder trained here for the minute a CPU
    profile can give it stays at chance (pairwise accuracy 0.48 measured), and distilling a
    teacher at chance destroys the student's ranking; the bi-encoder is a weaker teacher than the
    paper's reranker but a real one. ``scale`` is the inverse temperature of the softmax the KL
    takes over the scores (sentence-transformers trains MiniLM's cosine at scale 20).
Scoring
    :func:`score_pairs` scores (query, passage) pairs in length-sorted batches under
    ``torch.inference_mode``; :func:`score_candidates` builds the ``teacher_scores[qid][docid]``
    that :func:`harness.finetune.splade.train_splade` distils. The stage scores through
    :func:`cross_encoder_scorer` / :func:`bi_encoder_scorer`, one chunk of pairs at a time, each rank its
    own chunks (:mod:`harness.finetune.teacher_shards`).
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from harness.core.errors import HarnessError
from harness.core.fsutil import atomic_write_text
from harness.core.numerics import upcast
from harness.finetune.groups import GroupTask, GroupTrainConfig, normalise_examples
from harness.finetune.teacher_pairs import (
    PAIR_CHUNK,
    Candidates,
    Keys,
    iter_pair_chunks,
    iter_query_scores,
    pair_texts,
)
from harness.retrieval.encoder import (
    DEFAULT_TITLE_SEPARATOR,
    load_zero_shot_encoder,
)
from harness.stages.checkpoints import load_pretrained
from harness.training.config import required
from harness.training.engine import (
    Logger,
    Notes,
    StepContext,
    run,
    seed_everything,
    session,
)
from harness.training.finished import fingerprint, finish, finished_stats

SETTINGS_FILE = "harness_reranker.json"


@dataclass(kw_only=True)
class RerankerTrainConfig(GroupTrainConfig):
    """Cross-encoder training settings: the spec's (harness.spec.stage_settings.RerankerTrainSettings)."""

    what = "reranker"
    max_length: int = required()

    def check(self) -> None:
        super().check()
        self.need_positive_int("max_length")


def _load_tokenizer(source: Any) -> Any:
    from transformers import AutoTokenizer

    if not isinstance(source, (str, Path)):
        return source  # an already loaded tokenizer
    try:
        return AutoTokenizer.from_pretrained(str(source), local_files_only=True)
    except (OSError, ValueError) as exc:
        raise HarnessError(f"cannot load a tokenizer from {source}: {exc}") from exc


def _new_model(init_or_config: Any, tokenizer: Any | None) -> tuple[Any, Any, str]:
    """(model with one output logit, tokenizer, description of the initialisation)."""
    from transformers import (
        AutoModelForSequenceClassification,
        BertConfig,
        BertForSequenceClassification,
    )

    if isinstance(init_or_config, (dict, BertConfig)):
        config = BertConfig(**init_or_config) if isinstance(init_or_config, dict) else copy.deepcopy(init_or_config)
        config.num_labels = 1  # the setter also resets id2label
        if tokenizer is None:
            raise HarnessError("a reranker initialised from a config needs tokenizer= (the harness tokenizer)")
        tok = _load_tokenizer(tokenizer)
        if len(tok) > config.vocab_size:
            raise HarnessError(f"the tokenizer has {len(tok)} tokens, the config's vocab_size is {config.vocab_size}")
        return BertForSequenceClassification(config), tok, "random"
    path = Path(init_or_config)
    if not (path / "config.json").is_file():
        raise HarnessError(f"{path} holds no Hugging Face model (config.json missing)")
    model = load_pretrained(
        AutoModelForSequenceClassification, path, "a cross-encoder", num_labels=1, ignore_mismatched_sizes=True
    )
    return model, _load_tokenizer(tokenizer or path), str(path)


def _encode_pairs(
    tokenizer: Any, queries: Sequence[str], passages: Sequence[str], max_length: int, device: torch.device
) -> dict[str, torch.Tensor]:
    # longest_first: a query longer than max_length is cut too ("only_second" raises on it).
    enc = tokenizer(
        list(queries),
        list(passages),
        padding=True,
        truncation="longest_first",
        max_length=max_length,
        return_tensors="pt",
    )
    return {k: v.to(device) for k, v in enc.items()}


class RerankerTask(GroupTask):
    """One listwise step: each group's positive against its negatives, scored as (query, passage) pairs."""

    name = "train reranker"

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        groups: Sequence,
        passages: Mapping[str, Any] | None,
        config: RerankerTrainConfig,
        info: Any,
    ):
        super().__init__(model, tokenizer, groups, passages, config, info, "train_cross_encoder")

    def step(self, step: int, ctx: StepContext) -> dict[str, torch.Tensor]:
        q_per, p_per = self.config.queries_per_device, self.config.passages_per_query
        qs, ps = [], []
        for _, query, items in self.batch(step):
            qs += [query] * p_per
            ps += [self.text(d) for d in items]
        enc = _encode_pairs(self.tokenizer, qs, ps, self.config.max_length, ctx.info.device)
        with ctx.autocast():
            logits = upcast(ctx.engine(**enc).logits)
        target = torch.zeros(q_per, dtype=torch.long, device=ctx.info.device)  # positive first in every group
        loss = F.cross_entropy(logits.view(q_per, p_per), target)
        ctx.backward(loss)
        return {"loss": loss}


def train_cross_encoder(
    init_or_config: str | Path | Mapping[str, Any] | Any,
    examples: Sequence[tuple[str, Sequence[Any], Sequence[Any]]],
    config: RerankerTrainConfig,
    output_dir: str | Path,
    logger: Logger | None = None,
    *,
    passages: Mapping[str, Any] | None = None,
    tokenizer: Any | None = None,
) -> dict[str, Any]:
    """Train a cross-encoder on (query, positives, negatives) groups; returns stats (see module docstring).

    ``init_or_config``: a local checkpoint folder, or a ``BertConfig`` / dict for random
    initialisation (then ``tokenizer``, a folder or a tokenizer, is required). Items are texts, or
    doc ids looked up in ``passages`` (id -> text or {"title", "text"}).
    """
    started, out_dir = time.time(), Path(output_dir)
    notes = Notes("reranker")
    with session(config) as info:
        groups, skipped, _ = normalise_examples(examples, config.negatives_per_query)
        init_name = (
            str(init_or_config)
            if isinstance(init_or_config, (str, Path))
            else json.dumps(
                init_or_config if isinstance(init_or_config, dict) else init_or_config.to_dict(),
                sort_keys=True,
                default=str,
            )
        )
        digest = fingerprint(init_name, config.identity(), groups)
        done = finished_stats(out_dir, digest, "reranker")
        if done is not None:
            return done
        seed_everything(config.seed)
        model, tok, init_desc = _new_model(init_or_config, tokenizer)
        task = RerankerTask(model, tok, groups, passages, config, info)
        out = run(task, config, info, out_dir, notes, identity={"fingerprint": digest}, logger=logger)
        stats = task.stats(
            out, started, model_dir=str(out_dir), init=init_desc, fingerprint=digest, skipped_examples=skipped
        )

        def save() -> None:
            model.save_pretrained(str(out_dir))
            tok.save_pretrained(str(out_dir))
            atomic_write_text(
                out_dir / SETTINGS_FILE,
                json.dumps(
                    {
                        "max_length": config.max_length,
                        "title_separator": config.title_separator,
                        "trained_by": "harness.finetune.reranker",
                    },
                    indent=1,
                )
                + "\n",
            )

        return finish(out_dir, stats, save)


# --- scoring ------------------------------------------------------------------------------------


@dataclass
class CrossEncoder:
    """A loaded reranker; :meth:`score` gives one float per (query, passage) pair."""

    model: Any
    tokenizer: Any
    device: torch.device
    max_length: int
    title_separator: str = DEFAULT_TITLE_SEPARATOR

    def score(self, pairs: Sequence[tuple[str, str]], batch_size: int = 64, show_progress: bool = False) -> list[float]:
        if batch_size < 1:
            raise HarnessError(f"batch_size must be positive, got {batch_size}")
        scores = [0.0] * len(pairs)
        lengths = np.fromiter((len(q or "") + len(p or "") for q, p in pairs), dtype=np.int64, count=len(pairs))
        order = np.argsort(-lengths, kind="stable").tolist()  # longest first: little padding
        labels = int(self.model.config.num_labels)
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.inference_mode():
                for start in tqdm(
                    range(0, len(order), batch_size), desc="rerank", unit="batch", disable=not show_progress
                ):
                    idx = order[start : start + batch_size]
                    enc = _encode_pairs(
                        self.tokenizer,
                        [pairs[i][0] or "" for i in idx],
                        [pairs[i][1] or "" for i in idx],
                        self.max_length,
                        self.device,
                    )
                    logits = upcast(self.model(**enc).logits)
                    values = logits[:, 0] if labels == 1 else F.log_softmax(logits, dim=-1)[:, 1]
                    for i, v in zip(idx, values.cpu().tolist()):
                        scores[i] = float(v)
        finally:
            self.model.train(was_training)
        return scores


def load_cross_encoder(model_dir: str | Path, max_length: int | None = None, device: str | None = None) -> CrossEncoder:
    """Load a reranker folder (one logit, or two: relevance log-probability); the Hub is never contacted."""
    from transformers import AutoModelForSequenceClassification

    model_dir = Path(model_dir)
    if not (model_dir / "config.json").is_file():
        raise HarnessError(
            f"no reranker at {model_dir}: give a local cross-encoder folder (config.json, weights, "
            "tokenizer), e.g. the paper profile's configured checkpoint"
        )
    model = load_pretrained(AutoModelForSequenceClassification, model_dir, "a cross-encoder")
    if model.config.num_labels not in (1, 2):
        raise HarnessError(
            f"{model_dir}: a reranker has 1 (score) or 2 (not relevant / relevant) outputs, "
            f"this one has {model.config.num_labels}"
        )
    settings_file = model_dir / SETTINGS_FILE
    settings = json.loads(settings_file.read_text(encoding="utf-8")) if settings_file.is_file() else {}
    limit = int(getattr(model.config, "max_position_embeddings", 512) or 512)
    length = min(int(max_length or settings.get("max_length", 512)), limit)
    dev = torch.device(device) if device else torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model.to(dev).eval()
    return CrossEncoder(
        model, _load_tokenizer(model_dir), dev, length, settings.get("title_separator", DEFAULT_TITLE_SEPARATOR)
    )


def score_pairs(
    model_dir: str | Path | CrossEncoder,
    pairs: Sequence[tuple[str, str]],
    batch_size: int = 64,
    *,
    max_length: int | None = None,
    device: str | None = None,
    show_progress: bool = False,
) -> list[float]:
    """One score per (query, passage text) pair, in order (higher = more relevant)."""
    encoder = model_dir if isinstance(model_dir, CrossEncoder) else load_cross_encoder(model_dir, max_length, device)
    return encoder.score(pairs, batch_size, show_progress)


def _check_candidates(
    queries: Mapping[str, str], candidates: Mapping[str, Sequence[str]], passages: Mapping[str, Any]
) -> None:
    """Every query with candidates has a text and every candidate a passage (one clear error otherwise)."""
    for qid, docs in candidates.items():
        if qid not in queries:
            raise HarnessError(f"query {qid!r} has candidates but no text")
        for d in docs:
            if d not in passages:
                raise HarnessError(f"candidate {d!r} of query {qid!r} is not in passages")


def score_candidates(
    model_dir: str | Path | CrossEncoder,
    queries: Mapping[str, str],
    candidates: Mapping[str, Sequence[str]],
    passages: Mapping[str, Any],
    batch_size: int = 64,
    *,
    max_length: int | None = None,
    device: str | None = None,
    show_progress: bool = True,
    pair_chunk: int = PAIR_CHUNK,
) -> dict[str, dict[str, float]]:
    """``teacher_scores[qid][docid]`` for every candidate doc id of every query (stage 3's teacher)."""
    _check_candidates(queries, candidates, passages)
    return dict(
        iter_candidate_scores(
            model_dir,
            queries,
            candidates,
            passages,
            batch_size,
            max_length=max_length,
            device=device,
            show_progress=show_progress,
            pair_chunk=pair_chunk,
        )
    )


def iter_candidate_scores(
    model_dir: str | Path | CrossEncoder,
    queries: Mapping[str, str],
    candidates: Candidates,
    passages: Mapping[str, Any],
    batch_size: int = 64,
    *,
    max_length: int | None = None,
    device: str | None = None,
    show_progress: bool = True,
    pair_chunk: int = PAIR_CHUNK,
) -> Iterator[tuple[str, dict[str, float]]]:
    """:func:`score_candidates` one query at a time, candidates read as a stream (unchecked: a missing
    text fails with its KeyError), so neither the candidates nor the scores are held whole."""
    encoder = model_dir if isinstance(model_dir, CrossEncoder) else load_cross_encoder(model_dir, max_length, device)
    # In chunks of pairs (harness.finetune.teacher_pairs): one chunk's texts in memory, not all ~36M.
    chunks = iter_pair_chunks(queries, candidates, passages, encoder.title_separator, pair_chunk)
    yield from iter_query_scores((keys, encoder.score(pairs, batch_size, show_progress)) for keys, pairs in chunks)


def cross_encoder_scorer(
    model_dir: str | Path | CrossEncoder,
    queries: Mapping[str, str],
    passages: Mapping[str, Any],
    batch_size: int = 64,
    *,
    max_length: int | None = None,
    device: str | None = None,
    show_progress: bool = True,
) -> Callable[[Keys], list[float]]:
    """The cross-encoder's scores of one chunk of ``(qid, doc id)`` keys, as :func:`iter_candidate_scores`
    scores that chunk (harness.finetune.teacher_shards hands each rank its chunks)."""
    encoder = model_dir if isinstance(model_dir, CrossEncoder) else load_cross_encoder(model_dir, max_length, device)
    return lambda keys: encoder.score(
        pair_texts(keys, queries, passages, encoder.title_separator), batch_size, show_progress
    )


def bi_encoder_scorer(
    model_dir: str | Path,
    queries: Mapping[str, str],
    passages: Mapping[str, Any],
    *,
    scale: float,
    passage_max_length: int,
    batch_size: int = 64,
) -> Callable[[Keys], list[float]]:
    """``scale x sim(q, d)`` of one chunk of keys from a bi-encoder (the mini profile's teacher): the
    chunk's queries and passages encoded together, each query's candidates scored against it at once."""
    encoder = load_zero_shot_encoder(Path(model_dir), passage_max_length=passage_max_length)

    def score(keys: Keys) -> list[float]:
        qids = list(dict.fromkeys(q for q, _ in keys))
        doc_ids = list(dict.fromkeys(d for _, d in keys))
        q_vecs = encoder.encode([queries[q] for q in qids], batch_size, kind="query", show_progress=False)
        d_vecs = encoder.encode(encoder.passage_texts([passages[d] for d in doc_ids]), batch_size, kind="passage")
        q_row, d_row = {q: i for i, q in enumerate(qids)}, {d: i for i, d in enumerate(doc_ids)}
        out: list[float] = []
        start = 0
        while start < len(keys):  # a query's keys are consecutive: one product per query
            qid = keys[start][0]
            end = start
            while end < len(keys) and keys[end][0] == qid:
                end += 1
            sims = d_vecs[[d_row[d] for _, d in keys[start:end]]] @ q_vecs[q_row[qid]]
            out += [float(scale * s) for s in np.asarray(sims, dtype=np.float64)]
            start = end
        return out

    return score


def score_candidates_bi_encoder(
    model_dir: str | Path,
    queries: Mapping[str, str],
    candidates: Mapping[str, Sequence[str]],
    passages: Mapping[str, Any],
    *,
    scale: float,
    passage_max_length: int,
    batch_size: int = 64,
) -> dict[str, dict[str, float]]:
    """``teacher_scores[qid][docid] = scale x sim(q, d)`` from a bi-encoder (the mini profile's teacher),
    every candidate in one chunk."""

    _check_candidates(queries, candidates, passages)
    score = bi_encoder_scorer(
        model_dir, queries, passages, scale=scale, passage_max_length=passage_max_length, batch_size=batch_size
    )
    keys = [(qid, d) for qid, docs in candidates.items() for d in dict.fromkeys(docs)]
    scored = dict(iter_query_scores([(keys, score(keys))] if keys else []))
    return {qid: scored.get(qid, {}) for qid in candidates}
