"""Numbers as the leaderboard shows them: text, rounded, "-" where missing.

``st.dataframe`` prints a float with every digit it has (32.54498643686864) and a missing value as
the word "None"; a page that does either is a dump. So every grid is handed to it as text made
here: points at the paper's printed precision (harness/core/points.py), sizes with their unit,
p-values at 3 decimals, and "-" for a missing number. The numeric frames stay as they are for the
charts and the CSV downloads. No streamlit import: app.py displays what this returns.

Text from a record or a spec (a run id, a command, a substitution) is a contributor's text: every
``st.markdown`` / ``st.caption`` / ``st.subheader`` / ``st.warning`` it reaches goes through
:func:`md_text` (or :func:`md_code`), so a record holding ``![x](http://host/x.png)`` shows those
characters instead of making the viewer's browser fetch an image or follow a link.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import PurePosixPath
from typing import Any

import pandas as pd

from harness.core.paths import PROJECT_ROOT
from harness.core.points import fmt, points_decimals

MISSING = "-"
# Every ASCII punctuation character: CommonMark lets a backslash make any of them literal, and with all of
# them escaped no link, image, emphasis, code span, HTML tag, <autolink>, heading, list, table, math ($) or
# Streamlit directive (":red[...]") can start. A bare URL is another matter (_AUTOLINKED).
_PUNCTUATION = re.compile(r"([!-/:-@\[-`{-~])")
# What GFM turns into a link in plain text, escaped or not: a URL, www., an e-mail address.
_AUTOLINKED = re.compile(r"(?i)https?:|mailto:|xmpp:|www\.|[-.\w+]@[-\w]")
POINTS_DIGITS = 2  # a run's number without a paper cell beside it: 2 decimals, the finest any paper prints
P_DIGITS = 3  # p-values, as `check` prints them
# Streamlit cuts a multiselect's chip ("qc-emnlp2023-diff (emnlp2023-diff)") with an ellipsis at a fixed
# width: in the sidebar a chip's text wraps onto more lines instead, so every label is read whole.
SIDEBAR_CSS = """<style>
[data-testid="stSidebar"] [data-testid="stMultiSelectTagsContainer"] [role="group"] * {white-space: normal;
  overflow: visible; text-overflow: clip; height: auto; max-width: 100%; overflow-wrap: anywhere}
