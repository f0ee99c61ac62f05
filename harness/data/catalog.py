"""Named benchmarks: queries, qrels and corpus for each evaluation set the papers report.

    >>> b = get_benchmark("dl19")
    >>> len(b.queries()), b.kind
    (43, 'trec-dl')

Conventions (they match the papers' evaluation):

* ``queries(split)`` returns only the *judged* queries of that split (those with qrels).
  DL20's topics file has 200 topics, but only the 54 judged ones are evaluated; DL19 has
  43; MS MARCO dev (small) has 6,980. BEIR train/dev splits are, as in BEIR's own loader,
  the queries named in ``qrels/<split>.tsv``.
* ``split=None`` means the benchmark's evaluation split (``eval_split``): "dev" for
  ``msmarco-dev`` (which also accepts "test" as an alias for it), "test" for all others.
* BEIR test topics and qrels come from the Anserini copies (``topics-and-qrels/``) for all
  datasets. Where BEIR's own files are embedded too (scifact, nfcorpus, scidocs, fiqa), the
  two are checked to agree (same query ids and texts, same judgements) on first use.
* ``cqadupstack`` is reported as the mean over its 12 sub-forums: evaluate each of
  ``sub_benchmarks()`` (``cqadupstack-<forum>``) and average; it has no qrels of its own.
* ``msmarco-dl19-subset`` is a SMOKE-TEST set (5,000 real passages holding every DL19-relevant
  one): its scores are not comparable to DL19.
* Corpora: scifact, nfcorpus and the smoke subset are embedded; the others are downloaded
  (checksummed, cached) by :mod:`harness.data.download` when ``corpus()`` is first called.

The catalog is the benchmark registry, built from the declarations (``harness/core/benchmarks.yaml``,
through :mod:`harness.core.benchmarks`; each declaration's ``reader`` picks its class below):
``REPORTED`` (the benchmarks the papers' results tables report, in their order) and ``AGGREGATES``
(the BEIR averages they print) come from there, and the reported-scores registry and the
leaderboard take their lists from them. Benchmarks declared in ``benchmarks/`` beside the user's
specs (``reader: local``) are listed and built too (docs/adding-a-benchmark.md).
"""

from __future__ import annotations

import functools
import gzip
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from harness.core import benchmarks as declared
from harness.core.errors import HarnessError, UnknownNameError
from harness.data import download, embedded, sampled
from harness.data import formats as F
from harness.data.setting import msmarco_passages

# Every benchmark below is built from its declaration (harness/core/benchmarks.yaml): no name is written here.
BEIR_NAMES = list(declared.beir())
CQADUPSTACK_FORUMS = list(declared.beir_forums())
SMOKE_NAME = declared.smoke_name()

_TOPICS = "topics-and-qrels/"


