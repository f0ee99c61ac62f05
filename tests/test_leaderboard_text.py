"""Record and spec strings are text on the leaderboard: a contributed record's run id, command or
substitutions never render as a link, an image or HTML (issue 54, item 2)."""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import pandas as pd
import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

if str(Path(__file__).resolve().parents[1]) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.core.paths import PROJECT_ROOT
from harness.present.glance_html import esc
from harness.records.integrity import seal
from harness.records.store import RunRecord
from leaderboard_app import data as lb_data
from leaderboard_app import display, selection, tables

APP = Path(__file__).resolve().parents[1] / "leaderboard_app" / "app.py"
FIXTURES = Path(__file__).parent / "fixtures" / "records"
TINY = "cotmae__tiny__20261121T110000"
IMAGE, LINK, TAG = "![x](http://evil/x.png)", "[link](http://evil)", '<img src="http://evil/y.png">'
HOSTILE = f"{IMAGE} {LINK} {TAG} `code` **bold** _it_ $x$ :red[r] www.evil.com http://evil.com"


def _live(markdown: str) -> list[str]:
    """What in ``markdown`` would still render as markup: an unescaped [, ], <, `, *, _, $ or a bare
    http:// / www. (a backslash before a character makes it literal)."""
    bare = re.sub(r"\\.", "", markdown)  # drop escaped characters
    found = [c for c in "[]<`*_$" if c in bare]
    return found + [u for u in ("http://", "www.") if u in bare]


@pytest.mark.parametrize(
    "text",
    [
        IMAGE,
        LINK,
        TAG,
        "`x`",
        "**x**",
        "*x*",
        "__x__",
        "$x$",
        "# h",
        "- item",
        "1. item",
        "a | b",
        "<http://evil>",
        "http://evil.com",
        "www.evil.com",
        "line\n\n![x](http://evil/x.png)",
        ":red[x]",
        "a\\b",
    ],
)
def test_md_text_makes_every_markdown_construct_inert(text):
    out, folded = display.md_text(text), " ".join(text.split())
    assert "\n" not in out
    if any(u in text for u in ("http://", "www.")):
        # GFM links a bare URL after reading the escapes (the browser test saw it): a code span instead
        assert out == display.md_code(folded)
        return
    assert not _live(out)
    # unescaping gives back the text (whitespace folded to single spaces)
    assert re.sub(r"\\(.)", r"\1", out) == folded


@pytest.mark.parametrize("text", ["see https://host/x", "HTTP://HOST", "mailto:a@b.org", "a.b@host.org"])
def test_md_text_puts_what_gfm_would_link_in_a_code_span(text):
    assert display.md_text(text) == display.md_code(text)


def _outside_code(markdown: str) -> str:
    """``markdown`` without its code spans (a code span shows its text as is)."""
    return re.sub(r"(`+) .*? \1", "", markdown)


def test_md_code_fence_outruns_the_text_backticks():
    assert display.md_code("python -m harness run") == "` python -m harness run `"
    assert display.md_code("a `b` c") == "`` a `b` c ``"
    assert display.md_code("a ``b`` c\nd") == "``` a ``b`` c d ```"


def _hostile_record() -> RunRecord:
    data = json.loads((FIXTURES / "runs" / f"{TINY}.json").read_text())
    data.update(
        run_id=f"{TINY}-{IMAGE}",
        command=f"python -m harness run {HOSTILE}",
        substitutions=[IMAGE, LINK, TAG],
        created=f"2026 {LINK}",
        profile=f"tiny{TAG}",
    )
    return RunRecord.from_json(data, Path("x.json"))


def test_method_tab_texts_escape_the_record_strings():
    rec = _hostile_record()
    heading, caption = display.run_heading(rec), display.run_caption(rec, reference=True)
    assert not _live(_outside_code(heading)) and display.md_code(rec.run_id) in heading
    # outside its code spans the caption has no live markup; the command sits in one it cannot close
    spans = re.findall(r"(`+) .*? \1", caption)
    assert spans and not _live(re.sub(r"(`+) .*? \1", "", caption))
    assert display.md_code(rec.command) in caption
    listed = display.md_list("Substituted", rec.substitutions)
    assert listed.startswith("**Substituted**\n- ")
    assert not _live(_outside_code(listed.split("\n", 1)[1].replace("- ", "")))
    assert not _live(_outside_code(selection.caveat_md(rec.profile)))
    said = selection.shown_caveats([rec])
    assert said and not _live(_outside_code(said[0].replace("**", "", 2).replace("**", "", 1)))


