"""Checksummed, cached downloads of the corpora that are too large to embed.

:func:`fetch` downloads one URL (``http(s)://`` or ``file://``) into a folder: it streams
into ``<name>.<pid>.part`` with a tqdm progress bar, verifies the md5/sha256 it was given,
removes a file that does not match, and renames the good file into place atomically.
A file already present and verified is not downloaded again (its verified size and
hashes are kept in ``<name>.verified.json``; its content is checked against them on each
reuse, never its mtime alone). Nothing here runs at import time.

:data:`SOURCES` registers the real upstream files. The base URL of every source can be
replaced by ``HARNESS_DATA_MIRROR`` (a URL or a local folder holding the same file
names flat: ``scifact.zip``, ``collection.tar.gz``, ...); checksums still apply.
Downloads go to ``harness.core.paths.cache_dir()/downloads``.
"""

from __future__ import annotations

import fcntl
import hashlib
import http.client
import json
import os
import shutil
import tarfile
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from harness.core import benchmarks as declared
from harness.core.digests import SAMPLED_ABOVE, sampled_digest
from harness.core.errors import HarnessError
from harness.core.fsutil import atomic_dir
from harness.core.paths import cache_dir
from harness.data.structure import CHECKS, StructureError

MIRROR_ENV = "HARNESS_DATA_MIRROR"
BEIR_BASE_URL = "https://public.ukp.informatik.tu-darmstadt.de/thakur/BEIR/datasets"
MSMARCO_BASE_URL = "https://msmarco.z22.web.core.windows.net/msmarcoranking"
_CHUNK = 1 << 20
_TIMEOUT_S = 60


@dataclass(frozen=True)
class Source:
    """One upstream file: where it lives and the checksum its publisher gives."""

    name: str
    base_url: str
    filename: str
    md5: str | None = None
    sha256: str | None = None
    note: str = ""
    # Without a published checksum: the harness.data.structure check the file must pass before it
    # is marked verified (intact archive, the publisher's columns and line count).
    structure: str | None = None
    size: int | None = None  # bytes, as its publisher states them (None: no size published)

    def url(self) -> str:
        """Upstream URL, or the same file name under ``HARNESS_DATA_MIRROR`` when set."""
        mirror = os.environ.get(MIRROR_ENV, "").strip()
        return f"{_mirror_base(mirror)}/{self.filename}" if mirror else f"{self.base_url}/{self.filename}"

    def expected(self) -> tuple[str | None, str | None]:
        """(md5, sha256) the download is verified against: the publisher's, or a fixture mirror's own."""
        fixture = fixture_checksums()
        if fixture is not None:
            if self.filename not in fixture:
                raise HarnessError(
                    f"the fixture mirror {os.environ.get(MIRROR_ENV)} has no {self.filename} "
                    f"(its {FIXTURE_MANIFEST} lists {', '.join(sorted(fixture))})"
                )
            return None, fixture[self.filename]
        return self.md5, self.sha256

    def fetch_command(self) -> str:
        """The command that downloads (and verifies) this file ahead of a run."""
        return f"python -m harness fetch {self.name}"


# A mirror folder holding this file is a test fixture: small files in the upstream formats whose
# sha256 it lists. Their checksums replace the publisher's, they are downloaded into a folder of
# their own (never mixed with real downloads), and run records name them "fixture-sha256:...".
FIXTURE_MANIFEST = "FIXTURE.json"


def fixture_checksums() -> dict[str, str] | None:
    """``{file name: sha256}`` when ``HARNESS_DATA_MIRROR`` is a local fixture folder, else None."""
    mirror = os.environ.get(MIRROR_ENV, "").strip()
    if not mirror or "://" in mirror:
        return None
    manifest = Path(mirror).expanduser() / FIXTURE_MANIFEST
    if not manifest.is_file():
        return None
    try:
        files = json.loads(manifest.read_text())["files"]
        return {name: str(entry["sha256"]) for name, entry in files.items()}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise HarnessError(f"{manifest}: not a fixture manifest ({exc}); restore it from the repository") from None


# BEIR's zips: each declared BEIR benchmark's md5 (and sha256 where checked), as harness/core/benchmarks.yaml
# declares them (BEIR README dataset table), after BEIR's own MS MARCO zip (no benchmark of the harness).
_BEIR_MSMARCO_MD5 = "444067daf65d982533ea17ebd59501e4"