class Benchmark:
    """A named evaluation set. Subclasses say where its files come from."""

    kind: str = ""
    eval_split: str = "test"
    smoke: bool = False
    _split_aliases: dict[str, str] = {}

    def __init__(self, name: str, description: str):
        self.name, self.description = name, description
        # Parsed (judged queries, qrels) per split: files are read once per process.
        self._memo: dict[str, tuple[dict[str, str], dict[str, dict[str, int]]]] = {}

    def __repr__(self) -> str:
        return f"Benchmark({self.name!r}, kind={self.kind!r})"

    # -- interface -------------------------------------------------------------------
    def splits(self) -> list[str]:
        return [self.eval_split]

    def queries(self, split: str | None = None) -> dict[str, str]:
        """Judged queries of ``split`` (``{qid: text}``); a fresh dict the caller may change."""
        return dict(self._loaded(split)[0])

    def qrels(self, split: str | None = None) -> dict[str, dict[str, int]]:
        """Relevance judgements of ``split`` (``{qid: {doc_id: grade}}``); a fresh copy."""
        return {qid: dict(docs) for qid, docs in self._loaded(split)[1].items()}

    def has_corpus(self) -> bool:
        """Whether the corpus is embedded (available offline)."""
        return False

    def corpus(self) -> dict[str, dict[str, str]]:
        """``{doc_id: {"title", "text"}}``: embedded, or downloaded on first use."""
        return dict(self.iter_corpus())

    def iter_corpus(self) -> Iterator[tuple[str, dict[str, str]]]:
        """Stream ``(doc_id, {"title", "text"})`` without holding the corpus in memory (MS MARCO: 8.8M)."""
        raise NotImplementedError

    def files(self) -> dict[str, str]:
        """Checksums of every data file this benchmark uses, for run records and cache keys.

        Keys are ``embedded/<path>`` (value: sha256 of the stored file) and ``downloads/<file>``
        (value: the checksum the download is verified against: sha256 where published,
        otherwise ``md5:<hex>``; so the value is the same before and after the download).
        """
        raise NotImplementedError

    def corpus_files(self) -> dict[str, str]:
        """The subset of :meth:`files` that identifies the corpus (e.g. for an index cache key)."""
        raise NotImplementedError

    def sub_benchmarks(self) -> list[Benchmark]:
        """Parts whose scores are averaged to give this benchmark's score (cqadupstack only)."""
        return []

    def sources(self) -> list[str]:
        """The downloads (:data:`harness.data.download.SOURCES` keys) this benchmark reads."""
        return []

    # -- helpers ---------------------------------------------------------------------
    def _read(self, split: str) -> tuple[dict[str, str], dict[str, dict[str, int]]]:
        """Parse (judged queries, qrels) of a resolved split."""
        raise NotImplementedError

    def _loaded(self, split: str | None) -> tuple[dict[str, str], dict[str, dict[str, int]]]:
        split = self._split(split)
        if split not in self._memo:
            self._memo[split] = self._read(split)
        return self._memo[split]

    def has_split(self, split: str) -> bool:
        """Whether ``split`` (or one of its aliases) names queries of this benchmark."""
        return self._split_aliases.get(split, split) in self.splits()

    def _split(self, split: str | None) -> str:
        if split is None:
            return self.eval_split
        split = self._split_aliases.get(split, split)
        if split not in self.splits():
            raise UnknownNameError(f"split of benchmark '{self.name}'", split, self.splits())
        return split

    @staticmethod
    def _embedded_files(rels: list[str]) -> dict[str, str]:
        out = {}
        for rel in rels:
            embedded.path(rel)  # verified: a record never names bytes that failed their check
            out[f"embedded/{embedded.stored_name(rel)}"] = embedded.sha256(rel)
        return out

    @staticmethod
    def _download_files(key: str) -> dict[str, str]:
        src = download.SOURCES[key]
        md5, sha256 = src.expected()
        if download.fixture_checksums() is not None:  # never mistaken for the real file in a record or key
            return {f"downloads/{src.filename}": f"fixture-sha256:{sha256}"}
        if sha256:
            return {f"downloads/{src.filename}": sha256}
        if md5:
            return {f"downloads/{src.filename}": f"md5:{md5}"}
        # unpinned: what was fetched, or, before the first download, the file's name (a key still says what it is)
        sha = download.recorded_sha256(download.downloads_dir() / src.filename)
        return {f"downloads/{src.filename}": sha or "unpinned"}


def _judged(topics: dict[str, str], qrels: dict[str, dict[str, int]]) -> dict[str, str]:
    return {qid: text for qid, text in topics.items() if qid in qrels}


def _download_error(bench: str, what: str, exc: HarnessError) -> HarnessError:
    return HarnessError(f"{what} of '{bench}' is not embedded and must be downloaded, which failed: {exc}")


# ------------------------------------------------------------------------------ MS MARCO / TREC DL


class TrecBenchmark(Benchmark):
    """MS MARCO dev (small) and TREC DL19/DL20: Anserini topics + TREC qrels, MS MARCO passage corpus."""

    def __init__(self, decl: declared.Declaration):
        super().__init__(decl.name, decl.description)
        self.kind, self.eval_split = decl.kind, decl.eval_split
        self._topics_rel, self._qrels_rel = _TOPICS + str(decl.topics), _TOPICS + str(decl.qrels)
        self._split_aliases = dict(decl.split_aliases)

    def _read(self, split: str) -> tuple[dict[str, str], dict[str, dict[str, int]]]:
        topics_path = embedded.path(self._topics_rel)
        topics = F.read_topics_tsv(topics_path)
        qrels = F.read_trec_qrels(embedded.path(self._qrels_rel), topics, topics_path.name)
        return _judged(topics, qrels), qrels

    def iter_corpus(self) -> Iterator[tuple[str, dict[str, str]]]:
        return iter_msmarco_passages(self.name)

    def files(self) -> dict[str, str]:
        return {**self._embedded_files([self._topics_rel, self._qrels_rel]), **self.corpus_files()}

    def corpus_files(self) -> dict[str, str]:
        return msmarco_corpus_files()

    def sources(self) -> list[str]:
        return msmarco_corpus_sources()  # the topics and qrels are embedded


