"""Pre-training examples read lazily (issue 39): PassageFile is load_passages' list, EpochExamples is
make_examples' list, element for element, for every pair kind, rank and document layout; and neither
holds the texts (a pair is built when indexed)."""

from __future__ import annotations

import random

import pytest

from harness.corpus.epoch_examples import EpochExamples
from harness.corpus.pairs import make_examples
from harness.corpus.passage_file import PassageFile
from harness.corpus.passages import Passage, load_passages, save_passages


def _passages(contiguous: bool) -> list[Passage]:
    rng = random.Random(4)
    out = []
    for d in range(40):
        for _ in range(rng.choice((1, 1, 2, 3, 5))):
            words = " ".join(f"w{rng.randrange(50)}" for _ in range(rng.randint(1, 12)))
            out.append(Passage(pid=f"p{len(out)}", doc_id=f"doc{d}", text=words))
    if not contiguous:  # a document whose passages are not together: the exact (dict) grouping path
        out.append(Passage(pid="late", doc_id="doc3", text="late passage of doc three"))
        out.insert(5, Passage(pid="early", doc_id="doc30", text="early passage"))
    return out


@pytest.mark.parametrize("contiguous", [True, False])
def test_lazy_examples_are_make_examples(tmp_path, contiguous):
    passages = _passages(contiguous)
    save_passages(passages, tmp_path / "passages.jsonl")
    pf = PassageFile(tmp_path / "passages.jsonl")
    assert list(pf) == load_passages(tmp_path / "passages.jsonl") == passages
    queries = {p.pid: [f"q{p.pid} {i}" for i in range(3)] + [""] for p in passages}
    for kind in ("span", "qc", "mixed", "single"):
        for rank, world in ((0, 1), (0, 3), (2, 3)):
            for epoch, shuffle in ((0, True), (3, True), (1, False)):
                want = make_examples(
                    kind, passages, queries, epoch=epoch, seed=7, rank=rank, world_size=world, shuffle=shuffle
                )
                lazy = EpochExamples(
                    kind, pf, queries, epoch=epoch, seed=7, rank=rank, world_size=world, shuffle=shuffle
                )
                assert len(lazy) == len(want)
                assert list(lazy) == want, (kind, rank, world, epoch)
                in_memory = EpochExamples(
                    kind, passages, queries, epoch=epoch, seed=7, rank=rank, world_size=world, shuffle=shuffle
                )
                assert list(in_memory) == want
    pf.close()


def test_lazy_examples_hold_no_text_and_check_queries(tmp_path):
    passages = _passages(True)
    save_passages(passages, tmp_path / "passages.jsonl")
    pf = PassageFile(tmp_path)
    lazy = EpochExamples("span", pf, epoch=0)
    assert not any(
        isinstance(v, (list, tuple, str)) for v in vars(lazy).values() if v is not pf and not isinstance(v, str)
    )  # arrays and the file, no text lists
    assert lazy[len(lazy) - 1] == make_examples("span", passages)[-1]
    with pytest.raises(Exception, match="no non-empty generated query"):
        EpochExamples("qc", pf, {passages[0].pid: ["x"]})
    (tmp_path / "passages.jsonl").write_text('{"pid": "a", "doc_id": "d", "text": "t"}\n\nnot json\n')
    broken = PassageFile(tmp_path / "passages.jsonl")
    assert len(broken) == 2 and broken[0].text == "t"
    with pytest.raises(Exception, match=r"passages\.jsonl:3: not a passage record"):
        broken[1]