SOURCES: dict[str, Source] = {
    "beir/msmarco": Source("beir/msmarco", BEIR_BASE_URL, "msmarco.zip", md5=_BEIR_MSMARCO_MD5)
}
SOURCES.update(
    {
        f"beir/{d.name}": Source(
            f"beir/{d.name}", BEIR_BASE_URL, f"{d.name}.zip", md5=d.download_md5, sha256=d.download_sha256
        )
        for d in declared.declarations(include_user=False).values()
        if d.download_md5
    }
)
# md5 from the MS MARCO passage-ranking download table (also pinned by ir_datasets and by the
# docTTTTTquery / duoBERT data tables); 1,035,010,048 bytes, holds collection.tsv (8,841,823 lines).
SOURCES["msmarco-passage/collection"] = Source(
    "msmarco-passage/collection",
    MSMARCO_BASE_URL,
    "collection.tar.gz",
    md5="87dd01826da3e2ad45447ba5af577628",
    size=1_035_010_048,
)
# Pre-training corpora of the paper profiles. Their publishers give no checksum that could be
# checked here, so they are unpinned: the first download's sha256 is recorded beside the file and
# every later use is checked against it (and named in run records).
SOURCES["msmarco-docs"] = Source(
    "msmarco-docs",
    MSMARCO_BASE_URL,
    "msmarco-docs.tsv.gz",
    structure="msmarco-docs",
    note="MS MARCO document collection (3.2M documents: docid, url, title, body); coCondenser / CoT-MAE span pairs",
)
SOURCES["wikipedia-dpr"] = Source(
    "wikipedia-dpr",
    "https://dl.fbaipublicfiles.com/dpr/wikipedia_split",
    "psgs_w100.tsv.gz",
    structure="wikipedia-dpr",
    note="DPR's English Wikipedia (Dec. 2018) in 21M passages of 100 words (id, text, title); CPDAE pre-training",
)


# MS MARCO passage training data (the fine-tuning of every paper profile). md5s from the MS MARCO
# passage-ranking download table, also pinned by ir_datasets (msmarco-passage train queries, train
# qrels, train docpairs v2).
SOURCES["msmarco-passage/queries"] = Source(
    "msmarco-passage/queries",
    MSMARCO_BASE_URL,
    "queries.tar.gz",
    md5="c177b2795d5f2dcc524cf00fcd973be1",
    note="MS MARCO passage queries (queries.train.tsv: 808,731; dev; eval); 18,882,551 bytes",
    size=18_882_551,
)
SOURCES["msmarco-passage/qrels-train"] = Source(
    "msmarco-passage/qrels-train",
    MSMARCO_BASE_URL,
    "qrels.train.tsv",
    md5="733fb9fe12d93e497f7289409316eccf",
    note="MS MARCO passage training judgements (532,761 over 502,939 queries); 10,589,532 bytes",
    size=10_589_532,
)
SOURCES["msmarco-passage/triples"] = Source(
    "msmarco-passage/triples",
    MSMARCO_BASE_URL,
    "qidpidtriples.train.full.2.tsv.gz",
    md5="219083e80a0a751c08b968c2f31a4e0b",
    note="the official BM25 training triples (qid, positive pid, negative pid; 397,768,673 lines); "
    "coCondenser's and Tevatron's MS MARCO recipe takes each query's negatives from them",
)
# Published without a checksum: unpinned (the first download's sha256 is recorded and named in records).
SOURCES["rocketqa/marco"] = Source(
    "rocketqa/marco",
    "https://rocketqa.bj.bcebos.com/corpus",
    "marco.tar.gz",
    structure="rocketqa-marco",
    note="RocketQA's MS MARCO release; marco/para.title.txt (pid, title) gives the titles Tevatron's "
    "coCondenser / CoT-MAE fine-tuning joins to the passages (texttron/tevatron#106)",
)
# QC v2's BEIR fine-tuning (§3.2, footnote 2), BEIR's train_msmarco_v3.py: published without a checksum
# or a size, so unpinned like the files above (the first download's sha256 is recorded and named in records).
SOURCES["sbert/msmarco-hard-negatives"] = Source(
    "sbert/msmarco-hard-negatives",
    "https://sbert.net/datasets",
    "msmarco-hard-negatives.jsonl.gz",
    structure="sbert-hard-negatives",
    note="sentence-transformers' MS MARCO hard negatives (qid, pos, neg: 50 passages from each of bm25 and 12 "
    "dense systems, with cross-encoder scores); the training set of Thakur et al.'s BEIR bi-encoders",
)
SOURCES["tevatron/msmarco-passage"] = Source(
    "tevatron/msmarco-passage",
    "https://huggingface.co/datasets/Tevatron/msmarco-passage/resolve/main",
    "train.jsonl.gz",
    structure="tevatron-train",
    note="Tevatron's self-contained MS MARCO training set (query, positives, BM25 negatives with titles); "
    "known to lack ~100k of the training queries (texttron/tevatron#81)",
)