def msmarco_corpus_sources() -> list[str]:
    """The MS MARCO passage corpus's downloads (the titles too when the run reads the titled variant)."""

    return ["msmarco-passage/collection"] + (["rocketqa/marco"] if msmarco_passages() == "titled" else [])


def msmarco_corpus_files() -> dict[str, str]:
    """The MS MARCO passage corpus's files: collection.tsv, and RocketQA's titles when the run reads
    the titled variant (``data.msmarco_passages: titled``), so the two never share a cached stage."""

    files = Benchmark._download_files("msmarco-passage/collection")
    if msmarco_passages() == "titled":
        files.update(Benchmark._download_files("rocketqa/marco"))
        files["msmarco_passages"] = "titled"
    return files


def iter_msmarco_passages(bench: str) -> Iterator[tuple[str, dict[str, str]]]:
    """MS MARCO passages, titled (RocketQA's para.title.txt joined by pid, as Tevatron reads them) or plain."""

    try:
        path = download.msmarco_collection_path()
        titles = download.rocketqa_titles_path() if msmarco_passages() == "titled" else None
    except HarnessError as exc:
        raise _download_error(bench, "the MS MARCO passage corpus (8.8M passages)", exc) from None
    passages = F.iter_msmarco_collection(path)
    return passages if titles is None else F.join_titles(passages, titles)


class MsMarcoTrain(Benchmark):
    """MS MARCO passage training data: queries.train.tsv (judged ones) and qrels.train.tsv over the
    passage corpus. It trains retrievers; it is never an evaluation set."""

    def __init__(self, decl: declared.Declaration) -> None:
        super().__init__(decl.name, decl.description)
        self.kind, self.eval_split = decl.kind, decl.eval_split

    def _read(self, split: str) -> tuple[dict[str, str], dict[str, dict[str, int]]]:
        try:
            queries_path = download.msmarco_queries_path("train")
            qrels_path = download.fetch_source("msmarco-passage/qrels-train")
        except HarnessError as exc:
            raise _download_error(self.name, "the MS MARCO training queries and qrels", exc) from None
        queries = F.read_topics_tsv(queries_path)
        qrels = F.read_trec_qrels(qrels_path, queries, queries_path.name)
        return _judged(queries, qrels), qrels

    def iter_corpus(self) -> Iterator[tuple[str, dict[str, str]]]:
        return iter_msmarco_passages(self.name)

    def files(self) -> dict[str, str]:
        return {
            **self._download_files("msmarco-passage/queries"),
            **self._download_files("msmarco-passage/qrels-train"),
            **self.corpus_files(),
        }

    def corpus_files(self) -> dict[str, str]:
        return msmarco_corpus_files()

    def sources(self) -> list[str]:
        return ["msmarco-passage/queries", "msmarco-passage/qrels-train", *msmarco_corpus_sources()]


# ------------------------------------------------------------------------------ BEIR


