"""Maintainer tool: rebuild ``harness/data/embedded/`` from a checkout of the source data.

    python -m harness.data.vendor --source /path/to/data [--dest harness/data/embedded]

The source folder holds the files listed in ``SOURCES.md`` (origin, transformation and
licence of each). Every selected file is stored gzip-compressed with ``gzip -9 -n``
(no name, no timestamp, so the bytes are reproducible); files that are already ``.gz``
are copied as they are. ``MANIFEST.json`` records, per stored file, its sha256, the
sha256 and line count of its uncompressed content, its origin and its licence.
Nothing at run time reads the source folder: only this tool does.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

from harness.core import benchmarks as declared
from harness.core.paths import EMBEDDED_DATA_DIR

# Folders/files taken from the source, relative to it (trec_eval fixtures are test data
# owned by the evaluation tests, not part of the runtime data).
SELECTED = (
    "beir/scifact",
    "beir/nfcorpus",
    "beir/fiqa/qrels",
    "beir/scidocs",
    "topics-and-qrels",
    "msmarco-passage/dl19-relevant-subset",
)

SMOKE_NOTE = (
    "SMOKE TEST ONLY: 50 queries, the 4,102 DL19-relevant passages plus 898 distractors; "
    "judged non-relevant passages are missing, so scores are not comparable to DL19."
)

_MSMARCO_TERMS = "MS MARCO terms (Microsoft): non-commercial research use only"
# Each benchmark's terms as declared (harness/core/benchmarks.yaml ``terms``), the MS MARCO passages' too.
_DATASET_TERMS = {
    "msmarco-passage": _MSMARCO_TERMS,
    **{n: d.terms for n, d in declared.declarations(include_user=False).items() if d.terms},
}
_BEIR_OTHER = "BEIR dataset {ds}: the original dataset's own terms (BEIR grants no licence of its own)"
_ANSERINI = (
    "castorini/anserini src/main/resources/topics-and-qrels/ at commit "
    "a7df7fc5d527ede8f34ee60afa41dec4f6b0e93a, copied byte for byte"
)


def _beir_terms(rel: str) -> str:
    """The declared terms of the BEIR dataset a ``beir/<dataset>/...`` file belongs to."""
    return _DATASET_TERMS[rel.split("/")[1]]


def _origin_and_licence(rel: str) -> tuple[str, str]:
    """Origin and licence strings for one source file (summarised from SOURCES.md)."""
    name = rel.rsplit("/", 1)[-1]
    if rel.startswith("topics-and-qrels/"):
        if "beir-v1.0.0-" in name:
            ds = name.split("beir-v1.0.0-", 1)[1].split(".test", 1)[0]
            base = declared.forum_parent(ds) or ds
            terms = _DATASET_TERMS.get(base, _BEIR_OTHER.format(ds=base))
        else:  # the benchmark that declares this topics or qrels file; MS MARCO's terms otherwise
            terms = next(
                (
                    d.terms
                    for d in declared.declarations(include_user=False).values()
                    if name.removesuffix(".gz") in (d.topics, d.qrels) and d.terms
                ),
                _MSMARCO_TERMS,
            )
        return _ANSERINI, f"Anserini copy under Apache-2.0; judgements: {terms}"
    if rel.startswith("beir/scifact/corpus"):
        return (
            "rebuilt from sumithra-p-v/claimverifier data/scifact.zip (corpus_train.csv) at commit "
            "c89fe399bf3e91aa4502b10d673b07db27891526 into BEIR corpus.jsonl; see SOURCES.md section 2",
            _beir_terms(rel),
        )
    if rel.startswith("beir/scifact/"):
        return (
            "TwistXXF/PaperPilot-Reproduction data/scifact/ at commit "
            "2936d5047e8733ebde8a3fc94820a48f9dcc99d2 (BEIR SciFact)",
            _beir_terms(rel),
        )
    if rel.startswith("beir/nfcorpus/"):
        return (
            "BEIR nfcorpus.zip (md5 a89dba18a62ef92f7d323ec890a0d38d), unzipped unchanged; blob "
            "7e52caa23568e88a471203e3b091667b2f55c662 of castorini/pyserini docs/collections/nfcorpus.zip "
            "at commit dd360be5292670beacbd3da1fa8a7886f3074c6d",
            _beir_terms(rel),
        )
    if rel.startswith("beir/fiqa/"):
        return (
            "moorateeahtashil/Information-Retrieval fiqa/qrels/ at commit "
            "6e67f048ea403472620fbff4658e1641b8cfc82d, CRLF converted to LF",
            _beir_terms(rel),
        )
    if rel.startswith("beir/scidocs/"):
        return (
            "TwistXXF/PaperPilot-Reproduction data/scidocs/ at commit "
            "2936d5047e8733ebde8a3fc94820a48f9dcc99d2 (BEIR SCIDOCS)",
            _beir_terms(rel),
        )
    if rel.startswith("msmarco-passage/dl19-relevant-subset/"):
        return (
            "agentset-ai/embedding-leaderboard datasets/msmarco/ at commit 7a1376ca20a006b470e3bbb4a08b17affd380d90",
            _MSMARCO_TERMS,
        )
    raise ValueError(f"no origin recorded for {rel}; add it to SOURCES.md and to this tool")


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _gzip_deterministic(src: Path, dest: Path) -> None:
    """`gzip -9 -n`: the reference tool, so anyone can reproduce the stored bytes."""
    if shutil.which("gzip") is None:
        raise SystemExit("the gzip program is needed to rebuild the embedded data")
    with dest.open("wb") as out:
        subprocess.run(["gzip", "-9", "-n", "-c", str(src)], stdout=out, check=True)


def build(source: Path, dest: Path) -> dict:
    """Compress the selected files into ``dest`` and write ``dest/MANIFEST.json``."""
    files = sorted(p for sel in SELECTED for p in (source / sel).rglob("*") if p.is_file())
    if not files:
        raise SystemExit(f"no source files under {source} (expected {', '.join(SELECTED)})")
    entries = []
    for src in files:
        rel = src.relative_to(source).as_posix()
        stored_rel = rel if rel.endswith(".gz") else rel + ".gz"
        out = dest / stored_rel
        out.parent.mkdir(parents=True, exist_ok=True)
        if rel.endswith(".gz"):
            shutil.copyfile(src, out)
            content = gzip.decompress(src.read_bytes())
        else:
            _gzip_deterministic(src, out)
            content = src.read_bytes()
        origin, licence = _origin_and_licence(rel)
        entry = {
            "path": stored_rel,
            "sha256": _sha256(out.read_bytes()),
            "content_sha256": _sha256(content),
            "lines": content.count(b"\n") + (0 if content.endswith(b"\n") or not content else 1),
            "bytes": out.stat().st_size,
            "origin": origin,
            "licence": licence,
        }
        if rel.startswith("msmarco-passage/dl19-relevant-subset/"):
            entry["note"] = SMOKE_NOTE
        entries.append(entry)
    shutil.copyfile(source / "SOURCES.md", dest / "SOURCES.md")
    smoke_dir = dest / "msmarco-passage" / "dl19-relevant-subset"
    if smoke_dir.is_dir():
        (smoke_dir / "SMOKE-TEST-ONLY.txt").write_text(SMOKE_NOTE + "\n")
    manifest = {
        "description": "Embedded real data for the harness; see SOURCES.md for origin, transformation "
        "and licence. Stored files are gzip -9 -n; sha256 is of the stored file.",
        "files": entries,
    }
    (dest / "MANIFEST.json").write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")
    return manifest


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m harness.data.vendor", description=__doc__.splitlines()[0])
    ap.add_argument("--source", required=True, type=Path, help="folder holding SOURCES.md and the data")
    ap.add_argument("--dest", type=Path, default=EMBEDDED_DATA_DIR)
    args = ap.parse_args(argv)
    manifest = build(args.source, args.dest)
    total = sum(e["bytes"] for e in manifest["files"])
    print(f"wrote {len(manifest['files'])} files ({total / 1e6:.1f} MB) and MANIFEST.json to {args.dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