def downloads_dir() -> Path:
    """Where downloads and their extracted folders live (a fixture mirror's in a folder of its own)."""
    return cache_dir() / ("downloads-fixture" if fixture_checksums() is not None else "downloads")


def _mirror_base(mirror: str) -> str:
    if "://" not in mirror:  # a local folder
        return Path(mirror).expanduser().resolve().as_uri()
    return mirror.rstrip("/")


# ---------------------------------------------------------------------------- fetch


def _hashes(path: Path) -> tuple[str, str]:
    md5, sha = hashlib.md5(usedforsecurity=False), hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(_CHUNK), b""):
            md5.update(block)
            sha.update(block)
    return md5.hexdigest(), sha.hexdigest()


def _sidecar(path: Path) -> Path:
    return path.with_name(path.name + ".verified.json")


def _check(
    path: Path, url: str, md5: str | None, sha256: str | None, got_md5: str, got_sha: str, label: str | None = None
) -> None:
    """Raise (after removing the file) if a given checksum does not match."""
    for kind, want, got in (("md5", md5, got_md5), ("sha256", sha256, got_sha)):
        if want and want.lower() != got:
            path.unlink(missing_ok=True)
            _sidecar(path).unlink(missing_ok=True)
            raise HarnessError(
                f"checksum mismatch for {label or path.name} from {url}: {kind} {got}, expected {want}; the bad file "
                f"was removed. Fix: retry (the transfer may have been cut), or check that {MIRROR_ENV} "
                "points at an unmodified copy of the upstream file"
            )


def _verified_record(path: Path, md5: str, sha256: str) -> dict:
    """What the sidecar keeps of a verified file: its size and hashes, and a sampled digest when it is
    very large (reuse then reads 66 MiB of it, not all of it)."""
    size = path.stat().st_size
    rec: dict = {"size": size, "mtime_ns": path.stat().st_mtime_ns, "md5": md5, "sha256": sha256}
    if size >= SAMPLED_ABOVE:
        rec["sampled"] = sampled_digest(path, size)
    return rec


def _unchanged(dest: Path, rec: dict) -> tuple[str, str] | None:
    """(md5, sha256) of ``dest`` when its content is what the sidecar verified, else None. By content,
    never by mtime (a damaged file may keep its size and mtime): the size, then a full re-hash, or the
    sampled digest for a very large file (as the stage cache checks its outputs)."""
    size = dest.stat().st_size
    if rec.get("size") != size:
        return None
    if size >= SAMPLED_ABOVE and rec.get("sampled"):
        return (rec["md5"], rec["sha256"]) if sampled_digest(dest, size) == rec["sampled"] else None
    got = _hashes(dest)
    return got if got == (rec.get("md5"), rec.get("sha256")) else None


def _cached(dest: Path, url: str, md5: str | None, sha256: str | None, structure: str | None = None) -> bool:
    """True if ``dest`` exists and matches the checksums; its content is checked on every reuse
    (:func:`_unchanged`), and a file with no checksum to match passes its structural check before it
    is marked verified."""
    if not dest.is_file():
        return False
    try:
        rec = json.loads(_sidecar(dest).read_text())
        known = _unchanged(dest, rec) if isinstance(rec, dict) else None
    except (OSError, ValueError, KeyError):
        rec, known = {}, None
    try:
        if known is None:
            if rec and not (md5 or sha256):  # unpinned: the verified hashes are the only reference
                raise HarnessError(f"{dest.name} changed since it was verified")
            got_md5, got_sha = _hashes(dest)
            _check(dest, url, md5, sha256, got_md5, got_sha)
            _check_structure(dest, url, md5, sha256, structure)
            _sidecar(dest).write_text(json.dumps(_verified_record(dest, got_md5, got_sha)))
        else:
            _check(dest, url, md5, sha256, *known)
    except HarnessError as exc:  # stale (the expected checksum changed, or the file was damaged): fetched anew
        print(f"  download: the cached {dest.name} is not usable ({exc}); fetching it again")
        dest.unlink(missing_ok=True)
        _sidecar(dest).unlink(missing_ok=True)
        return False
    return True


