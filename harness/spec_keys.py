"""The nested keys a method spec may hold: declared once, per block, each with a one-line meaning.

harness/spec.py checks every mapping block of a spec, and of each `profiles.<name>` block (which
is deep-merged over the top level), against these, so a misspelt nested key such as
`finetune.retriever2.epoch` is an error with a did-you-mean instead of a setting silently ignored.
A key is listed only when the code reads it or a spec in baselines/ states it
(tests/test_spec_nested_keys.py keeps the list from rotting). Validation only: the fine-tuning
stage keys' types and defaults live in harness.stage_settings, the kinds of the other keys the
pipelines convert in :data:`KEY_KINDS` (checked by harness.spec_values), and the resolved config
(and its hash) is what the YAML says.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.kinds import FLAG, NON_NEGATIVE, NUM, POSITIVE, POSITIVE_WHOLE, TEXT, WHOLE, Kind, one_of
from harness.reported import CONDITION_KEYS
from harness.stage_settings import PretrainSettings, StageSettings


@dataclass(frozen=True)
class Block:
    """A nested mapping: its meaning and its allowed keys (key -> meaning, or key -> sub-Block)."""

    meaning: str
    keys: "Keys"


Keys = dict[str, "str | Block"]
# A block whose keys are checked elsewhere: `pretrain.objective_params` against the spec's own objective,
# as that objective's module registers them (harness.pretrain.objective_params, with a did-you-mean),
# when the spec is validated (harness.spec_values); loading a spec imports no objective.
OPEN = Block("checked against the spec's objective by harness.spec_values", {})

# What every fine-tuning stage reads (merged from the finetune block and the stage's own block):
# declared once, typed and with defaults, in harness.stage_settings.StageSettings.
_STAGE: Keys = StageSettings.meanings()
_NEGATIVES = {"negatives": "hard-negative pools: mined and/or bm25 (the dense retriever 2 reads it; "
                           "retriever 1 always trains on BM25 negatives)"}
_INIT = {"init": "pretrained (default) or an earlier retriever, e.g. retriever1"}

# RerankerTrainConfig's fields but `seed` (the pipeline passes the harness seed itself).
_RERANKER_TRAIN: Keys = {
    "queries_per_device": "queries per device and step",
    "passages_per_query": "passages per query group: 1 positive + BM25 negatives",
    "lr": "peak learning rate",
    "epochs": "passes over the training queries",
    "warmup_ratio": "share of the steps with linear learning-rate warm-up",
    "weight_decay": "AdamW weight decay",
    "grad_clip": "gradient-norm clip, null for none",
    "max_length": "query + passage length in tokens (capped at the encoder's positions)",
    "title_separator": "text between a passage's title and body",
    "log_every": "steps between logged losses",
    "progress": "show a progress bar",
    "device": "torch device, null for the default",
}

_RETRIEVER3: Keys = {
    **_STAGE,
    **_INIT,
    "reranker": "stage-3 teacher: configured-checkpoint | tiny-cross-encoder | bi-encoder | a checkpoint",
    "reranker_checkpoint": "checkpoint of a configured-checkpoint or bi-encoder teacher",
    "teacher_scale": "bi-encoder teacher logits = teacher_scale x cosine",
    "teacher_max_length": "bi-encoder teacher passage length in tokens",
    "teacher_positives": "positives per query the teacher scores (default: epochs)",
    "teacher_negatives": "negatives per query the teacher scores (default: epochs x (passages_per_query - 1))",
    "reranker_train": Block("training of the tiny cross-encoder teacher", _RERANKER_TRAIN),
    "distill": "the teacher's kind, e.g. cross-encoder (printed by the plan; stage 3 always distils)",
    "kl": "KL divergence to the teacher's scores (not read: stage 3 always uses it)",
}

# A scalar stage key set on the finetune block is the default for every stage (finetune_settings).
_SHARED: Keys = {k: v for stage in (_STAGE, _NEGATIVES, _INIT, _RETRIEVER3) for k, v in stage.items()
                 if not isinstance(v, Block)}

_FINETUNE: Keys = {
    "train_queries": "<benchmark>-<split> whose queries and qrels train every stage",
    "max_train_queries": "a seeded subsample of that many judged training queries (null: all)",
    "evaluate_start": "also score the encoder fine-tuning starts from (zero-shot)",
    **_SHARED,
    "mine": Block("hard-negative mining", {
        "depth": "mined negatives come from this many top results",
        "with": "the retriever that mines (printed by the plan; the previous retriever always mines)",
    }),
    "retriever1": Block("stage 1: BM25 negatives", {**_STAGE, **_NEGATIVES}),
    "retriever2": Block("stage 2: mined negatives", {**_STAGE, **_NEGATIVES, **_INIT}),
    "retriever3": Block("stage 3: distils a reranker (learned-sparse)", _RETRIEVER3),
}


# Top-level block -> its keys. The meaning of each top-level block is in spec.SCHEMA.
BLOCKS: dict[str, Keys] = {
    "data": {
        "mirror": "a folder (relative to the project) or URL serving the upstream data files under their own "
                  "names, instead of the publishers (sets HARNESS_DATA_MIRROR for the run; docs/data.md)",
        "msmarco_passages": "plain (collection.tsv) or titled (RocketQA's para.title.txt joined to it, as "
                            "Tevatron's coCondenser/CoT-MAE fine-tuning and evaluation read MS MARCO)",
        "bm25_negatives": "where retriever 1's BM25 negatives come from: own (BM25 here over the training "
                          "queries), msmarco-triples (the official qidpidtriples, coCondenser's / Tevatron's "
                          "recipe) or tevatron (Tevatron's published training set)",
    },
    "hardware": {
        "device_type": "cuda | cpu",
        "devices": "number of devices",
        "gpu": "GPU model as the paper states it",
        "hours": "training hours as the paper states them",
    },
    "model": {
        "init": "checkpoint name or path, or scratch",
        "layers": "encoder layers (scratch)",
        "hidden": "hidden size (scratch)",
        "heads": "attention heads (scratch)",
        "intermediate": "feed-forward size (scratch)",
    },
    "tokenizer": {
        "from": "a checkpoint's tokenizer, or wordpiece (trained on the corpora)",
        "vocab_size": "WordPiece vocabulary size",
        "corpora": "benchmarks whose corpora train the WordPiece vocabulary",
    },
    "corpus": {
        "source": "corpus name, or a list of benchmarks whose corpora are united",
        "splitter": "how documents are split into sentences (not read: always Punkt trained on the corpus)",
        "max_tokens": "passage length in tokens",
        "seed": "seed of the passage grouping and sampling",
        "max_passages": "keep a seeded set of whole documents up to this many passages",
        "punkt_train_chars": "characters of corpus text that train Punkt",
    },
    "qgen": {
        "model": "query generator: a checkpoint, tiny-t5 (trained here) or term-sampler",
        "input_prefix": "text put before each passage",
        "num_queries": "queries generated per passage",
        "top_k": "top-k sampling",
        "top_p": "nucleus sampling",
        "max_new_tokens": "query length in tokens",
        "batch_size": "passages per generation batch (seeded per batch, so it changes the queries)",
        "train_pairs": "<benchmark>-<split> whose (query, passage) pairs train tiny-t5 / term-sampler",
        "steps": "tiny-t5 training steps",
        "max_input_tokens": "tiny-t5 passage length in tokens",
        "smoothing": "term-sampler smoothing",
    },
    "retrieval": {
        "engine": "the BM25 engine (not read: Lucene through pyserini)",
        "k1": "BM25 k1",
        "b": "BM25 b",
        # Closed: the indexed collection holds only these two fields (retrieval.bm25.write_json_collection).
        "fields": Block("Lucene fields searched, with their weights", {
            "contents": "passage body (with the title prepended when title is not a field)",
            "title": "passage title as its own field",
        }),
        "depth": "BM25 results per query",
        "threads": "Lucene threads",
        "index": "impact index kind (lucene-impact)",
        "quantization": "impact = floor(quantization x weight)",
        "topk_sparsify": "documents keep their top-k terms, null for all",
        "max_query_terms": "a query keeps its largest impacts, at most Lucene's 1024 clauses",
    },
    # Typed, with defaults: harness.stage_settings.PretrainSettings.
    "pretrain": {**PretrainSettings.meanings(), "objective_params": OPEN},
    "finetune": _FINETUNE,
    # Closed: run conditions are compared key by key with the reported cells' conditions, which
    # may only use reported.CONDITION_KEYS; any other key could never match a cell.
    "conditions": {key: meaning for key, (_, meaning) in CONDITION_KEYS.items()},
}

_SHARE = Kind(NUM, "a number", 0.5, low=0, high=1)  # a share in [0, 1]
_TOP_P = Kind(NUM, "a number", 0.95, low=0, low_open=True, high=1)
# The kinds of the keys above that the pipelines read outside the typed blocks (harness.stage_settings),
# converting (int(...), float(...)) or comparing them when their stage starts; checked with the resolved
# spec before any stage runs (harness.spec_values).
KEY_KINDS: dict[tuple[str, ...], Kind] = {
    ("hardware", "device_type"): one_of("cuda", "cpu"),
    ("hardware", "devices"): POSITIVE_WHOLE,
    ("hardware", "gpu"): TEXT,
    ("hardware", "hours"): NON_NEGATIVE,
    **{("model", key): POSITIVE_WHOLE for key in ("layers", "hidden", "heads", "intermediate")},
    ("model", "init"): TEXT,
    ("tokenizer", "from"): TEXT,
    ("tokenizer", "vocab_size"): POSITIVE_WHOLE,
    ("corpus", "max_tokens"): POSITIVE_WHOLE,
    ("corpus", "seed"): WHOLE,
    ("corpus", "max_passages"): POSITIVE_WHOLE,
    ("corpus", "punkt_train_chars"): POSITIVE_WHOLE,
    **{("qgen", key): POSITIVE_WHOLE for key in ("num_queries", "top_k", "max_new_tokens", "batch_size", "steps",
                                                 "max_input_tokens")},
    ("qgen", "top_p"): _TOP_P,
    ("qgen", "smoothing"): NON_NEGATIVE,
    ("qgen", "model"): TEXT,
    ("retrieval", "k1"): NON_NEGATIVE,
    ("retrieval", "b"): _SHARE,
    ("retrieval", "depth"): POSITIVE_WHOLE,
    ("retrieval", "threads"): POSITIVE_WHOLE,
    ("finetune", "train_queries"): TEXT,
    ("finetune", "max_train_queries"): POSITIVE_WHOLE,
    ("finetune", "evaluate_start"): FLAG,
    ("finetune", "mine", "depth"): POSITIVE_WHOLE,
    ("finetune", "retriever2", "init"): one_of("pretrained", "retriever1"),
    ("finetune", "retriever3", "init"): one_of("pretrained", "retriever1", "retriever2"),
    ("finetune", "retriever3", "reranker"): TEXT,
    ("finetune", "retriever3", "reranker_checkpoint"): TEXT,
    ("finetune", "retriever3", "teacher_scale"): POSITIVE,
    ("finetune", "retriever3", "teacher_max_length"): POSITIVE_WHOLE,
    ("finetune", "retriever3", "teacher_positives"): POSITIVE_WHOLE,
    ("finetune", "retriever3", "teacher_negatives"): POSITIVE_WHOLE,
}
NEGATIVE_POOLS = ("mined", "bm25")  # what `negatives:` may list (the dense retriever 2 reads it)
