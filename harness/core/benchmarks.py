"""The benchmark declarations (``benchmarks.yaml`` beside this module), loaded once, as frozen records.

Every fact about a benchmark (its kind and margin family, query and corpus counts, splits, measures,
files and checksums, the papers' tables that print it) is declared there once; the catalog, the
conventions, downloads, noise, margins, power, projection, rehearsal and the leaderboard read it here
instead of naming benchmarks. A folder of one's own adds declarations without editing the package:
``benchmarks/*.yaml`` beside the user's specs (``HARNESS_SPECS_DIR``), their data files beside them
(docs/adding-a-benchmark.md). In core so every layer may ask; it reads only YAML and core/paths.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from harness.core import yamlsafe
from harness.core.errors import DataFormatError, UnknownNameError
from harness.core.paths import specs_dir

DECLARATIONS_FILE = Path(__file__).with_name("benchmarks.yaml")
USER_FOLDER = "benchmarks"  # beside the user's specs: one YAML file of declarations each
SAMPLE_MARK = "@"  # <name>@sample: a rehearsal sample of a benchmark (harness.data.sampled)
READERS = ("trec", "beir", "forums", "msmarco-train", "smoke", "local")
_KEYS = {
    "name",
    "title",
    "kind",
    "reader",
    "description",
    "eval_split",
    "splits",
    "split_aliases",
    "queries",
    "passages",
    "corpus",
    "corpus_file",
    "topics",
    "qrels",
    "embedded",
    "download",
    "forums",
    "note",
    "extra",
    "in_tables",
    "papers",
    "printed",
    "columns",
    "terms",
    "margin_family",
    "smoke",
}


@dataclass(frozen=True)
class Family:
    """How a kind of benchmark is scored: its measures (primary first) and BEIR's self-hit rule."""

    name: str
    measures: tuple[str, ...]
    primary: str
    drop_self_hits: bool = False
    spelled: dict[str, str] = field(default_factory=dict)  # a measure as the papers print it (RR@10: MRR@10)


@dataclass(frozen=True)
class Declaration:
    """One benchmark, as declared (see the header of benchmarks.yaml for each field)."""

    name: str
    kind: str
    reader: str
    title: str = ""  # as the papers print it (MS MARCO dev, TREC-COVID); empty: the name
    description: str = ""
    eval_split: str = "test"
    splits: tuple[str, ...] = ()
    split_aliases: dict[str, str] = field(default_factory=dict)
    queries: int | None = None  # judged evaluation queries
    passages: int | None = None  # corpus size (None: not declared)
    corpus: str | None = None  # a shared corpus (msmarco-passage) instead of one of its own
    corpus_file: str | None = None  # a user's declaration: its corpus.jsonl, beside the declaration
    topics: str | None = None
    qrels: str | None = None
    embedded: dict[str, str] = field(default_factory=dict)
    download_md5: str | None = None
    download_sha256: str | None = None
    forums: tuple[str, ...] = ()
    note: str = ""
    extra: dict[str, str] = field(default_factory=dict)
    in_tables: bool = False
    papers: tuple[str, ...] = ()  # the papers whose tables print it (baselines/reported/ keys)
    printed: tuple[str, ...] = ()
    columns: dict[str, str] = field(default_factory=dict)
    terms: str = ""
    margin_family: str = ""
    smoke: bool = False
    folder: Path | None = None  # a user's declaration: where its files (topics, qrels, corpus) lie

    @property
    def forum_names(self) -> tuple[str, ...]:
        """The benchmarks its score averages (``cqadupstack-android``, ...)."""
        return tuple(f"{self.name}-{forum}" for forum in self.forums)

    def corpus_passages(self) -> int | None:
        """Its corpus's size: its own, or the shared corpus's it is judged over."""
        return corpus_passages(self.corpus) if self.corpus else self.passages