def _check_structure(
    path: Path, url: str, md5: str | None, sha256: str | None, structure: str | None, label: str | None = None
) -> None:
    """Unpinned files only (a checksum says more): raise, after removing the file, if it fails its
    structural check, so a damaged or wrong file is never marked verified."""
    if md5 or sha256 or not structure:
        return

    print(f"  download: checking the structure of {label or path.name} (no published checksum)")
    try:
        CHECKS[structure](path)
    except StructureError as exc:
        path.unlink(missing_ok=True)
        _sidecar(path).unlink(missing_ok=True)
        raise HarnessError(
            f"{label or path.name} from {url} is not the publisher's file: {exc}; it was removed. Fix: retry (the "
            f"transfer may have been cut), or check that {MIRROR_ENV} points at an unmodified copy"
        ) from None


def recorded_sha256(path: Path) -> str | None:
    """sha256 of a downloaded file as recorded when it was verified (None if never fetched)."""
    try:
        rec = json.loads(_sidecar(Path(path)).read_text())
        st = Path(path).stat()
        if rec["size"] == st.st_size and rec["mtime_ns"] == st.st_mtime_ns:
            return rec["sha256"]
    except (OSError, ValueError, KeyError):
        pass
    return None


def first_sha256(path: Path) -> str | None:
    """sha256 the file had when it was fetched, whether or not it has changed since (None if never fetched)."""
    try:
        return str(json.loads(_sidecar(Path(path)).read_text())["sha256"])
    except (OSError, ValueError, KeyError):
        return None


def _open(url: str, offset: int) -> tuple[IO[bytes], int | None, bool]:
    """(stream from ``offset`` or from 0, total size if known, whether it starts at ``offset``)."""
    parsed = urllib.parse.urlparse(url)
    if parsed.scheme == "file":  # urllib's file handler ignores Range: seek ourselves
        local = Path(urllib.request.url2pathname(parsed.path))
        fh = open(local, "rb")
        total = local.stat().st_size
        if 0 < offset <= total:
            fh.seek(offset)
            return fh, total, True
        return fh, total, False
    headers = {"User-Agent": "harness-data/1 (python urllib)"}
    if offset:
        headers["Range"] = f"bytes={offset}-"
    resp = urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=_TIMEOUT_S)
    length = resp.headers.get("Content-Length")
    if offset and resp.status == 206:
        return resp, offset + int(length) if length else None, True
    return resp, int(length) if length else None, False


@contextmanager
def _locked(lock: Path) -> Iterator[None]:
    """One process at a time per file (the ranks of a distributed job may fetch it at once)."""

    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a") as fh:  # kept: removing it would let a later process lock a new file meanwhile
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def fetch(
    url: str,
    dest_dir: str | Path,
    sha256: str | None = None,
    md5: str | None = None,
    filename: str | None = None,
    structure: str | None = None,
) -> Path:
    """Download ``url`` into ``dest_dir`` (cached) and return the local path.

    Supports ``http://``, ``https://`` and ``file://``. The file is verified against
    ``sha256``/``md5`` when given; a mismatch removes the file and raises HarnessError. An
    interrupted transfer leaves ``<name>.part``, and the next call continues it from where it
    stopped (an HTTP Range request; a server that ignores Range sends the whole file again).
    With no checksum, ``structure`` names the :mod:`harness.data.structure` check it must pass.
    """
    parsed = urllib.parse.urlparse(url)
    if parsed.scheme not in ("http", "https", "file"):
        raise HarnessError(f"cannot download '{url}': only http://, https:// and file:// URLs are supported")
    name = filename or Path(urllib.parse.unquote(parsed.path)).name
    if not name:
        raise HarnessError(f"cannot tell a file name from the URL '{url}'; pass filename=")
    dest_dir = Path(dest_dir)
    dest = dest_dir / name
    if _cached(dest, url, md5, sha256, structure):
        return dest
    dest_dir.mkdir(parents=True, exist_ok=True)
    with _locked(dest_dir / ".locks" / (dest.name + ".lock")):
        if _cached(dest, url, md5, sha256, structure):  # another process finished it while this one waited
            return dest
        part = dest.with_name(dest.name + ".part")
        md5_h, sha_h = hashlib.md5(usedforsecurity=False), hashlib.sha256()
        offset = part.stat().st_size if part.is_file() else 0
        try:
            from tqdm import (
                tqdm,  # imported here: only needed when something is downloaded
            )

            _transfer(url, part, offset, name, md5_h, sha_h, tqdm)
        except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", None) or exc
            kept = (
                f" ({part.stat().st_size:,} bytes kept in {part.name}: the next try continues it)"
                if part.is_file() and part.stat().st_size
                else ""
            )
            raise HarnessError(
                f"could not download {url}: {reason}{kept}. Fix: check the network connection, or put {name} "
                f"into {dest_dir} yourself, or set {MIRROR_ENV} to a folder or URL that holds {name}"
            ) from None
        _check(part, url, md5, sha256, md5_h.hexdigest(), sha_h.hexdigest(), label=name)
        _check_structure(part, url, md5, sha256, structure, label=name)
        os.replace(part, dest)
        _sidecar(dest).write_text(json.dumps(_verified_record(dest, md5_h.hexdigest(), sha_h.hexdigest())))
    return dest