class BeirBenchmark(Benchmark):
    """One BEIR dataset (or one cqadupstack forum)."""

    def __init__(self, name: str, dataset: str, forum: str | None = None):
        label = f"BEIR {dataset}" + (f" / {forum}" if forum else "")
        super().__init__(name, f"{label}: test set (nDCG@10)")
        self.dataset, self.forum = dataset, forum
        self.kind = declared.get(dataset).kind  # a forum's is its archive's
        self._tag = f"{dataset}-{forum}" if forum else dataset
        self._topics_rel = f"{_TOPICS}topics.beir-v1.0.0-{self._tag}.test.tsv.gz"
        self._qrels_rel = f"{_TOPICS}qrels.beir-v1.0.0-{self._tag}.test.txt"
        # BEIR files embedded (relative to embedded/; ".gz" added by the manifest lookup), as declared
        self._beir = {} if forum else dict(declared.get(dataset).embedded)
        self._checked = False

    def splits(self) -> list[str]:
        return ["test"] if self.forum else list(declared.get(self.dataset).splits)

    # -- test split: Anserini files ------------------------------------------------------
    def _test(self) -> tuple[dict[str, str], dict[str, dict[str, int]]]:
        topics_path = embedded.path(self._topics_rel)
        topics = F.read_topics_tsv(topics_path)
        qrels = F.read_trec_qrels(embedded.path(self._qrels_rel), topics, topics_path.name)
        if not self._checked:
            self._check_against_beir(topics, qrels)
            self._checked = True
        return topics, qrels

    def _check_against_beir(self, topics: dict[str, str], qrels: dict[str, dict[str, int]]) -> None:
        """Anserini and BEIR copies of the same test set must agree exactly."""
        problems = []
        if "qrels/test" in self._beir:
            beir_qrels = F.read_beir_qrels(embedded.path(self._beir["qrels/test"]))
            if beir_qrels != qrels:
                problems.append("test qrels differ")
        if "queries" in self._beir:
            beir_q = F.read_beir_queries(embedded.path(self._beir["queries"]))
            judged = _judged(topics, qrels)
            if any(beir_q.get(qid) != text for qid, text in judged.items()):
                problems.append("test query texts differ")
        if problems:
            raise HarnessError(
                f"embedded data for '{self.name}' is inconsistent: Anserini and BEIR copies disagree "
                f"({'; '.join(problems)}); restore harness/data/embedded from the repository"
            )

    # -- other splits: BEIR files, embedded or downloaded ---------------------------------
    def _beir_dir(self) -> Path:
        try:
            root = download.beir_dataset_dir(self.dataset)
        except HarnessError as exc:
            raise _download_error(self.name, f"BEIR {self.dataset} data", exc) from None
        return root / self.forum if self.forum else root

    def _beir_file(self, key: str) -> Path:
        if key in self._beir:
            return embedded.path(self._beir[key])
        path = self._beir_dir() / (key + ".tsv" if key.startswith("qrels/") else key + ".jsonl")
        if not path.is_file():
            raise HarnessError(
                f"BEIR {self.dataset} download has no {path.name} at {path}; delete "
                f"{download.downloads_dir() / 'beir' / self.dataset} and retry"
            )
        return path

    def _other(self, split: str) -> tuple[dict[str, str], dict[str, dict[str, int]]]:
        qpath = self._beir_file("queries")
        all_queries = F.read_beir_queries(qpath)
        qrels = F.read_beir_qrels(self._beir_file(f"qrels/{split}"), all_queries, qpath.name)
        return _judged(all_queries, qrels), qrels

    def _read(self, split: str) -> tuple[dict[str, str], dict[str, dict[str, int]]]:
        if split == "test":
            topics, qrels = self._test()
            return _judged(topics, qrels), qrels
        return self._other(split)

    def has_corpus(self) -> bool:
        return "corpus" in self._beir

    def iter_corpus(self) -> Iterator[tuple[str, dict[str, str]]]:
        return F.iter_beir_corpus(self._beir_file("corpus"))

    def files(self) -> dict[str, str]:
        rels = [self._topics_rel, self._qrels_rel, *self._beir.values()]
        return {**self._embedded_files(rels), **self.corpus_files()}

    def corpus_files(self) -> dict[str, str]:
        if "corpus" in self._beir:
            return self._embedded_files([self._beir["corpus"]])
        files = self._download_files(f"beir/{self.dataset}")
        # one archive holds every cqadupstack forum: the forum says which corpus (an index is per forum)
        return {**files, "forum": self.forum} if self.forum else files

    def sources(self) -> list[str]:
        return [] if "corpus" in self._beir else [f"beir/{self.dataset}"]