def _declaration(entry: Any, where: Path, folder: Path | None, families: dict[str, Family]) -> Declaration:
    if not isinstance(entry, dict) or not entry.get("name") or not entry.get("kind"):
        raise DataFormatError(
            where,
            None,
            f"a benchmark needs a name and a kind, got {entry!r}",
            "write - {name: <name>, kind: <family>, reader: <reader>, ...}",
        )
    name = str(entry["name"])
    unknown = set(entry) - _KEYS
    if unknown:
        raise DataFormatError(
            where,
            None,
            f"benchmark '{name}': unknown field(s) {', '.join(sorted(unknown))}",
            f"the fields are {', '.join(sorted(_KEYS))}",
        )
    reader = str(entry.get("reader") or "")
    if reader not in READERS:
        raise DataFormatError(where, None, f"benchmark '{name}': reader '{reader}' is not one of {', '.join(READERS)}")
    margin_family = str(entry.get("margin_family") or entry["kind"])
    if margin_family not in families:
        raise DataFormatError(
            where,
            None,
            f"benchmark '{name}': margin family '{margin_family}' is not declared",
            f"one of {', '.join(families)} (benchmarks.yaml families), or margin_family: <one>",
        )
    eval_split = str(entry.get("eval_split") or "test")
    download = entry.get("download") or {}
    return Declaration(
        name=name,
        kind=str(entry["kind"]),
        reader=reader,
        title=str(entry.get("title") or ""),
        description=str(entry.get("description") or ""),
        eval_split=eval_split,
        splits=tuple(entry.get("splits") or [eval_split]),
        split_aliases=dict(entry.get("split_aliases") or {}),
        queries=entry.get("queries"),
        passages=entry.get("passages"),
        corpus=entry.get("corpus"),
        corpus_file=entry.get("corpus_file"),
        topics=entry.get("topics"),
        qrels=entry.get("qrels"),
        embedded=dict(entry.get("embedded") or {}),
        download_md5=download.get("md5"),
        download_sha256=download.get("sha256"),
        forums=tuple(entry.get("forums") or ()),
        note=str(entry.get("note") or ""),
        extra=dict(entry.get("extra") or {}),
        in_tables=bool(entry.get("in_tables")),
        papers=tuple(entry.get("papers") or ()),
        printed=tuple(entry.get("printed") or ()),
        columns=dict(entry.get("columns") or {}),
        terms=str(entry.get("terms") or ""),
        margin_family=margin_family,
        smoke=bool(entry.get("smoke")),
        folder=folder,
    )


@functools.lru_cache(maxsize=1)
def _package() -> dict[str, Any]:
    data = yamlsafe.load(DECLARATIONS_FILE.read_text(encoding="utf-8"))
    families = {
        name: Family(
            name, tuple(f["measures"]), str(f["primary"]), bool(f.get("drop_self_hits")), dict(f.get("spelled") or {})
        )
        for name, f in data["families"].items()
    }
    return {
        **data,
        "families": families,
        "benchmarks": {
            d.name: d for d in (_declaration(e, DECLARATIONS_FILE, None, families) for e in data["benchmarks"])
        },
    }


_USER_SHAPES: dict[str, type] = {
    **dict.fromkeys(("reader", "title", "description", "eval_split", "corpus", "note", "terms", "margin_family"), str),
    **dict.fromkeys(("splits", "forums", "papers", "printed"), list),
    **dict.fromkeys(("split_aliases", "embedded", "extra", "columns", "download"), dict),
}
PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")  # a run tag and an artifact path take it as is
COUNT_MAX = 10**10  # queries or passages: ~1,000x MS MARCO's corpus


@dataclass(frozen=True)
class UserDeclarations:
    """The user folder's declarations, and one error per file that could not be used (skipped)."""

    benchmarks: dict[str, Declaration]
    problems: tuple[DataFormatError, ...]