</style>"""


def md_text(value: Any) -> str:
    """``value`` as markdown that renders as exactly its text, on one line (a newline could start a block).
    A text with a URL or an e-mail address in it is a code span (:func:`md_code`): GFM links those after
    the escapes are read (remark-gfm's autolink transform), so no escape keeps ``http://host`` plain."""
    text = " ".join(str("" if value is None else value).split())
    if _AUTOLINKED.search(text):
        return md_code(text)
    return _PUNCTUATION.sub(r"\\\1", text)


def md_code(value: Any) -> str:
    """``value`` as one markdown code span: its fence is longer than any run of backticks in it, so the text
    cannot close it (nothing inside a code span is rendered)."""
    text = " ".join(str("" if value is None else value).split())
    fence = "`" * (1 + max((len(run) for run in re.findall("`+", text)), default=0))
    return f"{fence} {text} {fence}"


def md_list(title: str, items: Iterable[Any]) -> str:
    """A bold title over a bullet list of record or spec texts (``title`` is the page's own words)."""
    return f"**{title}**\n" + "\n".join(f"- {md_text(item)}" for item in items)


def run_heading(rec: Any) -> str:
    """The Method tab's title of a run record: method · profile · run id, as text."""
    return " · ".join(md_text(v) for v in (rec.method, rec.profile, rec.run_id))


def run_caption(rec: Any, reference: bool = False) -> str:
    """The line under it: spec hash, date and command (code spans), and whether it is a reference."""
    return (
        f"spec hash {md_code(rec.spec_hash)} · created {md_text(rec.created)} · command "
        f"{md_code(command_text(rec.command))}" + (" · reference record" if reference else "")
    )


_ENTRY = "/harness/__main__.py"  # how a recorded command names the harness: its checkout's path to it


def command_text(command: Any) -> str:
    """A recorded command as a reader can paste it in this checkout: ``/elsewhere/harness/__main__.py run
    ...`` reads ``python -m harness run ...``; a path inside that checkout (or this one) is relative to it,
    and any other absolute path (another machine's /tmp, a cache) shows only its file name."""
    words = str("" if command is None else command).split()
    roots = [str(PROJECT_ROOT)] + [w[: -len(_ENTRY)] for w in words if w.endswith(_ENTRY)]
    out = []
    for word in words:
        if word.endswith(_ENTRY) or word == "harness/__main__.py":
            out += ["python", "-m", "harness"]
        else:
            out.append(path_text(word, roots))
    return " ".join(out)


def path_text(value: str, roots: Iterable[str] = (str(PROJECT_ROOT),)) -> str:
    """An absolute path relative to the checkout it lies in (one of ``roots``), else its file name: a
    page never shows another machine's folders. Anything that is not an absolute path stays as is."""
    if not value.startswith("/"):
        return value
    for root in roots:
        if value == root or value.startswith(root.rstrip("/") + "/"):
            return value[len(root) :].lstrip("/") or "."
    return PurePosixPath(value).name or value


def duration(seconds: Any) -> str:
    """Seconds as h:mm:ss ("0:04:20"), "-" when missing; under a minute with its decimals ("0:00:03.6"
    would hide nothing a reader needs, so a stage of 0.18 s reads "0.18 s")."""
    if missing(seconds) or isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        return MISSING
    if seconds < 60:
        return f"{seconds:.2f} s"
    whole = int(round(seconds))
    return f"{whole // 3600}:{whole // 60 % 60:02d}:{whole % 60:02d}"


def clock(seconds: Any) -> str:
    """Seconds always as h:mm:ss ("0:00:41"), "-" when missing: for a column labelled h:mm:ss, where
    :func:`duration`'s "40.90 s" for a short run would contradict the label."""
    if missing(seconds) or isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        return MISSING
    whole = int(round(seconds))
    return f"{whole // 3600}:{whole // 60 % 60:02d}:{whole % 60:02d}"


def detail_value(key: str, value: Any) -> str:
    """A stage's output value as text: seconds as a duration, a fraction at 3 decimals, others at 2 (a
    tiny number in scientific form), paths as :func:`path_text`, lists as their items or their count."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)) and key.endswith("seconds"):
        return duration(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if value.is_integer() and abs(value) >= 1000:  # a count or a score sum stored as a float
            return str(int(value))
        if value != 0 and abs(value) < 0.01:
            return f"{value:.1e}"
        return f"{value:.3f}" if abs(value) < 1 else f"{value:.2f}"
    if isinstance(value, (list, tuple)):
        items = [detail_value(key, v) for v in value]
        if len(items) <= 3 and not any(i.startswith(("{", "[")) for i in items):
            return "; ".join(items)
        return f"{len(items)} items (in the record)"
    if isinstance(value, Mapping):
        return ", ".join(f"{k} {detail_value(str(k), v)}" for k, v in value.items())
    return MISSING if missing(value) else path_text(str(value))


def details_text(details: Mapping[str, Any]) -> str:
    """A stage's record fields but its name, dataset, cache flag and time, as "key value" text: nested
    outputs flattened to dotted keys, never a dict's braces and quotes."""
    parts = []
    for key, value in details.items():
        if isinstance(value, Mapping):  # a stage's "output": its own keys say what they are
            prefix = "" if key == "output" else f"{key}."
            parts += [f"{prefix}{k} {detail_value(str(k), v)}" for k, v in value.items() if not missing(v)]
        elif not missing(value):
            parts.append(f"{_DETAIL_NAMES.get(key, key)} {detail_value(key, value)}")
    return " · ".join(parts)


_DETAIL_NAMES = {"key": "cache key"}


def missing(value: Any) -> bool:
    """None, NaN or empty text: shown as "-"."""
    return (
        value is None
        or (isinstance(value, float) and math.isnan(value))
        or (isinstance(value, str) and not value.strip())
    )


def number(value: Any, digits: int = POINTS_DIGITS, signed: bool = False) -> str:
    """A number at ``digits`` decimals; "-" when missing; text that is not a number stays as is."""
    if missing(value):
        return MISSING
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    return fmt(float(value), digits, signed)


def cell_decimals(cell: Mapping[str, Any]) -> int:
    """Decimals in points of a reported cell or a comparison with one ("0.340" -> 1, "66.47" -> 2)."""
    reported = cell.get("reported")
    if reported is None and cell.get("score") is not None:
        reported = 100.0 * float(cell["score"])
    return points_decimals(str(cell.get("value") or ""), reported, POINTS_DIGITS)


def column_decimals(cells: Iterable[Mapping[str, Any]], benchmark: str, measure: str) -> int:
    """The precision the papers print a (benchmark, measure) at, in points (the most common one), for a
    run's number that has no cell beside it; 2 when no paper prints it."""
    seen = Counter(
        cell_decimals(c)
        for c in cells
        if c.get("benchmark") == benchmark and c.get("measure") == measure and c.get("value")
    )
    return seen.most_common(1)[0][0] if seen else POINTS_DIGITS


def size_text(gb: Any) -> str:
    """An index size with its unit at 3 significant digits: "27 GB", "0.9 GB", "1.86 MB"; "-" when
    missing (a tiny run's index is a few MB: in GB at 2 decimals it would read 0.00)."""
    if missing(gb):
        return MISSING
    gb = float(gb)
    # from 0.1 of a unit on (the papers print "0.2 GB"), except TB, which starts at 1,000 GB
    for unit, scale, floor in (("TB", 1e3, 1e3), ("GB", 1.0, 0.1), ("MB", 1e-3, 1e-4)):
        if abs(gb) >= floor:
            return f"{gb / scale:.3g} {unit}"
    return f"{gb / 1e-6:.3g} KB"


def text_frame(
    frame: pd.DataFrame,
    digits: Mapping[str, int] | None = None,
    default: int = POINTS_DIGITS,
    signed: Iterable[str] = (),
) -> pd.DataFrame:
    """Every cell as text: floats at ``digits[column]`` (else ``default``) decimals, integers and text as
    they are, missing values as "-". ``signed`` columns get a sign (a delta, an effect)."""
    digits = dict(digits or {})
    signed = set(signed)
    out = pd.DataFrame(index=frame.index)
    for column in frame.columns:
        places, sign = digits.get(column, default), column in signed
        out[column] = [_text(v, places, sign) for v in frame[column]]
    return out.reset_index(drop=True)


CHAR_PX, PAD_PX, MAX_PX = 8, 28, 640  # the grid's font at about 8 px a character, its cell padding


def column_widths(frame: pd.DataFrame) -> dict[str, int]:
    """The pixel width that shows each column's header and values in full (up to :data:`MAX_PX`): the grid
    cuts a longer text at its default width (a row name, a column state such as "REPRODUCED 2, NOT-YET-RUN 11")."""
    widths = {}
    for column in frame.columns:
        longest = max([len(str(column)), *(len(str(v)) for v in frame[column])])
        widths[str(column)] = min(MAX_PX, PAD_PX + CHAR_PX * longest)
    return widths


def _text(value: Any, places: int, signed: bool) -> str:
    if missing(value):
        return MISSING
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer() and places == 0):
        return f"{int(value):+d}" if signed else str(int(value))
    if isinstance(value, float):
        return fmt(value, places, signed)
    if hasattr(value, "item"):  # numpy scalars
        return _text(value.item(), places, signed)
    return str(value)
