"""The data and retrieval blocks of a spec, typed (harness.spec.settings), defaults declared once: the
tokenizer, the pre-training corpus, query generation and retrieval (BM25 and the impact index).

The pipelines read these classes (``TokenizerSettings.from_spec(spec).vocab_size``), the dry-run's
plan prints them, and :mod:`harness.spec.keys` derives the blocks' keys and the kinds ``validate``
checks from their fields. A stage's cache key is the block's :meth:`~harness.spec.settings.Settings.key` for
that stage: a block that serves several stages declares which stages read each setting (``stages``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.core import benchmarks as declared
from harness.core.seeds import DEFAULT_SEED
from harness.spec.kinds import MAPPING, NON_NEGATIVE, NUM, POSITIVE, POSITIVE_WHOLE, SEED_KIND, TEXT, Kind
from harness.spec.settings import BlockSettings, setting

# Lucene's default BooleanQuery clause limit (IndexSearcher.maxClauseCount): a query with more terms fails
# inside Anserini's search threads and silently returns nothing, so longer queries keep their largest impacts.
LUCENE_MAX_CLAUSES = 1024

NAMES = Kind((str, list), "a benchmark name or a list of them", declared.with_embedded_corpus("beir")[0])
SHARE = Kind(NUM, "a number", 0.5, low=0, high=1)  # a share in [0, 1]
TOP_P = Kind(NUM, "a number", 0.95, low=0, low_open=True, high=1)
QUERY_TERMS = Kind((int,), "a whole number", 64, low=1, high=LUCENE_MAX_CLAUSES)


@dataclass(frozen=True)
class TokenizerSettings(BlockSettings):
    """``tokenizer``: a checkpoint's, or a WordPiece vocabulary trained on the corpora."""

    block = ("tokenizer",)
    reads = ("tokenizer",)

    from_: str = setting("a checkpoint's tokenizer, or wordpiece (trained on the corpora)", "bert-base-uncased", TEXT)
    vocab_size: int = setting("WordPiece vocabulary size", 8000, POSITIVE_WHOLE)
    corpora: Any = setting("benchmarks whose corpora train the WordPiece vocabulary", None, NAMES)


@dataclass(frozen=True)
class CorpusSettings(BlockSettings):
    """``corpus``: the documents pre-training reads, split into passages."""

    block = ("corpus",)
    reads = ("passages",)

    source: Any = setting("corpus name, or a list of benchmarks whose corpora are united", None, NAMES)
    splitter: str | None = setting(
        "how documents are split into sentences (not read: always Punkt trained on the corpus)", None, TEXT, keyed=False
    )
    max_tokens: int = setting("passage length in tokens", 144, POSITIVE_WHOLE)
    seed: int = setting("seed of the passage grouping and sampling", DEFAULT_SEED, SEED_KIND)
    max_passages: int | None = setting(
        "keep a seeded set of whole documents up to this many passages", None, POSITIVE_WHOLE
    )
    punkt_train_chars: int | None = setting("characters of corpus text that train Punkt", None, POSITIVE_WHOLE)


GENERATION, QGEN_MODEL = ("qgen",), ("qgen_model",)  # the stages that generate queries / train tiny-t5


@dataclass(frozen=True)
class QgenSettings(BlockSettings):
    """``qgen``: the queries generated for each passage (query-as-context pre-training)."""

    block = ("qgen",)
    reads = (*GENERATION, *QGEN_MODEL)

    model: str | None = setting(
        "query generator: a checkpoint, tiny-t5 (trained here) or term-sampler",
        None,
        TEXT,
        example="tiny-t5",
        stages=GENERATION,
    )
    input_prefix: str = setting("text put before each passage", "", TEXT, example="text2query: ")
    num_queries: int = setting("queries generated per passage", 5, POSITIVE_WHOLE, stages=GENERATION)
    top_k: int = setting("top-k sampling", 25, POSITIVE_WHOLE, stages=GENERATION)
    top_p: float = setting("nucleus sampling", 0.95, TOP_P, stages=GENERATION)
    max_new_tokens: int = setting("query length in tokens", 64, POSITIVE_WHOLE, stages=GENERATION)
    batch_size: int = setting(
        "passages per generation batch (seeded per batch, so it changes the queries)",
        64,
        POSITIVE_WHOLE,
        stages=GENERATION,
    )
    cuda_batch_size: int = setting(
        "passages per generation batch on CUDA, in half precision (seeded per batch, so it changes the "
        "queries; 256 x 5 t5-base sequences of 144 + 64 tokens hold ~20 GiB of key/value cache)",
        256,
        POSITIVE_WHOLE,
        keyed=False,  # a CUDA run keys the batch it used (pipelines/pretrain.py): CPU keys stay as they were
        stages=GENERATION,
    )
    train_pairs: str = setting(
        "<benchmark>-<split> whose (query, passage) pairs train tiny-t5 / term-sampler", "nfcorpus-train", TEXT
    )
    steps: int = setting("tiny-t5 training steps", 400, POSITIVE_WHOLE, stages=QGEN_MODEL)
    max_input_tokens: int = setting("tiny-t5 passage length in tokens", 144, POSITIVE_WHOLE, stages=QGEN_MODEL)
    smoothing: float = setting("term-sampler smoothing", 2.0, NON_NEGATIVE, stages=GENERATION)


# Closed: the indexed collection holds only these two fields (retrieval.bm25.write_json_collection).
BM25_FIELDS = {
    "contents": "passage body (with the title prepended when title is not a field)",
    "title": "passage title as its own field",
}
IMPACT_KEYS = ("index", "quantization", "topk_sparsify", "max_query_terms", "threads")


@dataclass(frozen=True)
class RetrievalSettings(BlockSettings):
    """``retrieval``: BM25 (the papers' setting, see baselines/bm25.yaml) and the learned-sparse impact index."""

    block = ("retrieval",)
    reads = ("index", "retrieve", "impact_index", "impact_search")

    engine: str | None = setting(
        "the BM25 engine (not read: Lucene through pyserini)", None, TEXT, example="lucene", keyed=False
    )
    k1: float = setting("BM25 k1", 0.9, NON_NEGATIVE, stages=("retrieve",))
    b: float = setting("BM25 b", 0.4, SHARE, stages=("retrieve",))
    fields: dict = setting(
        "Lucene fields searched, with their weights",
        {"contents": 1.0, "title": 1.0},
        MAPPING,
        keys=BM25_FIELDS,
        stages=("index", "retrieve"),
    )
    depth: int = setting("BM25 results per query", 1000, POSITIVE_WHOLE, stages=("retrieve",))
    threads: int = setting("Lucene threads", 2, POSITIVE_WHOLE, keyed=False)  # results do not depend on it
    index: str = setting("impact index kind (lucene-impact)", "lucene-impact", TEXT, stages=("impact_index",))
    quantization: float = setting(
        "impact = floor(quantization x weight)", 100, POSITIVE, stages=("impact_index", "impact_search")
    )
    topk_sparsify: int | None = setting(
        "documents keep their top-k terms, null for all", None, POSITIVE_WHOLE, example=128, stages=("impact_index",)
    )
    max_query_terms: int = setting(
        f"a query keeps its largest impacts, at most Lucene's {LUCENE_MAX_CLAUSES} clauses",
        LUCENE_MAX_CLAUSES,
        QUERY_TERMS,
        stages=("impact_search",),
    )

    def impact(self) -> dict[str, Any]:
        """The impact index's and search's settings (the dry-run prints them)."""
        return {key: getattr(self, key) for key in IMPACT_KEYS}