def _user_file_path(where: Path, name: str, key: str, value: Any, required: bool) -> None:
    """``value``: a file name inside the declaration's folder, a regular file (when there or required)."""
    fix = f"name a file beside {where.name}, e.g. {key}: {name}-{key}.txt"
    if not isinstance(value, str) or not value.strip():
        if required or value is not None:
            raise DataFormatError(where, None, f"benchmark '{name}': {key} must be a file name, got {value!r}", fix)
        return
    folder = where.parent.resolve()
    target = (folder / value).resolve()
    if Path(value).is_absolute() or not target.is_relative_to(folder):
        raise DataFormatError(where, None, f"benchmark '{name}': {key} {value!r} lies outside {folder}", fix)
    if (required or target.exists()) and not target.is_file():
        raise DataFormatError(where, None, f"benchmark '{name}': {key} {value!r} is not a regular file there", fix)


def _check_user_entry(entry: Any, where: Path, families: dict[str, Family]) -> None:
    """What a user's declaration must hold beyond the package's (which the project reviews): a plain
    name, its files inside its folder, sane counts, a declared family and its measures."""
    if not isinstance(entry, dict):
        return  # _declaration names the problem
    name = entry.get("name")
    if not isinstance(name, str) or not PLAIN_NAME.fullmatch(name):
        raise DataFormatError(
            where,
            None,
            f"benchmark name {name!r} is not a plain name",
            "use letters, digits, '.', '_' and '-' (at most 64, not starting with '.' or '-')",
        )
    kind = entry.get("kind")
    if kind not in families:
        raise DataFormatError(
            where, None, f"benchmark '{name}': kind {kind!r} is not a declared family", f"one of {', '.join(families)}"
        )
    for key in ("queries", "passages"):
        value = entry.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= COUNT_MAX):
            raise DataFormatError(
                where,
                None,
                f"benchmark '{name}': {key} must be a whole number in [1, {COUNT_MAX:,}], got {value!r}",
                f"{key}: <count>, or leave it out",
            )
    for key, want in _USER_SHAPES.items():  # each field's type, so building the declaration cannot raise
        value = entry.get(key)
        names = not isinstance(value, list) or all(isinstance(v, (str, int)) for v in value)
        if value is not None and not (isinstance(value, want) and names):
            kind_name = {"str": "text", "list": "a list of names", "dict": "a mapping"}[want.__name__]
            raise DataFormatError(
                where,
                None,
                f"benchmark '{name}': {key} must be {kind_name}, got {value!r}",
                f"write {key} as {kind_name}",
            )
    printed = entry.get("printed") or []
    measures = families[kind].measures
    if not isinstance(printed, list) or any(m not in measures for m in printed):
        raise DataFormatError(
            where,
            None,
            f"benchmark '{name}': printed {printed!r} holds a measure {kind} does not score",
            f"a list of {', '.join(measures)}",
        )
    _user_file_path(where, name, "topics", entry.get("topics"), True)
    _user_file_path(where, name, "qrels", entry.get("qrels"), True)
    _user_file_path(where, name, "corpus_file", entry.get("corpus_file"), False)