class CqaDupstack(Benchmark):
    """A benchmark scored as the mean of its sub-forum scores (BEIR cqadupstack: 12; no qrels of its own)."""

    def __init__(self, decl: declared.Declaration) -> None:
        super().__init__(decl.name, decl.description)
        self.kind = decl.kind
        self._subs = [BeirBenchmark(sub, decl.name, f) for sub, f in zip(decl.forum_names, decl.forums)]

    def sub_benchmarks(self) -> list[Benchmark]:
        return list(self._subs)

    def _refuse(self, what: str) -> HarnessError:
        return HarnessError(
            f"'{self.name}' has no {what} of its own: it is scored as the mean over its "
            f"{len(self._subs)} sub-forums; evaluate each of get_benchmark('{self.name}')"
            f".sub_benchmarks() ({self._subs[0].name}, ...) and average"
        )

    def queries(self, split: str | None = None) -> dict[str, str]:
        self._split(split)
        raise self._refuse("queries")

    def qrels(self, split: str | None = None) -> dict[str, dict[str, int]]:
        self._split(split)
        raise self._refuse("qrels")

    def iter_corpus(self) -> Iterator[tuple[str, dict[str, str]]]:
        raise self._refuse("corpus")

    def files(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for sub in self._subs:  # each forum's topics and qrels; the one archive (a forum's corpus key names it)
            out.update({k: v for k, v in sub.files().items() if k != "forum"})
        return out

    def corpus_files(self) -> dict[str, str]:
        return self._download_files(f"beir/{self.name}")  # one archive holds every forum

    def sources(self) -> list[str]:
        return [f"beir/{self.name}"]


# ------------------------------------------------------------------------------ smoke subset


class SmokeSubset(Benchmark):
    """MS MARCO dl19-relevant subset: SMOKE TEST ONLY (not comparable to DL19)."""

    smoke = True
    _DIR = "msmarco-passage/dl19-relevant-subset/"

    def __init__(self, decl: declared.Declaration) -> None:
        super().__init__(decl.name, decl.description)
        self.kind = decl.kind

    def _read(self, split: str) -> tuple[dict[str, str], dict[str, dict[str, int]]]:
        qpath = embedded.path(self._DIR + "queries.jsonl")
        all_queries = F.read_beir_queries(qpath)
        qrels = F.read_beir_qrels(embedded.path(self._DIR + "qrels/test.tsv"), all_queries, qpath.name)
        return _judged(all_queries, qrels), qrels

    def has_corpus(self) -> bool:
        return True

    def iter_corpus(self) -> Iterator[tuple[str, dict[str, str]]]:
        return F.iter_beir_corpus(embedded.path(self._DIR + "corpus.jsonl"))

    def files(self) -> dict[str, str]:
        return {
            **self._embedded_files([self._DIR + f for f in ("queries.jsonl", "qrels/test.tsv")]),
            **self.corpus_files(),
        }

    def corpus_files(self) -> dict[str, str]:
        return self._embedded_files([self._DIR + "corpus.jsonl"])


# ------------------------------------------------------------------------------ a user's own


class LocalBenchmark(Benchmark):
    """A benchmark declared in a folder of one's own (docs/adding-a-benchmark.md): its topics (TSV ``qid
    <TAB> text``), TREC qrels and BEIR-style corpus.jsonl lie beside the declaration, named in it."""

    def __init__(self, decl: declared.Declaration) -> None:
        super().__init__(decl.name, decl.description)
        self.kind, self.eval_split = decl.kind, decl.eval_split
        self._split_aliases = dict(decl.split_aliases)
        folder = decl.folder or Path.cwd()
        self._topics, self._qrels = folder / str(decl.topics), folder / str(decl.qrels)
        self._corpus = folder / str(decl.corpus_file or "corpus.jsonl")

    def _read(self, split: str) -> tuple[dict[str, str], dict[str, dict[str, int]]]:
        topics = F.read_topics_tsv(self._topics)
        qrels = F.read_trec_qrels(self._qrels, topics, self._topics.name)
        return _judged(topics, qrels), qrels

    def has_corpus(self) -> bool:
        return self._corpus.is_file()

    def iter_corpus(self) -> Iterator[tuple[str, dict[str, str]]]:
        return F.iter_beir_corpus(self._corpus)

    def _local(self, paths: list[Path]) -> dict[str, str]:
        return {f"local/{self.name}/{p.name}": embedded.sha256_file(p) for p in paths}

    def files(self) -> dict[str, str]:
        return {**self._local([self._topics, self._qrels]), **self.corpus_files()}

    def corpus_files(self) -> dict[str, str]:
        return self._local([self._corpus])


# ------------------------------------------------------------------------------ pre-training corpora


class PretrainCorpus(Benchmark):
    """A corpus a paper profile pre-trains on: documents only (no queries, no qrels), downloaded
    on first use (``HARNESS_DATA_MIRROR`` points at a local copy)."""

    kind = "corpus"

    def __init__(
        self,
        name: str,
        source: str,
        reader: Callable[[Path], Iterator[tuple[str, dict[str, str]]]],
        description: str,
        fetch: Callable[[], Path] | None = None,
    ):
        super().__init__(name, description)
        self._source, self._reader = source, reader
        self._fetch = fetch or (lambda: download.fetch_source(source))

    def splits(self) -> list[str]:
        return []

    def _read(self, split: str) -> tuple[dict[str, str], dict[str, dict[str, int]]]:
        raise HarnessError(f"'{self.name}' is a pre-training corpus: it has no queries or qrels to evaluate on")

    def _loaded(self, split: str | None) -> tuple[dict[str, str], dict[str, dict[str, int]]]:
        return self._read(split or "")

    def iter_corpus(self) -> Iterator[tuple[str, dict[str, str]]]:
        try:
            path = self._fetch()
        except HarnessError as exc:
            raise _download_error(self.name, self.description, exc) from None
        return self._reader(path)

    def files(self) -> dict[str, str]:
        return self.corpus_files()

    def sources(self) -> list[str]:
        return [self._source]

    def corpus_files(self) -> dict[str, str]:
        return self._download_files(self._source)


def _iter_msmarco_docs(path: Path) -> Iterator[tuple[str, dict[str, str]]]:
    """msmarco-docs.tsv(.gz): ``docid <TAB> url <TAB> title <TAB> body`` per line."""

    with gzip.open(path, "rt", encoding="utf-8") if path.suffix == ".gz" else open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 4:
                raise HarnessError(
                    f"{path}:{n}: expected 4 tab-separated fields (docid, url, title, body), got {len(parts)}"
                )
            yield parts[0], {"title": parts[2], "text": parts[3]}


def _iter_dpr_wikipedia(path: Path) -> Iterator[tuple[str, dict[str, str]]]:
    """psgs_w100.tsv(.gz): a header ``id text title``, then one 100-word passage per line."""

    with gzip.open(path, "rt", encoding="utf-8") if path.suffix == ".gz" else open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            parts = line.rstrip("\n").split("\t")
            if n == 1 and parts[:1] == ["id"]:
                continue
            if len(parts) != 3:
                raise HarnessError(f"{path}:{n}: expected 3 tab-separated fields (id, text, title), got {len(parts)}")
            yield parts[0], {"title": parts[2], "text": parts[1]}


PRETRAIN_CORPORA: dict[str, Callable[[], Benchmark]] = {
    "msmarco-passage": lambda: PretrainCorpus(
        "msmarco-passage",
        "msmarco-passage/collection",
        F.iter_msmarco_collection,
        "MS MARCO passage collection (8.8M passages; LexMAE pre-training)",
        fetch=download.msmarco_collection_path,
    ),
    "msmarco-passage-docs": lambda: PretrainCorpus(
        "msmarco-passage-docs",
        "msmarco-docs",
        _iter_msmarco_docs,
        "MS MARCO documents (3.2M), split into passages for span pairs (coCondenser, CoT-MAE)",
    ),
    "wikipedia": lambda: PretrainCorpus(
        "wikipedia",
        "wikipedia-dpr",
        _iter_dpr_wikipedia,
        "English Wikipedia, DPR's 21M 100-word passages (CPDAE pre-training)",
    ),
}


# ------------------------------------------------------------------------------ registry

# How each declared ``reader`` builds its benchmark (BEIR: its dataset is its own name).
_READERS: dict[str, Callable[[declared.Declaration], Benchmark]] = {
    "trec": TrecBenchmark,
    "msmarco-train": MsMarcoTrain,
    "forums": CqaDupstack,
    "smoke": SmokeSubset,
    "beir": lambda d: BeirBenchmark(d.name, d.name),
    "local": LocalBenchmark,
}


def _factories(decls: dict[str, declared.Declaration]) -> dict[str, Callable[[], Benchmark]]:
    """Each declaration's factory; the forums of a benchmark scored over forums follow the last benchmark
    of its kind (the catalog lists cqadupstack's 12 after the 14 BEIR sets)."""
    last_of_kind = {d.kind: name for name, d in decls.items()}
    forums: dict[str, dict[str, Callable[[], Benchmark]]] = {}
    for name, decl in decls.items():
        for sub, forum in zip(decl.forum_names, decl.forums):
            forums.setdefault(decl.kind, {})[sub] = functools.partial(BeirBenchmark, sub, name, forum)
    reg: dict[str, Callable[[], Benchmark]] = {}
    for name, decl in decls.items():
        reg[name] = functools.partial(_READERS[decl.reader], decl)
        if last_of_kind[decl.kind] == name:
            reg.update(forums.get(decl.kind, {}))
    return reg


def _registry() -> tuple[dict[str, Callable[[], Benchmark]], tuple[str, ...]]:
    """Every catalog name with its factory, and the names the papers' results tables report, in the
    order they print them (MS MARCO dev, TREC DL 2019 / 2020, the 14 BEIR sets): not the training
    set, the cqadupstack forums (reported as their mean), the smoke subset or the corpora."""
    reg = _factories(declared.declarations(include_user=False))
    reg.update(PRETRAIN_CORPORA)
    return reg, declared.reported()


_REGISTRY, REPORTED = _registry()


def _user_registry() -> dict[str, Callable[[], Benchmark]]:
    """The benchmarks declared in the user's folder (``benchmarks/`` beside the specs), read when asked."""
    builtin = declared.declarations(include_user=False)
    return {
        name: functools.partial(_READERS[d.reader], d)
        for name, d in declared.declarations().items()
        if name not in builtin
    }


@dataclass(frozen=True)
class Aggregate:
    """A mean a paper prints over several benchmarks: a name a reported cell may carry, never a
    benchmark to run (the leaderboard recomputes it where a column has every member)."""

    name: str
    members: tuple[str, ...]
    label: str  # how a table names the mean: "average (<label>, computed)"


# The averages the papers print, after the benchmarks in their tables.
AGGREGATES: dict[str, Aggregate] = {
    name: Aggregate(name, members, label) for name, members, label in declared.aggregates()
}


def reported_benchmarks() -> list[str]:
    """Every name a reported cell's ``benchmark`` may hold: the benchmarks the papers' tables report,
    then the averages they print."""
    return [*REPORTED, *AGGREGATES]


def benchmark_split(value: str) -> tuple[str, str]:
    """``<benchmark>-<split>`` (nfcorpus-train) -> (benchmark, split); a benchmark's name may hold
    dashes itself, and a training set named alone (msmarco-passage-train) means its train split."""
    known = {**_REGISTRY, **_user_registry()}
    if value in known:
        return value, "train"
    name, _, split = value.rpartition("-")
    if name in known:
        return name, split
    name, _, split = value.partition("-")
    return name, split or "train"


def list_benchmarks() -> list[str]:
    """All catalog names: msmarco-dev, dl19, dl20, the 14 BEIR sets, the 12 cqadupstack forums,
    the smoke subset and the paper profiles' pre-training corpora (kind ``corpus``), then any declared in
    the user's folder (``benchmarks/`` beside the specs)."""
    return [*_REGISTRY, *(n for n in _user_registry() if n not in _REGISTRY)]


@functools.cache
def get_benchmark(name: str) -> Benchmark:
    """The benchmark called ``name`` (UnknownNameError with suggestions otherwise); ``<name>@sample``
    is a seeded rehearsal sample of it (:mod:`harness.data.sampled`)."""

    registry = {**_REGISTRY, **_user_registry()}
    if name.endswith(sampled.SUFFIX) and sampled.base_name(name) in registry:
        return sampled.SampledBenchmark(get_benchmark(sampled.base_name(name)))
    if name not in registry and declared.user_problems():
        raise declared.user_problems()[0]  # the name may be one a bad user file declares
    if name not in registry:
        raise UnknownNameError("benchmark", name, list(registry))
    return registry[name]()