def test_checkpoint_summary_escapes_the_record_strings():
    data = json.loads((FIXTURES / "runs" / f"{TINY}.json").read_text())
    data.update(profile="checkpoint", checkpoint={"name": f"ckpt {IMAGE} {TAG}"}, run_id=f"x__{LINK}")
    line = tables.checkpoint_summaries([RunRecord.from_json(data, Path("x.json"))], {})[0]
    assert IMAGE not in _outside_code(line) and TAG not in _outside_code(line) and not _live(_outside_code(line))


def test_glance_html_keeps_a_record_string_inside_its_html_block():
    """st.markdown(..., unsafe_allow_html=True) renders markdown after a blank line ends an HTML block:
    an escaped text never holds a line break."""
    assert "\n" not in esc(f"a\n\n{IMAGE}\r\n") and "&lt;img" in esc(TAG)


def test_the_page_shows_a_hostile_record_as_text(tmp_path, monkeypatch):
    """The page itself: a sealed record whose command and substitutions hold a link, an image and an
    HTML tag reaches the Method tab escaped."""
    runs = tmp_path / "runs"
    shutil.copytree(FIXTURES / "runs", runs)
    path = runs / f"{TINY}.json"
    data = json.loads(path.read_text())
    data.pop("integrity", None)
    data.update(command=f"python -m harness run {HOSTILE}", substitutions=[IMAGE, LINK, TAG])
    path.write_text(json.dumps(seal(data)))
    monkeypatch.setenv(lb_data.RECORDS_ENV, str(runs))
    monkeypatch.setenv(lb_data.REPORTED_ENV, str(FIXTURES / "reported_cells.json"))
    monkeypatch.setattr(lb_data, "inconsistency_report", lambda: ([], None))
    st.cache_data.clear()
    try:
        at = AppTest.from_file(str(APP), default_timeout=60).run()
        at.selectbox(key="m_method").set_value("cotmae").run()
        at.selectbox(key="m_run").set_value(TINY).run()
    finally:
        st.cache_data.clear()
    texts = [m.value for m in at.markdown] + [c.value for c in at.caption] + [s.value for s in at.subheader]
    texts += [w.value for w in at.warning]
    assert any(display.md_code(data["command"]) in t for t in texts)
    assert any("Substituted" in t and display.md_text(IMAGE) in t for t in at.markdown.values)
    outside_code = [re.sub(r"(`+) .*? \1", "", t) for t in texts]  # a code span shows its text as is
    for raw in (IMAGE, LINK, TAG):
        assert not any(raw in t for t in outside_code), raw


def test_commands_and_paths_read_relative_to_the_checkout_never_another_machine():
    command = (
        "/work/exp-run/harness/__main__.py run --method cotmae --json /work/exp-run/runs/x.json --out /tmp/a/b.json"
    )
    assert display.command_text(command) == "python -m harness run --method cotmae --json runs/x.json --out b.json"
    assert display.path_text(str(PROJECT_ROOT / "runs" / "records")) == "runs/records"


def test_durations_and_stage_details_are_text_not_dicts():
    assert display.duration(0.011 * 3600) == "39.60 s" and display.duration(3 * 3600 + 62) == "3:01:02"
    details = display.details_text(
        {"key": "ab12", "output": {"documents": 5183, "seconds": 40.71, "fit": {"acc": 0.0351}, "s": ["{'a': 1}"] * 5}}
    )
    assert details == "cache key ab12 · documents 5183 · seconds 40.71 s · fit acc 0.035 · s 5 items (in the record)"


def test_every_column_of_a_grid_gets_the_width_its_longest_text_needs():
    frame = pd.DataFrame(
        {
            "row": ["qc-v2 Table 1 · coCondenser (120K) · vs row above: reproduced"],
            "x": ["REPRODUCED 2, NOT-YET-RUN 11"],
        }
    )
    assert display.column_widths(frame) == {
        "row": display.PAD_PX + display.CHAR_PX * len(frame["row"][0]),
        "x": display.PAD_PX + display.CHAR_PX * len(frame["x"][0]),
    }