def _user_file(path: Path, taken: set[str]) -> dict[str, Declaration]:
    """One user file's declarations; DataFormatError (naming the file and the key) on the first problem."""
    try:
        data = yamlsafe.load(path.read_text(encoding="utf-8")) or {}  # a user's file: aliases, depth, size bounded
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        fix = exc.FIX if isinstance(exc, yamlsafe.BoundError) else "fix the YAML there"
        raise DataFormatError(
            path, mark.line + 1 if mark else None, f"invalid YAML: {getattr(exc, 'problem', exc)}", fix
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DataFormatError(path, None, f"cannot be read ({exc})", "save it as a UTF-8 YAML file") from None
    entries = data.get("benchmarks") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise DataFormatError(path, 1, "not a list of declarations", "write benchmarks: [{name: ..., kind: ...}]")
    families = _package()["families"]
    out: dict[str, Declaration] = {}
    for entry in entries:
        name = entry.get("name") if isinstance(entry, dict) else None
        if isinstance(name, str) and (name in taken or name in out):  # before its files: the likelier mistake
            raise DataFormatError(
                path, None, f"benchmark '{name}' is declared already", "give the new benchmark a name of its own"
            )
        _check_user_entry(entry, path, families)
        decl = _declaration(entry, path, path.parent, families)
        out[decl.name] = decl
    return out


@functools.lru_cache(maxsize=8)
def _user(folder: str) -> UserDeclarations:
    """The declarations in ``<folder>/*.yaml`` (``{benchmarks: [...]}``); file paths in them are relative
    to it. A bad file is skipped and kept as a problem: commands that never read it still work (even
    ``--help`` lists the benchmarks), and a lookup of a name nothing declares raises it (user_problems)."""
    out: dict[str, Declaration] = {}
    problems: list[DataFormatError] = []
    for path in sorted(Path(folder).glob("*.yaml")):
        try:
            out.update(_user_file(path, set(_package()["benchmarks"]) | set(out)))
        except DataFormatError as exc:
            problems.append(exc)
    return UserDeclarations(out, tuple(problems))


def _user_folder() -> Path | None:
    folder = specs_dir() / USER_FOLDER
    return folder.resolve() if folder.is_dir() else None


def declarations(include_user: bool = True) -> dict[str, Declaration]:
    """Every declared benchmark by name: the package's (in the papers' order), then the user folder's
    (its usable files only: :func:`user_problems` holds the others)."""
    builtin = _package()["benchmarks"]
    folder = _user_folder()
    if not include_user or folder is None:
        return dict(builtin)
    return {**builtin, **_user(str(folder)).benchmarks}


def user_problems() -> tuple[DataFormatError, ...]:
    """One error per file of the user folder that could not be used: a name nothing declares may be
    one of theirs, so a lookup that misses raises the first of these instead of 'unknown benchmark'."""
    folder = _user_folder()
    return () if folder is None else _user(str(folder)).problems


def families() -> dict[str, Family]:
    return dict(_package()["families"])


def find(name: str) -> Declaration | None:
    """The declaration of ``name`` (a benchmark, not a forum or sample), or None."""
    return declarations().get(name)


def get(name: str) -> Declaration:
    """The declaration of ``name``; UnknownNameError (with suggestions) when nothing declares it."""
    decl = find(name)
    if decl is None and user_problems():
        raise user_problems()[0]
    if decl is None:
        raise UnknownNameError("benchmark (harness/core/benchmarks.yaml)", name, list(declarations()))
    return decl


def family(name: str) -> Family:
    """How a benchmark of kind ``name`` is scored."""
    fams = _package()["families"]
    if name not in fams:
        raise UnknownNameError("benchmark family", name, list(fams))
    return fams[name]


def of_kind(kind: str, include_user: bool = False) -> tuple[str, ...]:
    """The benchmarks of ``kind``, in declaration order (``beir``: the BEIR paper's order)."""
    return tuple(n for n, d in declarations(include_user).items() if d.kind == kind)


def beir() -> tuple[str, ...]:
    """The 14 public BEIR datasets, in the BEIR paper's order."""
    return of_kind("beir")


def reported() -> tuple[str, ...]:
    """The benchmarks the papers' results tables report, in the order they print them."""
    return tuple(n for n, d in declarations(False).items() if d.in_tables)


def on_corpus(corpus: str) -> tuple[str, ...]:
    """The evaluation benchmarks judged over a shared corpus (``msmarco-passage``): not the training set."""
    return tuple(
        n for n, d in declarations(False).items() if d.corpus == corpus and d.eval_split != "train" and not d.smoke
    )


def with_embedded_corpus(kind: str) -> tuple[str, ...]:
    """The benchmarks of ``kind`` whose corpus is embedded (available offline), in declaration order."""
    return tuple(n for n, d in declarations(False).items() if d.kind == kind and "corpus" in d.embedded)


def smoke_name() -> str:
    (name,) = (n for n, d in declarations(False).items() if d.smoke)
    return name


def training_set(corpus: str) -> str:
    """The training set over a shared corpus (the MS MARCO passage training queries)."""
    (name,) = (n for n, d in declarations(False).items() if d.corpus == corpus and d.eval_split == "train")
    return name


def corpus_passages(corpus: str) -> int:
    return int(_package()["corpora"][corpus])


def shared_corpora() -> tuple[str, ...]:
    return tuple(_package()["corpora"])


def headline() -> tuple[str, str]:
    """The benchmark and measure a paper's efficiency numbers pair with."""
    h = _package()["headline"]
    return str(h["benchmark"]), str(h["measure"])


def ci_bm25() -> tuple[str, ...]:
    """The sets CI re-runs BM25 on against the papers' numbers."""
    return tuple(_package()["ci_bm25"])


def aggregates() -> tuple[tuple[str, tuple[str, ...], str], ...]:
    """(name, members, label) of each average the papers print."""
    out = []
    for a in _package()["aggregates"]:
        leave_out = set(a.get("leave_out") or ())
        out.append((str(a["name"]), tuple(n for n in of_kind(a["kind"]) if n not in leave_out), str(a["label"])))
    return tuple(out)


def papers_printing() -> dict[str, tuple[str, ...]]:
    """``{benchmark or printed average: the papers whose tables print it}``, as declared."""
    out = {n: d.papers for n, d in declarations(False).items() if d.papers}
    return {**out, **{str(a["name"]): tuple(a.get("papers") or ()) for a in _package()["aggregates"]}}


def forum_parent(name: str) -> str | None:
    """The benchmark whose score averages forum ``name`` (``cqadupstack-android`` -> ``cqadupstack``)."""
    for decl in declarations().values():
        if decl.forums and name in decl.forum_names:
            return decl.name
    return None


def beir_forums() -> tuple[str, ...]:
    """The forums of the BEIR benchmark scored over forums (cqadupstack's 12), in declared order."""
    return next(get(n).forums for n in beir() if get(n).forums)


def averaged_over_forums() -> tuple[str, ...]:
    """The benchmarks scored as the mean of their forums' means, not of their queries."""
    return tuple(n for n, d in declarations().items() if d.forums)


def base_name(name: str) -> str:
    """The declared benchmark a name stands for: a rehearsal sample is its full benchmark, a forum its parent."""
    base = name.split(SAMPLE_MARK, 1)[0]
    return forum_parent(base) or base


def printed_name(name: str) -> str:
    """``name`` as the papers print it: its declared title (``msmarco-dev`` -> ``MS MARCO dev``), a forum
    its benchmark's title and the forum (``CQADupStack android``), a rehearsal sample its benchmark's
    (``MS MARCO dev sample``), a printed average its label (``BEIR average 14``); any other name (a
    fixture) as it is."""
    base, mark, rest = name.partition(SAMPLE_MARK)
    if mark:
        return f"{printed_name(base)} {rest}"
    decl = find(name)
    if decl is not None:
        return decl.title or decl.name
    parent = forum_parent(name)
    if parent is not None:
        return f"{printed_name(parent)} {name[len(parent) + 1 :]}"
    labels = {str(a["name"]): str(a["label"]) for a in _package()["aggregates"]}
    return f"BEIR average {labels[name]}" if name in labels else name


def printed_measure(name: str, measure: str) -> str:
    """``measure`` on benchmark ``name`` as its papers print it (MS MARCO's ``RR@10`` is ``MRR@10``,
    ``R@1000`` is ``R@1k``); undeclared names and measures as they are."""
    decl = find(base_name(name))
    fams = _package()["families"]
    fam = fams.get(decl.kind) if decl is not None else None
    return fam.spelled.get(measure, measure) if fam is not None else measure


def margin_family(name: str) -> str:
    """The margin family (msmarco | trec-dl | beir) of ``name`` (a sample or forum: its benchmark's; a printed
    average: its members' kind), as declared; an undeclared name raises rather than borrowing another family's."""
    base = base_name(name)
    kinds = {str(a["name"]): str(a["kind"]) for a in _package()["aggregates"]}
    return kinds[base] if base in kinds else get(base).margin_family