def _transfer(url: str, part: Path, offset: int, name: str, md5_h: Any, sha_h: Any, tqdm: Any) -> None:
    """Download ``url`` into ``part`` (continuing its first ``offset`` bytes where the server allows a
    Range request), feeding every byte of the file into both hashes and showing it on a ``tqdm`` bar; a short
    transfer raises."""
    stream, total, resumed = _open(url, offset)
    with stream:
        if resumed:  # continue the partial file: its bytes count towards the checksums
            with open(part, "rb") as fh:
                for block in iter(lambda: fh.read(_CHUNK), b""):
                    md5_h.update(block)
                    sha_h.update(block)
            print(f"  download: resuming {name} at {offset:,} bytes")
        with (
            open(part, "ab" if resumed else "wb") as out,
            tqdm(
                total=total,
                initial=offset if resumed else 0,
                unit="B",
                unit_scale=True,
                unit_divisor=1024,
                desc=name,
                disable=None,
                leave=False,
            ) as bar,
        ):
            for block in iter(lambda: stream.read(_CHUNK), b""):
                out.write(block)
                md5_h.update(block)
                sha_h.update(block)
                bar.update(len(block))
    if total and part.stat().st_size != total:
        raise HarnessError(
            f"download of {url} was cut short ({part.stat().st_size:,} of {total:,} bytes); "
            "run the command again to continue it"
        )


def fetch_source(key: str, dest_dir: str | Path | None = None) -> Path:
    """Fetch a registered :data:`SOURCES` entry into ``downloads_dir()`` (or ``dest_dir``)."""
    src = SOURCES[key]
    md5, sha256 = src.expected()
    return fetch(
        src.url(), dest_dir or downloads_dir(), sha256=sha256, md5=md5, filename=src.filename, structure=src.structure
    )


# ---------------------------------------------------------------------------- extraction


def _inside(root: Path, member: str) -> bool:
    target = (root / member).resolve()
    return target == root or root in target.parents


_EXTRACTED_FROM = ".extracted-from.json"


def _current(archive: Path, dest_dir: Path) -> bool:
    """An extracted folder is used only while it was extracted from the archive's present bytes
    (a changed mirror file, re-downloaded, is extracted again)."""
    if not dest_dir.is_dir():
        return False
    sha = recorded_sha256(archive)
    try:
        made_from = json.loads((dest_dir / _EXTRACTED_FROM).read_text()).get("sha256")
    except (OSError, ValueError):
        made_from = None
    if sha is None or made_from in (None, sha):  # an older folder without the marker stays valid
        return True
    shutil.rmtree(dest_dir, ignore_errors=True)
    return False


def _record_source(tmp: Path, archive: Path) -> None:
    (tmp / _EXTRACTED_FROM).write_text(json.dumps({"archive": archive.name, "sha256": recorded_sha256(archive)}))


def extract_zip(archive: str | Path, dest_dir: str | Path) -> Path:
    """Extract a zip into ``dest_dir`` (atomic: a temporary folder renamed when complete).

    An existing ``dest_dir`` is taken as already extracted. Members that would land
    outside ``dest_dir`` are refused.
    """
    archive, dest_dir = Path(archive), Path(dest_dir)
    if _current(archive, dest_dir):
        return dest_dir
    try:  # an identical folder another process finished first is kept (replace=False)
        with atomic_dir(dest_dir, replace=False) as tmp, zipfile.ZipFile(archive) as zf:
            root = tmp.resolve()
            bad = [m for m in zf.namelist() if not _inside(root, m)]
            if bad:
                raise HarnessError(f"{archive} has members outside the extraction folder ({bad[0]}); refusing it")
            zf.extractall(tmp)
            _record_source(tmp, archive)
    except zipfile.BadZipFile as exc:
        raise HarnessError(f"{archive} is not a valid zip file ({exc}); delete it and download again") from None
    return dest_dir


def extract_tar(archive: str | Path, dest_dir: str | Path, members: list[str] | None = None) -> Path:
    """Extract a (compressed) tar into ``dest_dir``, atomically; ``members`` limits what is extracted."""
    archive, dest_dir = Path(archive), Path(dest_dir)
    if _current(archive, dest_dir):
        return dest_dir
    try:  # an identical folder another process finished first is kept (replace=False)
        with atomic_dir(dest_dir, replace=False) as tmp, tarfile.open(archive) as tf:
            chosen = [tf.getmember(m) for m in members] if members else tf.getmembers()
            root = tmp.resolve()
            for m in chosen:
                if not (m.isfile() or m.isdir()) or not _inside(root, m.name):
                    raise HarnessError(f"{archive} member '{m.name}' is a link or lies outside the folder; refusing it")
            if hasattr(tarfile, "data_filter"):  # Python >= 3.11.4: refuse odd members natively too
                tf.extractall(tmp, members=chosen, filter="data")
            else:
                tf.extractall(tmp, members=chosen)
            _record_source(tmp, archive)
    except (tarfile.TarError, KeyError, EOFError) as exc:
        raise HarnessError(f"{archive} is not a readable tar archive ({exc}); delete it and download again") from None
    return dest_dir


# ---------------------------------------------------------------------------- dataset helpers


def beir_dataset_dir(name: str) -> Path:
    """Folder holding BEIR ``<name>``'s ``corpus.jsonl`` (downloaded and extracted on first use).

    For cqadupstack the folder holds one sub-folder per forum.
    """
    key = f"beir/{name}"
    if key not in SOURCES:
        raise HarnessError(f"no download registered for BEIR dataset '{name}'")
    archive = fetch_source(key)
    out = extract_zip(archive, downloads_dir() / "beir" / name)
    # BEIR zips hold one top folder named after the dataset.
    nested = out / name
    return nested if nested.is_dir() else out


def _tar_member(key: str, folder: str, *members: str) -> Path:
    """A file of the registered tar archive ``key``, downloaded and extracted into ``folder`` on first
    use; ``members`` are the paths it may have inside the archive (the first is named when none is)."""
    archive = fetch_source(key)
    out = extract_tar(archive, downloads_dir() / folder)
    for member in members:
        if (out / member).is_file():
            return out / member
    raise HarnessError(f"{archive} did not contain {members[0]}; delete {out} and {archive} and retry")


def msmarco_collection_path() -> Path:
    """Path of MS MARCO passage ``collection.tsv`` (8.8M passages; downloaded on first use)."""
    return _tar_member("msmarco-passage/collection", "msmarco-passage", "collection.tsv")


def msmarco_queries_path(split: str) -> Path:
    """Path of MS MARCO ``queries.<split>.tsv`` (train, dev or eval; from queries.tar.gz)."""
    return _tar_member("msmarco-passage/queries", "msmarco-queries", f"queries.{split}.tsv")


def rocketqa_titles_path() -> Path:
    """Path of RocketQA's ``para.title.txt`` (``pid<TAB>title`` for every MS MARCO passage)."""
    return _tar_member("rocketqa/marco", "rocketqa-marco", "marco/para.title.txt", "para.title.txt")


def available(key: str) -> bool:
    """Whether a run can read ``SOURCES[key]`` without reaching the publisher: downloaded and
    verified here, or served by ``HARNESS_DATA_MIRROR`` (a local mirror folder must hold the file)."""
    src = SOURCES[key]
    if recorded_sha256(downloads_dir() / src.filename):
        return True
    mirror = os.environ.get(MIRROR_ENV, "").strip()
    if not mirror:
        return False
    return "://" in mirror or (Path(mirror).expanduser() / src.filename).is_file()
